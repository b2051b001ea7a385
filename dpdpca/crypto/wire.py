"""Compact binary format for a batch of packed ciphertexts.

Layout (all integers big-endian)::

    magic        4 bytes   b"DPCB"
    version      u16       2
    fingerprint  32 bytes  SHA-256 of n (the key the ciphertexts belong to)
    kind         u8        0 = flat vector, 1 = upper triangle of a symmetric matrix
    dim          u32       d for kind 1, 0 otherwise
    slot_bits    u32
    slots        u32       slots per plaintext of the layout
    count        u32       number of ciphertexts
    width        u32       bytes per ciphertext = byte length of n**2
    bound_len    u16       then bound_len bytes: the declared public |slot| bound
    carry_len    u16       then carry_len bytes: the layout's carry_bound (0: plain layout)
    chunks       count x u32   slots used in each ciphertext
    body         count x width bytes, each ciphertext in [1, n**2)
    trailer      32 bytes  SHA-256 of everything above

The SHA-256 trailer detects corruption and truncation in transit.  It is not
a MAC: a party that alters a message can recompute it.  Authenticity, if
needed, belongs to the transport.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Mapping, Sequence

from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.keys import PublicKey
from dpdpca.crypto.packing import SlotLayout
from dpdpca.errors import KeyMismatchError, MessageError

__all__ = ["MAGIC", "VERSION", "KIND_VECTOR", "KIND_SYMMETRIC", "encode_batch", "decode_batch", "ciphertext_bytes",
           "check_ciphertexts", "check_units"]

MAGIC = b"DPCB"
VERSION = 2
KIND_VECTOR = 0
KIND_SYMMETRIC = 1
_FIXED = struct.Struct(">4sH32sBIIIIIH")
_CARRY = struct.Struct(">H")
_TRAILER = 32


def encode_batch(public_key: PublicKey, layout: SlotLayout, chunks: Sequence[int], bound: int,
                 ciphertexts: Sequence[int], *, kind: int = KIND_VECTOR, dim: int = 0) -> bytes:
    """Serialize a batch (fields already validated by the caller)."""
    width = public_key.ciphertext_bytes
    bound_bytes = bk.int_to_bytes(bound)
    carry_bytes = bk.int_to_bytes(layout.carry_bound)
    head = _FIXED.pack(MAGIC, VERSION, bytes.fromhex(public_key.fingerprint), kind, dim,
                       layout.slot_bits, layout.slots, len(ciphertexts), width, len(bound_bytes))
    parts = [head, bound_bytes, _CARRY.pack(len(carry_bytes)), carry_bytes, struct.pack(f">{len(chunks)}I", *chunks),
             bk.ints_to_bytes(ciphertexts, width)]
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def decode_batch(data: bytes, public_key: PublicKey, *, check_units: bool = True, check_trailer: bool = True
                 ) -> tuple[int, int, SlotLayout, tuple[int, ...], int, list[bk.mpz]]:
    """Parse and validate; returns ``(kind, dim, layout, chunks, bound, ciphertexts)``.

    ``check_units=False`` leaves the test that every ciphertext is a unit
    modulo n to the caller, who must then run :func:`check_units` on these
    ciphertexts (with those of other batches: one gcd for all of them).
    ``check_trailer=False`` skips the trailer's SHA-256, for bytes the caller
    has already checked against a digest that covers them (a section of a
    message whose own digest matched): the trailer guards against the same
    corruption, so it would be a second pass over the same bytes.  Every
    other check still runs, and a batch with a wrong trailer parses the same.

    Raises
    ------
    MessageError
        Wrong magic or version, truncation, a bad trailer, inconsistent
        lengths, chunk sizes or layout, or a ciphertext outside ``[1, n**2)``.
    KeyMismatchError
        The fingerprint names another key.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MessageError(f"message must be bytes, got {type(data).__name__}")
    data = bytes(data)
    minimum = _FIXED.size + _TRAILER
    if len(data) < minimum:
        raise MessageError(f"message length must be >= {minimum} bytes, got {len(data)} (truncated)")
    (magic, version, fingerprint, kind, dim, slot_bits, slots, count, width,
     bound_len) = _FIXED.unpack_from(data)
    if magic != MAGIC:
        raise MessageError(f"message magic must be {MAGIC!r}, got {magic!r}")
    if version != VERSION:
        raise MessageError(f"message version must be {VERSION}, got {version}")
    trailer = data[-_TRAILER:]
    # the hash reads the body in place (a memoryview): slicing it off would copy the whole batch first
    if check_trailer and not hmac.compare_digest(hashlib.sha256(memoryview(data)[:-_TRAILER]).digest(), trailer):
        raise MessageError("message SHA-256 trailer must match header and body, "
                           f"got a mismatch ({len(data)} bytes: corrupted or truncated)")
    if fingerprint.hex() != public_key.fingerprint:
        raise KeyMismatchError(f"message key fingerprint must be {public_key.fingerprint[:16]}..., "
                               f"got {fingerprint.hex()[:16]}... (encrypted under another key)")
    if kind not in (KIND_VECTOR, KIND_SYMMETRIC):
        raise MessageError(f"message kind must be 0 or 1, got {kind}")
    if width != public_key.ciphertext_bytes:
        raise MessageError(f"message ciphertext width must be {public_key.ciphertext_bytes}, got {width}")
    pos = _FIXED.size + bound_len
    if len(data) < pos + _CARRY.size + _TRAILER:
        raise MessageError(f"message length must be >= {pos + _CARRY.size + _TRAILER} bytes, got {len(data)}")
    bound = int.from_bytes(data[_FIXED.size:pos], "big")
    (carry_len,) = _CARRY.unpack_from(data, pos)
    pos += _CARRY.size
    carry = int.from_bytes(data[pos:pos + carry_len], "big")
    pos += carry_len
    expected = pos + 4 * count + width * count + _TRAILER
    if len(data) != expected:
        raise MessageError(f"message length must be {expected} bytes for {count} ciphertexts, got {len(data)}")
    layout = _checked_layout(slot_bits, slots, carry, public_key)
    if bound > layout.limit:
        raise MessageError(f"message bound must be <= {layout.limit}, got {bound}")
    chunks = struct.unpack_from(f">{count}I", data, pos)
    pos += 4 * count
    if chunks and not 1 <= min(chunks) <= max(chunks) <= slots:  # then name the first one out of range
        k, c = next((k, c) for k, c in enumerate(chunks) if not 1 <= c <= slots)
        raise MessageError(f"message chunk[{k}] must be in [1, {slots}], got {c}")
    ciphertexts = bk.bytes_to_ints(data[pos:pos + width * count], width)
    check_ciphertexts(ciphertexts, public_key, "message ciphertext", units=check_units)
    return kind, dim, layout, tuple(chunks), bound, ciphertexts


#: Layouts a batch header named that were valid for their key: (slot_bits, slots, carry_bound, n) -> layout.
_LAYOUTS: dict[tuple[int, int, int, int], SlotLayout] = {}
_MAX_LAYOUTS = 64


def _checked_layout(slot_bits: int, slots: int, carry: int, public_key: PublicKey) -> SlotLayout:
    """The header's :class:`SlotLayout`, checked against the key (MessageError if invalid) once per layout and key.

    Every share of a session names the same few layouts; a valid one is kept
    (an invalid one is never cached, so it raises every time).
    """
    key = (slot_bits, slots, carry, int(public_key.n))
    layout = _LAYOUTS.get(key)
    if layout is None:
        try:
            layout = SlotLayout(slot_bits=slot_bits, slots=slots, carry_bound=carry)
            layout.check_key(public_key)
        except ValueError as exc:
            raise MessageError(f"message layout is invalid: {exc}") from exc
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        _LAYOUTS[key] = layout
    return layout


def ciphertext_span(length: int, count: int, width: int) -> tuple[int, int]:
    """Where the ``count`` ciphertexts of an accepted batch of ``length`` bytes lie in it: ``(start, count * width)``.

    They are the last ``count * width`` bytes before the trailer.

    Examples
    --------
    >>> ciphertext_span(100, 2, 10)
    (48, 20)
    """
    start = length - _TRAILER - count * width
    if count < 0 or start < 0:
        raise MessageError(f"message must hold {count} ciphertexts of {width} bytes, got {length} bytes")
    return start, count * width


def ciphertext_bytes(data: bytes, count: int, width: int) -> list[bytes]:
    """The ``count`` ciphertexts of a batch :func:`decode_batch` accepted, each as its ``width`` wire bytes.

    Equal bytes are equal ciphertexts (fixed width, range checked).
    """
    start, size = ciphertext_span(len(data), count, width)
    return [data[i:i + width] for i in range(start, start + size, width)]


def check_ciphertexts(ciphertexts: Sequence[int], public_key: PublicKey, name: str, *, units: bool = True) -> None:
    """Every ciphertext in ``[1, n**2)`` and (``units``) a unit modulo n, else MessageError naming ``name[k]``."""
    n2 = public_key.nsquare
    for k, c in enumerate(ciphertexts):
        if not 0 < c < n2:
            got = "0" if c == 0 else ("a negative value" if c < 0 else ">= n**2")
            raise MessageError(f"{name}[{k}] must be in [1, n**2), got {got}")
    if units:
        check_units({name: ciphertexts}, public_key)


def check_units(groups: Mapping[str, Sequence[int]], public_key: PublicKey) -> None:
    """Every ciphertext of every group a unit modulo n, else MessageError naming ``name[k]``, the first non-unit.

    One batched test for all groups (:func:`dpdpca.crypto._gmp.first_non_unit`:
    a gcd with n of the product of up to 256 of them), so several small
    batches cost one gcd, not one each.
    """
    flat = [c for cts in groups.values() for c in cts]
    bad = bk.first_non_unit(flat, public_key.n)
    if bad is None:
        return
    for name, cts in groups.items():
        if bad < len(cts):
            raise MessageError(f"{name}[{bad}] must be a unit modulo n, got a non-unit")
        bad -= len(cts)
