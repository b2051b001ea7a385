"""SEAL's and TenSEAL's byte layouts of a BFV ciphertext, read and written without the binding.

The protocol moves BFV ciphertexts as their RNS residues (:class:`~dpdpca.crypto.lattice.BFVArray`'s
wire format): the proxy checks and sums owners' shares in numpy, and only the
release, built once, goes through the binding again.  This module is the one
place that knows the binding's bytes:

* **TenSEAL's BFV vector** (0.3.18) is a protobuf message: field 1, the
  vector's size (a varint inside a length-delimited field); field 2, a SEAL
  ``Ciphertext`` blob.
* **A SEAL blob** (SEAL 4.x, little-endian): a 16-byte header (magic
  ``0xA15E``, header size 16, version major and minor, ``compr_mode``: 0
  none, 1 zlib, 2 zstd; 2 reserved bytes; total size as ``uint64``), then,
  compressed as the header says, ``parms_id`` (4 ``uint64``),
  ``is_ntt_form`` (1 byte), ``size``, ``poly_modulus_degree``,
  ``coeff_modulus_size`` (``uint64`` each), ``scale`` (``double``),
  ``correction_factor`` (``uint64``) and the coefficients as a nested
  serialized array: its own 16-byte header, its length (``uint64``), then
  the ``uint64`` residues, polynomial by polynomial, prime by prime,
  coefficient by coefficient.

TenSEAL writes zstd (there is no argument to choose another compression);
reading it needs the ``zstandard`` package, which the ``[lattice]`` extra
installs.  What this module writes is uncompressed, which SEAL loads and
validates like any other blob (every residue below its prime, the
parameters' id, the form).
"""

from __future__ import annotations

import importlib
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdpca.errors import MessageError, MissingDependencyError

__all__ = ["SealCiphertext", "parse_seal_ciphertext", "parse_bfv_vector", "ciphertext_blob",
           "varint", "read_varint", "zstd_available", "require_extra"]

_SEAL_MAGIC = 0xA15E
_HEADER = struct.Struct("<HBBBBHQ")  # magic, header size, version major, minor, compr_mode, reserved, size
_META = struct.Struct("<4QBQQQdQ")  # parms_id, is_ntt_form, size, N, coeff_modulus_size, scale, correction
_COMPR_NAMES = {0: "none", 1: "zlib", 2: "zstd"}
_MAX_INFLATED = 1 << 28  # a payload may not inflate past 256 MiB (a 2-poly ciphertext of N = 32768 is 8 MiB)


def zstd_available() -> bool:
    """Whether ``zstandard`` (TenSEAL's compression; ``pip install 'dpdpca[lattice]'``) is installed."""
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


def require_extra(module: str, what: str) -> Any:
    """``module`` imported, or a one-line MissingDependencyError naming the ``[lattice]`` extra and ``what``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(f"scheme 'bfv' needs the optional extra: pip install 'dpdpca[lattice]' "
                                     f"({what}), got it missing") from None


def _seal_header(size: int) -> bytes:
    sealapi = require_extra("tenseal.sealapi", "TenSEAL")  # registers SEAL's types (Modulus) with the binding
    h = sealapi.Serialization.SEALHeader()  # the running SEAL's version
    return _HEADER.pack(_SEAL_MAGIC, _HEADER.size, int(h.version_major), int(h.version_minor), 0, 0, size)


def varint(x: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative integer."""
    out = bytearray()
    while True:
        low, x = x & 0x7F, x >> 7
        out.append(low | (0x80 if x else 0))
        if not x:
            return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """``(value, position after it)`` of the varint at ``pos``; MessageError if it runs out or past 64 bits."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise MessageError(f"BFV vector must be a TenSEAL message, got a malformed varint at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def ciphertext_blob(words: np.ndarray, parms_id: Any, vector_size: int) -> bytes:
    """A TenSEAL BFV vector message holding the SEAL ciphertext with residues ``words``, uncompressed.

    ``words``: ``uint64`` residues of shape ``(size, coeff_modulus_size, N)``
    (coefficient form), each below its prime (SEAL checks it when loading);
    ``parms_id``: the level's id; ``vector_size``: the values the vector holds.
    """
    size, k, n = words.shape
    body = struct.pack("<Q", words.size) + np.ascontiguousarray(words, dtype="<u8").tobytes()
    array = _seal_header(_HEADER.size + len(body)) + body
    meta = _META.pack(*[int(x) for x in parms_id], 0, size, n, k, 1.0, 1)
    seal = _seal_header(_HEADER.size + len(meta) + len(array)) + meta + array
    count = varint(vector_size)
    return b"\x0a" + varint(len(count)) + count + b"\x12" + varint(len(seal)) + seal


@dataclass(frozen=True)
class SealCiphertext:
    """A parsed SEAL ciphertext: metadata and residues of shape ``(size, coeff_modulus_size, N)``."""

    parms_id: tuple[int, ...]
    is_ntt_form: bool
    size: int
    ring_degree: int
    coeff_modulus_size: int
    scale: float
    correction_factor: int
    data: np.ndarray


def _unwrap(data: bytes, what: str) -> bytes:
    """The payload after a SEAL header, decompressed (none, zlib or zstd), at most :data:`_MAX_INFLATED` bytes."""
    if len(data) < _HEADER.size:
        raise MessageError(f"{what} must start with a 16-byte SEAL header, got {len(data)} bytes")
    magic, hsize, _major, _minor, compr, _res, size = _HEADER.unpack_from(data)
    if magic != _SEAL_MAGIC or hsize != _HEADER.size:
        raise MessageError(f"{what} must start with SEAL magic 0xA15E and header size 16, got {magic:#06x} and {hsize}")
    if size != len(data):
        raise MessageError(f"{what} must be {size} bytes as its header says, got {len(data)}")
    body = data[_HEADER.size:]
    if compr == 0:
        return body
    if compr == 1:
        inflate = zlib.decompressobj()
        try:
            out = inflate.decompress(body, _MAX_INFLATED)
        except zlib.error:
            raise MessageError(f"{what} must be valid zlib data, got a corrupt stream") from None
        if inflate.unconsumed_tail or not inflate.eof:
            raise MessageError(f"{what} must inflate to at most {_MAX_INFLATED} bytes and end, got more or a cut stream")
        return out
    if compr == 2:
        zstandard = require_extra("zstandard", "zstandard, to read TenSEAL's ciphertexts")
        declared = zstandard.frame_content_size(body) if len(body) >= 18 else -1
        if not 0 <= declared <= _MAX_INFLATED:  # SEAL's frames state their size: no unbounded inflation
            raise MessageError(f"{what} must be one zstd frame stating a size of at most {_MAX_INFLATED} bytes, "
                               f"got {'none' if declared < 0 else declared}")
        inflate = zstandard.ZstdDecompressor().decompressobj()
        try:
            out = inflate.decompress(body)
        except zstandard.ZstdError:
            raise MessageError(f"{what} must be valid zstd data, got a corrupt stream") from None
        if not inflate.eof or inflate.unused_data or len(out) != declared:
            raise MessageError(f"{what} must be exactly one whole zstd frame, got a cut stream or trailing bytes")
        return bytes(out)
    raise MessageError(f"{what} compression must be none, zlib or zstd, got {_COMPR_NAMES.get(compr, compr)}")


def parse_seal_ciphertext(data: bytes) -> SealCiphertext:
    """Parse a serialized SEAL ciphertext (compression none, zlib or zstd).

    Raises
    ------
    MessageError
        Not a SEAL ciphertext, truncated, or with trailing bytes (one line).
    MissingDependencyError
        zstd-compressed and ``zstandard`` is not installed.
    """
    what = "SEAL ciphertext"
    body = _unwrap(bytes(data), what)
    if len(body) < _META.size:
        raise MessageError(f"{what} must hold {_META.size} bytes of metadata, got {len(body)}")
    meta = _META.unpack_from(body)
    parms_id, ntt, size, n, k, scale, corr = meta[:4], meta[4], meta[5], meta[6], meta[7], meta[8], meta[9]
    if ntt > 1 or not 1 <= size <= 16 or n < 1 or n & (n - 1) or n > 1 << 17 or not 1 <= k <= 64:
        raise MessageError(f"{what} must have size 1..16, a power-of-two degree and 1..64 primes, got size {size}, "
                           f"degree {n}, {k} primes")
    array = _unwrap(body[_META.size:], f"{what} data")
    count = size * k * n
    if len(array) != 8 + 8 * count or struct.unpack_from("<Q", array)[0] != count:
        raise MessageError(f"{what} data must hold {count} words, got {len(array)} bytes")
    words = np.frombuffer(array, dtype="<u8", offset=8).reshape(size, k, n).astype(np.uint64)
    return SealCiphertext(tuple(parms_id), bool(ntt), size, n, k, scale, corr, words)


def parse_bfv_vector(data: bytes) -> tuple[int, SealCiphertext]:
    """``(vector size, ciphertext)`` of a TenSEAL BFV vector message."""
    data = bytes(data)
    pos, fields = 0, {}
    while pos < len(data):
        key, pos = read_varint(data, pos)
        if key & 7 != 2 or key >> 3 not in (1, 2):
            raise MessageError(f"BFV vector must have length-delimited fields 1 and 2, got key {key}")
        length, pos = read_varint(data, pos)
        if pos + length > len(data):
            raise MessageError(f"BFV vector field {key >> 3} must fit the message, got {length} bytes past its end")
        fields[key >> 3] = data[pos:pos + length]
        pos += length
    if set(fields) != {1, 2}:
        raise MessageError(f"BFV vector must have fields 1 (size) and 2 (ciphertext), got {sorted(fields)}")
    size, end = read_varint(fields[1], 0)
    if end != len(fields[1]):
        raise MessageError("BFV vector size field must be one varint, got trailing bytes")
    return size, parse_seal_ciphertext(fields[2])
