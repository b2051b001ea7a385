"""Packing many signed integer slots into one Paillier plaintext.

A chunk of slots ``s_0, ..., s_{k-1}`` becomes the integer
``P = sum_j s_j * B**j`` with ``B = 2**slot_bits`` and *balanced* digits
``|s_j| <= 2**(slot_bits - 1) - 1``; the plaintext is ``P mod n``.  Because
the digits are signed, addition of packed integers and multiplication by a
plaintext integer act slot-wise with no offsets to correct, as long as no
slot leaves its range -- which the bound tracking of the layers above
guarantees *before* anything is computed.  With ``slots * slot_bits <=
bits(n) - 2`` every packed ``|P| < n / 2``, so the centred residue of a
decryption recovers ``P`` exactly and centred remainders peel the slots.

Carrying ("wide") layouts
-------------------------
A layout may declare a ``carry_bound`` C larger than ``max_abs``: slots of
*intermediate* values may then reach ``|s_j| <= C`` and spill into their
neighbours, while the *packed integer* still never wraps modulo n.  The slots
are sized for the final value only (``|s_j| <= max_abs``), which the caller
reaches by subtracting a known packed plaintext before decrypting.

Claim.  Let ``w = slot_bits``, ``s = slots``, ``A = 2**(w-1) - 1``,
``G = sum_{j<s} 2**(w j) = (2**(w s) - 1) / (2**w - 1)``.  If
``s w <= bits(n) - 2`` and ``2 C (2**(w s) - 1) < n (2**w - 1)`` (that is,
``C G < n / 2``), then

1. every packed integer ``P = sum_{j<c} s_j 2**(w j)`` (``c <= s``) with
   ``|s_j| <= max(A, C)`` satisfies ``|P| < n / 2``, so the centred residue
   of ``P mod n`` is ``P`` itself: nothing wraps;
2. packing is Z-linear (``P(x) + P(y) = P(x + y)``, ``k P(x) = P(k x)``), so
   a chain of homomorphic sums, scalar products and plaintext additions
   whose every result has declared slot bound ``<= max(A, C)`` decrypts to
   exactly ``P(true result)`` -- intermediate slots may overflow ``A``;
3. if moreover the result's slots satisfy ``|s_j| <= A``, the balanced
   digits of ``P`` in base ``2**w`` are unique, so peeling them returns the
   slots exactly; and a one-slot ciphertext (``c = 1``) decrypts exactly
   whenever ``|s_0| <= C``, since then ``P = s_0``.

Proof.  (1) ``|P| <= max(A, C) G``.  For A: ``A G < 2**(w-1) 2**(w(s-1))
(2**w / (2**w - 1)) (1 - 2**(-w s)) <= 2**(w s - 1) <= 2**(bits(n) - 3)
< n / 2`` as ``n >= 2**(bits(n) - 1)``; for C it is the second hypothesis.
(2) Decryption returns ``P mod n`` for the packed sum of the operands'
integers, which by linearity equals ``P(result)``; by (1) applied to the
result's bound, its centred residue is ``P(result)``.  (3) Two balanced
representations with digits in ``[-A, A]`` of the same integer agree digit
by digit: the lowest differing digits would differ by a non-zero multiple
of ``2**w`` while ``2 A < 2**w``.  QED.

The hypotheses are checked against the actual n by :meth:`SlotLayout.check_key`
and every operation checks its result's bound against :attr:`SlotLayout.limit`
*before* computing; decryption refuses a multi-slot array whose bound exceeds
``A`` (:meth:`SlotLayout.check_decryptable`).  What the crypto layer cannot
check is a *declared* bound of a difference (``a - b`` where the caller knows
an algebraic identity): it is the caller's proof obligation, like every
declared bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpdpca._validation import _fmt, check_int
from dpdpca.errors import OverflowRiskError

if TYPE_CHECKING:
    from dpdpca.crypto.keys import PublicKey

__all__ = ["SlotLayout", "pack_slots", "unpack_slots", "pack_many", "unpack_many", "centred"]


@dataclass(frozen=True)
class SlotLayout:
    """Slot width and number of slots per plaintext.

    Parameters
    ----------
    slot_bits : int
        Bits per slot, >= 2; the base is ``B = 2**slot_bits``.
    slots : int
        Slots per plaintext, >= 1.
    carry_bound : int
        0 (the default, a plain layout): every value, intermediate or final,
        has ``|slot| <= max_abs``.  Otherwise a carrying layout: intermediate
        values may have ``|slot| <= carry_bound`` (see the module docstring
        for the bound that keeps the packed integer below ``n / 2``); only
        values back within ``max_abs`` (or one-slot ciphertexts) decrypt.

    Attributes
    ----------
    max_abs : int
        Largest ``|slot|`` of a decryptable value: ``2**(slot_bits - 1) - 1``.
    limit : int
        Largest declared ``|slot|`` of any value: ``max(max_abs, carry_bound)``.

    Examples
    --------
    >>> SlotLayout(slot_bits=8, slots=3).max_abs
    127
    """

    slot_bits: int
    slots: int
    carry_bound: int = 0

    def __post_init__(self) -> None:
        check_int("slot_bits", self.slot_bits, minimum=2)
        check_int("slots", self.slots, minimum=1)
        check_int("carry_bound", self.carry_bound, minimum=0)
        object.__setattr__(self, "slot_bits", int(self.slot_bits))
        object.__setattr__(self, "slots", int(self.slots))
        object.__setattr__(self, "carry_bound", int(self.carry_bound))

    @property
    def max_abs(self) -> int:
        return (1 << (self.slot_bits - 1)) - 1

    @property
    def limit(self) -> int:
        return max(self.max_abs, self.carry_bound)

    @property
    def carries(self) -> bool:
        """True if intermediate slots may exceed :attr:`max_abs`."""
        return self.carry_bound > self.max_abs

    def _geometric(self) -> int:
        """``G = sum_{j < slots} 2**(slot_bits j)``."""
        return ((1 << (self.slot_bits * self.slots)) - 1) // ((1 << self.slot_bits) - 1)

    @property
    def base(self) -> int:
        return 1 << self.slot_bits

    @classmethod
    def for_bound(cls, public_key: PublicKey, max_abs: int) -> SlotLayout:
        """Narrowest slots holding ``|value| <= max_abs``, as many as ``n`` allows.

        Raises
        ------
        OverflowRiskError
            Not even one slot of ``max_abs.bit_length() + 1`` bits fits
            ``bits(n) - 2``.
        """
        max_abs = check_int("max_abs", max_abs, minimum=1)
        slot_bits = max(2, max_abs.bit_length() + 1)
        usable = public_key.bits - 2
        if slot_bits > usable:
            raise OverflowRiskError(
                f"max_abs must fit one slot of at most bits(n) - 2 = {usable} bits, "
                f"got a {slot_bits}-bit slot for max_abs {_fmt(max_abs)}")
        return cls(slot_bits=slot_bits, slots=usable // slot_bits)

    @classmethod
    def for_final_bound(cls, public_key: PublicKey, final_abs: int, carry_abs: int) -> SlotLayout:
        """A carrying layout: slots sized for ``final_abs``, intermediates up to ``carry_abs``.

        ``slot_bits = bits(final_abs) + 1``; ``slots`` is the largest count with
        ``slots * slot_bits <= bits(n) - 2`` and
        ``2 carry_abs (2**(slots slot_bits) - 1) < 2**(bits(n) - 1) (2**slot_bits - 1)``
        (the module docstring's hypotheses with the smallest n of the key's
        size, so the layout depends on the key size only).

        Raises
        ------
        OverflowRiskError
            Not even one slot fits.
        """
        final_abs = check_int("final_abs", final_abs, minimum=1)
        carry_abs = check_int("carry_abs", carry_abs, minimum=0)
        slot_bits = max(2, final_abs.bit_length() + 1)
        usable = public_key.bits - 2
        if slot_bits > usable:
            raise OverflowRiskError(
                f"final_abs must fit one slot of at most bits(n) - 2 = {usable} bits, "
                f"got a {slot_bits}-bit slot for final_abs {_fmt(final_abs)}")
        n_min = 1 << (public_key.bits - 1)
        slots = usable // slot_bits
        while slots >= 1 and 2 * carry_abs * ((1 << (slots * slot_bits)) - 1) >= n_min * ((1 << slot_bits) - 1):
            slots -= 1
        if slots < 1:
            raise OverflowRiskError(
                f"carry_abs must fit one slot below n/2 for a {public_key.bits}-bit key, got {_fmt(carry_abs)} "
                f"({carry_abs.bit_length()} bits) with {slot_bits}-bit slots")
        return cls(slot_bits=slot_bits, slots=slots, carry_bound=carry_abs)

    def check_key(self, public_key: PublicKey) -> None:
        """Raise :class:`OverflowRiskError` unless the layout fits the key (module docstring).

        ``slots * slot_bits <= bits(n) - 2``, and for a carrying layout
        ``2 carry_bound (2**(slots slot_bits) - 1) < n (2**slot_bits - 1)``.
        """
        if self.slots * self.slot_bits > public_key.bits - 2:
            raise OverflowRiskError(
                f"layout slots * slot_bits must be <= bits(n) - 2 = {public_key.bits - 2}, "
                f"got {self.slots} * {self.slot_bits} = {self.slots * self.slot_bits}")
        if self.carries and 2 * self.carry_bound * self._geometric() >= int(public_key.n):
            raise OverflowRiskError(
                f"layout carry_bound * sum_j 2**(slot_bits j) must be < n / 2 (no wrap mod n), got carry_bound "
                f"{self.carry_bound} ({self.carry_bound.bit_length()} bits) with {self.slots} slots of "
                f"{self.slot_bits} bits and a {public_key.bits}-bit n")

    def check_bound(self, bound: int, operation: str) -> None:
        """Raise :class:`OverflowRiskError` if ``bound`` exceeds :attr:`limit`."""
        if bound > self.limit:
            what = "carry_bound" if self.carries else f"slot_bits={self.slot_bits}"
            raise OverflowRiskError(
                f"{operation}: slot bound must be <= {self.limit} ({what}; beyond it the packed "
                f"value could wrap mod n), got {bound}")

    def check_decryptable(self, bound: int, chunks: Sequence[int], operation: str = "decrypt") -> None:
        """Raise :class:`OverflowRiskError` unless slots of ``|s| <= bound`` can be unpacked.

        Multi-slot ciphertexts need ``bound <= max_abs``; one-slot ciphertexts
        only ``bound <= limit``.
        """
        if bound > self.max_abs and any(c != 1 for c in chunks):
            raise OverflowRiskError(
                f"{operation}: slot bound must be <= {self.max_abs} (slot_bits={self.slot_bits}) to unpack "
                f"several slots per ciphertext, got {bound} (subtract the known part first)")
        self.check_bound(bound, operation)


def pack_slots(values: Sequence[int], slot_bits: int) -> int:
    """``sum_j values[j] * 2**(slot_bits * j)`` (signed; range checks are the caller's)."""
    packed = 0
    for v in reversed(values):
        packed = (packed << slot_bits) + int(v)
    return packed


def centred(m: int, n: int) -> int:
    """The representative of ``m mod n`` in ``(-n/2, n/2]``."""
    m = int(m) % int(n)
    return m - int(n) if 2 * m > n else m


def unpack_slots(packed: int, count: int, slot_bits: int) -> list[int] | None:
    """Peel ``count`` balanced digits off the signed integer ``packed``.

    Returns ``None`` if anything is left over (the plaintext did not fit the
    layout), so the caller can raise with context.
    """
    base = 1 << slot_bits
    half = base >> 1
    mask = base - 1
    out = []
    p = int(packed)
    for _ in range(count):
        s = p & mask
        if s >= half:
            s -= base
        out.append(s)
        p = (p - s) >> slot_bits
    return out if p == 0 else None


#: Widest slot the numpy paths handle (digits and values in int64).
_NUMPY_SLOT_BITS = 62
#: Ciphertexts whose digits are converted at once (bounds the bit matrices to a few tens of MiB).
_BLOCK = 2048


def _chunk_index(chunks: Sequence[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Row and column of every value when ``chunks`` are laid out as rows of a matrix."""
    counts = np.asarray(chunks, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    row = np.repeat(np.arange(len(counts)), counts)
    col = np.arange(int(counts.sum())) - np.repeat(starts, counts)
    return row, col, int(counts.max(initial=0))


def _offsets(chunks: Sequence[int], slot_bits: int) -> dict[int, int]:
    """``H_c = sum_{j<c} 2**(slot_bits - 1) 2**(slot_bits j)`` for each chunk size ``c`` used."""
    half = 1 << (slot_bits - 1)
    return {c: half * (((1 << (slot_bits * c)) - 1) // ((1 << slot_bits) - 1)) for c in set(chunks)}


def _digits_to_bytes(digits: np.ndarray, slot_bits: int) -> np.ndarray:
    """Rows of non-negative ``slot_bits``-bit digits (uint64, least significant first) as little-endian bytes.

    Digit ``j`` is or-ed into the 64-bit words that hold bits ``j w .. j w + w - 1``
    (two at most, as ``w <= 62``): one shift per digit column, no bit matrix.
    """
    k, w = digits.shape
    nbytes = (w * slot_bits + 7) // 8
    words = np.zeros((k, nbytes // 8 + 2), dtype=np.uint64)
    cols = np.ascontiguousarray(digits, dtype=np.uint64)
    for j in range(w):
        q, r = divmod(j * slot_bits, 64)
        words[:, q] |= cols[:, j] << np.uint64(r)
        if r + slot_bits > 64:
            words[:, q + 1] |= cols[:, j] >> np.uint64(64 - r)
    return np.ascontiguousarray(words.astype("<u8").view(np.uint8)[:, :nbytes])


def _bytes_to_digits(raw: np.ndarray, width: int, slot_bits: int) -> np.ndarray:
    """Inverse of :func:`_digits_to_bytes`: ``width`` digits per row of little-endian bytes, as int64."""
    k = raw.shape[0]
    bits = np.unpackbits(raw, axis=1, bitorder="little")[:, :width * slot_bits].reshape(k, width, slot_bits)
    bits = np.pad(bits, ((0, 0), (0, 0), (0, 64 - slot_bits)))
    return np.packbits(bits, axis=2, bitorder="little").view("<u8").reshape(k, width).astype(np.int64)


def pack_many(values: Sequence[int], chunks: Sequence[int], slot_bits: int) -> list[int]:
    """:func:`pack_slots` of each consecutive chunk of ``values`` (``chunks[k]`` values each).

    With slots of at most 62 bits and every ``|value| < 2**(slot_bits - 1)``
    the digits are made in numpy: the packed integer of a chunk is
    ``sum_j (s_j + 2**(w-1)) 2**(w j) - H_c``, whose shifted digits are
    non-negative and read as one little-endian bit string; otherwise
    (wider slots, or a carrying layout's intermediate values) the Python
    loop of :func:`pack_slots`.  Same integers either way.
    """
    chunks = list(chunks)
    if slot_bits <= _NUMPY_SLOT_BITS and len(values):
        try:
            arr = np.asarray(values, dtype=np.int64)
        except (OverflowError, TypeError, ValueError):
            arr = None
        half = 1 << (slot_bits - 1)
        if (arr is not None and arr.ndim == 1 and arr.size == sum(chunks)
                and -half < int(arr.min()) and int(arr.max()) < half):
            offsets = _offsets(chunks, slot_bits)
            out: list[int] = []
            pos = 0
            for start in range(0, len(chunks), _BLOCK):
                part = chunks[start:start + _BLOCK]
                row, col, width = _chunk_index(part)
                digits = np.zeros((len(part), width), dtype=np.uint64)
                digits[row, col] = (arr[pos:pos + row.size] + half).astype(np.uint64)
                pos += row.size
                raw = _digits_to_bytes(digits, slot_bits)
                # slices of one bytes object: int.from_bytes of a list of byte values is ten times slower
                blob, step = raw.tobytes(), raw.shape[1]
                out.extend(int.from_bytes(blob[i * step:(i + 1) * step], "little") - offsets[c]
                           for i, c in enumerate(part))
            return out
    if isinstance(values, np.ndarray):  # Python ints for the exact loop (int64 arithmetic would wrap)
        values = values.tolist()
    out, pos = [], 0
    for c in chunks:
        out.append(pack_slots(values[pos:pos + c], slot_bits))
        pos += c
    return out


def unpack_many(packed: Sequence[int], chunks: Sequence[int], slot_bits: int, bound: int
                ) -> tuple[list[int], int | None]:
    """:func:`unpack_slots` of each signed integer, and the index of the first that fails (or None).

    ``packed[k]`` holds ``chunks[k]`` balanced slots; it fails if anything is
    left over or a slot exceeds ``bound`` in absolute value (the values
    returned are then those before it).  With slots of at most 62 bits the
    digits come out in numpy from ``packed[k] + H_c``, whose digits lie in
    ``[0, 2**w)`` exactly when the balanced ones lie in ``[-2**(w-1), 2**(w-1))``;
    otherwise the Python loop.  Same result either way.
    """
    chunks = list(chunks)
    # A one-slot ciphertext holds any |value| <= bound: the numpy reading needs bound < 2**(w-1).
    if slot_bits <= _NUMPY_SLOT_BITS and len(packed) and max(chunks) > 1 and bound < (1 << (slot_bits - 1)):
        offsets = _offsets(chunks, slot_bits)
        shifted = [int(p) + offsets[c] for p, c in zip(packed, chunks)]
        bad = next((k for k, (t, c) in enumerate(zip(shifted, chunks)) if t < 0 or t >> (c * slot_bits)), None)
        good = len(packed) if bad is None else bad
        half = 1 << (slot_bits - 1)
        out: list[int] = []
        for start in range(0, good, _BLOCK):
            part = chunks[start:min(good, start + _BLOCK)]
            width = max(part)
            nbytes = (width * slot_bits + 7) // 8
            blob = b"".join(t.to_bytes(nbytes, "little") for t in shifted[start:start + len(part)])
            raw = np.frombuffer(blob, dtype=np.uint8).reshape(len(part), nbytes)
            row, col, _w = _chunk_index(part)
            flat = _bytes_to_digits(raw, width, slot_bits)[row, col] - half
            over = np.flatnonzero(np.abs(flat) > bound)
            if over.size:
                first = int(row[over[0]])
                out.extend(flat[row < first].tolist())
                return out, start + first
            out.extend(flat.tolist())
        return out, bad
    out = []
    for k, (p, c) in enumerate(zip(packed, chunks)):
        slots = [int(p)] if c == 1 else unpack_slots(p, c, slot_bits)
        if slots is None or any(abs(s) > bound for s in slots):
            return out, k
        out.extend(slots)
    return out, None
