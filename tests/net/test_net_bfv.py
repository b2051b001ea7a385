"""The proxy service (Starlette's ASGI test client) with a BFV session: owners and the user over HTTP."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("tenseal", reason="the [lattice] extra (TenSEAL) is not installed")

with warnings.catch_warnings():  # starlette >= 1.x prefers the httpx2 fork for its test client; httpx works
    warnings.filterwarnings("ignore", message=".*httpx.*starlette.testclient.*")
    from starlette.testclient import TestClient

from dpdpca.net.app import create_app  # noqa: E402
from dpdpca.net.auth import PartyKeys  # noqa: E402
from dpdpca.net.client import ProxyClient, ProxyRefused, ServiceTransport  # noqa: E402
from dpdpca.net.collection import Collection  # noqa: E402
from dpdpca.net.config import NoiseConfig  # noqa: E402
from dpdpca.protocol import DataOwner, DataUser  # noqa: E402
from dpdpca.protocol.identity import OwnerKeyring  # noqa: E402
from dpdpca.protocol.roles import owner_round, user_round  # noqa: E402

OWNERS = ["1", "2", "3"]


def _client(tc, identity) -> ProxyClient:
    party = "user" if identity.owner_id == "user" else f"owner:{identity.owner_id}"
    return ProxyClient("http://testserver", identity, party, client=tc, retries=0)


def test_bfv_session_over_the_service_and_a_paillier_share_refused(tmp_path, identities, owner_keyring, shares,
                                                                    rows_for):
    user = DataUser.generate(scheme="bfv", owner_keys=owner_keyring, max_owners=4, max_rows_per_owner=64, d=3)
    params = user.params
    coll = Collection(params, tmp_path / "state", owner_keys=owner_keyring, quorum=3, min_shares=1,
                      collection_seconds=60.0, noise=NoiseConfig(epsilon=20.0, delta=1e-5))
    keys = PartyKeys(owner_keyring, OwnerKeyring.from_identities([identities["user"]]), None)
    app = create_app(coll, keys, max_body_bytes=64 << 20)
    with TestClient(app) as tc:
        with pytest.raises(ProxyRefused, match="share scheme must be 'bfv', the session key's, got 'paillier'"):
            _client(tc, identities["1"]).post_share("1", shares["1"][0])  # a Paillier share
        for oid in OWNERS:
            owner = DataOwner(params, identities[oid], release="add-remove")
            net = ServiceTransport(_client(tc, identities[oid]))
            owner_round(owner, rows_for(50 + int(oid), n=20, d=3), net)
            assert net.answer["status"] == "accepted"
        res = user_round(user, ServiceTransport(_client(tc, identities["user"]), timeout_s=60), n_components=2)
    assert coll.phase.value == "released"
    assert res.extra["release"] == "add-remove" and sorted(res.extra["owners"]) == OWNERS
    assert res.components.shape == (3, 2)
    assert abs(user.n_noisy_ - 60) < 10  # 60 rows plus noise far below 10 at epsilon = 20


def test_a_bfv_share_is_never_smaller_than_the_bound_the_service_checks_its_body_limit_against(identities,
                                                                                              owner_keyring, rows_for):
    from dpdpca.protocol.messages import Message
    from dpdpca.protocol.sections import min_share_bytes

    user = DataUser.generate(scheme="bfv", owner_keys=owner_keyring, max_owners=4, max_rows_per_owner=64, d=3)
    share = DataOwner(user.params, identities["1"], release="add-remove").share(rows_for(7, n=20, d=3))
    packed = Message.from_bytes(share).section("R")  # every section packed into the first
    low = min_share_bytes(user.params, 3, "add-remove")
    # one ciphertext per plaintext prime; the bound is half the entropy of its uniform residues (compression
    # cannot go below that), so a real one is about 2.4 times it here
    assert 0 < low <= len(packed) < 4 * low
