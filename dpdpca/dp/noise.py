"""Structured noise: symmetric matrices, non-symmetric blocks, symmetric 3-way tensors.

* Symmetric d x d (Analyze Gauss, Dwork et al. 2014; capePCA; the protocol's
  G'): ``d(d+1)/2`` i.i.d. entries on the upper triangle (diagonal included),
  mirrored.  The matching sensitivity is the L2 norm of the upper-triangle
  difference vector, which never exceeds the Frobenius norm of the matrix
  difference; :mod:`dpdpca.dp.sensitivity` returns Frobenius bounds, which are
  therefore valid (and tight for the worst pairs we know).
* Non-symmetric d x c block (FPCA's streaming MOD-SuLQ, Grammenos et al. 2020
  §3.3): i.i.d. entries.
* Symmetric D x D x D tensor (capeAGN, Imtiaz & Sarwate 2018 Alg. 3 step 10):
  ``C(D+2, 3)`` i.i.d. entries, one per multiset {i <= j <= k}, copied to every
  permutation.

Each comes in float form (numpy float64) and integer form (exact discrete
Gaussian, numpy ``object`` arrays of Python ints).
"""

from __future__ import annotations

import functools
from fractions import Fraction
from itertools import combinations_with_replacement
from typing import Any

import numpy as np

from dpdpca import linalg as _linalg
from dpdpca._validation import check_int, check_nonnegative
from dpdpca.dp.discrete import sample_discrete_gaussian
from dpdpca.dp.randomness import resolve_source

__all__ = [
    "upper_triangle_size",
    "symmetric_from_upper",
    "upper_from_symmetric",
    "symmetric_gaussian_matrix",
    "symmetric_discrete_gaussian_matrix",
    "gaussian_block",
    "discrete_gaussian_block",
    "symmetric_tensor_size",
    "symmetric_tensor_from_entries",
    "entries_from_symmetric_tensor",
    "symmetric_gaussian_tensor",
    "symmetric_discrete_gaussian_tensor",
]


# The triangle helpers live in dpdpca.linalg (shared by every layer above crypto); the names stay here too.
upper_triangle_size = _linalg.upper_triangle_size
symmetric_from_upper = _linalg.unpack_upper
upper_from_symmetric = _linalg.pack_upper


def symmetric_gaussian_matrix(d: int, sigma: float, rng: Any = None) -> np.ndarray:
    """Symmetric (d, d) float64 noise: i.i.d. N(0, sigma^2) upper triangle, mirrored."""
    sigma = check_nonnegative("sigma", sigma)
    z = resolve_source(rng).standard_normal(upper_triangle_size(d), scale=sigma)
    return symmetric_from_upper(z, d)


def symmetric_discrete_gaussian_matrix(d: int, sigma_squared: Fraction | int, rng: Any = None) -> np.ndarray:
    """Symmetric (d, d) ``object`` array of exact N_Z(0, sigma^2) Python ints, mirrored."""
    z = np.empty(upper_triangle_size(d), dtype=object)
    z[:] = sample_discrete_gaussian(sigma_squared, upper_triangle_size(d), rng)
    return symmetric_from_upper(z, d)


def gaussian_block(d: int, c: int, sigma: float, rng: Any = None) -> np.ndarray:
    """Non-symmetric (d, c) float64 block of i.i.d. N(0, sigma^2) (FPCA streaming MOD-SuLQ)."""
    d = check_int("d", d, minimum=1)
    c = check_int("c", c, minimum=1)
    sigma = check_nonnegative("sigma", sigma)
    return resolve_source(rng).standard_normal((d, c), scale=sigma)


def discrete_gaussian_block(d: int, c: int, sigma_squared: Fraction | int, rng: Any = None) -> np.ndarray:
    """Non-symmetric (d, c) ``object`` array of exact N_Z(0, sigma^2) Python ints."""
    d = check_int("d", d, minimum=1)
    c = check_int("c", c, minimum=1)
    z = np.empty(d * c, dtype=object)
    z[:] = sample_discrete_gaussian(sigma_squared, d * c, rng)
    return z.reshape(d, c)


def symmetric_tensor_size(d: int) -> int:
    """``C(d+2, 3)``: number of distinct entries of a symmetric d x d x d tensor."""
    d = check_int("d", d, minimum=1)
    return d * (d + 1) * (d + 2) // 6


def symmetric_tensor_from_entries(values: Any, d: int) -> np.ndarray:
    """Symmetric (d, d, d) tensor from ``C(d+2,3)`` values in the order of
    ``itertools.combinations_with_replacement(range(d), 3)``."""
    d = check_int("d", d, minimum=1)
    vals = np.asarray(values)
    if vals.shape != (symmetric_tensor_size(d),):
        raise ValueError(f"values must have shape ({symmetric_tensor_size(d)},) for d={d}, got {vals.shape}")
    idx = _multiset_indices(d)
    out = np.zeros((d, d, d), dtype=vals.dtype)
    for perm in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        out[idx[:, perm[0]], idx[:, perm[1]], idx[:, perm[2]]] = vals
    return out


def entries_from_symmetric_tensor(tensor: Any) -> np.ndarray:
    """The ``C(d+2,3)`` distinct entries ``T[i, j, k]``, ``i <= j <= k``, of a (d, d, d) tensor.

    Inverse of :func:`symmetric_tensor_from_entries` on symmetric tensors; the
    L2 norm of this vector is the norm in which i.i.d. noise on the distinct
    entries is calibrated (see :func:`dpdpca.dp.sensitivity.tensor_moment_sensitivity`).
    """
    t = np.asarray(tensor)
    if t.ndim != 3 or len(set(t.shape)) != 1:
        raise ValueError(f"tensor must have shape (d, d, d), got {t.shape}")
    idx = _multiset_indices(t.shape[0])
    return t[idx[:, 0], idx[:, 1], idx[:, 2]]


@functools.lru_cache(maxsize=8)
def _multiset_indices(d: int) -> np.ndarray:
    """Rows ``(i, j, k)``, ``i <= j <= k``, in ``combinations_with_replacement`` order.  Cached, read-only."""
    idx = np.array(list(combinations_with_replacement(range(d), 3)), dtype=np.intp).reshape(-1, 3)
    idx.flags.writeable = False
    return idx


def symmetric_gaussian_tensor(d: int, sigma: float, rng: Any = None) -> np.ndarray:
    """Symmetric (d, d, d) float64 noise from ``C(d+2,3)`` i.i.d. N(0, sigma^2) entries (capeAGN)."""
    sigma = check_nonnegative("sigma", sigma)
    z = resolve_source(rng).standard_normal(symmetric_tensor_size(d), scale=sigma)
    return symmetric_tensor_from_entries(z, d)


def symmetric_discrete_gaussian_tensor(d: int, sigma_squared: Fraction | int, rng: Any = None) -> np.ndarray:
    """Symmetric (d, d, d) ``object`` tensor of exact N_Z(0, sigma^2) Python ints."""
    z = np.empty(symmetric_tensor_size(d), dtype=object)
    z[:] = sample_discrete_gaussian(sigma_squared, symmetric_tensor_size(d), rng)
    return symmetric_tensor_from_entries(z, d)
