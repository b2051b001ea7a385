"""Interoperability with python-paillier (``phe``).

A phe ciphertext for ``g = n + 1`` is ``(1 + m n) r**n mod n**2``, the same
group element our layer uses, so a single-slot ciphertext converts both ways
unchanged.  phe encodes integers as ``EncodedNumber(encoding=m mod n,
exponent=0)`` and reads ``m`` as negative when ``m >= n - n // 3``; our signed
slot ``x`` with ``|x| <= max_abs < n / 4`` is stored as ``x mod n``, which
decodes to the same ``x``.
"""

from __future__ import annotations

from typing import Any

import phe

from dpdpca._validation import check_int, param_error, type_error
from dpdpca.crypto.encrypted import EncryptedArray
from dpdpca.crypto.keys import PublicKey
from dpdpca.crypto.packing import SlotLayout
from dpdpca.errors import KeyMismatchError

__all__ = ["to_phe", "from_phe", "phe_public_key"]


def phe_public_key(public_key: PublicKey) -> phe.PaillierPublicKey:
    """The python-paillier public key with the same ``n``."""
    return phe.PaillierPublicKey(int(public_key.n))


def to_phe(enc: EncryptedArray, phe_key: phe.PaillierPublicKey | None = None) -> phe.EncryptedNumber:
    """One single-slot ciphertext -> ``phe.EncryptedNumber`` (exponent 0, an integer).

    Raises
    ------
    ParameterError
        ``enc`` does not hold exactly one ciphertext with one slot.
    KeyMismatchError
        ``phe_key`` has another ``n``.
    """
    if not isinstance(enc, EncryptedArray) or enc.chunks != (1,):
        raise param_error("enc", "an EncryptedArray with one single-slot ciphertext",
                          getattr(enc, "chunks", type(enc).__name__))
    key = phe_key if phe_key is not None else phe_public_key(enc.public_key)
    if key.n != enc.public_key.n:
        raise KeyMismatchError("to_phe: phe_key.n must equal the array's n, got another modulus")
    return phe.EncryptedNumber(key, int(enc.ciphertexts[0]), exponent=0)


def from_phe(enc_number: Any, public_key: PublicKey, *, bound: int | None = None,
             layout: SlotLayout | None = None) -> EncryptedArray:
    """A ``phe.EncryptedNumber`` of an integer -> single-slot :class:`EncryptedArray`.

    Parameters
    ----------
    enc_number : phe.EncryptedNumber
        Exponent 0 (an integer encoding); for a float encoding first call
        ``decrease_exponent_to`` yourself and account for the scale.
    public_key : PublicKey
        Our key with the same ``n``.
    bound : int or None
        Declared public bound on ``|value|`` (the ciphertext cannot be checked);
        default ``layout.max_abs``.
    layout : SlotLayout or None
        Default: one slot of ``bits(n) - 2`` bits.

    Raises
    ------
    KeyMismatchError
        Another ``n``.
    ParameterError
        Not an ``EncryptedNumber`` or a nonzero exponent.
    MessageError
        A ciphertext outside ``[1, n**2)``.
    """
    if not isinstance(enc_number, phe.EncryptedNumber):
        raise type_error("enc_number", "a phe.EncryptedNumber", type(enc_number).__name__)
    if enc_number.public_key.n != public_key.n:
        raise KeyMismatchError("from_phe: enc_number must be under the key's n, got another modulus")
    if enc_number.exponent != 0:
        raise param_error("enc_number.exponent", "0 (an integer encoding)", enc_number.exponent)
    if layout is None:
        layout = SlotLayout(slot_bits=public_key.bits - 2, slots=1)
    bound = layout.max_abs if bound is None else check_int("bound", bound, minimum=0)
    return EncryptedArray(public_key, layout, (1,), bound, [enc_number.ciphertext(be_secure=False)])
