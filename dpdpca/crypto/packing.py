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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpdpca._validation import check_int
from dpdpca.errors import OverflowRiskError

if TYPE_CHECKING:
    from dpdpca.crypto.keys import PublicKey

__all__ = ["SlotLayout", "pack_slots", "unpack_slots", "centred"]


@dataclass(frozen=True)
class SlotLayout:
    """Slot width and number of slots per plaintext.

    Parameters
    ----------
    slot_bits : int
        Bits per slot, >= 2; the base is ``B = 2**slot_bits``.
    slots : int
        Slots per plaintext, >= 1.

    Attributes
    ----------
    max_abs : int
        Largest allowed ``|slot|``: ``2**(slot_bits - 1) - 1``.

    Examples
    --------
    >>> SlotLayout(slot_bits=8, slots=3).max_abs
    127
    """

    slot_bits: int
    slots: int

    def __post_init__(self) -> None:
        check_int("slot_bits", self.slot_bits, minimum=2)
        check_int("slots", self.slots, minimum=1)
        object.__setattr__(self, "slot_bits", int(self.slot_bits))
        object.__setattr__(self, "slots", int(self.slots))

    @property
    def max_abs(self) -> int:
        return (1 << (self.slot_bits - 1)) - 1

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
                f"got a {slot_bits}-bit slot for max_abs {max_abs}")
        return cls(slot_bits=slot_bits, slots=usable // slot_bits)

    def check_key(self, public_key: PublicKey) -> None:
        """Raise :class:`OverflowRiskError` unless ``slots * slot_bits <= bits(n) - 2``."""
        if self.slots * self.slot_bits > public_key.bits - 2:
            raise OverflowRiskError(
                f"layout slots * slot_bits must be <= bits(n) - 2 = {public_key.bits - 2}, "
                f"got {self.slots} * {self.slot_bits} = {self.slots * self.slot_bits}")

    def check_bound(self, bound: int, operation: str) -> None:
        """Raise :class:`OverflowRiskError` if ``bound`` exceeds :attr:`max_abs`."""
        if bound > self.max_abs:
            raise OverflowRiskError(
                f"{operation}: slot bound must be <= {self.max_abs} "
                f"(slot_bits={self.slot_bits}), got {bound}")


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
