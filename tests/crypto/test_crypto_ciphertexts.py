"""``dpdpca.crypto.ciphertexts``: the public batch operations the proxy's intake uses, on a toy key."""

from __future__ import annotations

import pytest

from dpdpca.crypto import SlotLayout, decrypt, encrypt, generate_keypair
from dpdpca.crypto.ciphertexts import (divide_out, first_non_unit, from_fixed_bytes, product_mod, random_unit,
                                       to_fixed_bytes)


@pytest.fixture(scope="module")
def toy():
    return generate_keypair(512, insecure_test_key=True)


def test_product_then_divide_out_is_the_homomorphic_sum_and_back(toy):
    pk, sk = toy
    layout = SlotLayout(slot_bits=40, slots=12)
    a = encrypt(pk, [5, -7, 11], layout=layout, bound=100, chunks=[1, 1, 1])
    b = encrypt(pk, [2, 3, -4], layout=layout, bound=100, chunks=[1, 1, 1])
    prod = product_mod([a.ciphertexts, b.ciphertexts], pk.nsquare)
    summed = a.__class__._trusted(pk, a.layout, a.chunks, 200, prod)
    assert [int(x) for x in decrypt(sk, summed)] == [7, -4, 7]
    back = divide_out(prod, iter(b.ciphertexts), pk.nsquare)  # one iterator may run over several sections
    assert [int(c) for c in back] == [int(c) for c in a.ciphertexts]
    with pytest.raises(ValueError, match="divisors must be as many as values"):
        divide_out(prod, b.ciphertexts[:2], pk.nsquare)
    with pytest.raises(ValueError, match="at least one list"):
        product_mod([], pk.nsquare)


def test_unit_check_finds_the_first_non_unit(toy):
    pk, _ = toy
    units = [random_unit(pk.nsquare) for _ in range(300)]
    assert first_non_unit(units, pk.n) is None
    bad = units[:257] + [pk.n * 3] + units[257:]  # in the second block of 256
    assert first_non_unit(bad, pk.n) == 257


def test_fixed_width_bytes_round_trip_and_refuse_what_does_not_fit():
    values = [0, 1, 2 ** 64 - 1]
    blob = to_fixed_bytes(values, 8)
    assert len(blob) == 24 and [int(v) for v in from_fixed_bytes(blob, 8)] == values
    with pytest.raises(OverflowError):
        to_fixed_bytes([2 ** 64], 8)
    with pytest.raises(OverflowError):
        to_fixed_bytes([-1], 8)
    with pytest.raises(ValueError, match="whole number of 8-byte fields, got 23 bytes"):
        from_fixed_bytes(blob[:-1], 8)
