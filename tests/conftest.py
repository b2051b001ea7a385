"""Fixtures shared by every test directory."""

from __future__ import annotations

from typing import Callable

import gmpy2
import pytest


def _prime_3mod4(bits: int, seed: int) -> int:
    """A reproducible ``bits``-bit prime p ≡ 3 (mod 4) (a Blum prime) from ``seed``: test moduli only."""
    state = gmpy2.random_state(seed)
    while True:
        p = gmpy2.next_prime(gmpy2.mpz_urandomb(state, bits) | (gmpy2.mpz(1) << (bits - 1)))
        if p % 4 == 3:
            return int(p)


@pytest.fixture
def prime_3mod4() -> Callable[[int, int], int]:
    """``prime_3mod4(bits, seed)``: a reproducible Blum prime, for building moduli that attack the key checks."""
    return _prime_3mod4
