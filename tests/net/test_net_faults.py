"""The proxy service's promises across failed starts, restarts, faults at closing and a second service.

An acknowledged share is never lost, a start that fails pins nothing, a session the release cannot be made for
fails with its reason, a storage fault at closing answers 503 until a restart, the deadline's watch survives a
failed check, and one state directory serves one process.
"""

from __future__ import annotations

import json
import time
import types
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():  # starlette >= 1.x prefers the httpx2 fork for its test client; httpx works
    warnings.filterwarnings("ignore", message=".*httpx.*starlette.testclient.*")
    from starlette.testclient import TestClient

from dpdpca.errors import ParameterError
from dpdpca.net.app import create_app
from dpdpca.net.auth import PartyKeys
from dpdpca.net.collection import Collection
from dpdpca.net.config import NoiseConfig
from dpdpca.protocol import DataOwner, ProtocolParams
from dpdpca.protocol.identity import OwnerKeyring

CENTRED = NoiseConfig(epsilon=1.0, delta=1e-5, release="centred")


def _ring(identities, *oids):
    return OwnerKeyring.from_identities([identities[o] for o in (oids or ("1", "2", "3"))])


def _files(root) -> list[str]:
    return sorted(p.name for p in (root / "shares").iterdir())


def test_a_first_start_that_fails_writes_nothing_and_the_corrected_config_starts(tmp_path, net_keypair, identities):
    centred_only = ProtocolParams.create(net_keypair[0], release="centred", max_owners=4, max_rows_per_owner=64, d=3)
    root = tmp_path / "state"
    with pytest.raises(ParameterError, match="release must be 'centred', the release the public parameters"):
        Collection(centred_only, root, owner_keys=_ring(identities), quorum=3, collection_seconds=60.0,
                   noise=NoiseConfig(epsilon=1.0, delta=1e-5))  # proxy.toml without release_mode: add-remove
    assert not (root / "state.json").exists()  # before, the failed start's settings were pinned here
    fixed = Collection(centred_only, root, owner_keys=_ring(identities), quorum=3, collection_seconds=60.0,
                       noise=CENTRED)
    assert fixed.phase.value == "collecting" and json.loads((root / "state.json").read_text())["settings"][
        "release_mode"] == "centred"


def test_a_restart_that_cannot_accept_an_acknowledged_share_is_refused_and_deletes_nothing(
        tmp_path, net_params, identities, shares, clock, caplog):
    root = tmp_path / "state"

    def start(*oids, **kw):
        return Collection(net_params, root, owner_keys=_ring(identities, *oids), quorum=3, collection_seconds=60.0,
                          noise=CENTRED, clock=clock, **kw)

    coll = start()
    for oid in ("1", "2"):
        assert coll.submit_share(oid, shares[oid][0]).status == "accepted"
    # owner 2 left owner_keys by mistake: before, its acknowledged share was deleted for good
    with pytest.raises(ParameterError, match=r"stored share '.*2\.msg' must still be accepted on restart \(it was "
                                             r"acknowledged\), got: share signer must be a listed owner, got '2'; "
                                             r"restore protocol.owner_keys"):
        start("1", "3")
    assert _files(root) == ["1.msg", "2.msg"]
    with caplog.at_level("WARNING", logger="dpdpca.proxy"):
        again = start(deadline=clock.now + 3600)  # a deadline unlike the session's: kept, and said so
    assert again.accepted() == ["1", "2"] and again.deadline == pytest.approx(clock.now + 60.0)
    assert any("of the config is not this session's: it keeps" in r.getMessage() for r in caplog.records)
    assert again.submit_share("3", shares["3"][0]).status == "accepted"
    assert again.close_if_due() and again.phase.value == "released"
    with pytest.raises(ParameterError, match="protocol.owner_keys must hold the verify key of every owner of this "
                                             "session's closed aggregate"):
        start("1", "3")


def test_a_close_the_release_refuses_fails_the_session_with_its_reason(tmp_path, net_params, identities, clock):
    root = tmp_path / "state"
    coll = Collection(net_params, root, owner_keys=_ring(identities), quorum=3, collection_seconds=60.0,
                      noise=CENTRED, clock=clock)
    one_row = DataOwner(net_params, identities["1"], insecure_test_key=True, release="centred").share(
        np.full((1, 3), 0.2))
    assert coll.submit_share("1", one_row).status == "accepted"
    clock.now += 61.0
    assert coll.close_if_due()  # before, the release's refusal escaped close_if_due and the session never ended
    reason = "rows in total must be >= 2 (the centred scatter of one row is 0), got 1"
    assert coll.phase.value == "failed"
    out = coll.result()
    assert (out.code, out.detail) == (409, f"collection failed: {reason}")
    restarted = Collection(net_params, root, owner_keys=_ring(identities), quorum=3, collection_seconds=60.0,
                           noise=CENTRED, clock=clock)
    assert restarted.phase.value == "failed" and restarted.result().detail == f"collection failed: {reason}"


def test_a_storage_fault_at_closing_answers_503_until_a_restart_closes_again(tmp_path, net_params, identities, shares,
                                                                              caplog):
    root = tmp_path / "state"

    def start():
        return Collection(net_params, root, owner_keys=_ring(identities), quorum=2, collection_seconds=60.0,
                          noise=CENTRED)

    coll = start()
    (root / "aggregate.msg").mkdir()  # the close's write fails, as on a full or failing disk
    with caplog.at_level("ERROR", logger="dpdpca.proxy"):
        for oid in ("1", "2"):
            assert coll.submit_share(oid, shares[oid][0]).status == "accepted"
        assert coll.close_if_due() is False and coll.close_if_due() is False  # before: raised, then "called once"
    assert [r.getMessage() for r in caplog.records] == [
        "proxy storage failed at closing (FileAccessError); restart the service"]
    late = coll.submit_share("3", shares["3"][0])
    assert (late.code, late.detail) == (503, "proxy storage failed at closing (FileAccessError); restart the service")
    assert coll.result().code == 503
    (root / "aggregate.msg").rmdir()
    restarted = start()  # closes again from the same share files, then finishes on its first check
    assert restarted.phase.value == "closed" and restarted.accepted() == ["1", "2"]
    assert restarted.close_if_due() and restarted.phase.value == "released"


def test_the_deadline_watch_survives_a_failed_check(tmp_path, net_params, identities, clock, caplog):
    coll = Collection(net_params, tmp_path / "state", owner_keys=_ring(identities), quorum=3, collection_seconds=60.0,
                      noise=CENTRED, clock=clock)
    real, calls = coll.close_if_due, []

    def flaky():
        calls.append(clock.now)
        if len(calls) == 1:
            raise OSError("transient EIO")
        return real()

    coll.close_if_due = flaky  # type: ignore[method-assign]
    app = create_app(coll, PartyKeys(_ring(identities), _ring(identities, "user"), None), max_body_bytes=1 << 20,
                     tick_s=0.02)
    with caplog.at_level("ERROR", logger="dpdpca.proxy"), TestClient(app):
        clock.now += 61.0
        deadline = time.monotonic() + 10
        while coll.phase.value == "collecting" and time.monotonic() < deadline:
            time.sleep(0.02)
    assert coll.phase.value == "failed" and len(calls) >= 2  # before, the first exception ended the timer
    assert "the deadline check failed (OSError: transient EIO); it runs again in 0.02 s" in caplog.text


def test_owners_noise_settings_are_pinned_across_a_restart(tmp_path, net_params, identities):
    def start(epsilon=1.0, *oids):
        return Collection(net_params, tmp_path / "state", owner_keys=_ring(identities, *oids), quorum=3,
                          collection_seconds=60.0,
                          noise=NoiseConfig(epsilon=epsilon, delta=1e-5, release="add-remove", noise_by="owners"))

    start()
    # each owner's noise share is sized by these and named in its signed statement: a restart under others would
    # admit shares no release of the session can be made from
    with pytest.raises(ParameterError, match="protocol.epsilon must be 1.0, the setting session"):
        start(2.0)
    with pytest.raises(ParameterError, match=r"protocol.owner_keys \(how many owners it lists\) must be 3, "):
        start(1.0, "1", "2")
    assert start().phase.value == "collecting"
    # a state.json that kept only the first four settings adopts the others at its next start, then holds them
    path = tmp_path / "state" / "state.json"
    state = json.loads(path.read_text())
    state["settings"] = {k: state["settings"][k] for k in ("release_mode", "noise_by", "range_proofs",
                                                           "range_proof_mode")}
    path.write_text(json.dumps(state))
    start()
    assert json.loads(path.read_text())["settings"]["epsilon"] == 1.0
    with pytest.raises(ParameterError, match="protocol.epsilon must be 1.0"):
        start(2.0)


def test_the_privacy_setting_of_a_proxy_noised_session_is_pinned_across_a_restart(tmp_path, net_params, identities):
    # the status page announces epsilon and delta while the owners send: a restart must not release their shares
    # under another privacy setting
    def start(**noise):
        noise = {"epsilon": 1.0, "delta": 1e-5, "release": "add-remove", **noise}
        return Collection(net_params, tmp_path / "state", owner_keys=_ring(identities, "1", "2", "3"), quorum=3,
                          collection_seconds=60.0, noise=NoiseConfig(**noise))

    assert start().phase.value == "collecting"
    assert json.loads((tmp_path / "state" / "state.json").read_text())["settings"]["epsilon"] == 1.0
    with pytest.raises(ParameterError, match="protocol.epsilon must be 1.0, the setting session .* got 8.0"):
        start(epsilon=8.0)
    with pytest.raises(ParameterError, match="protocol.delta must be 1e-05, .* got 0.001"):
        start(delta=1e-3)
    with pytest.raises(ParameterError, match="protocol.calibration must be 'analytic', .* got 'classic'"):
        start(calibration="classic")
    assert start().phase.value == "collecting"


def test_a_second_service_on_one_state_dir_is_refused_in_one_line(tmp_path, net_params, identities, monkeypatch,
                                                                   capsys):
    import os

    import dpdpca.net.serve
    from dpdpca.cli import main
    from dpdpca.net.launch import write_proxy_toml
    from dpdpca.net.serve import lock_state_dir

    (tmp_path / "public.json").write_text(json.dumps(net_params.to_json()))
    path = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json",
                            owners={o: identities[o] for o in ("1", "2", "3")}, user=identities["user"], tls=None,
                            port=0, insecure_test_key=True, state_dir=tmp_path / "state")
    runs = []
    fake = types.SimpleNamespace(run=lambda app, **kw: runs.append(app))
    monkeypatch.setattr(dpdpca.net.serve, "require", lambda name: fake)
    serve = ["proxy", "serve", "--config", str(path), "--insecure-http"]
    held = lock_state_dir(tmp_path / "state")  # a service already running on it
    try:
        assert main(serve) == 2 and runs == []
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"dpdpca: error: server.state_dir {str(tmp_path / 'state')!r} must not be in use by another "
                       f"running proxy service, got it locked by one"], err
    finally:
        os.close(held)
    assert main(serve) == 0 and len(runs) == 1
    assert main(serve) == 0 and len(runs) == 2  # the lock left with the first service

