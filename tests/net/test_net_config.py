"""proxy.toml loading and the one-line errors of the HTTP commands."""

from __future__ import annotations

import json

import pytest

from dpdpca.cli import main
from dpdpca.crypto import generate_keypair
from dpdpca.errors import MessageError, ParameterError
from dpdpca.net.config import load_config
from dpdpca.net.launch import write_proxy_toml
from dpdpca.protocol import ProtocolParams
from dpdpca.protocol.identity import OwnerIdentity


@pytest.fixture
def parties():
    return {o: OwnerIdentity.generate(o) for o in ("a", "b")}, OwnerIdentity.generate("user")


def _write(tmp_path, parties, **kwargs):
    owners, user = parties
    (tmp_path / "public.json").write_text("{}")
    return write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json", owners=owners, user=user,
                            tls=None, port=8443, state_dir=tmp_path / "state", **kwargs)


def test_proxy_toml_round_trip(tmp_path, parties):
    path = _write(tmp_path, parties, quorum=1, min_shares=1, release="on-request",
                  tokens={"a": "a" * 20, "user": "u" * 20})
    cfg = load_config(path)
    assert sorted(cfg.owner_keys) == ["a", "b"] and list(cfg.user_keys) == ["user"]
    assert cfg.quorum == 1 and cfg.release == "on-request" and cfg.collection_seconds == 3600.0
    assert cfg.tokens == {"owner:a": "a" * 20, "user": "u" * 20}
    keys = cfg.party_keys()
    assert "owner:a" in keys and "user" in keys and "owner:c" not in keys and "owner:user" not in keys


@pytest.mark.parametrize("edit, error, match", [
    (("quorum = 2", "quorum = 3"), ParameterError, "quorum must be"),
    (('release = "on-request"', 'release = "sometime"'), ParameterError, "protocol.release"),
    (("owner_keys = ", "owner_keyz = "), MessageError, "protocol.owner_keys"),
    (("[protocol]", "[protocol\n"), MessageError, "must be TOML"),
])
def test_bad_proxy_toml_is_one_named_error(tmp_path, parties, edit, error, match):
    path = _write(tmp_path, parties, release="on-request")
    path.write_text(path.read_text().replace(*edit, 1))
    with pytest.raises(error, match=match):
        load_config(path)


def _one_line_error(capsys, argv, match):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: ") and err.count("\n") == 1 and match in err, err


def test_http_commands_refuse_bad_input_in_one_line(tmp_path, parties, capsys):
    path = _write(tmp_path, parties)
    _one_line_error(capsys, ["proxy", "serve", "--config", str(path)], "tls_cert")
    _one_line_error(capsys, ["proxy", "serve", "--config", str(tmp_path / "missing.toml")], "must exist")
    parties[0]["a"].save(tmp_path / "a.identity.json")
    (tmp_path / "x.csv").write_text("0.1,0.2\n0.3,0.1\n")
    share = ["owner", "share", "--public", str(tmp_path / "public.json"), "--identity",
             str(tmp_path / "a.identity.json"), "--data", str(tmp_path / "x.csv"), "--insecure-test-key"]
    _one_line_error(capsys, [*share, "--out", str(tmp_path / "s.msg"), "--proxy", "https://127.0.0.1:1"],
                    "exactly one of --out and --proxy")
    params = ProtocolParams.create(generate_keypair(768, insecure_test_key=True)[0], release="any", max_owners=2,
                                   max_rows_per_owner=4)
    (tmp_path / "public.json").write_text(json.dumps(params.to_json()))
    _one_line_error(capsys, [*share, "--proxy", "http://127.0.0.1:1"], "https://HOST:PORT")
    assert not (tmp_path / "s.msg").exists()


def test_public_status_switch_is_read_and_checked(tmp_path, parties):
    path = _write(tmp_path, parties)
    assert load_config(path).public_status is True
    path.write_text(path.read_text().replace("[server]\n", "[server]\npublic_status = false\n", 1))
    assert load_config(path).public_status is False
    path.write_text(path.read_text().replace("public_status = false", 'public_status = "no"', 1))
    with pytest.raises(ParameterError, match="server.public_status must be true or false"):
        load_config(path)


def test_a_quorum_above_max_owners_is_refused_at_start_in_one_line(tmp_path, monkeypatch, capsys):
    """Three listed owners, quorum 3, but public.json's max_owners = 2: the slots hold two shares, so the quorum is
    never reached (the third owner would be refused after encrypting). Refused before anything is created, by the
    command and by build_service; quorum 2 starts."""
    import types

    import dpdpca.net.serve
    from dpdpca.net.serve import build_service

    params = ProtocolParams.create(generate_keypair(768, insecure_test_key=True)[0], release="any", max_owners=2,
                                   max_rows_per_owner=4, d=3)
    (tmp_path / "public.json").write_text(json.dumps(params.to_json()))
    owners = {o: OwnerIdentity.generate(o) for o in ("a", "b", "c")}
    toml = {q: write_proxy_toml(tmp_path / f"q{q}" / "proxy.toml", public=tmp_path / "public.json", owners=owners,
                                user=OwnerIdentity.generate("user"), tls=None, port=0,
                                insecure_test_key=True, state_dir=tmp_path / f"q{q}" / "state", quorum=q) for q in (3, 2)}
    runs = []
    fake_uvicorn = types.SimpleNamespace(run=lambda app, **kw: runs.append(app))
    monkeypatch.setattr(dpdpca.net.serve, "require", lambda name: fake_uvicorn)
    _one_line_error(capsys, ["proxy", "serve", "--config", str(toml[3]), "--insecure-http"],
                    "protocol.quorum must be <= max_owners=2 of the public parameters (no more shares fit the slots, "
                    "so a larger quorum is never reached), got 3")
    assert runs == [] and not (tmp_path / "q3" / "state").exists()
    with pytest.raises(ParameterError, match="protocol.quorum must be <= max_owners=2"):
        build_service(load_config(toml[3]), params=params)
    assert not (tmp_path / "q3" / "state").exists()
    assert main(["proxy", "serve", "--config", str(toml[2]), "--insecure-http"]) == 0 and len(runs) == 1


def test_proxy_serve_refuses_a_weak_key_it_did_not_ask_for(tmp_path, monkeypatch, capsys):
    """public.json declares its 768-bit key a test key: the service refuses it at start in one line naming
    protocol.insecure_test_key, creating nothing, unless the operator's config says insecure_test_key = true
    (or proxy serve --insecure-test-key); the file's own flag exempts no party."""
    import types

    import dpdpca.net.serve
    from dpdpca.errors import InsecureKeyError
    from dpdpca.net.serve import build_service, load_public

    params = ProtocolParams.create(generate_keypair(768, insecure_test_key=True)[0], max_owners=2,
                                   max_rows_per_owner=4, d=3)
    public = tmp_path / "public.json"
    public.write_text(json.dumps(params.to_json()))
    assert params.to_json()["dpdpca_protocol"]["insecure_test_key"] is True
    owners = {o: OwnerIdentity.generate(o) for o in ("a", "b")}

    def config(name, **kwargs):
        return write_proxy_toml(tmp_path / name / "proxy.toml", public=public, owners=owners,
                                user=OwnerIdentity.generate("user"), tls=None, port=0,
                                state_dir=tmp_path / name / "state", **kwargs)

    toml = {False: config("False")}
    runs = []
    fake_uvicorn = types.SimpleNamespace(run=lambda app, **kw: runs.append(app))
    monkeypatch.setattr(dpdpca.net.serve, "require", lambda name: fake_uvicorn)
    refusal = ("public key bits must be >= 2048 unless proxy.toml sets protocol.insecure_test_key = true (or proxy "
               "serve --insecure-test-key), got 768")
    _one_line_error(capsys, ["proxy", "serve", "--config", str(toml[False]), "--insecure-http"], refusal)
    assert runs == [] and not (tmp_path / "False" / "state").exists()
    toml[True] = config("True", insecure_test_key=True)
    assert load_config(toml[False]).insecure_test_key is False and load_config(toml[True]).insecure_test_key is True
    with pytest.raises(InsecureKeyError, match="protocol.insecure_test_key"):
        build_service(load_config(toml[False]))
    with pytest.raises(InsecureKeyError, match="protocol.insecure_test_key"):
        load_public(public)
    assert load_public(public, insecure_test_key=True) == params
    assert main(["proxy", "serve", "--config", str(toml[True]), "--insecure-http"]) == 0 and len(runs) == 1
    assert main(["proxy", "serve", "--config", str(toml[False]), "--insecure-http", "--insecure-test-key"]) == 0
    assert len(runs) == 2
    bad = toml[True].read_text().replace("insecure_test_key = true", 'insecure_test_key = "yes"')
    toml[True].write_text(bad)
    with pytest.raises(ParameterError, match="protocol.insecure_test_key must be true or false"):
        load_config(toml[True])


@pytest.mark.parametrize("edit, message", [
    (("[server]\n", "tokens = 5\n[server]\n"), "tokens must be a table of owner id to bearer token ([tokens]), got int"),
    (("[server]\n", 'tokens = ["s3cret-token-not-echoed"]\n[server]\n'),
     "tokens must be a table of owner id to bearer token ([tokens]), got list"),
    (("collection_seconds = 3600.0", "deadline = nan"),
     "protocol.deadline must be a finite unix time in [0, 253402300799] (up to 9999-12-31T23:59:59Z), got nan"),
    (("collection_seconds = 3600.0", "deadline = 1e300"), "protocol.deadline must be a finite unix time"),
    (("collection_seconds = 3600.0", "collection_seconds = inf"),
     "protocol.collection_seconds must be in (0, 31536000] (a year), got inf"),
    (("collection_seconds = 3600.0", "collection_seconds = 1e300"), "protocol.collection_seconds must be in (0, "),
    ("state_dir", "server.state_dir "),
])
def test_proxy_serve_refuses_a_bad_config_value_in_one_line_naming_its_key_and_creates_nothing(
        tmp_path, monkeypatch, capsys, edit, message):
    """A bad value in proxy.toml is one line naming its key (exit 2), before anything is created: never the
    TypeError of a [tokens] that is no table, the ValueError of a NaN deadline after the state directory was made,
    or the NotADirectoryError of a state_dir under a file."""
    import types

    import dpdpca.net.serve

    params = ProtocolParams.create(generate_keypair(512, insecure_test_key=True)[0], max_owners=2,
                                   max_rows_per_owner=4, d=3)
    (tmp_path / "public.json").write_text(json.dumps(params.to_json()))
    path = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json",
                            owners={o: OwnerIdentity.generate(o) for o in ("a", "b")},
                            user=OwnerIdentity.generate("user"), tls=None, port=0, insecure_test_key=True,
                            state_dir=tmp_path / "state")
    text = path.read_text()
    if edit == "state_dir":  # under a file
        (tmp_path / "a.csv").write_text("1,2\n")
        edit = (f'state_dir = "{(tmp_path / "state").resolve()}"', 'state_dir = "a.csv/st"')
        message += f"{str(tmp_path / 'a.csv' / 'st')!r} must be a directory this service can create and write, got " \
                   f"NotADirectoryError"
    assert edit[0] in text
    path.write_text(text.replace(*edit, 1))
    runs = []
    fake_uvicorn = types.SimpleNamespace(run=lambda app, **kw: runs.append(app))
    monkeypatch.setattr(dpdpca.net.serve, "require", lambda name: fake_uvicorn)
    before = sorted(p.name for p in tmp_path.iterdir())
    capsys.readouterr()
    assert main(["proxy", "serve", "--config", str(path), "--insecure-http"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: ") and err.count("\n") == 1 and message in err, err
    assert "s3cret" not in err  # a [tokens] value may be a token: never echoed
    assert runs == [] and sorted(p.name for p in tmp_path.iterdir()) == before
