"""Binary batch format: round trip, tamper and truncation detection, validation."""

from __future__ import annotations

import hashlib
import re
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.crypto import EncryptedArray, EncryptedSymmetricMatrix, SlotLayout, decrypt, encrypt
from dpdpca.crypto import wire
from dpdpca.errors import KeyMismatchError, MessageError

LAYOUT = SlotLayout(slot_bits=40, slots=12)


@pytest.fixture(scope="module")
def message(keys512):
    pk, _ = keys512
    enc = encrypt(pk, list(range(-12, 13)), layout=LAYOUT, bound=100, chunks=[12, 12, 1])
    return enc, enc.to_bytes()


def _rehash(data: bytes) -> bytes:
    body = data[:-32]
    return body + hashlib.sha256(body).digest()


def test_round_trip(keys512, message):
    pk, sk = keys512
    enc, data = message
    assert len(data) == enc.nbytes
    back = EncryptedArray.from_bytes(data, pk)
    assert back.chunks == (12, 12, 1) and back.bound == 100 and back.layout == LAYOUT
    assert back.ciphertexts == enc.ciphertexts and decrypt(sk, back) == list(range(-12, 13))
    assert back.to_bytes() == data


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_flipped_byte_is_rejected(keys512, message, data):
    pk, _ = keys512
    _, raw = message
    pos = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    bit = data.draw(st.integers(min_value=0, max_value=7))
    bad = bytearray(raw)
    bad[pos] ^= 1 << bit
    with pytest.raises((MessageError, KeyMismatchError)):
        EncryptedArray.from_bytes(bytes(bad), pk)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_truncation_is_rejected(keys512, message, data):
    pk, _ = keys512
    _, raw = message
    cut = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    with pytest.raises(MessageError):
        EncryptedArray.from_bytes(raw[:cut], pk)


def test_specific_errors(keys512, other_keys512, message):
    pk, _ = keys512
    _, raw = message
    with pytest.raises(MessageError, match="message length must be >= 93 bytes, got 10"):
        EncryptedArray.from_bytes(raw[:10], pk)
    with pytest.raises(MessageError, match="SHA-256 trailer must match"):
        EncryptedArray.from_bytes(raw[:-1], pk)
    v2 = bytearray(raw)
    v2[4:6] = struct.pack(">H", 1)
    with pytest.raises(MessageError, match="message version must be 2, got 1"):
        EncryptedArray.from_bytes(_rehash(bytes(v2)), pk)
    with pytest.raises(MessageError, match="message magic must be"):
        EncryptedArray.from_bytes(b"XXXX" + raw[4:], pk)
    with pytest.raises(KeyMismatchError, match="message key fingerprint must be"):
        EncryptedArray.from_bytes(raw, other_keys512[0])
    with pytest.raises(MessageError, match="message must be bytes"):
        EncryptedArray.from_bytes("text", pk)


def test_ciphertext_out_of_range_rejected(keys512, message):
    pk, _ = keys512
    enc, raw = message
    width = pk.ciphertext_bytes
    start = len(raw) - 32 - width  # last ciphertext
    for value in (0, int(pk.nsquare)):
        bad = raw[:start] + value.to_bytes(width, "big") + raw[start + width:]
        with pytest.raises(MessageError, match=r"message ciphertext\[2\] must be in \[1, n\*\*2\)"):
            EncryptedArray.from_bytes(_rehash(bad), pk)


def test_non_unit_ciphertext_rejected(keys512, message):
    pk, sk = keys512
    _, raw = message
    width = pk.ciphertext_bytes
    start = len(raw) - 32 - width
    bad = raw[:start] + int(sk.q).to_bytes(width, "big") + raw[start + width:]
    with pytest.raises(MessageError, match=r"message ciphertext\[2\] must be a unit modulo n"):
        EncryptedArray.from_bytes(_rehash(bad), pk)


@pytest.mark.parametrize("where", [None, 0, 255, 256, 299])
def test_batched_unit_check_names_the_first_non_unit(keys512, where):
    """One gcd per block of 256 products, yet every non-unit is found and named, in any block."""
    from dpdpca.crypto import _gmp as bk

    pk, sk = keys512
    rng = random.Random(7)
    units = [bk.mpz(rng.randrange(1, int(pk.nsquare))) for _ in range(300)]
    units = [u if bk.gcd(u, pk.n) == 1 else u + 1 for u in units]  # (a random non-unit is p or q's multiple)
    assert bk.first_non_unit(units, pk.n) is None
    if where is None:
        return
    for factor in (sk.p, sk.q):
        bad = list(units)
        bad[where] = bk.mpz(factor * rng.randrange(1, int(pk.n)))  # a multiple of a prime factor, < n**2
        if where < len(bad) - 1:
            bad[-1] = bk.mpz(sk.q * 3)  # a later non-unit does not hide the first
        assert bk.first_non_unit(bad, pk.n) == where
        with pytest.raises(MessageError, match=rf"ct\[{where}\] must be a unit modulo n, got a non-unit"):
            wire.check_ciphertexts(bad, pk, "ct")
        # one batch over several groups names the group and the index within it
        with pytest.raises(MessageError, match=rf"^second\[{where}\] must be a unit modulo n, got a non-unit$"):
            wire.check_units({"first": units[:7], "second": bad, "third": [sk.p]}, pk)
    wire.check_units({"first": units[:7], "second": units}, pk)  # all units: no error
    with pytest.raises(MessageError, match=r"^third\[0\] must be a unit"):
        wire.check_units({"first": units[:7], "second": units, "third": [bk.mpz(sk.p)]}, pk)


def test_chunk_and_bound_validation(keys512, message):
    pk, _ = keys512
    _, raw = message
    head = wire._FIXED.size
    bound_len = struct.unpack_from(">H", raw, head - 2)[0]
    carry_len = struct.unpack_from(">H", raw, head + bound_len)[0]
    pos = head + bound_len + 2 + carry_len
    bad = raw[:pos] + struct.pack(">I", 13) + raw[pos + 4:]
    with pytest.raises(MessageError, match=r"message chunk\[0\] must be in \[1, 12\], got 13"):
        EncryptedArray.from_bytes(_rehash(bad), pk)
    enc, _ = message
    forged = wire.encode_batch(pk, LAYOUT, enc.chunks, LAYOUT.max_abs + 1, enc.ciphertexts)
    with pytest.raises(MessageError, match=f"message bound must be <= {LAYOUT.max_abs}"):
        EncryptedArray.from_bytes(forged, pk)


def test_symmetric_matrix_bytes(keys512):
    pk, sk = keys512
    m = [[1, -2, 3], [-2, 4, 5], [3, 5, -6]]
    enc = EncryptedSymmetricMatrix.encrypt_upper_triangle(pk, m, layout=LAYOUT, bound=6)
    back = EncryptedSymmetricMatrix.from_bytes(enc.to_bytes(), pk)
    assert back.d == 3 and back.decrypt(sk).tolist() == m
    with pytest.raises(MessageError, match="message kind must be 0"):
        EncryptedArray.from_bytes(enc.to_bytes(), pk)
    with pytest.raises(MessageError, match="must be a symmetric matrix"):
        EncryptedSymmetricMatrix.from_bytes(enc.array.to_bytes(), pk)


def test_header_layout_and_chunks_are_checked_every_time(keys512, message):
    # A valid header's layout is checked once and reused; an invalid one, or a chunk out of range, is refused
    # on every message (never cached), naming the first chunk out of range.
    pk, _ = keys512
    enc, data = message
    assert wire.decode_batch(data, pk)[2] is wire.decode_batch(data, pk)[2] == LAYOUT
    cts = list(enc.ciphertexts)
    for chunks, bad in (([12, 0, 1], "chunk[1] must be in [1, 12], got 0"),
                        ([13, 12, 1], "chunk[0] must be in [1, 12], got 13")):
        tampered = wire.encode_batch(pk, LAYOUT, chunks, 100, cts)
        for _ in range(2):
            with pytest.raises(MessageError, match=re.escape(bad)):
                wire.decode_batch(tampered, pk)
    too_wide = wire.encode_batch(pk, SlotLayout(slot_bits=400, slots=12), [12, 12, 1], 100, cts)
    for _ in range(2):
        with pytest.raises(MessageError, match="message layout is invalid: layout slots \\* slot_bits must be"):
            wire.decode_batch(too_wide, pk)
