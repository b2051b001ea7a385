"""Shared keys for the crypto tests: small insecure keys (explicit flag) and one 2048-bit key."""

from __future__ import annotations

import pytest
from dpdpca.crypto import generate_keypair, keypair_from_primes

#: Toy primes p = q = 3 (mod 4) for known-answer tests (n = 100460273, 27 bits).
TOY_P, TOY_Q = 10007, 10039
TOY_X = 5


@pytest.fixture(scope="session")
def toy_keys():
    return keypair_from_primes(TOY_P, TOY_Q, insecure_test_key=True, _test_randomness=lambda: TOY_X)


@pytest.fixture(scope="session")
def keys512():
    return generate_keypair(512, insecure_test_key=True)


@pytest.fixture(scope="session")
def keys1024():
    return generate_keypair(1024, insecure_test_key=True)


@pytest.fixture(scope="session")
def other_keys512():
    return generate_keypair(512, insecure_test_key=True)


@pytest.fixture(scope="session")
def keys2048():
    return generate_keypair(2048)
