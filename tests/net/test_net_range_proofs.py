"""The proxy service with range proofs: status says so, a failing proof is refused naming the owner, and the
exclusion survives a restart."""

from __future__ import annotations

import numpy as np

from dpdpca.net.collection import Collection
from dpdpca.net.config import NoiseConfig
from dpdpca.protocol import DataOwner
from dpdpca.protocol.identity import OwnerKeyring
from dpdpca.protocol.messages import Message
from dpdpca.protocol.proofs import PROOF_SECTION


def _proving_service(net_params, root, owners):
    """A centred session of quorum 2 requiring range proofs, released on request, its state under ``root``."""
    return Collection(net_params, root / "state", owner_keys=owners, quorum=2, collection_seconds=600.0,
                      noise=NoiseConfig(epsilon=1.0, delta=1e-5, release="centred"), release="on-request",
                      range_proofs=True)


def test_service_requires_proofs_reports_them_and_keeps_the_exclusion(tmp_path, net_params, identities, owner_signed):
    owners = OwnerKeyring.from_identities([identities[o] for o in ("1", "2", "3")])

    def service():
        return _proving_service(net_params, tmp_path, owners)

    coll = service()
    assert coll.status()["range_proofs"] is True and coll.status()["excluded"] == []
    rows = np.full((4, 3), 0.3)
    proved = DataOwner(net_params, identities["1"], insecure_test_key=True, range_proofs=True, release="centred").share(rows)
    assert coll.submit_share("1", proved).status == "accepted"
    unproved = DataOwner(net_params, identities["2"], insecure_test_key=True, release="centred").share(rows)
    out = coll.submit_share("2", unproved)  # refused, not excluded: nothing shows owner 2 left the proof out
    assert out.code == 400 and out.detail.startswith("share of owner '2' must carry its range proof signed by its "
                                                     "owner, got no 'rangeproof' section")
    assert coll.status()["excluded"] == []
    # owner 2 signs owner 1's proof as its own: a proof of its own that fails, so it is excluded
    mine = Message.from_bytes(DataOwner(net_params, identities["2"], insecure_test_key=True, range_proofs=True,
                                        release="centred").share(rows))
    bad = owner_signed(mine, identities["2"], net_params,
                        **{PROOF_SECTION: Message.from_bytes(proved).sections[PROOF_SECTION]})
    out = coll.submit_share("2", bad)
    assert out.code == 400 and out.detail.startswith("share of owner '2' must carry a valid range proof")
    assert coll.status()["excluded"] == ["2"]
    again = DataOwner(net_params, identities["2"], insecure_test_key=True, range_proofs=True, release="centred").share(rows)
    assert "excluded from this session" in coll.submit_share("2", again).detail
    restarted = service()
    assert restarted.status()["excluded"] == ["2"] and restarted.accepted() == ["1"]
    assert "excluded from this session" in restarted.submit_share("2", again).detail
    off = Collection(net_params, tmp_path / "state-off", owner_keys=owners, quorum=2, collection_seconds=600.0,
                     noise=NoiseConfig(epsilon=1.0, delta=1e-5, release="centred"))
    assert off.status()["range_proofs"] is False


def test_proxy_toml_range_proofs(tmp_path):
    import pytest

    from dpdpca.errors import ParameterError
    from dpdpca.net.config import load_config
    from dpdpca.net.launch import write_proxy_toml
    from dpdpca.protocol.identity import OwnerIdentity

    (tmp_path / "public.json").write_text("{}")
    path = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json",
                            owners={"a": OwnerIdentity.generate("a")}, user=OwnerIdentity.generate("user"), tls=None,
                            port=8443, state_dir=tmp_path / "state")
    assert load_config(path).range_proofs is False
    text = path.read_text()
    path.write_text(text.replace("[protocol]\n", "[protocol]\nrange_proofs = true\n", 1))
    assert load_config(path).range_proofs is True
    path.write_text(text.replace("[protocol]\n", "[protocol]\nrange_proofs = \"yes\"\n", 1))
    with pytest.raises(ParameterError, match="protocol.range_proofs must be true or false, got"):
        load_config(path)


def test_service_refuses_a_count_outside_zero_to_max_by_owner(tmp_path, net_params, identities, monkeypatch):
    """An add/remove share whose encrypted N is -1000 rows (within the slack range proof's bound): the owner's own
    software is patched to encrypt it and to feed the count prover an honest count; the service refuses it (400)
    with the one line naming the owner, and takes the honest owner's share."""
    from dpdpca.protocol import proofs
    from dpdpca.protocol.releases import AddRemoveRelease

    owners = OwnerKeyring.from_identities([identities[o] for o in ("1", "2", "3")])
    coll = Collection(net_params, tmp_path / "state", owner_keys=owners, quorum=2, collection_seconds=600.0,
                      noise=NoiseConfig(epsilon=1.0, delta=1e-5, release="add-remove"), release="on-request",
                      range_proofs=True)
    rows = np.full((4, 3), 0.3)
    honest = DataOwner(net_params, identities["1"], insecure_test_key=True, range_proofs=True,
                       release="add-remove").share(rows)
    assert coll.submit_share("1", honest).status == "accepted"
    original_values, original_prove = AddRemoveRelease.share_values, proofs.prove_interval
    scale = 1 << (2 * net_params.frac_bits)

    def bad_values(self, *args, **kwargs):
        values, count = original_values(self, *args, **kwargs)
        return dict(values, N=[-1000 * scale]), count

    def lying_prover(base, statement, *, value, exponent, context):
        return original_prove(base, statement, value=0, exponent=exponent, context=context)

    monkeypatch.setattr(AddRemoveRelease, "share_values", bad_values)
    monkeypatch.setattr(proofs, "prove_interval", lying_prover)
    bad = DataOwner(net_params, identities["2"], insecure_test_key=True, range_proofs=True,
                    release="add-remove").share(rows)
    out = coll.submit_share("2", bad)
    assert out.code == 400 and out.detail.startswith("share of owner '2' must carry a valid range proof, got: "
                                                     "interval proof")
    assert coll.status()["excluded"] == ["2"] and coll.accepted() == ["1"]


def test_service_in_exact_mode_refuses_a_slack_share_and_says_its_mode(tmp_path, net_params, identities):
    owners = OwnerKeyring.from_identities([identities[o] for o in ("1", "2", "3")])
    coll = Collection(net_params, tmp_path / "state", owner_keys=owners, quorum=2, collection_seconds=600.0,
                      noise=NoiseConfig(epsilon=1.0, delta=1e-5, release="centred"), release="on-request",
                      range_proofs=True, range_proof_mode="exact")
    assert coll.status()["range_proof_mode"] == "exact"
    rows = np.full((4, 3), 0.3)
    exact = DataOwner(net_params, identities["1"], insecure_test_key=True, range_proofs=True,
                      range_proof_mode="exact", release="centred").share(rows)
    assert coll.submit_share("1", exact).status == "accepted"
    slack = DataOwner(net_params, identities["2"], insecure_test_key=True, range_proofs=True, release="centred").share(rows)
    out = coll.submit_share("2", slack)
    assert out.code == 400 and out.detail == ("share of owner '2' must carry a valid range proof, got: range proof "
                                              "mode must be 'exact' (the session's), got 'slack'")
    assert coll.status()["excluded"] == ["2"]


def test_proxy_toml_range_proof_mode(tmp_path):
    import pytest

    from dpdpca.errors import ParameterError
    from dpdpca.net.config import load_config
    from dpdpca.net.launch import write_proxy_toml
    from dpdpca.protocol.identity import OwnerIdentity

    (tmp_path / "public.json").write_text("{}")
    path = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json",
                            owners={"a": OwnerIdentity.generate("a")}, user=OwnerIdentity.generate("user"), tls=None,
                            port=8443, state_dir=tmp_path / "state")
    assert load_config(path).range_proof_mode == "slack"
    text = path.read_text()
    path.write_text(text.replace("[protocol]\n", "[protocol]\nrange_proofs = true\nrange_proof_mode = \"exact\"\n", 1))
    assert load_config(path).range_proof_mode == "exact"
    path.write_text(text.replace("[protocol]\n", "[protocol]\nrange_proof_mode = \"loose\"\n", 1))
    with pytest.raises(ParameterError, match="protocol.range_proof_mode must be one of slack, exact, got 'loose'"):
        load_config(path)


def test_proxy_serve_range_proof_mode_overrides_the_config(tmp_path, monkeypatch):
    import dpdpca.net.serve
    from dpdpca.cli import main
    from dpdpca.net.launch import write_proxy_toml
    from dpdpca.protocol.identity import OwnerIdentity

    (tmp_path / "public.json").write_text("{}")
    path = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json",
                            owners={"a": OwnerIdentity.generate("a")}, user=OwnerIdentity.generate("user"), tls=None,
                            port=8443, state_dir=tmp_path / "state")
    seen = []
    monkeypatch.setattr(dpdpca.net.serve, "serve", lambda config, **kw: seen.append(config))
    assert main(["proxy", "serve", "--config", str(path), "--insecure-http", "--range-proofs",
                 "--range-proof-mode", "exact"]) == 0
    assert main(["proxy", "serve", "--config", str(path), "--insecure-http"]) == 0
    assert [(c.range_proofs, c.range_proof_mode) for c in seen] == [(True, "exact"), (False, "slack")]


def test_a_restart_under_other_admission_settings_is_refused_and_loses_no_acknowledged_share(tmp_path, net_params,
                                                                                             identities):
    import pytest

    from dpdpca.errors import ParameterError

    owners = OwnerKeyring.from_identities([identities[o] for o in ("1", "2", "3")])

    def service(release="centred", **proofs):
        return Collection(net_params, tmp_path / "state", owner_keys=owners, quorum=2, collection_seconds=600.0,
                          noise=NoiseConfig(epsilon=1.0, delta=1e-5, release=release), release="on-request", **proofs)

    coll = service(range_proofs=True)
    rows = np.full((4, 3), 0.3)
    proved = DataOwner(net_params, identities["1"], insecure_test_key=True, range_proofs=True, release="centred")
    assert coll.submit_share("1", proved.share(rows)).status == "accepted"
    session = net_params.session_id
    # before, each of these restarts re-checked the acknowledged share under the new rule: without proofs a later
    # share would join unproved; in the other release the stored share failed and was deleted
    for change, refused in [({"range_proofs": False}, "protocol.range_proofs must be True"),
                            ({"range_proofs": True, "range_proof_mode": "exact"},
                             "protocol.range_proof_mode must be 'slack'"),
                            ({"range_proofs": True, "release": "add-remove"},
                             "protocol.release_mode must be 'centred'")]:
        with pytest.raises(ParameterError) as info:
            service(**change)
        assert str(info.value).startswith(f"{refused}, the setting session {session} started with (kept in ")
        assert sorted(p.name for p in (tmp_path / "state" / "shares").iterdir()) == ["1.msg"]
    again = service(range_proofs=True)
    assert again.accepted() == ["1"] and again.status()["range_proofs"] is True
    unproved = DataOwner(net_params, identities["2"], insecure_test_key=True, release="centred").share(rows)
    assert again.submit_share("2", unproved).code == 400


def test_proxy_serve_refuses_a_restart_without_the_sessions_range_proofs_in_one_line(tmp_path, net_params, monkeypatch,
                                                                                      capsys):
    import json
    import types

    import dpdpca.net.serve
    from dpdpca.cli import main
    from dpdpca.net.launch import write_proxy_toml
    from dpdpca.protocol.identity import OwnerIdentity

    (tmp_path / "public.json").write_text(json.dumps(net_params.to_json()))
    path = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json",
                            owners={"a": OwnerIdentity.generate("a")}, user=OwnerIdentity.generate("user"), tls=None,
                            port=0, insecure_test_key=True, state_dir=tmp_path / "state")
    runs = []
    fake = types.SimpleNamespace(run=lambda app, **kw: runs.append(app))
    monkeypatch.setattr(dpdpca.net.serve, "require", lambda name: fake)
    serve = ["proxy", "serve", "--config", str(path), "--insecure-http"]
    assert main([*serve, "--range-proofs"]) == 0 and len(runs) == 1
    capsys.readouterr()
    assert main(serve) == 2 and len(runs) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "protocol.range_proofs must be True" in err[0] and "got False" in err[0], err
    assert "Traceback" not in err[0]
    assert main([*serve, "--range-proofs"]) == 0 and len(runs) == 2


def test_the_smallest_share_bounds_hold_for_real_shares_and_are_tight_for_the_ciphertexts(net_params, identities):
    from dpdpca.protocol.messages import Message
    from dpdpca.protocol.proofs import PROOF_SECTION, min_proof_bytes
    from dpdpca.protocol.sections import min_share_bytes

    rows = np.full((4, 3), 0.3)
    width = net_params.public_key.ciphertext_bytes
    for release in ("add-remove", "centred"):
        plain = DataOwner(net_params, identities["1"], insecure_test_key=True, release=release).share(rows)
        low = min_share_bytes(net_params, 3, release)
        cipher = sum(len(b) for name, b in Message.from_bytes(plain).sections.items())
        # the ciphertexts' own bytes, less the sections' headers and trailers: the bound is exactly them
        assert low % width == 0 and low <= cipher < low + 400 and low < len(plain)
        for mode in ("slack", "exact"):
            proved = DataOwner(net_params, identities["1"], insecure_test_key=True, range_proofs=True,
                               range_proof_mode=mode, release=release).share(rows)
            proof = len(Message.from_bytes(proved).section(PROOF_SECTION))
            assert min_proof_bytes(net_params, 3, release, mode) <= proof, (release, mode)
    assert min_proof_bytes(net_params, 3, "centred", "slack") == 41 * low


def test_a_body_limit_below_the_sessions_smallest_share_is_refused_at_start_in_one_line(tmp_path, net_params,
                                                                                         monkeypatch, capsys):
    import json
    import types

    import dpdpca.net.serve
    from dpdpca.cli import main
    from dpdpca.net.launch import write_proxy_toml
    from dpdpca.protocol.identity import OwnerIdentity
    from dpdpca.protocol.proofs import min_proof_bytes
    from dpdpca.protocol.sections import min_share_bytes

    (tmp_path / "public.json").write_text(json.dumps(net_params.to_json()))
    path = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json",
                            owners={"a": OwnerIdentity.generate("a")}, user=OwnerIdentity.generate("user"), tls=None,
                            port=0, insecure_test_key=True, state_dir=tmp_path / "state", max_body_bytes=4096)
    runs = []
    fake = types.SimpleNamespace(run=lambda app, **kw: runs.append(app))
    monkeypatch.setattr(dpdpca.net.serve, "require", lambda name: fake)
    serve = ["proxy", "serve", "--config", str(path), "--insecure-http"]
    need = min_share_bytes(net_params, 3, "add-remove") + min_proof_bytes(net_params, 3, "add-remove")
    assert 4096 < need  # a proved share does not fit 4 kB; a plain one does
    assert main([*serve, "--range-proofs"]) == 2 and runs == [] and not (tmp_path / "state").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dpdpca: error: server.max_body_bytes must be >= {need}, the fewest bytes a share of this session takes "
                   f"(d=3, the add-remove release, slack range proofs), got 4096"], err
    assert main(serve) == 0 and len(runs) == 1


def test_service_refuses_a_proof_changed_in_transit_without_excluding_and_takes_the_resent_share(tmp_path, net_params,
                                                                                                 identities):
    """docs/threat-model.md: a share whose proof section was swapped on its way is refused (400) naming the owner,
    which is not excluded, not in state.json after a restart either, and whose own share is then accepted."""
    import json

    owners = OwnerKeyring.from_identities([identities[o] for o in ("1", "2", "3")])

    def service():
        return _proving_service(net_params, tmp_path, owners)

    coll = service()
    rows = np.full((4, 3), 0.3)
    one = DataOwner(net_params, identities["1"], insecure_test_key=True, range_proofs=True, release="centred").share(rows)
    two = DataOwner(net_params, identities["2"], insecure_test_key=True, range_proofs=True, release="centred").share(rows)
    assert coll.submit_share("1", one).status == "accepted"
    msg = Message.from_bytes(two)
    swapped = Message(msg.type, msg.session, msg.key_fingerprint, msg.sender, msg.meta,
                      dict(msg.sections, **{PROOF_SECTION: Message.from_bytes(one).sections[PROOF_SECTION]}))
    out = coll.submit_share("2", swapped.to_bytes())
    assert (out.code, out.status) == (400, "invalid")
    assert out.detail.startswith("share of owner '2' must carry its range proof signed by its owner, got a signature "
                                 "that does not verify")
    assert coll.status()["excluded"] == [] and coll.accepted() == ["1"]
    assert not json.loads((tmp_path / "state" / "state.json").read_text()).get("excluded")
    restarted = service()
    assert restarted.status()["excluded"] == [] and restarted.accepted() == ["1"]
    assert restarted.submit_share("2", two).status == "accepted"
    assert restarted.accepted() == ["1", "2"]
