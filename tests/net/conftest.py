"""Shared pieces of the HTTP-service tests: a small test key, identities, shares, an in-process service."""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.crypto import generate_keypair
from dpdpca.protocol import DataOwner, ProtocolParams
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

pytest.importorskip("starlette")  # the [server] extra; CI installs it through [test]

TEST_KEY_BITS = 768


@pytest.fixture(scope="session")
def net_keypair():
    return generate_keypair(TEST_KEY_BITS, insecure_test_key=True)


@pytest.fixture(scope="session")
def net_params(net_keypair):
    return ProtocolParams.create(net_keypair[0], release="any", max_owners=4, max_rows_per_owner=64, d=3)  # the service needs d


@pytest.fixture(scope="session")
def identities():
    ids = {oid: OwnerIdentity.generate(oid) for oid in ("1", "2", "3")}
    ids["user"] = OwnerIdentity.generate("user")
    return ids


@pytest.fixture(scope="session")
def owner_keyring(identities):
    return OwnerKeyring.from_identities([identities[o] for o in ("1", "2", "3")])


def owner_rows(seed: int, n: int = 20, d: int = 3) -> np.ndarray:
    X = np.random.default_rng(seed).normal(size=(n, d))
    return 0.9 * X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)


@pytest.fixture(scope="session")
def shares(net_params, identities):
    """Two distinct signed shares per owner id: ``shares[oid][0]`` and an alternative ``shares[oid][1]``."""
    return {oid: [DataOwner(net_params, identities[oid], insecure_test_key=True, release="centred")
                  .share(owner_rows(10 * int(oid) + k, n=20 + k)) for k in (0, 1)]
            for oid in ("1", "2", "3")}


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="session")
def rows_for():
    """``rows_for(seed, n, d)``: rows of norm <= 0.9 (a fixture: test modules do not import conftest)."""
    return owner_rows


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
