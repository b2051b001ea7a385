"""The DJN fixed-base table: exact for every window, sized to the work it serves."""

from __future__ import annotations

import secrets

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.crypto import _gmp as bk
from dpdpca.crypto import decrypt, encrypt
from dpdpca.crypto.packing import SlotLayout


@settings(max_examples=40, deadline=None)
@given(window=st.integers(1, 12), exp=st.integers(0, (1 << 130) - 1), base=st.integers(2, 10 ** 30))
def test_every_window_gives_the_exact_power(window, exp, base):
    mod = (1 << 127) - 1
    table = bk.FixedBaseTable(base, mod, 130, window=window)
    assert table.n_rows == -(-130 // window)
    assert table.pow(exp) == gmpy2.powmod(base, exp, mod)
    assert table.pow_many([0, exp, (1 << 130) - 1]) == [1, gmpy2.powmod(base, exp, mod),
                                                      gmpy2.powmod(base, (1 << 130) - 1, mod)]


def test_window_out_of_range_is_refused():
    with pytest.raises(ValueError, match="window must be in"):
        bk.FixedBaseTable(3, 101, 16, window=17)


def test_best_window_grows_with_the_work_and_minimises_the_cost():
    small, large = bk.FixedBaseTable.best_window(1024, 100), bk.FixedBaseTable.best_window(1024, 10_000)
    assert small < 8 < large  # a hundred encryptions do not pay for byte windows; ten thousand pay for more
    for count in (1, 100, 10_000):
        best = bk.FixedBaseTable.best_window(1024, count)
        assert all(bk.FixedBaseTable.cost(1024, count, best) <= bk.FixedBaseTable.cost(1024, count, w)
                   for w in range(1, 17) if -(-1024 // w) << w <= bk.FixedBaseTable.MAX_ENTRIES)
    # The memory cap holds even for huge batches.
    w = bk.FixedBaseTable.best_window(1024, 10 ** 9)
    assert -(-1024 // w) << w <= bk.FixedBaseTable.MAX_ENTRIES


def test_public_key_keeps_its_table_unless_rebuilding_pays(keys512):
    pk, sk = keys512
    pk.drop_table()
    small = pk.djn_table(50)
    assert small.window == bk.FixedBaseTable.best_window(pk.alpha_bits, 50)
    assert pk.djn_table(3) is small  # a handful more never rebuilds
    big = pk.djn_table(100_000)
    assert big is not small and big.window > small.window
    assert pk.djn_table(50) is big  # a larger table already paid for is kept
    pk.drop_table()
    assert pk.djn_table(None).window == 8
    # Ciphertexts from every table size decrypt (randomizers stay valid encryptions of 0).
    layout = SlotLayout(slot_bits=40, slots=4)
    for expected in (1, 1000):
        pk.drop_table()
        pk.djn_table(expected)
        vals = [secrets.randbelow(2 ** 30) - 2 ** 29 for _ in range(9)]
        assert decrypt(sk, encrypt(pk, vals, layout=layout, bound=2 ** 29)) == vals


class _CountedRow(list):
    """A table row that counts the entries read from it: after the first row, each read is one multiplication."""

    reads = 0

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        _CountedRow.reads += 1
        return super().__getitem__(index)


@pytest.mark.parametrize("window", [3, 8])
def test_lookup_multiplies_once_per_nonzero_digit_after_the_first_row(window):
    """The floor counts ``lookup_mulmods`` multiplications per power: what the row-major lookup performs."""
    mod = (1 << 127) - 1
    table = bk.FixedBaseTable(5, mod, 130, window=window)
    table.rows = [table.rows[0]] + [_CountedRow(row) for row in table.rows[1:]]
    digits = table.random_digits(400)
    digits[0] = 0  # the power 1: no multiplication at all
    _CountedRow.reads = 0
    powers = table._lookup(digits)
    assert _CountedRow.reads == int((digits[:, 1:] != 0).sum())  # one entry (one product) per non-zero digit
    exps = [sum(int(u) << (window * k) for k, u in enumerate(row)) for row in digits.tolist()]
    assert [int(p) for p in powers] == [int(gmpy2.powmod(5, e, mod)) for e in exps]
    assert all(type(p) is type(gmpy2.mpz(1)) for p in powers)  # immutable values out, never the accumulators
    expected = 400 * bk.FixedBaseTable.lookup_mulmods(table.n_rows, window)
    assert abs(_CountedRow.reads - expected) < 0.05 * expected


def test_columnwise_product_is_exact_and_leaves_its_inputs_alone():
    mod = (1 << 127) - 1
    rows = [[gmpy2.mpz(secrets.randbelow(mod)) for _ in range(50)] for _ in range(4)]
    before = [list(r) for r in rows]
    out = bk.columnwise_prod_mod(rows, mod)
    assert [int(v) for v in out] == [a * b * c * e % mod for a, b, c, e in zip(*before)]
    assert rows == before and all(type(v) is type(gmpy2.mpz(1)) for v in out)
    assert bk.columnwise_prod_mod(rows[:1], mod) == rows[0]


@pytest.mark.parametrize("window", [3, 7, 8, 10, 16])
def test_digits_match_the_exponents_and_a_too_large_exponent_is_refused(window):
    table = bk.FixedBaseTable(5, (1 << 127) - 1, 130, window=window)
    exps = [0, 1, (1 << 130) - 1, secrets.randbits(130), secrets.randbits(130)]
    raw = np.frombuffer(b"".join(e.to_bytes(table.n_bytes, "little") for e in exps), dtype=np.uint8)
    digits = table._digit_matrix(raw.reshape(len(exps), table.n_bytes))
    assert digits.shape == (len(exps), table.n_rows)
    assert [sum(int(u) << (window * k) for k, u in enumerate(row)) for row in digits.tolist()] == exps
    with pytest.raises(ValueError, match="exponents must be"):
        table.pow_many([1 << 130])
    with pytest.raises(ValueError, match="exponents must be"):
        table.pow_many([1 << 200])
    big = np.frombuffer((1 << 130).to_bytes(table.n_bytes, "little"), dtype=np.uint8).reshape(1, -1)
    with pytest.raises(ValueError, match="exponents must be below 2\\*\\*130"):
        table._digit_matrix(big)
