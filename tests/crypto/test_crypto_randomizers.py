"""Encryptions of zero made ahead: valid, fresh, handed out once, no thread left behind."""

from __future__ import annotations

import threading

import gmpy2
import pytest

from dpdpca.crypto import RandomizerPool, decrypt, encrypt
from dpdpca.crypto.packing import SlotLayout
from dpdpca.errors import ParameterError


def _is_nth_residue_of_one(sk, factor) -> bool:
    # An encryption of 0 decrypts to 0 and is a unit modulo n**2.
    return int(sk.raw_decrypt([factor])[0]) == 0 and gmpy2.gcd(factor, sk.public_key.n) == 1


def test_pool_hands_out_valid_distinct_factors_once(keys512):
    pk, sk = keys512
    with RandomizerPool(pk) as pool:
        pool.fill(20)
        first = pool.take(12)
        second = pool.take(12)  # 8 left over from the fill, 4 made now
        assert len(first) == len(second) == 12
        everything = [int(f) for f in first + second]
        assert len(set(everything)) == 24  # nothing handed out twice
        assert all(_is_nth_residue_of_one(sk, f) for f in first + second)
        assert pool.ready == 0
        assert pool.cpu_s > 0.0


def test_take_ready_never_blocks_on_more_than_is_ready(keys512):
    pk, _ = keys512
    pool = RandomizerPool(pk)
    assert pool.take_ready(5) == []  # nothing filled, nothing made
    pool.fill(3)
    got = pool.take_ready(10)
    assert len(got) <= 3
    pool.close()
    assert pool.ready == 0


def test_close_stops_the_thread_and_forgets_the_factors(keys1024):
    pk, _ = keys1024
    before = {t.ident for t in threading.enumerate()}
    pool = RandomizerPool(pk)
    pool.fill(10_000)  # far more than will be made before close
    pool.close()
    assert pool.ready == 0
    assert {t.ident for t in threading.enumerate() if t.name == "dpdpca-randomizers"} - before == set()
    assert "ready=0" in repr(pool)


def test_rerandomize_with_given_factors_keeps_plaintexts_and_changes_ciphertexts(keys512):
    pk, sk = keys512
    layout = SlotLayout(slot_bits=24, slots=3)
    vals = [5, -7, 0, 11, 2, -1, 8]
    enc = encrypt(pk, vals, layout=layout, bound=20)
    with RandomizerPool(pk) as pool:
        factors = pool.take(2)  # the first two ciphertexts get these, the third a new one
        out = enc.rerandomize(method="standard", factors=factors)
    assert decrypt(sk, out) == vals
    n2 = pk.nsquare
    assert [int(c) for c in out.ciphertexts[:2]] == [int(c * f % n2) for c, f in zip(enc.ciphertexts, factors)]
    assert all(a != b for a, b in zip(out.ciphertexts, enc.ciphertexts))
    with pytest.raises(ParameterError, match="factors must be at most one per ciphertext"):
        enc.rerandomize(factors=[1] * 4)


def test_rerandomize_draws_new_factors_from_the_given_base(keys512):
    # base = a key with the same n and another hs: the new factors are that hs**alpha. With the
    # degenerate hs = 1 nothing changes, which shows the base (not the array's key) was used.
    from dpdpca.crypto import PublicKey, generate_keypair
    from dpdpca.errors import KeyMismatchError

    pk, sk = keys512
    layout = SlotLayout(slot_bits=24, slots=3)
    vals = [5, -7, 0, 11, 2, -1, 8]
    enc = encrypt(pk, vals, layout=layout, bound=20)
    own = pk.with_own_base()
    assert int(own.n) == int(pk.n) and int(own.hs) != int(pk.hs)
    out = enc.rerandomize(method="djn", base=own)
    assert decrypt(sk, out) == vals and all(a != b for a, b in zip(out.ciphertexts, enc.ciphertexts))
    trivial = enc.rerandomize(method="djn", base=PublicKey(int(pk.n), 1, insecure_test_key=True))
    assert [int(c) for c in trivial.ciphertexts] == [int(c) for c in enc.ciphertexts]
    with pytest.raises(KeyMismatchError, match="base must have this array's modulus n"):
        enc.rerandomize(base=generate_keypair(512, insecure_test_key=True)[0])


@pytest.mark.parametrize("method", ["djn", "standard"])
def test_fill_now_on_an_executor(keys512, method):
    from concurrent.futures import ThreadPoolExecutor

    pk, sk = keys512
    own = pk.with_own_base()
    with ThreadPoolExecutor(2) as ex, RandomizerPool(own, method=method) as pool:
        pool.fill(9, wait=True, executor=ex)
        assert pool.ready == 9 and pool.cpu_s > 0
        got = pool.take(9)
    assert len({int(f) for f in got}) == 9 and all(_is_nth_residue_of_one(sk, f) for f in got)
