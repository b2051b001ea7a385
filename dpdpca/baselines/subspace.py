"""Subspace linear algebra for the streaming pipelines: truncated SVD, Merge_r, block update, AdjustRank.

A *subspace* is a pair ``(U, s)``: ``U`` of shape (d, r) with orthonormal
columns and ``s`` of shape (r,) the non-increasing singular values it carries
(so ``U diag(s)`` stands for the data it summarises).  An empty subspace has
``r = 0``.

* :func:`svd_r` is ``SVD_r`` (left factor and singular values only).
* :func:`merge_r` is ``Merge_r`` (Grammenos et al. 2020, Alg. 2) with the
  forgetting factor ``lambda`` of eq. (2).  The result is orthonormal to
  rounding: the residual ``U2 - U1 Z`` is orthogonalised twice against ``U1``
  (classical Gram-Schmidt twice; once loses orthogonality when ``U2`` is
  nearly inside ``span(U1)``), its rank-deficient part is dropped, and the left singular vectors of the small block
  are split at row ``r1`` (rows ``0..r1-1`` multiply ``U1``, rows
  ``r1..r1+r2-1`` multiply ``Q``).  The authors' MATLAB takes rows
  ``1..r2`` for the second factor instead, which is not orthonormal.
* :func:`block_update` is the streaming block update of eq. (3) (``SSVD_r``):
  ``SVD_r([U diag(s), D])`` computed as ``Merge_r(U, s, D, 1)``.
* :func:`adjust_rank` is ``AdjustRank`` with the energy bounds of eq. (4).

Nothing here allocates a d x d matrix: every step costs O(d (r1 + r2)) memory.

References
----------
A. Grammenos, R. Mendoza-Smith, J. Crowcroft, C. Mascolo, "Federated Principal
Component Analysis", NeurIPS 2020: eqs. (2)-(4), Alg. 2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from dpdpca._validation import check_real, param_error

__all__ = ["Subspace", "empty_subspace", "svd_r", "merge_r", "block_update", "adjust_rank", "energy_ratio",
           "check_forgetting"]

Subspace = tuple[np.ndarray, np.ndarray]

#: A residual column whose R diagonal is below this fraction of the scale is treated as zero (rounding level).
_RANK_TOL = 1e-13
#: Below this fraction, a kept Q column is re-orthogonalised against U1 (its Householder error is eps / R_ii).
_REORTH_TOL = 1e-6


def empty_subspace(d: int) -> Subspace:
    """The rank-0 subspace of R^d."""
    return np.zeros((d, 0)), np.zeros(0)


def check_forgetting(value: Any) -> float:
    """The forgetting factor lambda must be in (0, 1] (eq. (2))."""
    v = check_real("forgetting", value)
    if not 0.0 < v <= 1.0:
        raise param_error("forgetting", "in (0, 1]", value)
    return v


def svd_r(D: np.ndarray, r: int) -> Subspace:
    """``SVD_r(D)``: the top-``r`` left singular vectors and singular values of ``D`` (d, c).

    Returns at most ``min(r, d, c)`` columns.
    """
    if D.shape[1] == 0:
        return empty_subspace(D.shape[0])
    U, s, _ = scipy.linalg.svd(D, full_matrices=False, check_finite=False, lapack_driver="gesdd")
    k = min(r, s.size)
    return U[:, :k], s[:k]


def merge_r(U1: np.ndarray, s1: np.ndarray, U2: np.ndarray, s2: np.ndarray, r: int, *,
            forgetting: float = 1.0) -> Subspace:
    """``Merge_r`` (Alg. 2): the top-``r`` left singular pairs of ``[lambda U1 diag(s1), U2 diag(s2)]``.

    Parameters
    ----------
    U1 : array of shape (d, r1), orthonormal columns
    s1 : array of shape (r1,)
    U2 : array of shape (d, r2)
        Need not be orthonormal (the block update passes raw data with ``s2 = 1``).
    s2 : array of shape (r2,)
    r : int, >= 1
        Rank kept.
    forgetting : float in (0, 1]
        ``lambda`` of eq. (2): weight of the first (older) subspace.

    Returns
    -------
    U : array of shape (d, min(r, r1 + r2, d)), orthonormal columns
    s : array of the same number of singular values, non-increasing

    Notes
    -----
    ``Z = U1^T U2``; ``Q R = (U2 - U1 Z) S2``; ``[U', s, ~] = SVD_r([[lambda S1, Z S2], [0, R]])``;
    ``U = [U1, Q] U'``.  The block is (r1 + r2) x (r1 + r2), so the cost is
    O(d (r1 + r2)^2) time and O(d (r1 + r2)) memory.  The QR is column-pivoted:
    columns of the residual below a relative 1e-13 of the scale are treated as
    zero and their arbitrary ``Q`` columns dropped (they need not be orthogonal
    to ``U1``), so ``[U1, Q]`` is orthonormal even when ``r1 + r2 > d`` or the
    data are rank-deficient; the result is then completed with orthonormal
    directions of singular value 0 up to ``min(r, r1 + r2, d)`` columns.
    """
    r1, r2 = U1.shape[1], U2.shape[1]
    if r1 == 0:
        return svd_r(U2 * s2, r)
    if r2 == 0:
        k = min(r, r1)
        return U1[:, :k], forgetting * s1[:k]
    Z = U1.T @ U2
    resid = U2 - U1 @ Z
    Z2 = U1.T @ resid  # second Gram-Schmidt pass: orthogonality to rounding even when U2 ~ span(U1)
    resid -= U1 @ Z2
    Z += Z2
    W = resid * s2  # the weighted residual (R S2 of Alg. 2)
    Q, R, piv = scipy.linalg.qr(W, mode="economic", pivoting=True, check_finite=False)
    diag = np.abs(np.diag(R))
    scale = max(float(diag[0]) if diag.size else 0.0, float(np.max(s1, initial=0.0)),
                float(np.max(np.abs(Z * s2), initial=0.0)), 1e-300)
    p = int(np.count_nonzero(diag > _RANK_TOL * scale))
    if p < diag.size or (p and diag[p - 1] < _REORTH_TOL * scale):
        # a (numerically) rank-deficient residual: its last columns of Q are arbitrary, not orthogonal to U1;
        # keep the p columns that carry the residual (the rest is below rank tolerance) and re-orthogonalise
        Q = Q[:, :p] - U1 @ (U1.T @ Q[:, :p])
        Q, R2 = scipy.linalg.qr(Q, mode="economic", check_finite=False)
        R = R2 @ R[:p]
    R_unpiv = np.empty_like(R)
    R_unpiv[:, piv] = R
    n1, n2 = r1, Q.shape[1]
    block = np.zeros((n1 + n2, r1 + r2))
    block[:n1, :r1] = np.diag(forgetting * s1)
    block[:n1, r1:] = Z * s2
    block[n1:, r1:] = R_unpiv
    Ub, sb, _ = scipy.linalg.svd(block, full_matrices=False, check_finite=False, lapack_driver="gesdd")
    k = min(r, sb.size)
    U = U1 @ Ub[:n1, :k] + Q @ Ub[n1:, :k]  # rows 0..r1-1 go with U1, rows r1.. with Q
    return _pad(U, sb[:k], min(r, r1 + r2, U1.shape[0]))


def _pad(U: np.ndarray, s: np.ndarray, r: int) -> Subspace:
    """Complete ``U`` to ``r`` orthonormal columns with singular value 0 (a rank-deficient merge)."""
    while U.shape[1] < r:
        i = int(np.argmin(np.einsum("ij,ij->i", U, U)))  # the canonical vector least inside span(U)
        v = -U @ U[i, :]
        v[i] += 1.0
        v -= U @ (U.T @ v)
        U, s = np.column_stack([U, v / np.linalg.norm(v)]), np.append(s, 0.0)
    return U, s


def block_update(D: np.ndarray, U: np.ndarray, s: np.ndarray, r: int, *, forgetting: float = 1.0) -> Subspace:
    """Eq. (3) / ``SSVD_r(D, U, S)``: the subspace of ``[lambda U diag(s), D]`` truncated to rank ``r``.

    ``D`` has shape (d, b) (columns are samples).  With an empty ``(U, s)`` this
    is ``SVD_r(D)``.
    """
    return merge_r(U, s, D, np.ones(D.shape[1]), r, forgetting=forgetting)


def energy_ratio(s: np.ndarray) -> float:
    """``E_r = sigma_r / sum_{i <= r} sigma_i`` (eq. (4)); 0 for an empty or all-zero subspace."""
    total = float(np.sum(s))
    return float(s[-1]) / total if s.size and total > 0 else 0.0


def adjust_rank(U: np.ndarray, s: np.ndarray, *, alpha: float, beta: float, r_max: int) -> Subspace:
    """``AdjustRank^{alpha,beta}_r`` (eq. (4) and the definition under it).

    * ``E_r > beta`` and ``r < r_max``: one more direction, with singular value 0
      (the next block fills it in).  The paper appends the canonical vector
      ``e_{r+1}``, which may lie in ``span(U)``; we append the canonical vector
      least represented in ``span(U)``, orthogonalised against ``U``, so the
      result stays orthonormal.
    * ``E_r < alpha`` and ``r > 1``: drop the last direction.
    * otherwise unchanged.

    ``alpha`` and ``beta`` are fractions (the paper's typical 1 and 10 are
    percentages: 0.01 and 0.10 here).
    """
    r = U.shape[1]
    if r == 0:
        return U, s
    e = energy_ratio(s)
    if e > beta and r < min(r_max, U.shape[0]):
        row_energy = np.einsum("ij,ij->i", U, U)  # ||U^T e_i||^2
        i = int(np.argmin(row_energy))
        v = -U @ U[i, :]
        v[i] += 1.0
        v -= U @ (U.T @ v)
        v /= np.linalg.norm(v)
        return np.column_stack([U, v]), np.append(s, 0.0)
    if e < alpha and r > 1:
        return U[:, :-1], s[:-1]
    return U, s
