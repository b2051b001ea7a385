"""Interop with python-paillier: single-slot ciphertexts convert both ways."""

from __future__ import annotations

import phe
import pytest

from dpdpca.crypto import SlotLayout, decrypt, encrypt, from_phe, to_phe
from dpdpca.errors import KeyMismatchError, ParameterError

LAYOUT = SlotLayout(slot_bits=40, slots=12)


@pytest.fixture(scope="module")
def phe_keys(keys512):
    pk, sk = keys512
    ppk = phe.PaillierPublicKey(int(pk.n))
    return ppk, phe.PaillierPrivateKey(ppk, int(sk.p), int(sk.q))


@pytest.mark.parametrize("value", [0, 1, -1, 123456789, -(2**38), LAYOUT.max_abs, -LAYOUT.max_abs])
def test_ours_to_phe(keys512, phe_keys, value):
    pk, _ = keys512
    ppk, psk = phe_keys
    num = to_phe(encrypt(pk, [value], layout=LAYOUT, bound=LAYOUT.max_abs), ppk)
    assert num.exponent == 0 and psk.decrypt(num) == value
    assert psk.decrypt(num + 5) == value + 5  # phe arithmetic works on it


@pytest.mark.parametrize("value", [0, 7, -7, 2**60, -(2**60)])
def test_phe_to_ours(keys512, phe_keys, value):
    pk, sk = keys512
    ppk, _ = phe_keys
    enc = from_phe(ppk.encrypt(value), pk)
    assert enc.chunks == (1,) and enc.layout.slot_bits == pk.bits - 2
    assert decrypt(sk, enc) == [value]
    small = from_phe(ppk.encrypt(value % 1000 - 500), pk, bound=500, layout=LAYOUT)
    assert decrypt(sk, small.mul_scalar(3)) == [3 * (value % 1000 - 500)]


def test_interop_errors(keys512, other_keys512, phe_keys):
    pk, _ = keys512
    ppk, _ = phe_keys
    with pytest.raises(ParameterError, match="enc.exponent must be 0|enc_number.exponent must be 0"):
        from_phe(ppk.encrypt(1.5), pk)
    with pytest.raises(KeyMismatchError, match="from_phe"):
        from_phe(ppk.encrypt(1), other_keys512[0])
    with pytest.raises(ParameterError, match="enc must be an EncryptedArray with one single-slot ciphertext"):
        to_phe(encrypt(pk, [1, 2], layout=LAYOUT, bound=2))
    with pytest.raises(KeyMismatchError, match="to_phe"):
        to_phe(encrypt(pk, [1], layout=LAYOUT, bound=2), phe.PaillierPublicKey(int(other_keys512[0].n)))
