"""Carrying ("wide") layouts: slots sized for the final value, intermediates bounded below n/2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.crypto import EncryptedArray, SlotLayout, decrypt, encrypt, sum_arrays, wire
from dpdpca.crypto.packing import centred, pack_slots
from dpdpca.errors import MessageError, OverflowRiskError, ParameterError

HYP = settings(max_examples=25, deadline=None)
FINAL = 2**20 - 1       # final slots: |y| <= A = 2**20 - 1 (21-bit slots)
CARRY = 2**150          # intermediate slots up to 2**150


@pytest.fixture(scope="module")
def wide(keys512):
    return SlotLayout.for_final_bound(keys512[0], FINAL, CARRY)


def test_layout_is_the_largest_that_keeps_the_packed_total_below_n_half(keys512, wide):
    pk, _ = keys512
    w, s = wide.slot_bits, wide.slots
    assert w == 21 and wide.max_abs == FINAL and wide.carries and wide.limit == CARRY
    geometric = ((1 << (w * s)) - 1) // ((1 << w) - 1)
    assert 2 * CARRY * geometric < pk.n  # the docstring's hypothesis, against the real n
    one_more = ((1 << (w * (s + 1))) - 1) // ((1 << w) - 1)
    assert 2 * CARRY * one_more >= 1 << (pk.bits - 1)  # one more slot would break it for the smallest n
    # Wider than the plain layout for the intermediate bound: 17 slots of 21 bits instead of 3 of 152.
    plain = SlotLayout.for_bound(pk, CARRY)
    assert s > 3 * plain.slots
    wide.check_key(pk)


def test_check_key_refuses_a_carry_that_could_wrap(keys512, wide):
    pk, _ = keys512
    too_big = SlotLayout(slot_bits=wide.slot_bits, slots=wide.slots + 1, carry_bound=CARRY)
    with pytest.raises(OverflowRiskError, match="must be < n / 2"):
        encrypt(pk, [1], layout=too_big, bound=1)


def test_packed_total_at_the_limit_never_wraps(keys512, wide):
    pk, sk = keys512
    for sign in (1, -1):
        values = [sign * CARRY] * wide.slots  # every slot at the carry bound: the largest packed total
        enc = encrypt(pk, values, layout=wide, bound=CARRY)
        (plain,) = sk.raw_decrypt(enc.ciphertexts)
        assert centred(plain, pk.n) == pack_slots(values, wide.slot_bits)
        with pytest.raises(OverflowRiskError, match="decrypt: slot bound must be <= 1048575"):
            decrypt(sk, enc)
        with pytest.raises(OverflowRiskError, match="beyond it the packed value could wrap mod n"):
            sum_arrays([enc, encrypt(pk, [1] * wide.slots, layout=wide, bound=1)])
        with pytest.raises(OverflowRiskError, match=f"slot bound must be <= {CARRY}"):
            enc.mul_scalar(2)


def _case(data, wide):
    """y (final, |y| <= A), b (known, |b| <= plain_bound) and a = y + b with bound(a) + plain_bound = CARRY."""
    a_max = wide.max_abs
    plain_bound = data.draw(st.sampled_from([CARRY // 2, CARRY - a_max, a_max]), label="plain_bound")
    bound_a = CARRY - plain_bound
    k = data.draw(st.integers(min_value=1, max_value=wide.slots), label="slots")
    edge = st.sampled_from([a_max, -a_max, 0])
    y = data.draw(st.lists(edge | st.integers(-a_max, a_max), min_size=k, max_size=k), label="y")
    room = min(plain_bound, bound_a - a_max)
    b = data.draw(st.lists(st.sampled_from([room, -room]) | st.integers(-room, room), min_size=k, max_size=k),
                  label="b")
    return y, b, [yy + bb for yy, bb in zip(y, b)], bound_a, plain_bound


@HYP
@given(data=st.data())
def test_subtract_known_at_the_bound_recovers_the_final_slots(keys512, wide, data):
    pk, sk = keys512
    y, b, a, bound_a, plain_bound = _case(data, wide)
    assert bound_a + plain_bound == wide.limit  # exactly at the bound
    enc = encrypt(pk, a, layout=wide, bound=bound_a)
    out = enc.sub_plain(b, plain_bound=plain_bound, result_bound=wide.max_abs)
    assert out.bound == wide.max_abs
    assert decrypt(sk, out) == y


@HYP
@given(data=st.data())
def test_one_past_the_bound_is_refused_before_computing(keys512, wide, data):
    pk, _ = keys512
    y, b, a, bound_a, plain_bound = _case(data, wide)
    enc = encrypt(pk, a, layout=wide, bound=bound_a)
    with pytest.raises(OverflowRiskError, match=f"sub_plain: slot bound must be <= {CARRY} .*got {CARRY + 1}"):
        enc.sub_plain(b, plain_bound=plain_bound + 1, result_bound=wide.max_abs)
    with pytest.raises(OverflowRiskError, match=f"encrypt: slot bound must be <= {CARRY}"):
        encrypt(pk, a, layout=wide, bound=CARRY + 1)


def test_result_bound_is_checked_at_decryption(keys512, wide):
    pk, sk = keys512
    enc = encrypt(pk, [10**30, 7], layout=wide, bound=10**30)
    # A false declaration the digits expose: y = (5, 7) declared <= 4.
    bad = enc.sub_plain([10**30 - 5, 0], plain_bound=10**30, result_bound=4)
    with pytest.raises(MessageError, match=r"^every ciphertext must decrypt to its declared slots with \|slot\| <= 4,"):
        decrypt(sk, bad)
    with pytest.raises(ParameterError, match="result_bound must be <= "):
        enc.sub_plain([0, 0], plain_bound=1, result_bound=10**30 + 2)


def test_single_slot_ciphertexts_decrypt_up_to_the_carry_bound(keys512, wide):
    pk, sk = keys512
    values = [CARRY, -CARRY, 12345]
    enc = encrypt(pk, values, layout=wide, bound=CARRY, chunks=[1, 1, 1])
    assert decrypt(sk, enc) == values
    plain_enc = encrypt(pk, [1, 2], layout=SlotLayout(slot_bits=21, slots=2), bound=2, chunks=[1, 1])
    with pytest.raises(OverflowRiskError, match="slot bound must be <= 1048575"):
        plain_enc.mul_scalar(2**20)


def test_carrying_layout_survives_the_wire(keys512, wide):
    pk, sk = keys512
    enc = encrypt(pk, [3 * 10**40, -5], layout=wide, bound=10**41)
    back = EncryptedArray.from_bytes(enc.to_bytes(), pk)
    assert back.layout == wide and back.bound == 10**41 and back.ciphertexts == enc.ciphertexts
    assert len(enc.to_bytes()) == enc.nbytes
    assert decrypt(sk, back.sub_plain([3 * 10**40, 0], plain_bound=10**41, result_bound=5)) == [0, -5]
    forged = wire.encode_batch(pk, wide, enc.chunks, CARRY + 1, enc.ciphertexts)
    with pytest.raises(MessageError, match=f"message bound must be <= {CARRY}, got {CARRY + 1}"):
        EncryptedArray.from_bytes(forged, pk)
