"""The proxy service in-process (Starlette's ASGI test client): rounds, credentials, limits, faults, restarts."""

from __future__ import annotations

import asyncio
import json
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():  # starlette >= 1.x prefers the httpx2 fork for its test client; httpx works
    warnings.filterwarnings("ignore", message=".*httpx.*starlette.testclient.*")
    from starlette.testclient import TestClient

from dpdpca.dp.release import calibrate_add_remove
from dpdpca.errors import ParameterError
from dpdpca.net.app import create_app
from dpdpca.net.auth import PartyKeys, sign_headers
from dpdpca.net.client import ProxyClient, ProxyRefused
from dpdpca.net.collection import Collection
from dpdpca.net.config import NoiseConfig
from dpdpca.protocol import DataOwner, DataUser
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

OWNERS = ["1", "2", "3"]


def _keys(identities, *, tokens: dict[str, str] | None = None) -> PartyKeys:
    owners = OwnerKeyring.from_identities([identities[o] for o in OWNERS])
    return PartyKeys(owners, OwnerKeyring.from_identities([identities["user"]]), tokens)


def _service(tmp_path, params, identities, *, clock=None, quorum=3, min_shares=1, max_body=1 << 20, tokens=None,
             noise=None):
    owners = OwnerKeyring.from_identities([identities[o] for o in OWNERS])
    noise = NoiseConfig(epsilon=1.0, delta=1e-5, release="centred") if noise is None else noise  # the fixture shares
    coll = Collection(params, tmp_path / "state", owner_keys=owners, quorum=quorum, min_shares=min_shares,
                      collection_seconds=60.0, noise=noise,
                      **({"clock": clock} if clock is not None else {}))
    return coll, create_app(coll, _keys(identities, tokens=tokens), max_body_bytes=max_body)


def _client(tc, identity, token=None) -> ProxyClient:
    party = "user" if identity.owner_id == "user" else f"owner:{identity.owner_id}"
    return ProxyClient("http://testserver", identity, party, client=tc, token=token, retries=0)


def _headers(identity, method, path, body, **kwargs):
    party = "user" if identity.owner_id == "user" else f"owner:{identity.owner_id}"
    return sign_headers(identity, party, method, path, body, **kwargs)


def _stored(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "state" / "shares").iterdir())


def _user_finish(tc, identities, params, keypair, owner_keyring, k=2):
    c = _client(tc, identities["user"])
    assert c.wait_released(timeout_s=30, poll_s=0.05)["phase"] == "released"
    result = c.result()
    user = DataUser(keypair[1], params, owner_keys=owner_keyring)
    return user, result, user.finish(result, n_components=k)


def test_the_service_default_is_the_add_remove_release_end_to_end(tmp_path, net_params, net_keypair, identities,
                                                                  shares, owner_keyring, rows_for):
    """Owners and the user run their role steps over the service (ServiceTransport), as over any transport."""
    from dpdpca.net.client import ServiceTransport
    from dpdpca.protocol.roles import owner_round, user_round

    assert NoiseConfig().mode == "add-remove"  # the project's default release, as dpdpca run
    # A large epsilon keeps the noise well under one owner's 20 rows, so the checks below can
    # tell a missing or double-counted owner from noise at 6 sigma (sigma from the calibration).
    coll, app = _service(tmp_path, net_params, identities, noise=NoiseConfig(epsilon=20.0, delta=1e-5))
    cal = calibrate_add_remove(epsilon=20.0, delta=1e-5, d=3, frac_bits=net_params.frac_bits)
    assert 6 * cal.sigma("N") < 10 and 6 * cal.sigma("v") < 10
    rows = {oid: rows_for(40 + int(oid), n=20, d=3) for oid in OWNERS}
    with TestClient(app) as tc:
        with pytest.raises(ProxyRefused, match="400 invalid.*release must be 'add-remove'"):
            _client(tc, identities["1"]).post_share("1", shares["1"][0])  # a centred share
        for oid in OWNERS:
            owner = DataOwner(net_params, identities[oid], insecure_test_key=True, release="add-remove")
            net = ServiceTransport(_client(tc, identities[oid]))
            owner_round(owner, rows[oid], net)
            assert net.answer["status"] == "accepted" and net.bytes_sent[f"owner:{oid}"] > 0
        assert _client(tc, identities["user"]).status()["n_rows"] is None  # N is private under add/remove
        user = DataUser(net_keypair[1], net_params, owner_keys=owner_keyring)
        res = user_round(user, ServiceTransport(_client(tc, identities["user"]), timeout_s=30), n_components=2)
    assert coll.phase.value == "released"
    assert res.extra["release"] == "add-remove" and res.privacy.neighbouring != "replace-one"
    assert sorted(res.extra["owners"]) == OWNERS and res.components.shape == (3, 2)
    # The noisy N is the 60 rows plus discrete Gaussian noise (6 sigma: fails about once in 5e8 runs).
    assert abs(user.n_noisy_ - 60) < 6 * cal.sigma("N")
    # The user's decrypted sum v is the owners' pooled v plus noise of the same small size.
    frac = net_params.frac_bits
    v_true = sum(np.trunc(r * (1 << frac)).sum(axis=0) for r in rows.values())
    assert np.max(np.abs(np.array(user.noisy_blocks_["v"], dtype=float) - v_true)) / (1 << frac) < 6 * cal.sigma("v")


def test_three_owners_and_the_user_over_the_asgi_client(tmp_path, net_params, net_keypair, identities, shares,
                                                        owner_keyring):
    coll, app = _service(tmp_path, net_params, identities)
    with TestClient(app) as tc:
        with pytest.raises(ProxyRefused, match="409 collecting"):
            _client(tc, identities["user"]).result()
        for oid in OWNERS:
            assert _client(tc, identities[oid]).post_share(oid, shares[oid][0])["status"] == "accepted"
        user, result, res = _user_finish(tc, identities, net_params, net_keypair, owner_keyring)
        assert _client(tc, identities["user"]).status()["accepted"] == 3
        # the centred release's N goes to the data user only: owner 1, knowing its own 20 rows, would read the
        # other owners' total from it
        assert _client(tc, identities["user"]).status()["n_rows"] == 60
        assert [_client(tc, identities[oid]).status()["n_rows"] for oid in OWNERS] == [None] * 3
        assert res.components.shape == (3, 2)
        assert user.n_ == 60  # 20 rows per owner, counted once each
        assert sorted(res.extra["owners"]) == OWNERS
        # Asked again, the proxy answers with the same release, never a fresh draw of noise.
        assert _client(tc, identities["user"]).result() == result
    assert coll.phase.value == "released"
    assert coll.ledger.is_released(net_params.session_id)


def test_retried_share_is_idempotent_and_another_share_is_refused(tmp_path, net_params, identities, shares):
    coll, app = _service(tmp_path, net_params, identities)
    with TestClient(app) as tc:
        c = _client(tc, identities["1"])
        assert c.post_share("1", shares["1"][0])["status"] == "accepted"
        assert c.post_share("1", shares["1"][0])["status"] == "duplicate"
        with pytest.raises(ProxyRefused, match="409 conflict") as err:
            c.post_share("1", shares["1"][1])
        assert err.value.code == 409
        assert c.status()["accepted"] == 1
    assert (tmp_path / "state" / "shares" / "1.msg").read_bytes() == shares["1"][0]


def _post(tc, path, body, headers):
    return tc.post(path, content=body, headers={**headers, "content-type": "application/octet-stream"})


def test_unknown_party_and_bad_credentials_change_nothing(tmp_path, net_params, identities, shares):
    coll, app = _service(tmp_path, net_params, identities, tokens={"owner:2": "t" * 32})
    body = shares["1"][0]
    path = "/v1/shares/1"
    stranger = OwnerIdentity.generate("9")
    impostor = OwnerIdentity.generate("1")  # right name, wrong key
    with TestClient(app) as tc:
        cases = {
            "missing": (401, {}),
            "unknown party": (401, _headers(stranger, "POST", path, body)),
            "wrong key": (401, _headers(impostor, "POST", path, body)),
            "signature of another body": (401, _headers(identities["1"], "POST", path, shares["1"][1])),
            "signature of another path": (401, _headers(identities["1"], "POST", "/v1/shares/2", body)),
            "stale time": (401, _headers(identities["1"], "POST", path, body, now=1.0)),
            "another owner's route": (403, _headers(identities["2"], "POST", path, body, token="t" * 32)),
            "the user posting a share": (403, _headers(identities["user"], "POST", path, body)),
        }
        for name, (code, headers) in cases.items():
            r = _post(tc, path, body, headers)
            assert r.status_code == code, (name, r.text)
            assert r.headers["connection"] == "close", name  # refused before the body: never read
        # A token on top: owner 2 must present it.
        body2 = shares["2"][0]
        assert _post(tc, "/v1/shares/2", body2, _headers(identities["2"], "POST", "/v1/shares/2", body2)) \
            .status_code == 401
        assert _post(tc, "/v1/shares/2", body2, _headers(identities["2"], "POST", "/v1/shares/2", body2,
                                                         token="x" * 32)).status_code == 401
        # An owner's key claiming to be the user.
        assert tc.get("/v1/result", headers=sign_headers(identities["1"], "user", "GET", "/v1/result", b"")) \
            .status_code == 401
        # Owners may not read what is for the user.
        assert tc.get("/v1/result", headers=_headers(identities["1"], "GET", "/v1/result", b"")).status_code == 403
        assert coll.status()["accepted"] == 0 and _stored(tmp_path) == []
        # A share signed by its owner but sent over another owner's authenticated request is refused.
        assert _post(tc, "/v1/shares/3", body, _headers(identities["3"], "POST", "/v1/shares/3", body)) \
            .status_code == 403
        # The same requests, properly signed, go through.
        assert _post(tc, path, body, _headers(identities["1"], "POST", path, body)).status_code == 201
        assert _post(tc, "/v1/shares/2", body2, _headers(identities["2"], "POST", "/v1/shares/2", body2,
                                                         token="t" * 32)).status_code == 201
    assert _stored(tmp_path) == ["1.msg", "2.msg"]


def _asgi_post(app, path, headers, chunks, *, disconnect=False):
    """Drive the app directly, one body chunk per receive; returns (status, chunks pulled)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80)}
    pulled = 0
    sent = []

    async def receive():
        nonlocal pulled
        if pulled < len(chunks):
            pulled += 1
            return {"type": "http.request", "body": chunks[pulled - 1],
                    "more_body": disconnect or pulled < len(chunks)}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], pulled


def test_oversized_body_is_refused_after_its_headers(tmp_path, net_params, identities, shares):
    coll, app = _service(tmp_path, net_params, identities, max_body=768)
    body = shares["1"][0]
    assert len(body) > 2 * 768
    path = "/v1/shares/1"
    headers = {**_headers(identities["1"], "POST", path, body), "content-length": str(len(body))}
    chunks = [body[i:i + 256] for i in range(0, len(body), 256)]
    # A signed Content-Length over the limit is refused before any body is read.
    status, pulled = _asgi_post(app, path, headers, chunks)
    assert status == 413 and pulled == 0
    # No Content-Length (a chunked body): refused before any body is read.
    status, pulled = _asgi_post(app, path, {k: v for k, v in headers.items() if k != "content-length"}, chunks)
    assert status == 411 and pulled == 0
    with TestClient(app) as tc:
        r = _post(tc, path, body, headers)
        assert r.status_code == 413 and r.json()["status"] == "too_large"
        assert r.headers["connection"] == "close"
    assert coll.status()["accepted"] == 0 and _stored(tmp_path) == []


def test_a_body_longer_than_signed_is_cut_off_while_streaming(tmp_path, net_params, identities, shares):
    coll, app = _service(tmp_path, net_params, identities)
    body = shares["1"][0]
    path = "/v1/shares/1"
    headers = {**_headers(identities["1"], "POST", path, body), "content-length": str(len(body))}
    chunks = [body[i:i + 256] for i in range(0, len(body), 256)] + [b"x" * 256] * 20
    status, pulled = _asgi_post(app, path, headers, chunks)
    assert status == 401 and pulled == -(-len(body) // 256) + 1 < len(chunks)
    assert coll.status()["accepted"] == 0 and _stored(tmp_path) == []


def test_truncated_upload_is_discarded_and_the_owner_can_resend(tmp_path, net_params, identities, shares):
    coll, app = _service(tmp_path, net_params, identities)
    body = shares["1"][0]
    path = "/v1/shares/1"
    headers = {**_headers(identities["1"], "POST", path, body), "content-length": str(len(body))}
    half = [body[:len(body) // 2]]
    status, _ = _asgi_post(app, path, headers, half, disconnect=True)  # the owner hangs up mid-body
    assert status == 400
    assert coll.status()["accepted"] == 0 and _stored(tmp_path) == []
    # A body that ends early without a disconnect is not the signed body.
    status, _ = _asgi_post(app, path, headers, half)
    assert status == 401 and _stored(tmp_path) == []
    status, _ = _asgi_post(app, path, headers, [body[:1000], body[1000:]])
    assert status == 201 and _stored(tmp_path) == ["1.msg"]


def test_share_after_the_deadline_is_refused_as_late(tmp_path, net_params, identities, shares, clock):
    coll, app = _service(tmp_path, net_params, identities, clock=clock)
    with TestClient(app) as tc:
        assert _client(tc, identities["1"]).post_share("1", shares["1"][0])["status"] == "accepted"
        clock.now += 61.0
        assert coll.close_if_due()
        assert coll.status()["phase"] == "released" and coll.accepted() == ["1"]
        with pytest.raises(ProxyRefused, match="410 late") as err:
            _client(tc, identities["2"]).post_share("2", shares["2"][0])
        assert err.value.status == "late"
        # The accepted owner's retry is still recognised after closing.
        assert _client(tc, identities["1"]).post_share("1", shares["1"][0])["status"] == "duplicate"
    assert _stored(tmp_path) == ["1.msg"]


def test_deadline_without_min_shares_fails_the_collection(tmp_path, net_params, identities, shares, clock):
    coll, app = _service(tmp_path, net_params, identities, clock=clock, min_shares=2)
    with TestClient(app) as tc:
        _client(tc, identities["1"]).post_share("1", shares["1"][0])
        clock.now += 61.0
        coll.close_if_due()
        with pytest.raises(ProxyRefused, match="409 failed"):
            _client(tc, identities["user"]).result()


def test_restart_loses_no_share_and_never_releases_twice(tmp_path, net_params, net_keypair, identities, shares,
                                                         owner_keyring, caplog):
    coll, app = _service(tmp_path, net_params, identities)
    with TestClient(app) as tc:
        for oid in ("1", "2"):
            _client(tc, identities[oid]).post_share(oid, shares[oid][0])
    shares_dir = tmp_path / "state" / "shares"
    # What a SIGKILL can leave behind: a half-written temporary file and a file never acknowledged.
    (shares_dir / ".3.msg.abc.tmp").write_bytes(shares["3"][0][:100])
    (shares_dir / "3.msg").write_bytes(shares["3"][0][:-5])
    root = tmp_path / "state"
    for name in (".state.json.k1.tmp", ".ledger.json.k2.tmp", ".aggregate.msg.k3.tmp"):
        (root / name).write_bytes(b"{")  # a state write cut short
    del coll, app
    with caplog.at_level("WARNING", logger="dpdpca.proxy"):
        coll, app = _service(tmp_path, net_params, identities)  # the restart
    assert coll.accepted() == ["1", "2"] and _stored(tmp_path) == ["1.msg", "2.msg"]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "stored share 3.msg refused on restart and removed: message digest must match its content, got a mismatch "
        "(truncated or tampered)"]
    assert not list(root.glob(".*.tmp")) and not list(shares_dir.glob(".*.tmp"))
    with TestClient(app) as tc:
        assert _client(tc, identities["2"]).post_share("2", shares["2"][0])["status"] == "duplicate"
        assert _client(tc, identities["3"]).post_share("3", shares["3"][0])["status"] == "accepted"
        _, result, res = _user_finish(tc, identities, net_params, net_keypair, owner_keyring)
    (root / ".result.msg.k4.tmp").write_bytes(b"x")
    coll, app = _service(tmp_path, net_params, identities)  # restart after the release
    assert coll.phase.value == "released" and not list(root.glob(".*.tmp"))
    with TestClient(app) as tc:
        assert _client(tc, identities["user"]).result() == result
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert sorted(state["owners"]) == ["1", "2", "3"] and state["n_rows"] == 60
    assert np.allclose(np.abs(DataUser(net_keypair[1], net_params, owner_keys=owner_keyring)
                              .finish(result, n_components=2).components), np.abs(res.components))


def test_restart_between_writing_the_result_and_the_state_stays_released(tmp_path, net_params, net_keypair,
                                                                          identities, shares, owner_keyring):
    coll, app = _service(tmp_path, net_params, identities)
    with TestClient(app) as tc:
        for oid in OWNERS:
            _client(tc, identities[oid]).post_share(oid, shares[oid][0])
        _, result, _ = _user_finish(tc, identities, net_params, net_keypair, owner_keyring)
    state_path = tmp_path / "state" / "state.json"
    state = json.loads(state_path.read_text())
    state_path.write_text(json.dumps({**state, "phase": "closed"}))  # killed before the last state write
    coll, _ = _service(tmp_path, net_params, identities)
    assert coll.phase.value == "released" and coll.result().body == result


def test_restart_after_the_ledger_claim_but_before_the_result_never_releases_again(tmp_path, net_params,
                                                                                    identities, shares):
    coll, app = _service(tmp_path, net_params, identities)
    with TestClient(app) as tc:
        for oid in OWNERS:
            _client(tc, identities[oid]).post_share(oid, shares[oid][0])
    assert coll.phase.value == "released"
    state_path = tmp_path / "state" / "state.json"
    state = json.loads(state_path.read_text())
    # Killed after Proxy.finish claimed the session in the ledger, before result.msg was written.
    (tmp_path / "state" / "result.msg").unlink()
    state_path.write_text(json.dumps({**state, "phase": "closed"}))
    coll, app = _service(tmp_path, net_params, identities)
    assert coll.phase.value == "lost"
    assert not coll.close_if_due()  # the ledger refuses a second release
    with TestClient(app) as tc:
        with pytest.raises(ProxyRefused, match="410 lost"):
            _client(tc, identities["user"]).result()
    assert not (tmp_path / "state" / "result.msg").exists()


def test_an_owner_uploading_another_d_first_locks_nobody_out(tmp_path, net_params, net_keypair, identities, shares,
                                                              owner_keyring, rows_for):
    """Issue 24 item 3: public.json declares d (keygen --features); a listed owner who uploads a validly signed
    d = 1 share first is refused with the declared d named, and the honest d = 3 owners are all accepted.
    A public.json without d cannot start the service."""
    import dataclasses

    from dpdpca.errors import ParameterError

    undeclared = dataclasses.replace(net_params, d=None)
    first = DataOwner(undeclared, identities["1"], insecure_test_key=True).share(rows_for(5, n=20, d=1))
    coll, app = _service(tmp_path, net_params, identities)
    with TestClient(app) as tc:
        with pytest.raises(ProxyRefused, match=r"400 .*d must be the d=3 declared in public.json.*got d=1"):
            _client(tc, identities["1"]).post_share("1", first)
        for oid in OWNERS:
            assert _client(tc, identities[oid]).post_share(oid, shares[oid][0])["status"] == "accepted"
        _, _, res = _user_finish(tc, identities, net_params, net_keypair, owner_keyring)
    assert res.components.shape == (3, 2)
    with pytest.raises(ParameterError, match="public.json must declare d"):
        _service(tmp_path / "other", undeclared, identities)


def _owners_noise_share(params, identity, rows_for, *, epsilon=1.0, quorum=2):
    """Owner ``identity``'s add/remove share holding its part of the owners' noise (L = t = 3)."""
    from dpdpca.dp import calibrate_distributed

    cal = calibrate_distributed(epsilon=epsilon, delta=1e-5, d=3, frac_bits=params.frac_bits, owners=3, honest=3,
                                quorum=quorum)
    return DataOwner(params, identity, insecure_test_key=True, release="add-remove", noise=cal).share(
        rows_for(int(identity.owner_id), n=20, d=3))


def test_an_owner_signing_another_noise_setting_is_refused_on_arrival_and_the_session_is_released(
        tmp_path, net_params, net_keypair, identities, owner_keyring, rows_for, clock, caplog):
    """Audit: with noise_by = "owners", a listed owner's share whose signed noise label was for another epsilon
    was accepted (201); once the collection closed the finish refused the whole session, 503 "proxy finish
    failed" for ever, restarts included.  It is now refused on arrival (400 invalid, both labels named) and not
    stored: the session is released with the honest owners at the deadline, and in another session the refused
    owner, not excluded, resends a share with the session's noise (accepted, not a conflict).  A share the old
    code stored with another label stops a restart in one line naming its file (nothing is deleted: the operator
    removes it), and the session then goes on."""
    noise = NoiseConfig(epsilon=1.0, delta=1e-5, noise_by="owners")
    session = "owners:epsilon=1.0,delta=1e-05,owners=3,honest=3,quorum=2"  # L = the 3 owner keys, quorum = min_shares
    bad = _owners_noise_share(net_params, identities["3"], rows_for, epsilon=8.0)
    refused = (f"400 invalid: share statement of owner '3' must say its share holds the session's noise "
               f"{session!r}, got 'owners:epsilon=8.0,delta=1e-05,owners=3,honest=3,quorum=2'")
    coll, app = _service(tmp_path, net_params, identities, clock=clock, quorum=3, min_shares=2, noise=noise)
    with TestClient(app) as tc:
        for oid in ("1", "2"):
            share = _owners_noise_share(net_params, identities[oid], rows_for)
            assert _client(tc, identities[oid]).post_share(oid, share)["status"] == "accepted"
        with pytest.raises(ProxyRefused) as err:
            _client(tc, identities["3"]).post_share("3", bad)
        assert err.value.code == 400 and refused in str(err.value) and "\n" not in str(err.value)
        assert _stored(tmp_path) == ["1.msg", "2.msg"] and coll.status()["excluded"] == []
        clock.now += 61.0
        coll.close_if_due()
        _, _, res = _user_finish(tc, identities, net_params, net_keypair, owner_keyring)
    assert coll.phase.value == "released" and sorted(res.extra["owners"]) == ["1", "2"]

    other = tmp_path / "resend"
    coll, app = _service(other, net_params, identities, clock=clock, quorum=3, min_shares=2, noise=noise)
    with TestClient(app) as tc:
        with pytest.raises(ProxyRefused, match="400 invalid"):
            _client(tc, identities["3"]).post_share("3", bad)
        for oid in OWNERS:
            share = _owners_noise_share(net_params, identities[oid], rows_for)
            assert _client(tc, identities[oid]).post_share(oid, share)["status"] == "accepted"
        _, _, res = _user_finish(tc, identities, net_params, net_keypair, owner_keyring)
    assert sorted(res.extra["owners"]) == OWNERS

    stored = tmp_path / "stored"
    coll, app = _service(stored, net_params, identities, clock=clock, quorum=3, min_shares=2, noise=noise)
    with TestClient(app) as tc:
        share = _owners_noise_share(net_params, identities["1"], rows_for)
        assert _client(tc, identities["1"]).post_share("1", share)["status"] == "accepted"
    (stored / "state" / "shares" / "3.msg").write_bytes(bad)  # what the old code acknowledged and kept
    with pytest.raises(ParameterError) as stop:
        _service(stored, net_params, identities, clock=clock, quorum=3, min_shares=2, noise=noise)
    assert str(stop.value) == (f"stored share {str(stored / 'state' / 'shares' / '3.msg')!r} must still be accepted "
                               f"on restart (it was acknowledged), got: {refused.removeprefix('400 invalid: ')}; "
                               f"restore protocol.owner_keys, or remove the file to drop that share from the session")
    assert _stored(stored) == ["1.msg", "3.msg"]
    (stored / "state" / "shares" / "3.msg").unlink()  # the operator's decision
    coll, _ = _service(stored, net_params, identities, clock=clock, quorum=3, min_shares=2, noise=noise)
    assert coll.accepted() == ["1"]


def test_proxy_serve_with_workers_runs_a_whole_session_on_a_process_pool_and_shuts_it_down(
        tmp_path, net_params, net_keypair, identities, owner_keyring, rows_for, monkeypatch, capsys):
    """``proxy serve --workers 2`` through the CLI: the service's collection gets a started pool, owners and the
    user run a session against the served application, and the pool is shut down when the service stops."""
    import types
    from concurrent.futures import ProcessPoolExecutor

    import dpdpca.net.serve
    from dpdpca.cli import main
    from dpdpca.net.client import ServiceTransport
    from dpdpca.net.launch import write_proxy_toml
    from dpdpca.protocol.roles import owner_round, user_round

    (tmp_path / "public.json").write_text(json.dumps(net_params.to_json()))
    path = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json",
                            owners={o: identities[o] for o in OWNERS}, user=identities["user"], tls=None, port=0,
                            insecure_test_key=True, state_dir=tmp_path / "state", epsilon=20.0)
    built, served = [], []
    original = dpdpca.net.serve.build_service

    def build(config, *, executor=None, params=None):
        built.append(executor)
        return original(config, executor=executor, params=params)

    def run(app, **_):  # uvicorn.run, serving the application to in-process clients
        with TestClient(app) as tc:
            for oid in OWNERS:
                owner = DataOwner(net_params, identities[oid], insecure_test_key=True)
                owner_round(owner, rows_for(70 + int(oid), n=20, d=3), ServiceTransport(_client(tc, identities[oid])))
            user = DataUser(net_keypair[1], net_params, owner_keys=owner_keyring)
            served.append(user_round(user, ServiceTransport(_client(tc, identities["user"]), timeout_s=60),
                                     n_components=2))

    monkeypatch.setattr(dpdpca.net.serve, "build_service", build)
    monkeypatch.setattr(dpdpca.net.serve, "require", lambda name: types.SimpleNamespace(run=run))
    assert main(["proxy", "serve", "--config", str(path), "--insecure-http", "--workers", "2"]) == 0
    [pool] = built
    assert isinstance(pool, ProcessPoolExecutor) and pool._max_workers == 2
    with pytest.raises(RuntimeError, match="shutdown"):
        pool.submit(int)
    assert sorted(served[0].extra["owners"]) == OWNERS and served[0].components.shape == (3, 2)
    assert "2 worker processes)" in capsys.readouterr().err
    assert main(["proxy", "serve", "--config", str(path), "--insecure-http", "--workers", "0"]) == 2
