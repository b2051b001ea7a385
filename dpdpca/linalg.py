"""Shared floating-point linear algebra: eigenpairs with one sign rule, triangles, moments.

Every pipeline that releases a subspace takes its eigenpairs from
:func:`top_eigenpairs`, so signs and ordering follow one convention
everywhere (see ``docs/architecture.md``):

* eigenpairs are the ``k`` *algebraically* largest, in decreasing order (a
  noisy symmetric matrix can have negative eigenvalues);
* signs are deterministic, as scikit-learn's ``svd_flip`` makes them: the
  entry of largest magnitude in each eigenvector is positive (the first such
  entry on a tie).

The upper-triangle helpers use the row-major order ``i <= j`` (diagonal
included) that the noise samplers and the protocol's messages share; its size,
:func:`upper_triangle_size`, is :mod:`dpdpca.triangle`'s, which the crypto
layer (it knows nothing of this module) shares too.

This module depends on numpy and scipy only, so every layer may import it.

Examples
--------
>>> import numpy as np
>>> w, V = top_eigenpairs(np.diag([1.0, 3.0, 2.0]), 2)
>>> w
array([3., 2.])
>>> V.T
array([[0., 1., 0.],
       [0., 0., 1.]])
>>> pack_upper(np.array([[1, 2], [2, 3]]))
array([1, 2, 3])
>>> unpack_upper(np.array([1, 2, 3]), 2)
array([[1, 2],
       [2, 3]])
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.linalg

from dpdpca._validation import check_int
from dpdpca.errors import DataError
from dpdpca.triangle import upper_triangle_size

__all__ = ["top_eigenpairs", "flip_signs", "match_components", "upper_triangle_size", "pack_upper", "unpack_upper",
           "second_moment", "scatter"]


def flip_signs(V: np.ndarray) -> np.ndarray:
    """Columns of ``V`` with the sign rule applied: each column's largest-magnitude entry is positive.

    The column-wise form of scikit-learn's ``svd_flip`` for components stored
    as columns.  A copy is returned; an all-zero column is left as it is.

    Parameters
    ----------
    V : ndarray of shape (n_features, k)

    Returns
    -------
    ndarray of shape (n_features, k)

    Examples
    --------
    >>> flip_signs(np.array([[0.6, 0.1], [-0.8, -0.9]]))
    array([[-0.6, -0.1],
           [ 0.8,  0.9]])
    """
    V = np.array(V, dtype=np.float64)
    if V.ndim != 2:
        raise DataError(f"V must be a 2-D (n_features, k) array, got shape {V.shape}")
    if V.shape[1] == 0:
        return V
    signs = np.sign(V[np.abs(V).argmax(axis=0), np.arange(V.shape[1])])
    V *= np.where(signs == 0, 1.0, signs)
    return V


def match_components(private: Any, reference: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair each private component with its own reference component, by absolute cosine, sign aligned.

    A noisy release can swap components of close eigenvalues and flip signs,
    so the j-th private component is compared with the reference component it
    is closest to: the pairing maximises the sum of ``|cos|`` over all pairs
    (one reference component per private one; ``scipy.optimize.linear_sum_assignment``).

    Parameters
    ----------
    private : array of shape (n_features, k)
        Unit columns.
    reference : array of shape (n_features, m), m >= k
        Unit columns (e.g. the non-private top components, a few more than k).

    Returns
    -------
    index : int array of shape (k,)
        ``reference[:, index[j]]`` is private component j's match.
    sign : array of shape (k,)
        +1 or -1: ``sign[j] * reference[:, index[j]]`` points the way private component j does.
    cosine : array of shape (k,)
        ``|cos|`` of each pair, in [0, 1].

    Examples
    --------
    >>> R = np.eye(3)
    >>> P = np.stack([-R[:, 1], R[:, 0]], axis=1)  # swapped and one flipped
    >>> index, sign, cosine = match_components(P, R)
    >>> index.tolist(), sign.tolist(), cosine.tolist()
    ([1, 0], [-1.0, 1.0], [1.0, 1.0])
    """
    from scipy.optimize import linear_sum_assignment

    P, R = np.asarray(private, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if P.ndim != 2 or R.ndim != 2 or P.shape[0] != R.shape[0] or R.shape[1] < P.shape[1]:
        raise DataError(f"match_components needs (d, k) and (d, m >= k) arrays, got {P.shape} and {R.shape}")
    C = P.T @ R  # (k, m) cosines of unit columns
    rows, cols = linear_sum_assignment(-np.abs(C))
    index = cols[np.argsort(rows)]
    picked = C[np.arange(P.shape[1]), index]
    sign = np.where(picked >= 0, 1.0, -1.0)
    return index, sign, np.minimum(np.abs(picked), 1.0)


def top_eigenpairs(M: np.ndarray, k: int, *, dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` algebraically largest eigenpairs of a symmetric matrix, descending, signs fixed.

    Parameters
    ----------
    M : ndarray of shape (d, d)
        Symmetric (only the upper triangle is read when ``k < d``).
    k : int in [1, d]
    dtype : numpy.float64 or numpy.float32
        ``numpy.float32`` decomposes a float32 copy (faster; sound only when its
        rounding is negligible against the noise already in ``M``, see
        :func:`dpdpca.baselines._common.site_eigh_dtype`).  The results are
        float64 either way.

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
    eigenvectors : ndarray of shape (d, k)
        Orthonormal columns under the sign rule of :func:`flip_signs`.
    """
    d = M.shape[0]
    k = check_int("k", k, minimum=1, maximum=d)
    A = M.astype(np.float32) if dtype == np.float32 else M
    if k < d:
        # only the top k: LAPACK's subset driver is several times faster than a full eigh at k << d;
        # the upper-triangle reduction is ~10% faster in float32
        w, U = scipy.linalg.eigh(A, lower=False, subset_by_index=[d - k, d - 1], check_finite=False)
    else:
        w, U = np.linalg.eigh(A)
    w = w[::-1][:k].astype(np.float64)
    return w, flip_signs(U[:, ::-1][:, :k].astype(np.float64))


@functools.lru_cache(maxsize=8)
def _triangle_flat_indices(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat (row-major) positions of the upper triangle, and of their transposes, in a d x d matrix.

    Flat ``take``/``put`` is ~10x faster than indexing with the two
    ``triu_indices`` arrays at d = 784.  Cached, read-only.
    """
    rows, cols = np.triu_indices(d)
    upper, lower = rows * d + cols, cols * d + rows
    upper.flags.writeable = False
    lower.flags.writeable = False
    return upper, lower


def pack_upper(matrix: Any) -> np.ndarray:
    """Row-major upper triangle (with diagonal) of a square matrix, shape (d(d+1)/2,).

    Keeps the dtype (``object`` arrays of Python ints stay exact).
    """
    m = np.asarray(matrix)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise DataError(f"matrix must be square, got shape {m.shape}")
    return np.take(m, _triangle_flat_indices(m.shape[0])[0])


def unpack_upper(values: Any, d: int) -> np.ndarray:
    """The symmetric d x d matrix whose row-major upper triangle (with diagonal) is ``values``.

    Inverse of :func:`pack_upper`; keeps the dtype of ``values``.
    """
    d = check_int("d", d, minimum=1)
    vals = np.asarray(values)
    if vals.shape != (upper_triangle_size(d),):
        raise DataError(f"values must have shape ({upper_triangle_size(d)},) for d={d}, got {vals.shape}")
    upper, lower = _triangle_flat_indices(d)
    out = np.empty((d, d), dtype=vals.dtype)
    flat = out.reshape(-1)
    flat[upper] = vals
    flat[lower] = vals  # the transposed positions; the diagonal gets the same value twice
    return out


def scatter(X: np.ndarray, *, center: bool = False) -> np.ndarray:
    """``Y^T Y`` with ``Y = X`` or ``X`` minus its column means (``center=True``).

    ``X`` is a float array of shape (n_samples, n_features), rows as samples;
    it is not modified.
    """
    Y = X - X.mean(axis=0) if center else X
    return Y.T @ Y


def second_moment(X: np.ndarray, *, center: bool = False) -> np.ndarray:
    """``A = Y^T Y / N`` (Imtiaz & Sarwate 2018, Alg. 1 step 2), ``Y`` as in :func:`scatter`."""
    return scatter(X, center=center) / X.shape[0]
