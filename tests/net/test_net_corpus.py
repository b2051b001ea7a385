"""The network commands' malformed-input corpus: bad proxy.toml values, bad --proxy URLs, missing or bad TLS files.

The sibling of ``tests/protocol/test_protocol_corpus.py`` for ``dpdpca proxy
serve``, ``dpdpca owner share --proxy`` and ``dpdpca user finish --proxy``.
Every case runs ``dpdpca.cli.main`` and must give exit status 2, exactly one
line on stderr starting ``dpdpca: error:`` that names what is wrong, no
traceback, and nothing written: no proxy state directory, no output file.
None of them needs a server (each is refused before any connection).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from dpdpca.cli import main
from dpdpca.net.launch import throwaway_tls, write_proxy_toml
from dpdpca.protocol.identity import OwnerIdentity

KEY = ["--key-bits", "768", "--insecure-test-key"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    """Keys, identities of owners a and b and the user, a CA and server certificate, one valid proxy.toml."""
    root = tmp_path_factory.mktemp("netcorpus")
    assert main(["keygen", "--out-dir", str(root / "keys"), *KEY, "--release", "any", "--max-owners", "2", "--max-rows-per-owner",
                 "8", "--features", "2"]) == 0
    ids = {o: OwnerIdentity.generate(o) for o in ("a", "b")}
    for oid, ident in ids.items():
        ident.save(root / f"{oid}.identity.json")
    user = OwnerIdentity.generate("user")
    user.save(root / "user.identity.json")
    tls = throwaway_tls(root)
    write_proxy_toml(root / "proxy.toml", public=root / "keys" / "public.json", owners=ids, user=user, tls=tls,
                     port=8443, insecure_test_key=True, state_dir=root / "state")
    np.savetxt(root / "a.csv", np.full((3, 2), 0.2), delimiter=",")
    (root / "junk.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    return root


Case = Callable[[Path, Path], list[str]]


def _serve(edit: tuple[str, str] | None = None, *, append: str = "") -> Case:
    """``proxy serve`` with the valid proxy.toml edited (one replacement) and/or lines appended to a table."""
    def build(root: Path, work: Path) -> list[str]:
        text = (root / "proxy.toml").read_text().replace(str(root / "state"), str(work / "state"))
        # TEST-NET-1 cannot be bound: a case that gets past the checks it is about is refused there, never serves
        text = text.replace('host = "127.0.0.1"', 'host = "192.0.2.1"')
        if edit is not None:
            assert edit[0] in text, edit
            text = text.replace(edit[0], edit[1], 1)
        if append:
            table, line = append.split("\n", 1)
            text = text.replace(table + "\n", f"{table}\n{line}\n", 1)
        (work / "proxy.toml").write_text(text.replace("@ROOT@", str(root)))
        return ["proxy", "serve", "--config", str(work / "proxy.toml")]
    return build


def _share(*extra: str) -> Case:
    def build(root: Path, work: Path) -> list[str]:
        return ["owner", "share", "--public", str(root / "keys" / "public.json"), "--identity",
                str(root / "a.identity.json"), "--data", str(root / "a.csv"), "--insecure-test-key", *extra]
    return build


def _user(*extra: str, identity: bool = True) -> Case:
    def build(root: Path, work: Path) -> list[str]:
        return ["user", "finish", "--insecure-test-key", "--private", str(root / "keys" / "private.json"), "--owner-keys",
                str(root / "owners.verify.json"), "--components", "1", "--out", str(work / "pcs.npz"),
                *(["--identity", str(root / "user.identity.json")] if identity else []), *extra]
    return build


def _missing_config(root: Path, work: Path) -> list[str]:
    return ["proxy", "serve", "--config", str(work / "nope.toml")]


def _binary_config(root: Path, work: Path) -> list[str]:
    (work / "proxy.toml").write_bytes(b"\xff\xfe\x00[server]")
    return ["proxy", "serve", "--config", str(work / "proxy.toml")]


_HELD: list[socket.socket] = []


@pytest.fixture(autouse=True, scope="module")
def _close_held_sockets():
    yield
    while _HELD:
        _HELD.pop().close()


def _port_in_use(root: Path, work: Path) -> list[str]:
    """A valid proxy.toml on a loopback port another socket is listening on."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    _HELD.append(sock)
    argv = _serve(('host = "192.0.2.1"', 'host = "127.0.0.1"'))(root, work)
    path = work / "proxy.toml"
    path.write_text(path.read_text().replace("port = 8443", f"port = {sock.getsockname()[1]}"))
    return argv


CA = "@ROOT@/ca.pem"
GOOD = "https://127.0.0.1:8443"

#: (name, command line builder, what the one-line error must say)
CASES: list[tuple[str, Case, str]] = [
    # -- proxy.toml -------------------------------------------------------------------------
    ("toml-missing", _missing_config, "must exist"),
    ("toml-not-utf8", _binary_config, "must be TOML"),
    ("toml-syntax", _serve(("[protocol]", "[protocol")), "must be TOML"),
    ("toml-no-public", _serve(("public = ", "publik = ")), "protocol.public"),
    ("toml-no-owner-keys", _serve(("owner_keys = ", "owner_keyz = ")), "protocol.owner_keys"),
    ("toml-owner-keys-missing-file", _serve(("owner_keys = [", 'owner_keys = ["@ROOT@/nope.json", ')), "nope.json"),
    ("toml-public-missing-file", _serve(("public = ", 'public = "@ROOT@/nope.json"\nx = ')), "must exist"),
    ("toml-public-not-json", _serve(("public = ", 'public = "@ROOT@/a.csv"\nx = ')), "must be JSON"),
    ("toml-quorum-too-big", _serve(("quorum = 2", "quorum = 3")), "quorum must be"),
    ("toml-quorum-zero", _serve(("quorum = 2", "quorum = 0")), "quorum must be"),
    ("toml-quorum-text", _serve(("quorum = 2", 'quorum = "two"')), "documented types"),
    ("toml-min-shares-above-quorum", _serve(("min_shares = 1", "min_shares = 3")), "min_shares must be"),
    ("toml-port-negative", _serve(("port = 8443", "port = -1")), "port must be"),
    ("toml-port-too-big", _serve(("port = 8443", "port = 70000")), "port must be"),
    ("toml-release-when", _serve(('release = "on-close"', 'release = "sometime"')), "protocol.release"),
    ("toml-release-mode", _serve(append='[protocol]\nrelease_mode = "both"'), "release must be"),
    ("toml-epsilon-negative", _serve(("epsilon = 1.0", "epsilon = -1.0")), "epsilon must be"),
    ("toml-epsilon-text", _serve(("epsilon = 1.0", 'epsilon = "one"')), "epsilon must be"),
    ("toml-delta-one", _serve(("delta = 1e-05", "delta = 1.0")), "delta must be"),
    ("toml-calibration", _serve(append='[protocol]\ncalibration = "magic"'), "calibration must be"),
    ("toml-owners-noise-centred", _serve(append='[protocol]\nrelease_mode = "centred"\nnoise_by = "owners"'),
     "noise_by must be"),
    ("toml-honest-owners-without-owners-noise", _serve(append="[protocol]\nhonest_owners = 1"),
     "honest_owners must be"),
    ("toml-collection-seconds-zero", _serve(("collection_seconds = 3600.0", "collection_seconds = 0")),
     "collection_seconds must be"),
    ("toml-no-deadline", _serve(("collection_seconds = 3600.0", "x = 1")), "deadline or protocol.collection_seconds"),
    ("toml-deadline-without-zone", _serve(("collection_seconds = 3600.0", "deadline = 2030-01-01T00:00:00")),
     "time zone"),
    ("toml-max-body-tiny", _serve(append="[server]\nmax_body_bytes = 10"), "max_body_bytes must be"),
    ("toml-token-short", _serve(append='[user]\ntoken = "short"'), ">= 16 characters"),
    ("toml-host-not-here", _serve(), "an address this machine can listen on"),
    ("toml-port-in-use", _port_in_use, "an address this machine can listen on"),
    # -- TLS files ------------------------------------------------------------------------------
    ("tls-none", _serve(("tls_cert = ", "x_cert = "), append=""), "tls_cert and tls_key must be"),
    ("tls-cert-missing-file", _serve(("tls_cert = ", 'tls_cert = "@ROOT@/nope.pem"\nx = ')),
     "tls_cert must be an existing PEM file"),
    ("tls-key-missing-file", _serve(("tls_key = ", 'tls_key = "@ROOT@/nope.key"\nx = ')),
     "tls_key must be an existing PEM file"),
    ("tls-cert-not-pem", _serve(("tls_cert = ", 'tls_cert = "@ROOT@/junk.pem"\nx = ')), "PEM certificate chain"),
    ("tls-key-is-the-cert", _serve(("tls_key = ", 'tls_key = "@ROOT@/server.pem"\nx = ')), "PEM certificate chain"),
    # -- --proxy URLs and --ca-cert --------------------------------------------------------------
    ("url-http", _share("--proxy", "http://127.0.0.1:8443"), "https://HOST:PORT"),
    ("url-no-scheme", _share("--proxy", "127.0.0.1:8443"), "https://HOST:PORT"),
    ("url-no-host", _share("--proxy", "https://:8443"), "https://HOST:PORT"),
    ("url-port-too-big", _share("--proxy", "https://127.0.0.1:99999"), "port in 1-65535"),
    ("url-port-text", _share("--proxy", "https://127.0.0.1:port"), "port in 1-65535"),
    ("url-query", _share("--proxy", "https://127.0.0.1:8443/?x=1"), "https://HOST:PORT"),
    ("url-credentials", _share("--proxy", "https://me:secret@127.0.0.1:8443"), "without user information"),
    ("url-empty", _share("--proxy", ""), "https://HOST:PORT"),
    ("share-ca-missing", _share("--proxy", GOOD, "--ca-cert", "/nonexistent/ca.pem"), "ca_cert must be"),
    ("user-url-http", _user("--proxy", "http://127.0.0.1:8443"), "https://HOST:PORT"),
    ("user-url-credentials", _user("--proxy", "https://u:pw@127.0.0.1:8443"), "without user information"),
    ("user-no-identity", _user("--proxy", GOOD, identity=False), "--identity must be given"),
    ("user-ca-missing", _user("--proxy", GOOD, "--ca-cert", "/nonexistent/ca.pem"), "ca_cert must be"),
    ("user-ca-not-pem", _user("--proxy", GOOD, "--ca-cert", "@ROOT@/a.csv"), "ca_cert must be a PEM file"),
]


def test_the_cases_are_distinct_and_cover_every_network_command():
    assert len({name for name, _, _ in CASES}) == len(CASES)
    assert {name.split("-")[0] for name, _, _ in CASES} >= {"toml", "tls", "url", "share", "user"}


@pytest.mark.parametrize("name,build,match", CASES, ids=[c[0] for c in CASES])
def test_every_bad_network_input_is_refused_in_one_line(setup, tmp_path, capsys, name, build, match):
    argv = [a.replace("@ROOT@", str(setup)) for a in build(setup, tmp_path)]
    capsys.readouterr()
    assert main(argv) == 2, name
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("dpdpca: error: ") and err.count("\n") == 1, (name, err)
    assert match in err, (name, err)
    assert "Traceback" not in err and "secret" not in err
    assert captured.out == ""
    assert not (tmp_path / "state").exists(), name  # the proxy created nothing
    assert not (tmp_path / "pcs.npz").exists(), name
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob("*.msg")), name
