"""The numpy paths (digits, packing, conversions) give exactly what the per-value loops give."""

from __future__ import annotations

import itertools

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.encrypted import as_int_list
from dpdpca.crypto.packing import pack_many, pack_slots, unpack_many, unpack_slots
from dpdpca.errors import ParameterError


@st.composite
def _chunked(draw, max_bits=62):
    bits = draw(st.integers(2, max_bits))
    half = 1 << (bits - 1)
    chunks = draw(st.lists(st.integers(1, 9), min_size=1, max_size=12))
    values = draw(st.lists(st.integers(-half + 1, half - 1), min_size=sum(chunks), max_size=sum(chunks)))
    return bits, chunks, values


def _loop_pack(values, chunks, bits):
    out, pos = [], 0
    for c in chunks:
        out.append(pack_slots(values[pos:pos + c], bits))
        pos += c
    return out


@settings(max_examples=80, deadline=None)
@given(_chunked(max_bits=70))
def test_pack_and_unpack_many_match_the_loops(case):
    bits, chunks, values = case
    packed = pack_many(values, chunks, bits)
    assert packed == _loop_pack(values, chunks, bits)
    bound = max(abs(v) for v in values)
    assert unpack_many(packed, chunks, bits, bound) == (values, None)


def test_pack_many_falls_back_for_carrying_values():
    # A slot beyond 2**(w-1) (a carrying layout's intermediate) takes the loop, with the same result.
    values, chunks = [2 ** 20, -3, 7, -(2 ** 21)], [2, 2]
    assert pack_many(values, chunks, 8) == _loop_pack(values, chunks, 8)
    # int64's -2**63, which np.abs leaves negative, takes the loop as well
    values = [-(2 ** 63), 1]
    assert pack_many(values, [2], 20) == _loop_pack(values, [2], 20)


@pytest.mark.parametrize("bits", [8, 40, 62, 64])
def test_unpack_many_names_the_first_bad_ciphertext(bits):
    half = 1 << (bits - 1)
    chunks = [3, 3, 1, 3]
    values = [1, -2, 3, 4, 5, -6, 7, 8, -9, 10]
    packed = pack_many(values, chunks, bits)
    assert unpack_many(packed, chunks, bits, 10) == (values, None)
    # a slot over the bound in ciphertext 1 (and a leftover in ciphertext 3): ciphertext 1 is named
    over = list(packed)
    over[1] = pack_slots([4, 11, -6], bits)
    over[3] = packed[3] + (1 << (3 * bits))
    assert unpack_many(over, chunks, bits, 10) == (values[:3], 1)
    # a leftover alone (the value does not fit 3 slots)
    left = list(packed)
    left[2] = half  # beyond the bound of a one-slot ciphertext
    assert unpack_many(left, chunks, bits, 10)[1] == 2
    # ... which a one-slot ciphertext may hold when the bound allows it (as unpack_slots' caller did)
    assert unpack_many(left, chunks, bits, half) == (values[:6] + [half] + values[7:], None)
    left = list(packed)
    left[3] = -half * (1 << (3 * bits))
    assert unpack_many(left, chunks, bits, 10)[1] == 3
    for k in range(4):  # the loop agrees on every case
        assert (unpack_slots(packed[k], chunks[k], bits) is None) is False


@settings(max_examples=30, deadline=None)
@given(window=st.integers(1, 16), exps=st.lists(st.integers(0, (1 << 100) - 1), min_size=1, max_size=6))
def test_table_digits_match_powmod(window, exps):
    mod = (1 << 127) - 1
    table = bk.FixedBaseTable(5, mod, 100, window=window)
    assert table.pow_many(exps) == [gmpy2.powmod(5, e, mod) for e in exps]
    assert table.pow_many(np.array([3, 0], dtype=np.int64)) == [125, 1]


@pytest.mark.parametrize("window", [3, 8, 11])
def test_table_refuses_exponents_out_of_range(window):
    table = bk.FixedBaseTable(5, 1009, 20, window=window)
    for bad in (1 << 20, -1, 1 << 40):
        with pytest.raises(ValueError, match="exponents must be"):
            table.pow_many([1, bad])


@pytest.mark.slow
def test_pow_random_draws_in_range_and_uniform_low_bits():
    # Base 2 modulo an odd number above 2**(2**exp_bits): the power is 2**e itself, so e is read back exactly
    # (no prime is needed for that, and finding one of 8193 bits took 5 s).
    exp_bits = 13
    mod = (1 << (1 << exp_bits)) + 1
    table = bk.FixedBaseTable(2, mod, exp_bits, window=5)
    exps = [int(p).bit_length() - 1 for p in table.pow_random(3000)]
    assert all(0 <= e < (1 << exp_bits) for e in exps)
    # every bit of e is set about half the time (top bit included: no bit beyond exp_bits leaks in)
    for b in range(exp_bits):
        ones = sum((e >> b) & 1 for e in exps)
        assert 1300 < ones < 1700, (b, ones)


def test_as_int_list_checks_types_once_and_names_a_bad_entry():
    assert as_int_list("v", [1, -2, 3]) == [1, -2, 3]
    mixed = as_int_list("v", [1, gmpy2.mpz(2), np.int64(-3)])
    assert mixed == [1, 2, -3] and {type(x) for x in mixed} == {int}
    assert as_int_list("v", np.array([4, 5], dtype=np.int32)) == [4, 5]
    assert as_int_list("v", (x for x in [7, 8])) == [7, 8]
    with pytest.raises(ParameterError, match=r"v\[2\] must be an integer"):
        as_int_list("v", [1, 2, 3.0])
    with pytest.raises(ParameterError, match=r"v\[1\] must be an integer"):
        as_int_list("v", [1, True])


@pytest.mark.parametrize("window", [3, 8, 10])
def test_a_table_split_by_rows_multiplies_back_to_the_powers(window):
    mod, bits = (1 << 127) - 1, 100
    whole = bk.FixedBaseTable(7, mod, bits, window=window)
    exps = [0, 1, (1 << bits) - 1, 123456789 ** 3]
    raw = np.frombuffer(b"".join(e.to_bytes(whole.n_bytes, "little") for e in exps), dtype=np.uint8)
    digits = whole._digit_matrix(raw.reshape(len(exps), whole.n_bytes))
    cut = [0, whole.n_rows // 3, whole.n_rows // 2, whole.n_rows]
    parts = [bk.FixedBaseTable(7, mod, bits, window=window, rows=(a, b)).partial_products(digits[:, a:b])
             for a, b in itertools.pairwise(cut)]
    assert bk.columnwise_prod_mod(parts, mod) == [gmpy2.powmod(7, e, mod) for e in exps]
    part = bk.FixedBaseTable(7, mod, bits, window=window, rows=(cut[1], cut[2]))
    with pytest.raises(ValueError, match="partial products, not powers"):
        part.pow_many([1])
    with pytest.raises(ValueError, match="digits must have"):
        part.partial_products(digits)
    with pytest.raises(ValueError, match="rows must be within"):
        bk.FixedBaseTable(7, mod, bits, window=window, rows=(0, whole.n_rows + 1))


@pytest.mark.parametrize("slot_bits", [1, 7, 8, 13, 32, 49, 50, 63 - 1])
def test_digit_rows_to_bytes_are_the_packed_integers(slot_bits):
    from dpdpca.crypto.packing import _bytes_to_digits, _digits_to_bytes

    rng = np.random.default_rng(slot_bits)
    digits = rng.integers(0, 1 << slot_bits, size=(9, 11), dtype=np.uint64)
    digits[0] = (1 << slot_bits) - 1  # every bit set
    raw = _digits_to_bytes(digits, slot_bits)
    assert raw.shape == (9, (11 * slot_bits + 7) // 8)
    for row, blob in zip(digits.tolist(), raw):
        assert int.from_bytes(blob.tobytes(), "little") == sum(int(u) << (slot_bits * j) for j, u in enumerate(row))
    assert (_bytes_to_digits(raw, 11, slot_bits) == digits.astype(np.int64)).all()
