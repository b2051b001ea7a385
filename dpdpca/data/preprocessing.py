"""Centring, scaling, clipping and partitioning into sites.

Which steps are differentially private matters:

* :func:`clip_rows` is a **public, data-independent** rule
  ``x <- x * min(1, max_norm / ||x||)``: each row is changed using only that
  row and a public constant, so it composes with any DP mechanism downstream.
* :func:`center` and :func:`scale_by_max_norm` **read the whole dataset**
  (its mean, its largest row norm).  They reproduce the Imtiaz-Sarwate
  experiments ("We note that this preprocessing step is not differentially
  private") and are **not DP**: the released subspace then depends on every
  row through the mean and the maximum norm as well as through the noisy
  second moment.  Use them to reproduce the papers, not in production.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any

import numpy as np

from dpdpca._validation import check_data_matrix, check_int, check_positive, param_error
from dpdpca.errors import DataError

__all__ = ["center", "scale_by_max_norm", "clip_rows", "preprocess", "partition", "check_partitions",
           "SCALINGS"]

SCALINGS = ("max-norm", "clip", "none")


def center(X: Any) -> np.ndarray:
    """Subtract the column mean (NOT DP: the mean is read from the data).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)

    Returns
    -------
    ndarray of shape (n_samples, n_features)
        A new array; ``X`` is not modified.
    """
    arr = check_data_matrix("X", X)
    arr -= arr.mean(axis=0)
    return arr


def scale_by_max_norm(X: Any) -> np.ndarray:
    """Divide every row by the largest row L2 norm, as the papers do.

    Afterwards ``max ||x|| == 1`` (unless every row is zero).  This is **not
    differentially private**: the divisor is the maximum norm of the private
    rows (Imtiaz & Sarwate 2018, Sec. 4, and 2018 JSTSP, Sec. VI say so).
    Prefer :func:`clip_rows` with a public bound outside reproductions.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)

    Returns
    -------
    ndarray of shape (n_samples, n_features)
    """
    arr = check_data_matrix("X", X)
    top = float(np.sqrt(np.max(np.einsum("ij,ij->i", arr, arr))))
    if top > 0:
        arr /= top
    return arr


def clip_rows(X: Any, max_norm: float = 1.0) -> tuple[np.ndarray, int]:
    """Clip each row to L2 norm at most ``max_norm`` (public, data-independent).

    ``x <- x * min(1, max_norm / ||x||)``.  Rows already inside the ball are
    unchanged.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    max_norm : float > 0
        The public bound; the papers assume ``||x|| <= 1``.

    Returns
    -------
    X_clipped : ndarray of shape (n_samples, n_features)
        A new array.
    n_clipped : int
        How many rows were shrunk.

    Examples
    --------
    >>> Xc, n = clip_rows([[3.0, 4.0], [0.3, 0.4]])
    >>> np.round(Xc, 12).tolist(), n
    ([[0.6, 0.8], [0.3, 0.4]], 1)
    """
    bound = check_positive("max_norm", max_norm)
    arr = check_data_matrix("X", X)
    # Norms through the row's largest |entry|, so a row like [1e200, 1e200] (whose squared
    # norm overflows to inf) is scaled to the ball, never turned into a zero row.
    peak = np.max(np.abs(arr), axis=1) if arr.shape[1] else np.zeros(arr.shape[0])
    unit = arr / np.where(peak > 0, peak, 1.0)[:, None]
    rel = np.sqrt(np.einsum("ij,ij->i", unit, unit))  # ||x|| / peak, in [1, sqrt(d)]
    with np.errstate(over="ignore"):
        over = peak * rel > bound
    arr[over] = unit[over] * (bound / rel[over])[:, None]
    return arr, int(np.count_nonzero(over))


def preprocess(X: Any, *, centre: bool = True, scaling: str = "max-norm", max_norm: float = 1.0) -> np.ndarray:
    """The papers' preprocessing in one call: centre, then scale or clip.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    centre : bool
        Subtract the mean (not DP).
    scaling : {"max-norm", "clip", "none"}
        ``"max-norm"``: :func:`scale_by_max_norm` (the papers, not DP);
        ``"clip"``: :func:`clip_rows` to ``max_norm`` (public rule);
        ``"none"``: leave the norms alone.
    max_norm : float > 0
        Bound for ``"clip"``.

    Returns
    -------
    ndarray of shape (n_samples, n_features)
    """
    if scaling not in SCALINGS:
        raise param_error("scaling", f"one of {', '.join(SCALINGS)}", scaling)
    arr = center(X) if centre else check_data_matrix("X", X)
    if scaling == "max-norm":
        return scale_by_max_norm(arr)
    if scaling == "clip":
        return clip_rows(arr, max_norm)[0]
    return arr


def partition(X: Any, n_sites: int, *, sizes: int | Sequence[int] | None = None,
              rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Split the rows of ``X`` into ``n_sites`` disjoint partitions.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    n_sites : int >= 1
        S, the number of sites.
    sizes : None, int or sequence of int
        ``None``: equal split (sizes differ by at most one, all rows used).
        An int ``N_s``: every site gets ``N_s`` rows (``S * N_s <= n_samples``;
        the remaining rows are left out).  A sequence of ``S`` positive ints:
        unequal sizes, ``sum(sizes) <= n_samples``.
    rng : numpy.random.Generator or None
        ``None`` keeps the row order (site 1 gets the first rows).  Pass an
        explicit Generator to shuffle rows before splitting.

    Returns
    -------
    list of ndarray, each of shape (N_s, n_features)
        Copies; ``X`` is not modified.

    Raises
    ------
    ParameterError
        ``n_sites`` larger than the number of rows, a size that is not a
        positive int, the wrong number of sizes, or sizes summing past the rows.
    DataError
        ``X`` not a finite non-empty 2-D array.

    Examples
    --------
    >>> [p.shape for p in partition(np.zeros((10, 3)), 3)]
    [(4, 3), (3, 3), (3, 3)]
    """
    arr = check_data_matrix("X", X)
    n = arr.shape[0]
    S = check_int("n_sites", n_sites, minimum=1)
    if S > n:
        raise param_error("n_sites", f"<= the number of rows ({n})", S)
    if sizes is None:
        counts = [len(c) for c in np.array_split(np.arange(n), S)]
    elif isinstance(sizes, (Integral, np.integer)) and not isinstance(sizes, bool):
        per = check_int("sizes", sizes, minimum=1)
        if per * S > n:
            raise param_error("sizes", f"<= {n // S} rows per site ({n} rows, {S} sites)", per)
        counts = [per] * S
    else:
        if not isinstance(sizes, (Sequence, np.ndarray)):
            raise param_error("sizes", "None, an int or a sequence of ints", sizes)
        counts = [check_int(f"sizes[{i}]", c, minimum=1) for i, c in enumerate(sizes)]
        if len(counts) != S:
            raise param_error("sizes", f"a sequence of n_sites={S} counts", list(sizes))
        if sum(counts) > n:
            raise param_error("sum(sizes)", f"<= the number of rows ({n})", sum(counts))
    if rng is not None:
        if not isinstance(rng, np.random.Generator):
            raise param_error("rng", "None or a numpy.random.Generator", rng)
        arr = arr[rng.permutation(n)]
    bounds = np.cumsum([0] + counts)
    return [arr[bounds[i]:bounds[i + 1]].copy() for i in range(S)]


def check_partitions(partitions: Any, *, check_finite: bool = True) -> list[np.ndarray]:
    """Validate a list of site matrices; return read-only float64 views (copies only when not float64).

    ``check_finite=False`` skips the NaN/inf scan, for callers whose own pass
    over the data finds them (see :func:`dpdpca._validation.check_finite_rows`).

    Raises
    ------
    DataError
        Not a non-empty sequence, an empty site, NaN/inf, a site that is not
        2-D, or sites with different numbers of features.
    """
    if isinstance(partitions, np.ndarray) or not isinstance(partitions, Sequence) or len(partitions) == 0:
        raise DataError(f"partitions must be a non-empty list of (n_s, d) arrays, got {type(partitions).__name__}"
                        + (f" of length {len(partitions)}" if isinstance(partitions, Sequence) else ""))
    first = check_data_matrix("partitions[0]", partitions[0], copy=False, check_finite=check_finite)
    out = [first]
    for i, part in enumerate(partitions[1:], start=1):
        out.append(check_data_matrix(f"partitions[{i}]", part, n_features=first.shape[1], copy=False,
                                     check_finite=check_finite))
    return out
