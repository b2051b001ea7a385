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
def make_user(keypair):
    """Factory: a DataUser on the session key with the given declared bounds."""
    def make(**kwargs) -> DataUser:
        pk, sk = keypair
        defaults = dict(max_owners=10, max_rows_per_owner=64, frac_bits=16, kappa=40)
        defaults.update(kwargs)
        return DataUser(sk, ProtocolParams.create(pk, **defaults))
    return make


@pytest.fixture(scope="session")
def unit_rows():
    """Factory: ``(rng, n, d)`` -> signed rows of norm <= 0.9."""
    def rows(rng: np.random.Generator, n: int, d: int, scale: float = 0.9) -> np.ndarray:
        X = rng.normal(size=(n, d))
        return scale * X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    return rows
