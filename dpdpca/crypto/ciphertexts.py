"""Batch operations on raw ciphertext integers, for the parties that aggregate them.

The proxy's intake multiplies the owners' ciphertexts position by position,
divides a refused share back out of a product, checks that every ciphertext
is a unit, and moves ciphertexts between processes as fixed-width bytes.
These are the public names for those steps; they work on lists of integers
(``gmpy2.mpz`` in memory, any ``int`` accepted) modulo a given modulus and
know nothing of keys, slots or bounds.  The big-number backend stays private
to :mod:`dpdpca.crypto`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dpdpca.crypto import _gmp

__all__ = [
    "product_mod",
    "divide_out",
    "first_non_unit",
    "to_fixed_bytes",
    "from_fixed_bytes",
    "random_unit",
    "random_below",
    "power_mod",
]


def product_mod(rows: Sequence[Sequence[Any]], modulus: int) -> list[Any]:
    """Position-wise product of equally long lists of integers modulo ``modulus``.

    The aggregation kernel (``E[a]·E[b] = E[a + b]`` modulo n**2 for Paillier
    ciphertexts): one ``a * b % modulus`` per multiplication.

    Examples
    --------
    >>> [int(c) for c in product_mod([[2, 3], [4, 5]], 7)]
    [1, 1]
    """
    if not rows:
        raise ValueError("rows must hold at least one list of integers, got none")
    return _gmp.columnwise_prod_mod(rows, modulus)


def divide_out(values: Sequence[Any], divisors: Iterable[Any], modulus: int) -> list[Any]:
    """``values[i] · divisors[i]**-1 mod modulus``: take factors back out of a product.

    The proxy divides a share it refused after multiplying it in (cheaper
    than multiplying the others again).  ``divisors`` is consumed one per
    value, so one iterator can run over several sections in order.

    Raises
    ------
    ZeroDivisionError
        If a divisor is not a unit modulo ``modulus``.
    ValueError
        If ``divisors`` runs out before ``values``.

    Examples
    --------
    >>> [int(c) for c in divide_out([6, 1], [2, 3], 7)]
    [3, 5]
    """
    m = _gmp.mpz(modulus)
    it = iter(divisors)
    out = []
    for v in values:
        try:
            d = next(it)
        except StopIteration:
            raise ValueError(f"divisors must be as many as values, got fewer than {len(values)}") from None
        out.append(v * _gmp.invert(d, m) % m)
    return out


def first_non_unit(values: Sequence[Any], n: int) -> int | None:
    """Index of the first value sharing a factor with ``n``, or ``None`` (all are units).

    A Paillier ciphertext must be a unit modulo n; one gcd per block of
    values, not one per value.

    Examples
    --------
    >>> first_non_unit([2, 4, 6], 15), first_non_unit([2, 4], 15)
    (2, None)
    """
    return _gmp.first_non_unit(values, n)


def to_fixed_bytes(values: Iterable[Any], width: int) -> bytes:
    """Non-negative integers as concatenated big-endian fields of ``width`` bytes.

    Raises ``OverflowError`` for a negative or too wide value (never truncates).

    Examples
    --------
    >>> to_fixed_bytes([1, 258], 2).hex()
    '00010102'
    """
    return _gmp.ints_to_bytes(values, width)


def from_fixed_bytes(blob: bytes, width: int) -> list[Any]:
    """Inverse of :func:`to_fixed_bytes`.

    Raises
    ------
    ValueError
        If ``len(blob)`` is not a multiple of ``width``.

    Examples
    --------
    >>> [int(v) for v in from_fixed_bytes(bytes.fromhex('00010102'), 2)]
    [1, 258]
    """
    if width < 1 or len(blob) % width:
        raise ValueError(f"blob must be a whole number of {width}-byte fields, got {len(blob)} bytes")
    return _gmp.bytes_to_ints(blob, width)


def random_unit(n: int) -> Any:
    """A uniform element of Z*_n from :mod:`secrets` (e.g. a stand-in ciphertext in a benchmark)."""
    return _gmp.random_unit(n)


def random_below(upper: int) -> Any:
    """A uniform integer in ``[0, upper)`` from :mod:`secrets`."""
    return _gmp.random_below(upper)


def power_mod(base: int, exponent: int, modulus: int) -> Any:
    """``base**exponent mod modulus`` (a negative exponent uses the inverse)."""
    return _gmp.powmod(base, exponent, modulus)
