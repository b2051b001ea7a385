"""What an operator sees: ``proxy init`` (and its test TLS), the log, ``proxy status``, the page at ``/``.

The loopback test follows docs/network.md's walk-through with the commands
alone: keygen, identities, ``proxy init --dev-tls``, ``proxy serve``, three
owners and the user over HTTPS on 127.0.0.1.  The page is then opened in a
real headless Chromium (Debian's package; ``.ci/run`` installs it), its DOM
read and a screenshot checked for content.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from dpdpca.cli import main
from dpdpca.net.config import load_config

pytest.importorskip("uvicorn")
x509 = pytest.importorskip("cryptography.x509")

KEY = ["--key-bits", "768", "--insecure-test-key"]


def _parties(root: Path, owners=("alice", "bob", "carol")) -> None:
    assert main(["keygen", "--out-dir", str(root / "keys"), *KEY, "--max-owners", "3", "--features", "4"]) == 0
    for oid in owners:
        assert main(["owner", "keygen", "--owner-id", oid, "--out-dir", str(root / "ids")]) == 0
    assert main(["user", "identity", "--out-dir", str(root / "ids")]) == 0


def test_proxy_init_writes_a_loadable_config_and_test_tls_for_an_ip(tmp_path, capsys):
    from dpdpca.net.devtls import TEST_ONLY_BANNER

    _parties(tmp_path)
    out = tmp_path / "proxy"
    assert main(["proxy", "init", "--out-dir", str(out), "--host", "127.0.0.1", "--port", "9443", "--owners-dir",
                 str(tmp_path / "ids"), "--public", str(tmp_path / "keys" / "public.json"), "--quorum", "2",
                 "--dev-tls", "--insecure-test-key"]) == 0
    said = capsys.readouterr().out
    assert "3 owners (alice, bob, carol)" in said and "THROWAWAY" in said and "NOT FOR PRODUCTION" in said
    text = (out / "proxy.toml").read_text()
    assert "# 3 owners found: alice, bob, carol" in text and "TESTING ONLY" in text
    config = load_config(out / "proxy.toml")  # what proxy serve reads, validated
    assert sorted(config.owner_keys) == ["alice", "bob", "carol"] and list(config.user_keys) == ["user"]
    assert config.quorum == 2 and config.port == 9443 and config.tls_cert == out / "server.pem"
    assert stat.S_IMODE(os.stat(out / "server.key").st_mode) == 0o600
    for name in ("ca.pem", "server.pem", "server.key"):
        assert (out / name).read_text().startswith(TEST_ONLY_BANNER)
    leaf = x509.load_pem_x509_certificates((out / "server.pem").read_bytes())[0]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert san.get_values_for_type(x509.DNSName) == []
    # the chain verifies against ca.pem (what the owners pass as --ca-cert), and the key is the leaf's
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(out / "server.pem"), str(out / "server.key"))
    ssl.create_default_context(cafile=str(out / "ca.pem"))
    # no overwrite without --force; a DNS name gets a DNS entry
    assert main(["proxy", "init", "--out-dir", str(out), "--host", "127.0.0.1", "--owners-dir",
                 str(tmp_path / "ids")]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["proxy", "init", "--out-dir", str(tmp_path / "dns"), "--host", "proxy.example.org",
                 "--owners-dir", str(tmp_path / "ids"), "--dev-tls"]) == 0
    leaf = x509.load_pem_x509_certificates((tmp_path / "dns" / "server.pem").read_bytes())[0]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["proxy.example.org"]


@pytest.mark.parametrize("argv, message", [
    (["--host", "bad host!"], "--host must be an IP address or a DNS name"),
    (["--quorum", "4"], "--quorum must be in [1, 3]"),
    (["--epsilon", "0"], "epsilon must be > 0"),
])
def test_proxy_init_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, capsys, argv, message):
    _parties(tmp_path)
    out = tmp_path / "proxy"
    base = ["proxy", "init", "--out-dir", str(out), "--host", "127.0.0.1", "--owners-dir", str(tmp_path / "ids"),
            "--dev-tls"]
    capsys.readouterr()
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: ") and err.count("\n") == 1 and message in err, err
    assert not (out / "proxy.toml").exists() and not (out / "server.key").exists()


@pytest.mark.parametrize("argv, message", [
    (["--out-dir", "{f}/px"], "--out-dir '{f}/px/proxy.toml' must be in a directory, got '{f}', which is not a directory"),
    (["--user-key", "{f}"], "--user-key must be the data user's verify-key file (user.verify.json from dpdpca user "
                            "identity), got: owner verify keys file '{f}' must be JSON, got JSONDecodeError"),
    (["--user-key", "{ids}/a.verify.json"], "--user-key must be the data user's verify-key file (user.verify.json "
                                            "from dpdpca user identity, id 'user'), got '{ids}/a.verify.json' with "
                                            "ids ['a']"),
    (["--collection-seconds", "inf"], "--collection-seconds must be in (0, 31536000] (a year), got inf"),
    (["--collection-seconds", "1e300"], "--collection-seconds must be in (0, 31536000] (a year), got 1e+300"),
])
def test_proxy_init_refuses_a_bad_path_user_key_or_deadline_in_one_line_and_creates_nothing(
        tmp_path, capsys, argv, message):
    """--out-dir under a file (never a NotADirectoryError), a --user-key that is not the data user's verify key
    (checked as proxy serve will read it) and a non-finite or absurd --collection-seconds: one line naming the
    option, nothing created, the file in the way intact."""
    assert main(["owner", "keygen", "--owner-id", "a", "--out-dir", str(tmp_path / "ids")]) == 0
    (tmp_path / "f").write_text("not json\n")
    names = {"f": str(tmp_path / "f"), "ids": str(tmp_path / "ids")}
    argv = [a.format(**names) for a in argv]
    out = [] if "--out-dir" in argv else ["--out-dir", str(tmp_path / "px")]
    capsys.readouterr()
    assert main(["proxy", "init", "--host", "127.0.0.1", "--owners-dir", str(tmp_path / "ids"), *out, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: ") and err.count("\n") == 1 and message.format(**names) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "ids"] and (tmp_path / "f").read_text() == "not json\n"


def test_proxy_init_refuses_a_quorum_the_public_parameters_cannot_reach(tmp_path, capsys):
    """Four owners found, max_owners 3: the default quorum (every owner) is refused at init, as proxy serve
    would refuse it at start; a quorum within max_owners is written."""
    _parties(tmp_path, owners=("alice", "bob", "carol", "dave"))
    base = ["proxy", "init", "--out-dir", str(tmp_path / "p"), "--host", "127.0.0.1", "--owners-dir",
            str(tmp_path / "ids"), "--public", str(tmp_path / "keys" / "public.json"), "--insecure-test-key"]
    capsys.readouterr()
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--quorum must be <= max_owners=3" in err and "got 4" in err, err
    assert not (tmp_path / "p" / "proxy.toml").exists()
    assert main([*base, "--quorum", "3"]) == 0
    assert load_config(tmp_path / "p" / "proxy.toml").quorum == 3


def test_proxy_init_refuses_a_weak_key_unless_asked_and_then_says_so_in_the_config(tmp_path, capsys):
    """--public declares a 768-bit test key: proxy init refuses it as proxy serve would (one line naming
    --insecure-test-key, nothing written); with --insecure-test-key it writes protocol.insecure_test_key = true,
    marked TESTING ONLY, so the service it configures accepts the key."""
    _parties(tmp_path)
    out = tmp_path / "p"
    base = ["proxy", "init", "--out-dir", str(out), "--host", "127.0.0.1", "--owners-dir", str(tmp_path / "ids"),
            "--public", str(tmp_path / "keys" / "public.json")]
    capsys.readouterr()
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unless this party passes --insecure-test-key, got 768" in err, err
    assert not (out / "proxy.toml").exists()
    assert main([*base, "--insecure-test-key"]) == 0
    text = (out / "proxy.toml").read_text()
    assert "insecure_test_key = true" in text and "TESTING ONLY (proxy init --insecure-test-key)" in text
    assert load_config(out / "proxy.toml").insecure_test_key is True


def test_proxy_init_without_owners_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["proxy", "init", "--out-dir", str(tmp_path / "p"), "--host", "127.0.0.1", "--owners-dir",
                 str(tmp_path / "empty")]) == 2
    assert "at least one owner's verify key" in capsys.readouterr().err


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browse(url: str, *, screenshot: Path | None = None) -> str:
    """Headless Chromium on ``url``: its DOM (and a screenshot). The page's certificate is the test CA's,
    which Chromium cannot be pointed at without an NSS database: certificate errors are ignored here only."""
    exe = _chromium()
    assert exe is not None
    with tempfile.TemporaryDirectory(prefix="dpdpca-chromium-") as profile:
        flags = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--ignore-certificate-errors", "--window-size=1000,700"]
        if screenshot is not None:
            flags.append(f"--screenshot={screenshot}")
        else:
            flags.append("--dump-dom")
        proc = subprocess.run([*flags, url], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _not_blank(png: Path) -> float:
    """Share of pixels that are not the background colour (matplotlib reads the PNG)."""
    from matplotlib.image import imread

    img = imread(str(png))[..., :3]
    background = img[0, 0]
    return float(np.mean(np.any(np.abs(img - background) > 0.05, axis=-1)))


def test_three_owners_and_the_user_as_docs_network_says_watched_by_status_log_and_page(tmp_path, capsys):
    from dpdpca.net.client import ProxyRefused, public_session
    from dpdpca.net.launch import ServerProcess, free_port

    _parties(tmp_path)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    proxy = tmp_path / "proxy"
    assert main(["proxy", "init", "--out-dir", str(proxy), "--host", "127.0.0.1", "--port", str(port),
                 "--owners-dir", str(tmp_path / "ids"), "--public", str(tmp_path / "keys" / "public.json"),
                 "--dev-tls", "--insecure-test-key"]) == 0
    ca = str(proxy / "ca.pem")
    server = ServerProcess(proxy / "proxy.toml", url).start()
    try:
        for _ in range(600):  # until the service answers (no credential needed for the session summary)
            try:
                session = public_session(url, ca_cert=ca)
                break
            except ProxyRefused:  # not listening yet
                time.sleep(0.1)
        assert session["phase"] == "collecting" and session["owners_missing"] == ["alice", "bob", "carol"]
        rng = np.random.default_rng(0)
        for i, oid in enumerate(("alice", "bob", "carol")):
            np.savetxt(tmp_path / f"{oid}.csv", rng.uniform(0, 0.3, size=(20 + i, 4)), delimiter=",")
            assert main(["owner", "share", "--public", str(tmp_path / "keys" / "public.json"), "--identity",
                         str(tmp_path / "ids" / f"{oid}.identity.json"), "--data", str(tmp_path / f"{oid}.csv"),
                         "--insecure-test-key", "--proxy", url, "--ca-cert", ca, "--quiet"]) == 0
            if oid == "alice":  # a second, different share under alice's id: refused, and logged as such
                assert main(["owner", "share", "--public", str(tmp_path / "keys" / "public.json"), "--identity",
                             str(tmp_path / "ids" / "alice.identity.json"), "--data", str(tmp_path / "alice.csv"),
                             "--insecure-test-key", "--proxy", url, "--ca-cert", ca, "--quiet"]) == 2
        verify = [a for o in ("alice", "bob", "carol") for a in ("--owner-keys", str(tmp_path / "ids" /
                                                                                    f"{o}.verify.json"))]
        capsys.readouterr()
        assert main(["user", "finish", "--insecure-test-key", "--private", str(tmp_path / "keys" / "private.json"), *verify,
                     "--components", "2", "--out", str(tmp_path / "pcs.npz"), "--proxy", url, "--identity",
                     str(tmp_path / "ids" / "user.identity.json"), "--ca-cert", ca, "--json", "--quiet"]) == 0
        assert json.loads(capsys.readouterr().out)["components_shape"] == [4, 2]
        # proxy status: the three owners and the release
        assert main(["proxy", "status", "--proxy", url, "--ca-cert", ca]) == 0
        status = capsys.readouterr().out
        assert "phase released" in status and "accepted (3): alice, bob, carol" in status
        assert "still expected (0): none" in status and "release: released (add-remove" in status
        assert "budget used: epsilon 1, delta 1e-05" in status
        # the page at /, in a real browser
        browser = _chromium() is not None
        dom = _browse(url + "/") if browser else ""
        if browser:
            for text in ("alice", "bob", "carol", "released", "3 of 3 owners", 'http-equiv="refresh"'):
                assert text in dom, text
            assert "<script" not in dom and "http://" not in dom.replace('http-equiv', '')
            shot = tmp_path / "page.png"
            _browse(url + "/", screenshot=shot)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert 0.01 < _not_blank(shot) < 0.9  # text and the coloured table, on a white page
    finally:
        server.stop()
    log = server.log.read_text()
    for oid in ("alice", "bob", "carol"):  # one line per share
        assert log.count(f"share accepted: owner {oid} ") == 1, log
    assert log.count("share refused: owner alice, 409 conflict") == 1
    assert log.count("collection closed: quorum reached (3 of 3)") == 1
    assert log.count("release made: the add-remove release") == 1
    assert log.count("budget spent: epsilon 1, delta 1e-05") == 1
    # never a secret or a ciphertext: no line longer than a sentence, no key material
    private = json.loads((tmp_path / "keys" / "private.json").read_text())
    for line in log.splitlines():
        assert len(line) < 400
    for secret in (str(private["p"]), str(private["q"])):
        assert secret[:12] not in log
    if not browser:
        pytest.skip("the page was not opened in a browser: chromium is not installed (.ci/run installs it)")


def test_limit_anyone_reaching_the_proxy_sees_owner_ids_and_progress_and_nothing_else(
        tmp_path, net_params, identities, shares, caplog):
    """The session summary and the page need no credential: they show owner ids, counts against the quorum,
    the deadline, the release state and the budget, and never a share, a row count, a key or a ciphertext.
    The log gets one line per share."""
    import logging
    import warnings

    from dpdpca.net.app import create_app
    from dpdpca.net.auth import PartyKeys
    from dpdpca.net.client import ProxyClient, public_session
    from dpdpca.net.collection import Collection
    from dpdpca.net.config import NoiseConfig
    from dpdpca.protocol.identity import OwnerKeyring

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*httpx.*starlette.testclient.*")
        from starlette.testclient import TestClient

    owners = OwnerKeyring.from_identities([identities[o] for o in ("1", "2", "3")])
    from dpdpca.dp import PrivacyLedger

    coll = Collection(net_params, tmp_path / "state", owner_keys=owners, quorum=3, collection_seconds=60.0,
                      noise=NoiseConfig(epsilon=1.0, delta=1e-5, release="centred"),
                      budget=PrivacyLedger(tmp_path / "budget.json", budget_epsilon=3.0, budget_delta=1e-4))
    app = create_app(coll, PartyKeys(owners, OwnerKeyring.from_identities([identities["user"]])),
                     max_body_bytes=1 << 20)
    caplog.set_level(logging.INFO, logger="dpdpca.proxy")
    with TestClient(app) as tc:
        for oid in ("1", "2"):
            client = ProxyClient("http://testserver", identities[oid], f"owner:{oid}", client=tc, retries=0)
            assert client.post_share(oid, shares[oid][0])["status"] == "accepted"
        session = public_session("http://testserver", client=tc)
        page = tc.get("/")
        client = ProxyClient("http://testserver", identities["3"], "owner:3", client=tc, retries=0)
        assert client.post_share("3", shares["3"][0])["status"] == "accepted"
        for _ in range(100):
            after = public_session("http://testserver", client=tc)
            if after["phase"] == "released":
                break
            time.sleep(0.05)
        after_page = tc.get("/").text
    assert after["release"]["state"] == "released" and after["owners_missing"] == []
    assert after["budget"]["epsilon_spent"] == 1.0 and after["budget"]["service"]["releases"] == 1
    assert after["budget"]["service"]["epsilon"] == 3.0 and "of 3" in after_page
    assert set(session) == {"session", "phase", "quorum", "min_shares", "deadline_unix", "seconds_left",
                            "owners_expected", "owners_accepted", "owners_missing", "closed_because", "release",
                            "budget"}
    assert session["owners_accepted"] == ["1", "2"] and session["owners_missing"] == ["3"]
    assert session["release"]["state"] == "not yet" and session["budget"]["epsilon_spent"] == 0.0
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "<script" not in page.text and "src=" not in page.text and "href=" not in page.text
    assert "2 of 3 owners" in page.text and 'http-equiv="refresh"' in page.text
    shown = json.dumps(session) + page.text
    assert "n_rows" not in shown and "20 rows" not in shown
    lines = [r.getMessage() for r in caplog.records if r.name == "dpdpca.proxy"]
    assert [line for line in lines if line.startswith("share accepted")] == [
        "share accepted: owner 1 (1/3)", "share accepted: owner 2 (2/3)", "share accepted: owner 3 (3/3)"]
    import re

    spent = re.search(r"1 release\(s\), composed epsilon ([0-9.]+) of 3\.0$",
                      [line for line in lines if line.startswith("budget spent")][0])
    assert spent is not None and 0 < float(spent.group(1)) <= 1.0  # composed at the budget's delta


def test_without_public_status_a_stranger_gets_404_and_the_signed_status_still_answers(
        tmp_path, net_params, identities):
    import warnings

    from dpdpca.net.app import create_app
    from dpdpca.net.auth import PartyKeys
    from dpdpca.net.client import ProxyClient
    from dpdpca.net.collection import Collection
    from dpdpca.protocol.identity import OwnerKeyring

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*httpx.*starlette.testclient.*")
        from starlette.testclient import TestClient

    owners = OwnerKeyring.from_identities([identities[o] for o in ("1", "2", "3")])
    coll = Collection(net_params, tmp_path / "state", owner_keys=owners, quorum=3, collection_seconds=60.0)
    keys = PartyKeys(owners, OwnerKeyring.from_identities([identities["user"]]))
    with TestClient(create_app(coll, keys, max_body_bytes=1 << 20, public_status=False)) as tc:
        assert tc.get("/").status_code == 404 and tc.get("/v1/session").status_code == 404
        assert "owner" not in tc.get("/").text
        status = ProxyClient("http://testserver", identities["1"], "owner:1", client=tc, retries=0).status()
        assert status["quorum"] == 3
    with TestClient(create_app(coll, keys, max_body_bytes=1 << 20)) as tc:  # the default keeps both
        assert tc.get("/").status_code == 200 and tc.get("/v1/session").status_code == 200
