"""Shared fixtures: one small insecure test key for the whole protocol suite."""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.crypto import generate_keypair
from dpdpca.protocol import DataUser, ProtocolParams

TEST_KEY_BITS = 768


@pytest.fixture(scope="session")
def keypair():
    return generate_keypair(TEST_KEY_BITS, insecure_test_key=True)


@pytest.fixture(scope="session")
def other_keypair():
    return generate_keypair(TEST_KEY_BITS, insecure_test_key=True)


@pytest.fixture(scope="session")
def make_user(keypair, test_keyring):
    """Factory: a DataUser on the session key (a fresh session) with the given declared bounds.

    It lists the verify keys of TEST_OWNER_IDS and keeps its release ledger in memory.
    """
    def make(**kwargs) -> DataUser:
        pk, sk = keypair
        # "any": these parameters serve both releases (the tests run each); keygen's default is add-remove
        defaults = dict(max_owners=10, max_rows_per_owner=64, frac_bits=16, kappa=40, release="any")
        defaults.update(kwargs)
        return DataUser(sk, ProtocolParams.create(pk, **defaults), owner_keys=test_keyring)
    return make


@pytest.fixture(scope="session")
def unit_rows():
    """Factory: ``(rng, n, d)`` -> signed rows of norm <= 0.9."""
    def rows(rng: np.random.Generator, n: int, d: int, scale: float = 0.9) -> np.ndarray:
        X = rng.normal(size=(n, d))
        return scale * X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    return rows


#: Owner ids the shared test keyring lists ("mallory" is deliberately absent).
TEST_OWNER_IDS = [str(i) for i in range(1, 13)] + ["a", "b", "c", "d", "alice", "bob"]


@pytest.fixture(scope="session")
def identity():
    """Factory: the (cached) Ed25519 identity of an owner id."""
    from dpdpca.protocol.identity import OwnerIdentity

    cache: dict = {}

    def get(owner_id: str):
        if owner_id not in cache:
            cache[owner_id] = OwnerIdentity.generate(owner_id)
        return cache[owner_id]
    return get


@pytest.fixture(scope="session")
def test_keyring(identity):
    """The verify keys of every id in TEST_OWNER_IDS."""
    from dpdpca.protocol.identity import OwnerKeyring

    return OwnerKeyring.from_identities([identity(i) for i in TEST_OWNER_IDS])


@pytest.fixture(scope="session")
def make_owner(identity):
    """Factory: ``(params, owner_id, **kw)`` -> a DataOwner that accepts the small test key."""
    from dpdpca.protocol import DataOwner

    def make(params, owner_id: str, **kwargs):
        kwargs.setdefault("insecure_test_key", True)
        return DataOwner(params, identity(owner_id), **kwargs)
    return make
