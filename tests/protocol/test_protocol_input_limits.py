"""Bad input that used to end in a traceback, and small lies in reports (issue 24, items 7 and 9).

Each case is refused with exit status 2, one line on stderr naming the parameter, no traceback and no
output file; or, for the reports, counted truthfully.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.cli import main

KEY = ["--insecure-test-key", "--key-bits", "512"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    out = tmp_path_factory.mktemp("limits")
    X = np.random.default_rng(0).normal(size=(50, 4))
    np.savetxt(out / "x.csv", X, delimiter=",")
    (out / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["keygen", "--out-dir", str(out / "keys"), *KEY, "--max-owners", "3", "--max-rows-per-owner", "60"]) \
        == 0
    for oid in ("a", "b"):
        assert main(["owner", "keygen", "--owner-id", oid, "--out-dir", str(out / "ids")]) == 0
    return out


def _refused(capsys, argv: list[str], match: str, *, absent: str | None = None, not_in: str | None = None) -> str:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (code, err)
    assert err.startswith("dpdpca: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert match in err, err
    if not_in is not None:
        assert not_in not in err, err
    if absent is not None:
        from pathlib import Path
        assert not Path(absent).exists()
    return err


def _run(files, *extra: str) -> list[str]:
    return ["run", "--data", str(files / "x.csv"), "--components", "2", *KEY, "--out", str(files / "run-out"),
            *extra]


def test_deeply_nested_json_is_one_line(files, capsys):
    _refused(capsys, _run(files, "--feature-bounds-file", str(files / "deep.json")), "feature bounds file",
             absent=files / "run-out")
    _refused(capsys, _run(files, "--feature-bounds", "-3", "3", "--ledger", str(files / "deep.json")),
             "must be a dpdpca ledger, got RecursionError", absent=files / "run-out")


def test_proxy_finish_with_a_deeply_nested_ledger_is_one_line(files, tmp_path, capsys):
    shares = []
    for k, oid in enumerate(("a", "b")):
        np.save(tmp_path / f"{oid}.npy", np.random.default_rng(k).uniform(-0.4, 0.4, size=(10, 3)))
        assert main(["owner", "share", "--public", str(files / "keys" / "public.json"), "--identity",
                     str(files / "ids" / f"{oid}.identity.json"), "--data", str(tmp_path / f"{oid}.npy"),
                     "--insecure-test-key", "--out", str(tmp_path / f"{oid}.msg")]) == 0
        shares.append(str(tmp_path / f"{oid}.msg"))
    state = tmp_path / "state"
    assert main(["proxy", "aggregate", "--insecure-test-key", "--public", str(files / "keys" / "public.json"), "--owner-keys",
                 str(files / "ids" / "a.verify.json"), "--owner-keys", str(files / "ids" / "b.verify.json"),
                 "--out-dir", str(state), *shares]) == 0
    result = tmp_path / "result.msg"
    _refused(capsys, ["proxy", "finish", "--insecure-test-key", "--state", str(state), "--out", str(result), "--epsilon", "1", "--delta",
                      "1e-5", "--ledger", str(files / "deep.json")], "must be a dpdpca ledger, got RecursionError",
             absent=result)
    for delta in ("5e-324", "0.9999999999999999"):  # named as delta, not as epsilon's allowance
        _refused(capsys, ["proxy", "finish", "--insecure-test-key", "--state", str(state), "--out", str(result), "--epsilon", "1",
                          "--delta", delta], "delta must be in [1e-300, 0.5]", not_in="epsilon", absent=result)


def test_a_5000_digit_port_in_proxy_toml_is_one_line(tmp_path, capsys):
    pytest.importorskip("nacl")
    (tmp_path / "proxy.toml").write_text(f"[server]\nport = {'9' * 5000}\n")
    _refused(capsys, ["proxy", "serve", "--config", str(tmp_path / "proxy.toml")], "at most 4300 digits")
    # 4000 digits parse, and the port's check says so without printing them
    from dpdpca.net.launch import write_proxy_toml
    from dpdpca.protocol.identity import OwnerIdentity

    config = write_proxy_toml(tmp_path / "full.toml", public=tmp_path / "public.json",
                              owners={"a": OwnerIdentity.generate("a")}, user=OwnerIdentity.generate("user"),
                              tls=None, port=8443, state_dir=tmp_path / "state")
    config.write_text(config.read_text().replace("port = 8443", f"port = {'9' * 4000}"))
    err = _refused(capsys, ["proxy", "serve", "--config", str(config)], "port must be <= 65535, got an integer of")
    assert len(err) < 300


def test_a_csv_line_of_two_million_columns_is_refused_before_anything_is_allocated(files, tmp_path, capsys):
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(["0.1"] * 2_000_000) + "\n")
    out = tmp_path / "share.msg"
    owner = ["owner", "share", "--public", str(files / "keys" / "public.json"), "--identity",
             str(files / "ids" / "a.identity.json"), "--insecure-test-key", "--out", str(out)]
    _refused(capsys, [*owner, "--data", str(wide)], "max_features=4096 columns", absent=out)
    np.save(tmp_path / "five.npy", np.zeros((2, 5)))
    _refused(capsys, [*owner, "--data", str(tmp_path / "five.npy"), "--max-features", "4"], "got 5", absent=out)


def test_noise_by_owners_at_a_tiny_epsilon_is_one_line(files, capsys):
    _refused(capsys, _run(files, "--feature-bounds", "-3", "3", "--noise-by", "owners", "--epsilon", "1e-4"),
             "epsilon must be >= ", absent=files / "run-out")


def test_feature_bounds_that_clamp_every_row_are_counted(files, tmp_path, capsys):
    capsys.readouterr()
    assert main(["owner", "share", "--public", str(files / "keys" / "public.json"), "--identity",
                 str(files / "ids" / "a.identity.json"), "--insecure-test-key", "--out", str(tmp_path / "s.msg"),
                 "--data", str(files / "x.csv"), "--feature-bounds", "0", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "50 rows, 50 clamped to the feature bounds, 0 clipped to norm 1" in out, out


@pytest.mark.parametrize("delta, match", [("5e-324", "delta must be in [1e-300, 0.5]"),
                                          ("0.9999999999999999", "delta must be in [1e-300, 0.5]"),
                                          ("0.05", "delta must be < 1/N = 0.02 (N = 50 rows)")])
def test_delta_is_bounded_and_named(files, capsys, delta, match):
    _refused(capsys, _run(files, "--feature-bounds", "-3", "3", "--delta", delta), match, not_in="epsilon",
             absent=files / "run-out")


def test_keygen_refuses_a_max_rows_per_owner_above_its_maximum(tmp_path, capsys):
    _refused(capsys, ["keygen", "--out-dir", str(tmp_path / "k"), *KEY, "--max-rows-per-owner", str(10 ** 30)],
             "--max-rows-per-owner must be <= 1099511627776", absent=tmp_path / "k" / "public.json")
    _refused(capsys, ["keygen", "--out-dir", str(tmp_path / "k"), *KEY, "--min-delta", "5e-324"],
             "--min-delta must be in [1e-300, 0.5]", not_in="epsilon", absent=tmp_path / "k" / "public.json")


def test_proxy_finish_of_a_centred_release_knows_n_and_bounds_delta_by_it(files, tmp_path, capsys):
    """N is public in the centred release (the owners' signed counts): delta must be < 1/N there too."""
    keys = tmp_path / "keys"
    assert main(["keygen", "--out-dir", str(keys), *KEY, "--max-owners", "3", "--max-rows-per-owner", "60",
                 "--release", "centred"]) == 0
    shares = []
    for k, oid in enumerate(("a", "b")):
        np.save(tmp_path / f"{oid}.npy", np.random.default_rng(k).uniform(-0.4, 0.4, size=(10, 3)))
        assert main(["owner", "share", "--public", str(keys / "public.json"), "--identity",
                     str(files / "ids" / f"{oid}.identity.json"), "--data", str(tmp_path / f"{oid}.npy"),
                     "--insecure-test-key", "--release", "centred", "--out", str(tmp_path / f"{oid}.msg")]) == 0
        shares.append(str(tmp_path / f"{oid}.msg"))
    state = tmp_path / "state"
    assert main(["proxy", "aggregate", "--insecure-test-key", "--public", str(keys / "public.json"), "--owner-keys",
                 str(files / "ids" / "a.verify.json"), "--owner-keys", str(files / "ids" / "b.verify.json"),
                 "--release", "centred", "--out-dir", str(state), *shares]) == 0
    result = tmp_path / "result.msg"
    _refused(capsys, ["proxy", "finish", "--insecure-test-key", "--state", str(state), "--out", str(result), "--epsilon", "1", "--delta",
                      "0.06"], "delta must be < 1/N = 0.05 (N = 20 rows)", absent=result)
    assert main(["proxy", "finish", "--insecure-test-key", "--state", str(state), "--out", str(result), "--epsilon", "1", "--delta",
                 "1e-5"]) == 0
