"""Fixed-point quantization of rows and the owner's exact scatter share.

Rows with L2 norm <= 1 are scaled by ``2**frac_bits`` and truncated *toward
zero*.  Truncation never increases ``|x_i|``, so the integer row keeps
``sum_i x_int_i**2 <= 2**(2f)`` and the DP sensitivity analysis, which assumes
``||x|| <= 1``, holds for the integer rows exactly.  The share
``R = sum x_int x_int^T``, ``v = sum x_int`` is then computed exactly in
integers (Wang & Chang, eq. 8).
"""

from __future__ import annotations

import numpy as np

from dpdpca._validation import check_int
from dpdpca.errors import DataError

__all__ = ["quantize_rows", "exact_scatter_share", "exact_scatter_upper"]

_FLOAT_EXACT = 1 << 53  # every integer of magnitude < 2**53 is a float64
#: Multiply-adds below which exact_scatter_share uses an int64 product instead of float64 BLAS.
_SMALL_INT_WORK = 1 << 24


def quantize_rows(X: np.ndarray, frac_bits: int) -> np.ndarray:
    """Scale rows of norm <= 1 by ``2**frac_bits`` and truncate toward zero.

    Parameters
    ----------
    X : ndarray of shape (n_rows, d)
        Finite rows with L2 norm <= 1 (already clipped or checked).
    frac_bits : int in [0, 26]
        Fraction bits ``f`` of the fixed-point scale.

    Returns
    -------
    ndarray of int64, shape (n_rows, d)
        ``x_int`` with ``sum_i x_int_i**2 <= 2**(2f)`` for every row, checked
        exactly.  A row whose floating-point norm rounded just above 1 is
        brought inside the bound by moving its largest coordinate one unit
        toward zero at a time (a public, row-local rule).

    Raises
    ------
    DataError
        If a row has norm > 1 by more than floating-point rounding.
    """
    f = check_int("frac_bits", frac_bits, minimum=0, maximum=26)
    scale = float(1 << f)
    Xq = np.trunc(np.asarray(X, dtype=np.float64) * scale).astype(np.int64)
    limit = 1 << (2 * f)
    sq = _row_square_norms(Xq)
    bad = np.flatnonzero(sq > limit)
    for r in bad:
        # Float rounding of a clipped row can put ||x||^2 at 1 + a few ulp.
        row = Xq[r]
        if int(sq[r]) - limit > max(limit >> 20, 1):
            raise DataError(f"rows must have L2 norm <= 1, got row {int(r)} with norm^2 "
                            f"{int(sq[r]) / limit!r} after quantization")
        while _row_sq(row) > limit:
            j = int(np.argmax(np.abs(row)))
            row[j] -= np.sign(row[j])
    return Xq


def _row_sq(row: np.ndarray) -> int:
    return sum(int(x) * int(x) for x in row)


def _row_square_norms(Xq: np.ndarray) -> np.ndarray:
    """Exact sum of squares per row (int64 when it cannot overflow)."""
    if Xq.size == 0:
        return np.zeros(Xq.shape[0], dtype=np.int64)
    m = int(np.abs(Xq).max())
    if Xq.shape[1] * m * m < (1 << 63):
        return np.einsum("ij,ij->i", Xq, Xq)
    return np.array([_row_sq(row) for row in Xq], dtype=object)


def exact_scatter_share(Xq: np.ndarray, frac_bits: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact ``R = sum x x^T`` (full, symmetric), ``v = sum x`` and ``N``.

    float64 BLAS is exact on integers while every partial sum stays below
    ``2**53``; each product is at most ``||x||^2 <= 2**(2f)``, so rows are
    processed in blocks of ``2**(53 - 2f) - 1`` and blocks are summed exactly
    (in int64 while ``N 2**(2f) < 2**62`` bounds every entry, else as Python
    integers).  Small shares (``n d**2 <= 2**24`` multiply-adds) use an exact
    int64 product instead, which keeps the BLAS thread pool asleep.

    Parameters
    ----------
    Xq : ndarray of int64, shape (n_rows, d)
        Quantized rows from :func:`quantize_rows`.
    frac_bits : int
        The ``f`` the rows were quantized with.

    Returns
    -------
    R : ndarray of object (Python int), shape (d, d)
    v : ndarray of object (Python int), shape (d,)
    n : int

    References
    ----------
    Wang & Chang, "Differentially private distributed PCA...", eq. (8).
    """
    R, v, n = _scatter(Xq, frac_bits)
    return R.astype(object), v.astype(object), n


def exact_scatter_upper(Xq: np.ndarray, frac_bits: int) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`exact_scatter_share` as an owner sends it: R's row-major upper triangle (``i <= j``), ``v``, ``N``.

    The same exact integers, as int64 arrays when they fit (every entry of R
    and v is at most ``N 2**(2f)`` in magnitude, checked before computing: at
    the default ``f = 16`` up to ``2**30`` rows), else object arrays of Python
    integers: an encryption reads int64 without a Python integer per value.
    """
    R, v, n = _scatter(Xq, frac_bits)
    return R[np.triu_indices(R.shape[0])], v, n


def _scatter(Xq: np.ndarray, frac_bits: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact R (full) and v: int64 when ``N 2**(2f) < 2**62`` (no entry can reach it), else object."""
    f = check_int("frac_bits", frac_bits, minimum=0, maximum=26)
    n, d = Xq.shape
    # |R_ij| <= sum |x_i x_j| <= sum ||x||^2 <= n 2**(2f), and |v_j| <= n 2**f: int64 holds them (with room to
    # add the blocks) whenever n 2**(2f) < 2**62
    fits = n < (1 << (62 - 2 * f))
    v = (Xq.sum(axis=0, dtype=np.int64) if n < (1 << (62 - f))
         else np.array([sum(int(x) for x in col) for col in Xq.T], dtype=object))
    if n * d * d <= _SMALL_INT_WORK and fits:
        # A small share: int64 products are exact (|x_i x_j| <= 2**(2f), n of them sum below 2**62)
        # and numpy's integer matmul does not wake the BLAS thread pool, whose idle workers would
        # otherwise spin beside the encryption that follows.
        Xi = Xq.astype(np.int64)
        return Xi.T @ Xi, v, int(n)
    block = max(1, (_FLOAT_EXACT >> (2 * f)) - 1)
    R: np.ndarray = np.zeros((d, d), dtype=np.int64 if fits else object)
    for start in range(0, n, block):
        Xb = Xq[start:start + block].astype(np.float64)
        part = np.rint(Xb.T @ Xb).astype(np.int64)  # every partial sum below 2**53: exact
        R = R + (part if fits else part.astype(object))
    return R, v, int(n)
