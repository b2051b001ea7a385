"""Known-answer tests on a toy key with fixed randomness.

p = 10007, q = 10039 (both 3 mod 4), n = 100460273, x = 5, so
hs = -5**(2n) mod n**2.  The expected ciphertexts below were computed with
plain Python ``pow`` from the formulas (1 + m n) hs**alpha and (1 + m n) r**n,
independently of the library, and are also recomputed here.
"""

from __future__ import annotations

import pytest

from dpdpca.crypto import SlotLayout, decrypt, encrypt
from dpdpca.errors import OverflowRiskError

N = 10007 * 10039
N2 = N * N
HS = 7836878157999751
ALPHA = 12345


def test_toy_key_fields(toy_keys):
    pk, sk = toy_keys
    assert pk.n == N == 100460273
    assert pk.hs == HS == (-pow(5, 2 * N, N2)) % N2
    assert pk.alpha_bits == 14


def test_djn_known_answer(toy_keys):
    pk, sk = toy_keys
    expected = (1 + 42 * N) * pow(HS, ALPHA, N2) % N2
    assert expected == 8806020043819902
    assert pk.raw_encrypt([42], _test_randomness=lambda i: ALPHA) == [expected]
    assert sk.raw_decrypt([expected]) == [42]


def test_standard_known_answer(toy_keys):
    pk, sk = toy_keys
    expected = (1 + 42 * N) * pow(777, N, N2) % N2
    assert expected == 3290198895966010
    assert pk.raw_encrypt([42], method="standard", _test_randomness=lambda i: 777) == [expected]
    assert sk.raw_decrypt([expected]) == [42]


def test_packed_known_answer(toy_keys):
    pk, sk = toy_keys
    layout = SlotLayout(slot_bits=8, slots=3)  # 24 <= bits(n) - 2 = 25
    values = [5, -3, 127]
    packed = (5 + (-3) * 256 + 127 * 256 ** 2) % N
    enc = encrypt(pk, values, layout=layout, bound=127, _test_randomness=lambda i: ALPHA + i)
    assert [int(c) for c in enc.ciphertexts] == [(1 + packed * N) * pow(HS, ALPHA, N2) % N2]
    assert decrypt(sk, enc) == values


def test_toy_boundaries(toy_keys):
    pk, _ = toy_keys
    with pytest.raises(OverflowRiskError, match=r"plaintext\[0\] must be in \[0, n\)"):
        pk.raw_encrypt([N])
    with pytest.raises(OverflowRiskError, match="slots \\* slot_bits must be <= bits\\(n\\) - 2 = 25"):
        encrypt(pk, [1], layout=SlotLayout(slot_bits=13, slots=2), bound=1)
    with pytest.raises(ValueError, match=r"alpha must be <= 16383"):
        pk.raw_encrypt([1], _test_randomness=lambda i: 1 << 14)
