"""The protocol commands: the per-role file sequence as separate processes, ``dpdpca run``, bad input."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpdpca.cli import main

KEY = ["--key-bits", "1024", "--insecure-test-key"]


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpdpca.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def _rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    X = rng.normal(size=(n, d)) * np.array([3.0, 1.0, 0.5, 0.2][:d])
    return 0.9 * X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("keys")
    assert main(["keygen", "--out-dir", str(out), *KEY, "--release", "any", "--max-owners", "3", "--max-rows-per-owner", "50"]) == 0
    return out


@pytest.fixture(scope="module")
def ids(tmp_path_factory) -> Path:
    """Owner identities (``<id>.identity.json``, ``<id>.verify.json``) for the ids these tests use."""
    out = tmp_path_factory.mktemp("ids")
    for oid in ("1", "2", "3", "4", "d4", "f"):
        assert main(["owner", "keygen", "--owner-id", oid, "--out-dir", str(out)]) == 0
    return out


def _verify_keys(ids: Path, *oids: str) -> list[str]:
    return [arg for oid in oids for arg in ("--owner-keys", str(ids / f"{oid}.verify.json"))]


@pytest.fixture(scope="module")
def other_keys(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("other")
    assert main(["keygen", "--out-dir", str(out), *KEY, "--release", "any"]) == 0
    return out


def _expect_error(capsys, argv: list[str], match: str, *, no_file: Path | None = None) -> None:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert err.startswith("dpdpca: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert match in err, err
    if no_file is not None:
        assert not no_file.exists()
        assert not any(p.name.startswith(f".{no_file.name}.") for p in no_file.parent.glob(".*"))


def _expect_usage_error(capsys, argv: list[str], option: str, value: str) -> None:
    """click's refusal of an option's type or range: exit 2, one line naming the option, the range and the value,
    no traceback."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"dpdpca: error: Invalid value for '{option}': {value} is not in the range"), err


def _public_with(keys: Path, tmp: Path, **fields) -> Path:
    """A copy of keys/public.json with its protocol fields changed (e.g. a declared d)."""
    from dpdpca.protocol.params import PARAMS_KEY

    public = json.loads((keys / "public.json").read_text())
    public[PARAMS_KEY].update(fields)
    path = tmp / f"public-{'-'.join(f'{k}{v}' for k, v in fields.items())}.json"
    path.write_text(json.dumps(public))
    return path


@pytest.mark.slow
def test_per_role_sequence_as_separate_processes(tmp_path):
    """keygen, owner keygen x3 -> owner share x3 -> proxy aggregate -> proxy finish -> user finish."""
    rng = np.random.default_rng(0)
    parts = [_rows(rng, n, 4) for n in (300, 120, 210)]
    np.savetxt(tmp_path / "a.csv", parts[0], delimiter=",")
    np.save(tmp_path / "b.npy", parts[1])
    np.savetxt(tmp_path / "c.csv", parts[2], delimiter=",", header="w,x,y,z", comments="")
    verify = [a for o in ("alice", "bob", "carol") for a in ("--owner-keys", f"ids/{o}.verify.json")]
    owner = ["--public", "keys/public.json", "--insecure-test-key"]
    steps = [
        ["keygen", "--out-dir", "keys", *KEY, "--release", "any", "--max-owners", "3", "--max-rows-per-owner", "400"],
        *[["owner", "keygen", "--owner-id", o, "--out-dir", "ids"] for o in ("alice", "bob", "carol")],
        ["owner", "share", *owner, "--identity", "ids/alice.identity.json", "--data", "a.csv", "--out", "s1.msg"],
        ["owner", "share", *owner, "--identity", "ids/bob.identity.json", "--data", "b.npy", "--out", "s2.msg"],
        ["owner", "share", *owner, "--identity", "ids/carol.identity.json", "--data", "c.csv", "--out", "s3.msg"],
        ["proxy", "aggregate", "--insecure-test-key", "--public", "keys/public.json", *verify, "--out-dir", "state",
         "s1.msg", "s2.msg", "s3.msg"],
        ["proxy", "finish", "--insecure-test-key", "--state", "state", "--epsilon", "100", "--delta", "1e-5", "--out", "result.msg"],
        ["user", "finish", "--insecure-test-key", "--private", "keys/private.json", *verify, "result.msg", "--components", "2",
         "--out", "pcs.npz", "--json"],
    ]
    for argv in steps:
        proc = _cli(*argv, cwd=tmp_path)
        assert proc.returncode == 0, (argv, proc.stderr)
    # the proxy's parallel intake (a local pool of 2) writes the very same state, byte for byte
    pooled = _cli("proxy", "aggregate", "--insecure-test-key", "--public", "keys/public.json", *verify, "--out-dir", "state2", "--workers",
                  "2", "s1.msg", "s2.msg", "s3.msg", cwd=tmp_path)
    assert pooled.returncode == 0, pooled.stderr
    assert (tmp_path / "state2" / "state.msg").read_bytes() == (tmp_path / "state" / "state.msg").read_bytes()
    assert stat.S_IMODE(os.stat(tmp_path / "keys" / "private.json").st_mode) == 0o600
    # the noiseless aggregate and the shares are their writer's alone (they were 0644)
    for name in ("state/state.msg", "state2/state.msg", "s1.msg", "s2.msg", "s3.msg"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600, name
    assert stat.S_IMODE(os.stat(tmp_path / "ids" / "alice.identity.json").st_mode) == 0o600
    assert "p" not in json.loads((tmp_path / "keys" / "public.json").read_text())
    summary = json.loads(proc.stdout)
    # the default add/remove release keeps N private: the user only has a noisy count
    assert summary["n_rows"].startswith("private (noisy ") and summary["components_shape"] == [4, 2]
    assert summary["privacy"]["neighbouring"] == "add/remove-one"
    with np.load(tmp_path / "pcs.npz", allow_pickle=False) as npz:
        V = npz["components"]
        privacy = json.loads(str(npz["privacy"]))
    assert privacy["epsilon"] == 100 and privacy["neighbouring"] == "add/remove-one"
    # epsilon = 100: the subspace is the non-private one of the centred pooled data
    X = np.vstack(parts)
    Xc = X - X.mean(axis=0)
    U = np.linalg.eigh(Xc.T @ Xc)[1][:, ::-1][:, :2]
    assert np.linalg.norm(U @ U.T - V @ V.T, 2) < 0.05
    assert np.allclose(V.T @ V, np.eye(2), atol=1e-10)


def test_run_json_out_and_verify(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", *KEY, "--json", "--verify", "--owners", "3", "--components", "3", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    for key in ("components_shape", "captured_energy_ratio", "privacy", "timings", "bytes_sent"):
        assert key in summary
    assert summary["components_shape"] == [64, 3] and summary["n_rows"] == 1797
    assert summary["verify"]["max_abs_integer_error"] == 0
    assert 0.0 < summary["captured_energy_ratio"] <= 1.0
    assert {"epsilon", "delta", "mechanism", "sigma", "sensitivity", "neighbouring"} <= set(summary["privacy"])
    assert set(summary["bytes_sent"]) == {"owner:1", "owner:2", "owner:3", "proxy"}  # the user sends nothing
    assert summary["timings"]["critical_path_s"] <= summary["timings"]["total_s"]
    with np.load(out / "components.npz", allow_pickle=False) as npz:
        assert npz["components"].shape == (64, 3)
    assert json.loads((out / "result.json").read_text())["n_rows"] == 1797


def test_run_refuses_an_unwritable_out_before_the_ledger_records_the_run(tmp_path, capsys):
    """run --ledger records the run's cost: a --out under a file is refused before the run, not after it (before,
    the ledger held a run whose output was lost), and a run refused after the reservation leaves nothing behind."""
    data = tmp_path / "x.npy"
    np.save(data, _rows(np.random.default_rng(6), 30, 3))
    blocker = tmp_path / "notadir"
    blocker.write_text("a file where --out wants a directory")
    budget = tmp_path / "budget.json"
    run = ["run", *KEY, "--data", str(data), "--owners", "2", "--quiet", "--ledger", str(budget)]
    bad = blocker / "out"
    _expect_error(capsys, [*run, "--components", "1", "--out", str(bad)],
                  f"--out {str(bad / 'components.npz')!r} must be in a directory, got {str(blocker)!r}")
    assert not budget.exists()
    fresh = tmp_path / "new" / "out"  # refused after the reservation (k > d is known once the data are read)
    _expect_error(capsys, [*run, "--components", "4", "--out", str(fresh)], "components must be <= 3")
    assert not (tmp_path / "new").exists() and not budget.exists()
    out = tmp_path / "out"
    assert main([*run, "--components", "1", "--out", str(out)]) == 0
    assert (out / "components.npz").is_file() and json.loads((out / "result.json").read_text())["n_rows"] == 30
    assert len(json.loads(budget.read_text())["entries"]) == 1 and not list(tmp_path.rglob(".*.tmp"))


@pytest.mark.slow
def test_run_human_summary_with_processes(tmp_path, capsys):
    data = tmp_path / "x.npy"
    np.save(data, _rows(np.random.default_rng(1), 40, 4))
    assert main(["run", *KEY, "--data", str(data), "--owners", "2", "--components", "2", "--processes",
                 "--verify", "--epsilon", "5"]) == 0
    text = capsys.readouterr().out
    assert "captured energy ratio" in text and "owner:2" in text and "proxy" in text
    assert "integer domain = 0" in text


@pytest.mark.parametrize("argv,match", [
    (["--epsilon", "0"], "epsilon must be > 0"),
    (["--epsilon", "nan"], "epsilon must be finite"),
    (["--delta", "1"], "delta must be in (0, 1)"),
    (["--delta", "0"], "delta must be in (0, 1)"),
    (["--components", "0"], "components must be >= 1"),
    (["--components", "65"], "components must be <= 64"),
    (["--owners", "0"], "owners must be >= 1"),
    (["--kappa", "20"], "kappa must be >= 40"),
    (["--key-bits", "1024"], "2048"),
    # outside [1e-6, 1e9] the calibrations leave double precision (were an OverflowError traceback)
    (["--epsilon", "1e-300"], "epsilon must be in [1e-06, 1e+09], got 1e-300"),
    (["--epsilon", "1e300"], "epsilon must be in [1e-06, 1e+09], got 1e+300"),
    # kappa at most 256 (was a 4300-digit ValueError building the layout's error message)
    (["--kappa", "9999", "--release", "centred"], "kappa must be <= 256, got 9999"),
])
def test_run_rejects_out_of_range_parameters(tmp_path, capsys, argv, match):
    extra = [] if "--key-bits" in argv else KEY
    _expect_error(capsys, ["run", *extra, *argv, "--out", str(tmp_path / "o")], match,
                  no_file=tmp_path / "o" / "result.json")


@pytest.mark.parametrize("argv, message", [
    (["keygen", "--out-dir", "{tmp}/k", "--key-bits", "513", "--insecure-test-key"], "--key-bits must be even, got 513"),
    (["owner", "share", "--public", "{keys}/public.json", "--identity", "{ids}/1.identity.json", "--data", "{tmp}/x.csv",
      "--insecure-test-key", "-q", "--out", "{tmp}/s.msg", "--noise-by", "owners", "--owners", "0", "--epsilon", "1",
      "--delta", "1e-5"], "--owners must be in [1, 3] (max_owners in public.json), got 0"),
    (["owner", "share", "--public", "{keys}/public.json", "--identity", "{ids}/1.identity.json", "--data", "{tmp}/x.csv",
      "--insecure-test-key", "-q", "--out", "{tmp}/s.msg", "--noise-by", "owners", "--owners", "2", "--honest-owners",
      "3", "--epsilon", "1", "--delta", "1e-5"], "--honest-owners must be <= 2, got 3"),
])
def test_errors_name_the_option_typed_not_the_librarys_parameter(keys, ids, tmp_path, capsys, argv, message):
    """keygen's "bits must be even" names --key-bits; owner share --noise-by owners --owners 0 says --owners must be
    >= 1 (it said "quorum must be > L - t = 0"); the error is the whole line, nothing is written."""
    (tmp_path / "x.csv").write_text("0.1,0.2,0.3\n0.2,0.1,0.0\n")
    argv = [a.format(tmp=tmp_path, keys=keys, ids=ids) for a in argv]
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == f"dpdpca: error: {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]


def test_a_file_that_is_no_message_or_no_verify_key_file_is_refused_naming_it(keys, ids, tmp_path, capsys):
    """A garbage share, result or proxy state and a verify-key file whose keys are a list: one line naming the
    file and what is wrong with it (was: "message magic must be ..." naming no file; "must have version 1 and a
    'keys' object, got version 1"); nothing is written."""
    garbage = tmp_path / "garbage.msg"
    garbage.write_bytes(bytes(range(256)) * 4)
    (tmp_path / "state").mkdir()
    for name in ("public.json", "private.json"):
        (tmp_path / "state" / name).write_bytes((keys / name).read_bytes())
    (tmp_path / "state" / "owner-keys.json").write_bytes((ids / "1.verify.json").read_bytes())
    (tmp_path / "state" / "state.msg").write_bytes(b"DPDPCA\x03" + bytes(60))
    (tmp_path / "vk.json").write_text('{"dpdpca_owner_keys": {"keys": ["1"], "version": 1}}')
    magic = "must be a dpdpca message, got: message magic must be b'DPDPCA', got b'\\x00\\x01\\x02\\x03\\x04\\x05'"
    cases = [
        (["proxy", "aggregate", "--public", str(keys / "public.json"), "--insecure-test-key", *_verify_keys(ids, "1"),
          "--out-dir", str(tmp_path / "st"), str(garbage)], f"share file {str(garbage)!r} {magic}"),
        (["user", "finish", "--insecure-test-key", "--private", str(keys / "private.json"), *_verify_keys(ids, "1"),
          str(garbage), "--out", str(tmp_path / "pcs.npz"), "--components", "1"], f"result file {str(garbage)!r} {magic}"),
        (["proxy", "finish", "--insecure-test-key", "--state", str(tmp_path / "state"), "--epsilon", "1", "--delta",
          "1e-5", "--out", str(tmp_path / "r.msg")],
         f"proxy state file {str(tmp_path / 'state' / 'state.msg')!r} must be a dpdpca message, got: message header "
         f"must be valid JSON with the required fields, got JSONDecodeError"),
        (["proxy", "aggregate", "--public", str(keys / "public.json"), "--insecure-test-key", "--owner-keys",
          str(tmp_path / "vk.json"), "--out-dir", str(tmp_path / "st"), str(garbage)],
         f"owner verify keys file {str(tmp_path / 'vk.json')!r} must have dpdpca_owner_keys.keys an object of owner id "
         f"to verify key, got a list"),
    ]
    for argv, message in cases:
        capsys.readouterr()
        assert main(argv) == 2
        assert capsys.readouterr().err == f"dpdpca: error: {message}\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.msg", "state", "vk.json"]
def test_keygen_refuses_out_of_range_declarations_before_the_key(tmp_path, capsys):
    """Each was a traceback (OverflowError, a 4300-digit ValueError) or accepted; now one line, nothing written."""
    out = tmp_path / "keys"
    base = ["keygen", "--out-dir", str(out), "--key-bits", "512", "--insecure-test-key"]
    for extra, match in [(["--min-epsilon", "1e-300"], "--min-epsilon must be in [1e-06, 1e+09], got 1e-300"),
                         (["--min-epsilon", "1e300"], "--min-epsilon must be in [1e-06, 1e+09], got 1e+300"),
                         (["--kappa", "9999", "--release", "centred"], "--kappa must be <= 256, got 9999"),
                         (["--features", "100000000"], "--features must be <= 65536, got 100000000")]:
        _expect_error(capsys, [*base, *extra], match, no_file=out / "public.json")
        assert not (out / "private.json").exists()
    # a key size no prime search finishes (10^20 bits overflowed gmpy2; 10^6 ran for hours): every --key-bits
    for argv in (["keygen", "--out-dir", str(out)], ["run", "--owners", "2"], ["bench", "crypto", "--quick"]):
        _expect_usage_error(capsys, [*argv, "--key-bits", "100000000000000000000"], "--key-bits",
                            "100000000000000000000")
    _expect_usage_error(capsys, ["keygen", "--out-dir", str(out), "--key-bits", "1000000"], "--key-bits", "1000000")
    assert not out.exists()


def test_run_rejects_bad_data_files(tmp_path, capsys):
    nan = tmp_path / "nan.csv"
    nan.write_text("0.1,0.2\n0.3,nan\n")
    _expect_error(capsys, ["run", *KEY, "--data", str(nan), "--owners", "1", "--components", "1",
                           "--out", str(tmp_path / "o")], "finite", no_file=tmp_path / "o" / "result.json")
    inf = tmp_path / "inf.npy"
    np.save(inf, np.array([[0.1, np.inf]]))
    _expect_error(capsys, ["run", *KEY, "--data", str(inf), "--owners", "1", "--components", "1"], "finite")
    big = tmp_path / "big.npy"
    np.save(big, np.array([[0.1, 0.2], [1.0, 1.0]]))
    _expect_error(capsys, ["run", *KEY, "--data", str(big), "--owners", "1", "--components", "1", "--no-clip",
                           "--out", str(tmp_path / "o")], "norm <= 1", no_file=tmp_path / "o" / "components.npz")
    _expect_error(capsys, ["run", *KEY, "--data", str(big), "--owners", "3", "--components", "1"],
                  "--owners must be <= the number of rows (2), got 3")  # the option typed, not partition's n_sites
    _expect_error(capsys, ["run", *KEY, "--owners", "3", "--max-owners", "2", "--components", "1"], "max_owners=2")


def _share(keys: Path, ids: Path, tmp: Path, X: np.ndarray, oid: str, *extra: str) -> Path:
    data = tmp / f"{oid}.npy"
    np.save(data, X)
    out = tmp / f"{oid}.msg"
    assert main(["owner", "share", "--public", str(keys / "public.json"), "--data", str(data), "--identity",
                 str(ids / f"{oid}.identity.json"), "--insecure-test-key", "--out", str(out), *extra]) == 0
    return out


def test_owner_share_bad_input(keys, ids, tmp_path, capsys):
    pub = str(keys / "public.json")
    out = tmp_path / "share.msg"
    owner = ["owner", "share", "--public", pub, "--identity", str(ids / "1.identity.json"), "--insecure-test-key"]
    cases = [("nan.csv", "0.1,0.2\nnan,0.1\n", "finite"), ("inf.csv", "0.1,inf\n", "finite"),
             ("empty.csv", "", "at least one row")]
    for name, text, match in cases:
        (tmp_path / name).write_text(text)
        _expect_error(capsys, [*owner, "--data", str(tmp_path / name), "--out", str(out)], match, no_file=out)
    np.save(tmp_path / "big.npy", np.array([[0.8, 0.7]]))
    _expect_error(capsys, [*owner, "--data", str(tmp_path / "big.npy"), "--out", str(out), "--no-clip"],
                  "norm <= 1", no_file=out)
    np.save(tmp_path / "many.npy", np.zeros((51, 2)))
    _expect_error(capsys, [*owner, "--data", str(tmp_path / "many.npy"), "--out", str(out)],
                  "max_rows_per_owner=50", no_file=out)
    np.save(tmp_path / "ok.npy", np.zeros((2, 2)))
    _expect_error(capsys, [*owner, "--data", str(tmp_path / "ok.npy"), "--owner-id", "2", "--out", str(out)],
                  "--owner-id must be the identity's owner id", no_file=out)
    # the owner's own policy: a data-user key below 2048 bits is refused without --insecure-test-key
    _expect_error(capsys, [*owner[:-1], "--data", str(tmp_path / "ok.npy"), "--out", str(out)],
                  "key bits must be >= 2048", no_file=out)


def test_owner_share_checks_the_public_bounds_before_any_work(keys, ids, tmp_path, capsys):
    """public.json's d and max_owners are checked before the background randomness and the owners' noise: a huge
    declared d or --owners ran (and grew) until killed, --owners above max_owners was accepted."""
    np.save(tmp_path / "x.npy", _rows(np.random.default_rng(8), 6, 2))
    out = tmp_path / "share.msg"
    owner = ["owner", "share", "--identity", str(ids / "1.identity.json"), "--insecure-test-key", "--data",
             str(tmp_path / "x.npy"), "--out", str(out)]
    pub = ["--public", str(keys / "public.json")]
    _expect_error(capsys, [*owner, "--public", str(_public_with(keys, tmp_path, d=10 ** 9))],
                  "dpdpca_protocol.d must be <= 65536, got 1000000000", no_file=out)
    _expect_error(capsys, [*owner, "--public", str(_public_with(keys, tmp_path, d=60000))],
                  "d (declared features) must be <= max_features=4096 (raise it with --max-features), got 60000",
                  no_file=out)
    _expect_error(capsys, [*owner, "--public", str(_public_with(keys, tmp_path, d=3))],
                  "d must be the d=3 declared in public.json (keygen --features), got d=2 from --data", no_file=out)
    noise = ["--noise-by", "owners", "--epsilon", "1", "--delta", "1e-5"]
    for owners in ("4", "0", "100000000"):
        _expect_error(capsys, [*owner, *pub, *noise, "--owners", owners],
                      f"--owners must be in [1, 3] (max_owners in public.json), got {owners}", no_file=out)
    assert not list(tmp_path.glob(".*.tmp"))


def test_owner_prepare_takes_the_declared_d(keys, tmp_path, capsys):
    """--d must be public.json's d (the default when it declares one; 5 was accepted, then refused by the share),
    and without a declared d at most --max-features (10^9 ran until killed)."""
    own = tmp_path / "alice"
    assert main(["owner", "keygen", "--owner-id", "alice", "--out-dir", str(own)]) == 0
    rnd = tmp_path / "alice.randomness.bin"
    common = ["owner", "prepare", "--identity", str(own / "alice.identity.json"), "--insecure-test-key",
              "--randomness", str(rnd)]
    declared = ["--public", str(_public_with(keys, tmp_path, d=3))]
    _expect_error(capsys, [*common, *declared, "--d", "5"],
                  "d must be the d=3 declared in public.json (keygen --features), got d=5 from --d", no_file=rnd)
    undeclared = ["--public", str(keys / "public.json")]
    _expect_error(capsys, [*common, *undeclared, "--d", "1000000000"],
                  "d (declared features) must be <= max_features=4096", no_file=rnd)
    _expect_error(capsys, [*common, *undeclared], "--d must be given when public.json declares no d", no_file=rnd)
    capsys.readouterr()
    assert main([*common, *declared]) == 0
    assert "for d=3" in capsys.readouterr().out and rnd.exists()


def test_owner_with_a_spent_ledger_refuses_to_share(keys, ids, tmp_path, capsys):
    """``owner share --ledger``: the owner prices the release with its calibration and refuses past its budget."""
    rng = np.random.default_rng(3)
    ledger = tmp_path / "owner.ledger.json"
    budget = ["--ledger", str(ledger), "--budget-epsilon", "1.5", "--budget-delta", "1e-5"]
    _share(keys, ids, tmp_path, _rows(rng, 10, 2), "1", "--epsilon", "1", "--delta", "1e-5", *budget)
    entries = json.loads(ledger.read_text())["entries"]
    assert len(entries) == 1 and entries[0]["cost"]["epsilon"] == 1.0
    before = ledger.read_bytes()
    data = tmp_path / "second.npy"
    np.save(data, _rows(rng, 10, 2))
    out = tmp_path / "second.msg"
    argv = ["owner", "share", "--public", str(keys / "public.json"), "--data", str(data), "--identity",
            str(ids / "1.identity.json"), "--insecure-test-key", "--out", str(out), "--epsilon", "1",
            "--delta", "1e-5", *budget]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: release must keep the ledger") and err.count("\n") == 1, err
    assert not out.exists() and ledger.read_bytes() == before  # nothing written, nothing recorded
    _expect_error(capsys, argv[:-8] + budget, "--epsilon and --delta", no_file=out)


def test_proxy_aggregate_bad_shares(keys, ids, other_keys, tmp_path, capsys):
    rng = np.random.default_rng(2)
    pub = str(keys / "public.json")
    s1 = _share(keys, ids, tmp_path, _rows(rng, 5, 3), "1")
    s2 = _share(keys, ids, tmp_path, _rows(rng, 5, 3), "2")
    s3 = _share(keys, ids, tmp_path, _rows(rng, 5, 3), "3")
    s4 = _share(keys, ids, tmp_path, _rows(rng, 5, 3), "4")
    s4d = _share(keys, ids, tmp_path, _rows(rng, 5, 4), "d4")
    foreign = _share(other_keys, ids, tmp_path, _rows(rng, 5, 3), "f")
    truncated = tmp_path / "trunc.msg"
    truncated.write_bytes(s1.read_bytes()[:-100])
    tampered = tmp_path / "tamper.msg"
    raw = bytearray(s1.read_bytes())
    raw[200] ^= 1
    tampered.write_bytes(bytes(raw))
    state = tmp_path / "state"
    for shares, match in [([s1, s1], "duplicate or replayed"), ([s1, s4d], "d=3 features, got d=4"),
                          ([s1, foreign], "key_fingerprint"), ([s1, truncated], "digest"),
                          ([s1, tampered], "digest"), ([s1, s2, s3, s4], "max_owners=3")]:
        _expect_error(capsys, ["proxy", "aggregate", "--insecure-test-key", "--public", pub, *_verify_keys(ids, "1", "2", "3", "4", "d4", "f"),
                               "--out-dir", str(state), *map(str, shares)], match, no_file=state / "state.msg")
    assert not (state / "state.msg").exists()
    # an owner the proxy does not list is an unknown signer
    _expect_error(capsys, ["proxy", "aggregate", "--insecure-test-key", "--public", pub, *_verify_keys(ids, "1"), "--out-dir", str(state),
                           str(s1), str(s2)], "share signer must be a listed owner, got '2'", no_file=state / "state.msg")


def _aggregated(keys, ids, tmp_path, seed: int) -> Path:
    """The proxy state of owners 1 and 2 (6 rows each), aggregated by ``proxy aggregate`` into tmp_path/state."""
    rng = np.random.default_rng(seed)
    shares = [_share(keys, ids, tmp_path, _rows(rng, 6, 3), oid) for oid in ("1", "2")]
    state = tmp_path / "state"
    assert main(["proxy", "aggregate", "--insecure-test-key", "--public", str(keys / "public.json"), *_verify_keys(ids, "1", "2"),
                 "--out-dir", str(state), *map(str, shares)]) == 0
    return state


def test_user_and_proxy_finish_bad_input(keys, ids, other_keys, tmp_path, capsys):
    state = _aggregated(keys, ids, tmp_path, 3)
    count = tmp_path / "count.msg"
    # the retired count round: refused with an explanation, nothing written
    _expect_error(capsys, ["user", "reveal-count", "--private", str(keys / "private.json"), str(state / "state.msg"),
                           "--out", str(count)], "the count round no longer exists", no_file=count)
    result = tmp_path / "result.msg"
    base = ["proxy", "finish", "--insecure-test-key", "--state", str(state), "--out", str(result)]
    _expect_error(capsys, base + ["--epsilon", "-1", "--delta", "1e-5"], "epsilon must be > 0", no_file=result)
    _expect_error(capsys, base + ["--epsilon", "1", "--delta", "2"], "delta must be in (0, 1)", no_file=result)
    _expect_error(capsys, base + ["--epsilon", "1e-5", "--delta", "1e-11"], "noise fits the declared allowance",
                  no_file=result)
    # outside [1e-6, 1e9]: refused by the privacy setting, before any calibration (was an OverflowError)
    _expect_error(capsys, base + ["--epsilon", "1e-300", "--delta", "1e-5"],
                  "epsilon must be in [1e-06, 1e+09], got 1e-300", no_file=result)
    _expect_error(capsys, base + ["--epsilon", "1", "--delta", "1e-5", "--noise-by", "owners", "--owners", "4"],
                  "--owners must be in [1, 3] (max_owners in public.json), got 4", no_file=result)
    assert main(base + ["--epsilon", "1", "--delta", "1e-5"]) == 0
    # one release per session, even across processes: the ledger in the state refuses a second
    again = tmp_path / "again.msg"
    _expect_error(capsys, ["proxy", "finish", "--insecure-test-key", "--state", str(state), "--out", str(again), "--epsilon", "1",
                           "--delta", "1e-5"], "must be released once", no_file=again)
    pcs = tmp_path / "pcs.npz"
    fin = ["user", "finish", "--insecure-test-key", "--private", str(keys / "private.json"), *_verify_keys(ids, "1", "2"), str(result),
           "--out", str(pcs), "--ledger", str(tmp_path / "user-ledger.json")]
    _expect_error(capsys, fin + ["--components", "0"], "components must be >= 1", no_file=pcs)
    _expect_error(capsys, fin + ["--components", "4"], "--components must be <= 3, got 4", no_file=pcs)
    assert not (tmp_path / "user-ledger.json").exists()  # k > d is refused before the release is claimed
    bad = tmp_path / "bad.msg"
    bad.write_bytes(result.read_bytes()[:-1])
    _expect_error(capsys, ["user", "finish", "--insecure-test-key", "--private", str(keys / "private.json"), *_verify_keys(ids, "1", "2"),
                           str(bad), "--out", str(pcs), "--components", "1"], "digest", no_file=pcs)
    _expect_error(capsys, ["user", "finish", "--insecure-test-key", "--private", str(keys / "private.json"), *_verify_keys(ids, "1", "2"),
                           str(state / "state.msg"), "--out", str(pcs), "--components", "1"], "MASKED_RESULT",
                  no_file=pcs)


def test_proxy_and_user_refuse_a_weak_key_they_did_not_ask_for(keys, ids, tmp_path, capsys):
    """public.json declares its 1024-bit key a test key (keygen --insecure-test-key): proxy aggregate, proxy
    finish and user finish refuse it in one line naming --insecure-test-key, writing nothing, unless they pass
    --insecure-test-key themselves (the file's word exempts no party)."""
    assert json.loads((keys / "public.json").read_text())["dpdpca_protocol"]["insecure_test_key"] is True
    refusal = "public key bits must be >= 2048 unless this party passes --insecure-test-key, got 1024"
    rng = np.random.default_rng(11)
    shares = [str(_share(keys, ids, tmp_path, _rows(rng, 6, 3), oid)) for oid in ("1", "2")]
    state = tmp_path / "state"
    aggregate = ["proxy", "aggregate", "--public", str(keys / "public.json"), *_verify_keys(ids, "1", "2"),
                 "--out-dir", str(state), *shares]
    _expect_error(capsys, aggregate, refusal, no_file=state / "state.msg")
    assert main([*aggregate, "--insecure-test-key"]) == 0
    result = tmp_path / "result.msg"
    finish = ["proxy", "finish", "--state", str(state), "--epsilon", "1", "--delta", "1e-5", "--out", str(result)]
    _expect_error(capsys, finish, refusal, no_file=result)
    assert main([*finish, "--insecure-test-key"]) == 0
    pcs = tmp_path / "pcs.npz"
    user = ["user", "finish", "--private", str(keys / "private.json"), *_verify_keys(ids, "1", "2"), str(result),
            "--out", str(pcs), "--components", "1", "--ledger", str(tmp_path / "user-ledger.json")]
    _expect_error(capsys, user, refusal, no_file=pcs)
    assert not (tmp_path / "user-ledger.json").exists()  # refused before anything is decrypted or recorded
    assert main([*user, "--insecure-test-key"]) == 0 and pcs.exists()
    # the owner's commands, as before: its own flag (prepare refuses without it too)
    _expect_error(capsys, ["owner", "prepare", "--public", str(keys / "public.json"), "--identity",
                           str(ids / "3.identity.json"), "--d", "3", "--randomness", str(tmp_path / "r.bin")],
                  refusal, no_file=tmp_path / "r.bin")


def test_proxy_finish_refuses_an_unwritable_out_before_the_release(keys, ids, tmp_path, capsys):
    """A mistyped --out (a path under a file) is refused in one line before the session's one release is claimed
    or the budget charged, so the session then finishes with a good --out.  Before, --out was first written
    after the claim: the write failed, no result file existed, and every later finish was refused."""
    state = _aggregated(keys, ids, tmp_path, 5)
    blocker = tmp_path / "notadir"
    blocker.write_text("a file where --out wants a directory")
    budget = tmp_path / "budget.json"
    finish = ["proxy", "finish", "--insecure-test-key", "--state", str(state), "--epsilon", "1", "--delta", "1e-5", "--ledger", str(budget)]
    for bad in (blocker / "result.msg", blocker / "sub" / "result.msg"):
        _expect_error(capsys, finish + ["--out", str(bad)],
                      f"--out {str(bad)!r} must be in a directory, got {str(blocker)!r}, which is not a directory")
        assert not (state / "ledger.json").exists() and not budget.exists()  # nothing claimed, nothing charged
    assert not list(tmp_path.rglob(".*.tmp"))  # no reserved temporary file is left behind
    # a finish refused after the reservation removes its temporary file and the directory it made for it
    fresh = tmp_path / "new" / "result.msg"
    _expect_error(capsys, [*finish[:5], "--epsilon", "-1", "--delta", "1e-5", "--out", str(fresh)],
                  "epsilon must be > 0")
    assert not fresh.parent.exists() and not (state / "ledger.json").exists()
    result = tmp_path / "result.msg"
    assert main(finish + ["--out", str(result)]) == 0
    assert result.is_file() and not list(tmp_path.rglob(".*.tmp"))
    assert len(json.loads((state / "ledger.json").read_text())["dpdpca_release_ledger"]["releases"]) == 1
    assert len(json.loads(budget.read_text())["entries"]) == 1


def test_user_finish_refuses_an_unwritable_out_before_it_decrypts(keys, ids, tmp_path, capsys):
    """The data user's --out is checked before the release is claimed in its ledger and decrypted (before, after:
    nothing was lost, since the same release may be decrypted again, but the decryption, and with --proxy the wait
    for the release, were done for nothing)."""
    rng = np.random.default_rng(7)
    shares = [_share(keys, ids, tmp_path, _rows(rng, 6, 3), oid) for oid in ("1", "2")]
    state, result = tmp_path / "state", tmp_path / "result.msg"
    assert main(["proxy", "aggregate", "--insecure-test-key", "--public", str(keys / "public.json"), *_verify_keys(ids, "1", "2"),
                 "--out-dir", str(state), *map(str, shares)]) == 0
    assert main(["proxy", "finish", "--insecure-test-key", "--state", str(state), "--epsilon", "1", "--delta", "1e-5", "--out",
                 str(result)]) == 0
    blocker = tmp_path / "notadir"
    blocker.write_text("a file where --out wants a directory")
    ledger = tmp_path / "user-ledger.json"
    fin = ["user", "finish", "--insecure-test-key", "--private", str(keys / "private.json"), *_verify_keys(ids, "1", "2"), str(result),
           "--components", "1", "--ledger", str(ledger)]
    bad = blocker / "pcs.npz"
    _expect_error(capsys, [*fin, "--out", str(bad)],
                  f"--out {str(bad)!r} must be in a directory, got {str(blocker)!r}, which is not a directory")
    assert not ledger.exists()  # nothing claimed, nothing decrypted
    pcs = tmp_path / "pcs.npz"
    assert main([*fin, "--out", str(pcs)]) == 0
    assert pcs.is_file() and not list(tmp_path.rglob(".*.tmp"))


def test_a_ledger_that_cannot_be_written_is_refused_in_one_line_before_the_work(keys, ids, tmp_path, capsys):
    """--ledger under a file, or in a directory that cannot be made: one line naming --ledger, before the work
    (before, a FileExistsError or FileNotFoundError traceback; run's only after every owner had encrypted).  A
    ledger refusal leaves nothing behind: no lock file, no directory made for it."""
    blocker = tmp_path / "notadir"
    blocker.write_text("a file where --ledger wants a directory")
    bad = [(blocker / "l.json", f"must be in a directory, got {str(blocker)!r}, which is not a directory"),
           (Path("/proc/dpdpca-no-such-dir/l.json"), "must be in an existing or creatable directory")]
    X = tmp_path / "x.npy"
    np.save(X, _rows(np.random.default_rng(8), 6, 3))
    out = tmp_path / "out.msg"
    share = ["owner", "share", "--public", str(keys / "public.json"), "--identity", str(ids / "1.identity.json"),
             "--insecure-test-key", "--data", str(X), "--out", str(out), "--epsilon", "1", "--delta", "1e-5"]
    run = ["run", *KEY, "--data", str(X), "--owners", "2", "--components", "1", "--quiet"]
    state = _aggregated(keys, ids, tmp_path, 9)
    finish = ["proxy", "finish", "--insecure-test-key", "--state", str(state), "--epsilon", "1", "--delta", "1e-5",
              "--out", str(out)]
    for ledger, match in bad:
        for argv in (share, run, finish):
            _expect_error(capsys, [*argv, "--ledger", str(ledger)], f"--ledger {str(ledger)!r} {match}", no_file=out)
    assert sorted(p.name for p in state.iterdir()) == ["owner-keys.json", "public.json", "state.msg"]  # no lock
    # refused by its budget: the directory made for a new ledger and its lock file are removed again
    nodir = tmp_path / "nodir"
    _expect_error(capsys, [*share, "--ledger", str(nodir / "l.json"), "--budget-epsilon", "0.1", "--budget-delta",
                           "1e-6"], "release must keep the ledger", no_file=out)
    assert not nodir.exists()
    assert main([*finish, "--ledger", str(nodir / "l.json")]) == 0  # recorded: the ledger keeps its lock file
    assert sorted(p.name for p in nodir.iterdir()) == ["l.json", "l.json.lock"]
    user = ["user", "finish", "--insecure-test-key", "--private", str(keys / "private.json"),
            *_verify_keys(ids, "1", "2"), str(out), "--components", "1", "--out", str(tmp_path / "pcs.npz")]
    for ledger, match in bad:
        _expect_error(capsys, [*user, "--ledger", str(ledger)], f"--ledger {str(ledger)!r} {match}",
                      no_file=tmp_path / "pcs.npz")


def test_every_output_of_a_command_is_reserved_before_any_is_written(keys, ids, tmp_path, capsys):
    """A command that writes several files reserves them all before its work: where one cannot be written (here a
    directory in its place), it is refused in one line naming the option and none is written (before, keygen
    --force left private.json, owner keygen / user identity the identity, proxy init the TLS files, proxy
    aggregate public.json and owner-keys.json)."""
    rng = np.random.default_rng(12)
    shares = [str(_share(keys, ids, tmp_path, _rows(rng, 6, 3), oid)) for oid in ("1", "2")]
    init = ["proxy", "init", "--out-dir", "{o}", "--host", "127.0.0.1", "--owners-dir", str(ids), "--dev-tls",
            "--force"]
    cases = [
        (["keygen", "--out-dir", "{o}", "--key-bits", "512", "--insecure-test-key", "--force"], "public.json"),
        (["owner", "keygen", "--owner-id", "z", "--out-dir", "{o}", "--force"], "z.verify.json"),
        (["user", "identity", "--out-dir", "{o}", "--force"], "user.verify.json"),
        (init, "proxy.toml"),
        (init, "server.key"),
        (["proxy", "aggregate", "--insecure-test-key", "--public", str(keys / "public.json"),
          *_verify_keys(ids, "1", "2"), "--out-dir", "{o}", *shares], "state.msg"),
    ]
    for i, (argv, blocked) in enumerate(cases):
        out = tmp_path / f"out{i}"
        (out / blocked).mkdir(parents=True)
        _expect_error(capsys, [a.replace("{o}", str(out)) for a in argv],
                      f"--out-dir {str(out / blocked)!r} must be a file, got a directory")
        assert [p.name for p in out.iterdir()] == [blocked], argv  # nothing else, no temporary file


def test_run_and_compare_reserve_their_figures_before_the_work(tmp_path, capsys):
    """run --out's scree.png and compare --output's FILE.png are reserved with the other outputs: where one cannot
    be written, none is (before, components.npz and result.json, or the JSON, were left behind)."""
    from dpdpca import plotting

    if not plotting.available():
        pytest.skip("matplotlib is not installed: no figure is written or reserved")
    data = tmp_path / "x.npy"
    np.save(data, _rows(np.random.default_rng(13), 20, 3))
    out = tmp_path / "od"
    (out / "scree.png").mkdir(parents=True)
    _expect_error(capsys, ["run", *KEY, "--data", str(data), "--owners", "2", "--components", "1", "--quiet",
                           "--out", str(out)], f"--out {str(out / 'scree.png')!r} must be a file, got a directory")
    assert [p.name for p in out.iterdir()] == ["scree.png"]
    compare = ["compare", "--data", str(data), "--sites", "2", "--components", "1", "--methods", "pooled",
               "--quiet", "--output"]
    (tmp_path / "o.png").mkdir()
    _expect_error(capsys, [*compare, str(tmp_path / "o.json")],
                  f"--output's .png {str(tmp_path / 'o.png')!r} must be a file, got a directory",
                  no_file=tmp_path / "o.json")
    # an --output that is itself FILE.png would be overwritten by the chart: refused
    _expect_error(capsys, [*compare, str(tmp_path / "c.png")], "--output must not end in .png",
                  no_file=tmp_path / "c.png")


def test_processes_bad_input_prints_one_line_and_no_child_traceback(tmp_path, capfd):
    big = tmp_path / "big.npy"
    np.save(big, np.array([[0.1, 0.2], [1.0, 1.0], [0.1, 0.1], [0.2, 0.2]]))
    code = main(["run", *KEY, "--data", str(big), "--owners", "2", "--components", "1", "--no-clip", "--processes",
                 "--quiet"])  # progress lines, once the processes are up, would precede the error
    err = capfd.readouterr().err  # capfd also sees what the party processes write to fd 2
    assert code == 2
    assert err == ("dpdpca: error: rows must have L2 norm <= 1 with clipping off (--no-clip), "
                   "got norm 1.4142135623730951 in row 1 of owner 1\n")


@pytest.mark.slow
def test_run_with_the_default_2048_bit_key(tmp_path, capsys):
    data = tmp_path / "x.csv"
    np.savetxt(data, _rows(np.random.default_rng(4), 30, 3), delimiter=",")
    assert main(["run", "--data", str(data), "--owners", "3", "--components", "2", "--verify", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["params"]["key_bits"] == 2048 and summary["verify"]["max_abs_integer_error"] == 0
    assert summary["privacy"]["neighbouring"] == "add/remove-one" and summary["privacy"]["sensitivity_mode"] == "rigorous"


def test_run_on_a_dask_scheduler_and_role_commands_accept_it(capsys, keys, ids, tmp_path):
    """``--scheduler``: owners and proxy on the cluster, the user's decryption local; exact result."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        address = cluster.scheduler_address
        capsys.readouterr()
        code = main(["run", "--owners", "2", "--components", "2", *KEY, "--scheduler", address, "--verify",
                     "--json", "--dataset", "digits"])
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["verify"]["max_abs_integer_error"] == 0
        share = tmp_path / "share.msg"
        data = tmp_path / "x.npy"
        np.save(data, _rows(np.random.default_rng(1), 20, 4))
        assert main(["owner", "share", "--public", str(keys / "public.json"), "--insecure-test-key",
                     "--identity", str(ids / "1.identity.json"), "--data", str(data), "--out", str(share),
                     "--scheduler", address]) == 0
        assert share.stat().st_size > 0
        with Client(address) as client:  # the cluster is still healthy after the commands closed their clients
            assert len(client.scheduler_info()["workers"]) == 2
    _expect_error(capsys, ["run", *KEY, "--scheduler", "localhost:8786"],
                  "scheduler must be an address like tcp://HOST:8786")


def test_owner_prepare_then_share_uses_the_randomness_once(tmp_path, keys, capsys):
    """owner prepare writes the share's encryptions of zero (0600, beside the identity); owner share reads
    them once, deletes the file, and the share is the same as one made with fresh randomness."""
    from dpdpca.crypto import EncryptedArray, load_private_key
    from dpdpca.protocol.messages import Message
    from dpdpca.protocol.params import ProtocolParams

    own = tmp_path / "alice"
    assert main(["owner", "keygen", "--owner-id", "alice", "--out-dir", str(own)]) == 0
    np.savetxt(tmp_path / "a.csv", _rows(np.random.default_rng(4), 20, 4), delimiter=",")
    common = ["--public", str(keys / "public.json"), "--identity", str(own / "alice.identity.json"),
              "--insecure-test-key"]
    assert main(["owner", "prepare", *common, "--d", "4", "--release", "centred"]) == 0
    path = own / "alice.randomness.bin"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "used once" in capsys.readouterr().out
    _expect_error(capsys, ["owner", "prepare", *common, "--d", "4"], "must not exist yet")
    # a --randomness it cannot write (under a file) is refused before a factor is made, and nothing is left
    from dpdpca.protocol.owner import DataOwner

    made = []
    real_precompute = DataOwner.precompute
    DataOwner.precompute = lambda self, d: made.append(d) or real_precompute(self, d)  # type: ignore[method-assign]
    try:
        _expect_error(capsys, ["owner", "prepare", *common, "--d", "4", "--randomness",
                               str(tmp_path / "a.csv" / "r.bin")], "--randomness")
    finally:
        DataOwner.precompute = real_precompute  # type: ignore[method-assign]
    assert made == [] and sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "alice"]
    share = ["owner", "share", *common, "--data", str(tmp_path / "a.csv"), "--release", "centred"]
    # an --out it cannot write (under a file) is refused before the randomness is read: the file is kept
    _expect_error(capsys, [*share, "--out", str(tmp_path / "a.csv" / "share.msg")], "--out")
    assert path.exists()
    assert main([*share, "--out", str(tmp_path / "ahead.msg")]) == 0
    assert not path.exists()  # read once, deleted
    assert main([*share, "--out", str(tmp_path / "fresh.msg")]) == 0  # no file left: fresh randomness
    sk = load_private_key(keys / "private.json", insecure_test_key=True)
    params = ProtocolParams.from_json(json.loads((keys / "public.json").read_text()), insecure_test_key=True)

    def plain(name: str) -> dict[str, list[int]]:
        msg = Message.from_bytes((tmp_path / name).read_bytes())
        return {k: [int(x) for x in sk.raw_decrypt(EncryptedArray.from_bytes(b, params.public_key).ciphertexts)]
                for k, b in msg.sections.items()}
    assert plain("ahead.msg") == plain("fresh.msg")
    # prepared for another d: refused in one line before the file is deleted (it is kept for a share of d=3)
    assert main(["owner", "prepare", *common, "--d", "3", "--release", "centred"]) == 0
    _expect_error(capsys, [*share, "--out", str(tmp_path / "bad.msg")], "must be made for d=4",
                  no_file=tmp_path / "bad.msg")
    assert path.exists()
    # a mistyped --randomness naming another 0600 file (the private key, an identity): refused, never deleted
    for victim in (keys / "private.json", own / "alice.identity.json"):
        before = victim.read_bytes()
        _expect_error(capsys, [*share, "--out", str(tmp_path / "bad.msg"), "--randomness", str(victim)],
                      f"randomness file {str(victim)!r} must start with 'DPDPCA-OWNER-RANDOMNESS-1'",
                      no_file=tmp_path / "bad.msg")
        assert victim.read_bytes() == before


def test_owner_share_makes_its_randomness_while_the_data_load_when_d_is_declared(tmp_path, capsys):
    from dpdpca.crypto import EncryptedArray, load_private_key
    from dpdpca.protocol.messages import Message
    from dpdpca.protocol.params import ProtocolParams

    keys, own = tmp_path / "keys", tmp_path / "alice"
    assert main(["keygen", "--out-dir", str(keys), *KEY, "--max-owners", "3", "--max-rows-per-owner", "50",
                 "--features", "4"]) == 0
    assert main(["owner", "keygen", "--owner-id", "alice", "--out-dir", str(own)]) == 0
    X = _rows(np.random.default_rng(6), 20, 4)
    np.savetxt(tmp_path / "a.csv", X, delimiter=",")
    capsys.readouterr()
    assert main(["owner", "share", "--public", str(keys / "public.json"), "--identity", str(own / "alice.identity.json"),
                 "--insecure-test-key", "--data", str(tmp_path / "a.csv"), "--out", str(tmp_path / "a.msg")]) == 0
    assert "encryptions of zero made while the data loaded" in capsys.readouterr().out
    sk = load_private_key(keys / "private.json", insecure_test_key=True)
    params = ProtocolParams.from_json(json.loads((keys / "public.json").read_text()), insecure_test_key=True)
    msg = Message.from_bytes((tmp_path / "a.msg").read_bytes())
    v = EncryptedArray.from_bytes(msg.section("v"), params.public_key)
    from dpdpca.crypto import decrypt

    assert len(decrypt(sk, v)) == 4  # a valid share of the declared d
    # the data user's --components past the declared d: refused, naming the option, before any release is read
    pcs = tmp_path / "pcs.npz"
    _expect_error(capsys, ["user", "finish", "--insecure-test-key", "--private", str(keys / "private.json"),
                           "--owner-keys", str(own / "alice.verify.json"), "--components", "5", "--out", str(pcs),
                           str(tmp_path / "a.msg")], "components must be <= 4, got 5", no_file=pcs)
    assert not (keys / "releases.json").exists()


@pytest.mark.parametrize("argv, line", [
    (["run", "--workers", "0"], "dpdpca: error: Invalid value for '--workers': 0 is not in the range x>=1. "
                                "(see 'dpdpca run --help')"),
    (["run", "--bogus"], "dpdpca: error: No such option '--bogus'. Did you mean '--out'? (see 'dpdpca run --help')"),
    (["nosuch"], "dpdpca: error: No such command 'nosuch'. (see 'dpdpca --help')"),
    (["run", "--owners"], "dpdpca: error: Option '--owners' requires an argument."),  # click gives no context here
])
def test_click_usage_errors_are_one_line_too(capsys, argv, line):
    """An option click itself refuses (type, range, unknown, missing value) gets the same one line and exit 2 as
    every other refusal, not click's usage block; ``dpdpca`` alone still shows the help."""
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == line + "\n"
    assert main([]) in (0, 2) and "Usage: dpdpca [OPTIONS] COMMAND" in "".join(capsys.readouterr())
