r"""Sensitivities of the quadratic random-feature sketch (Chatalic et al. 2022), computed or soundly bounded.

A record ``x`` with ``||x|| <= 1`` contributes ``phi(x) = (Omega^T x)^2`` (entrywise)
to the sketch ``Sigma(X) = sum_i phi(x_i)``; with feature subsampling it
contributes ``(1/alpha) phi(x) * h`` where the mask ``h`` keeps ``r`` of the ``m``
features and ``alpha = r/m``.  Write ``u = Omega^T x`` and ``Omega_h`` for the
columns kept by ``h``.

Add/remove-one (Chatalic et al.'s table; UDP)
    * L1 (Laplace): ``Delta_1 = (1/alpha) sup_h ||Omega_h||_2^2``, because
      ``sum_j u_j^2 = ||Omega_h^T x||^2 <= ||Omega_h||_2^2``, attained at the top
      singular vector.  Without subsampling it is exactly ``||Omega||_2^2``; for
      a union of ``m/d`` orthonormal bases it is ``m/d``.
    * L2 (Gaussian): ``Delta_2 = (1/alpha) sup_h ||Omega_h^T||_{2->4}^2``.  The
      2->4 norm has no closed form (computing it is hard in general), so we
      use the smallest of three upper bounds, each proven in one line:

      - ``||u||_4^2 <= ||u||_2^2 <= ||Omega||_2^2``;
      - ``||u||_4^4 = sum u_j^4 <= max_j u_j^2 sum_j u_j^2 <= max_j ||omega_j||^2 ||Omega||_2^2``;
      - ``u_j^4 <= ||omega_j||^4`` (Cauchy-Schwarz), so ``||u||_4^4 <= sum_j ||omega_j||^4``.

      For a union of orthonormal bases the first two give ``sqrt(m/d)`` .. ``m/d``;
      the second is ``sqrt(m/d)`` (``max ||omega_j|| = 1``), attained when one unit
      vector belongs to every basis.  We also *compute* a lower bound (a
      feasible ``x`` found by the monotone ascent ``x <- Omega u^3 / ||Omega u^3||``
      from several starts), so every report states ``lower <= Delta_2 <= upper``.
      The mechanism is always calibrated to the upper bound.

    Subsampling with arbitrary masks of size ``r`` bounds ``sup_h`` by the ``r``
    largest column norms as well; block masks (``h`` selects one of ``m/r``
    fixed blocks of consecutive features, e.g. one orthonormal basis) are
    exact per block.

Replace-one
    ``phi(x)`` and ``phi(x')`` are entrywise non-negative, so
    ``|a_j - b_j| <= max(a_j, b_j)`` gives L1 ``<= 2 Delta_1`` (tight for
    ``Omega = I``, ``x = e_1``, ``x' = e_2``) and ``||a - b||_2^2 = ||a||^2 + ||b||^2
    - 2 a.b <= 2 Delta_2^2`` gives L2 ``<= sqrt(2) Delta_2`` (tight for the same pair).
    The computed lower bound is the add/remove one (``x' = 0`` is a valid record).

References
----------
A. Chatalic, V. Schellekens, F. Houssiau, Y.-A. de Montjoye, L. Jacques,
R. Gribonval, "Compressive learning with privacy guarantees", Information and
Inference (2021/2022): table "Privacy results" and the subsampling table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.dp.mechanisms import check_neighbouring
from dpdpca.dp.report import REPLACE_ONE

__all__ = ["SketchSensitivity", "quadratic_sketch_bounds", "two_to_four_lower", "SUBSAMPLING_MASKS"]

SUBSAMPLING_MASKS = ("uniform", "block")


@dataclass(frozen=True)
class SketchSensitivity:
    """Sensitivities of one record's (rescaled) contribution to the quadratic sketch.

    Attributes
    ----------
    l1 : float
        L1 sensitivity (exact without subsampling and for block masks; an upper bound otherwise).
    l2 : float
        Upper bound on the L2 sensitivity (what the Gaussian mechanism uses).
    l2_lower : float
        A computed lower bound on the L2 sensitivity (``l2_lower <= true <= l2``).
    neighbouring : str
    how : str
        Which bound was used, in words.
    """

    l1: float
    l2: float
    l2_lower: float
    neighbouring: str
    how: str


def _check_omega(omega: Any) -> np.ndarray:
    om = np.asarray(omega, dtype=np.float64)
    if om.ndim != 2 or om.size == 0 or not np.all(np.isfinite(om)):
        raise param_error("omega", "a finite non-empty 2-D array (d, m)", f"array of shape {om.shape}")
    return om


def _l2_upper(spec: float, col_norms: np.ndarray) -> tuple[float, str]:
    """min of the three bounds on ``||Omega^T||_{2->4}^2`` (module docstring)."""
    cands = {"||Omega||_2^2": spec ** 2,
             "max_j ||omega_j|| ||Omega||_2": float(col_norms.max()) * spec,
             "sqrt(sum_j ||omega_j||^4)": math.sqrt(float(np.sum(col_norms ** 4)))}
    name = min(cands, key=lambda key: cands[key])
    return cands[name], name


def two_to_four_lower(omega: Any, *, starts: int = 8, iterations: int = 100, seed: int = 0) -> tuple[float, np.ndarray]:
    """A lower bound on ``||Omega^T||_{2->4}^2`` and the unit vector attaining it.

    Each iterate is a feasible unit ``x``, so the best value found is a true
    lower bound.  The ascent ``x <- grad f(x)/||grad f(x)||`` never decreases the
    convex ``f(x) = sum_j (omega_j^T x)^4`` on the sphere.  Starts: the top
    singular vectors of ``Omega``, the largest columns, and ``starts`` random
    points (the seed is public; nothing here touches data).
    """
    om = _check_omega(omega)
    d = om.shape[0]
    U = np.linalg.svd(om, full_matrices=False)[0]
    norms = np.linalg.norm(om, axis=0)
    top_cols = om[:, np.argsort(norms)[::-1][:min(starts, om.shape[1])]] / np.maximum(
        np.sort(norms)[::-1][:min(starts, om.shape[1])], 1e-300)
    rand = np.random.default_rng(seed).normal(size=(d, starts))
    X = np.column_stack([U[:, :min(starts, U.shape[1])], top_cols, rand])
    X /= np.linalg.norm(X, axis=0)
    best, best_x = 0.0, X[:, 0]
    for _ in range(iterations):
        u = om.T @ X
        u2 = u * u  # (products, not float powers: several times faster)
        vals = np.sum(u2 * u2, axis=0)
        i = int(np.argmax(vals))
        if vals[i] > best:
            best, best_x = float(vals[i]), X[:, i].copy()
        G = om @ (u2 * u)
        G /= np.maximum(np.linalg.norm(G, axis=0), 1e-300)
        if np.max(np.abs(G - X)) < 1e-10:  # every start at its fixed point
            break
        X = G
    return math.sqrt(best), best_x


def quadratic_sketch_bounds(omega: Any, *, features_per_sample: int | None = None, mask: str = "uniform",
                            neighbouring: str = REPLACE_ONE, lower_starts: int = 8) -> SketchSensitivity:
    """L1 and L2 sensitivities of the (subsampled) quadratic sketch, ``||x|| <= 1``.

    Parameters
    ----------
    omega : array of shape (d, m)
        The public frequencies.
    features_per_sample : int or None
        ``r``: features computed per record (``None`` or ``m``: no subsampling).
    mask : {"uniform", "block"}
        ``"uniform"``: any ``r`` of the ``m`` features; ``"block"``: one of the
        ``m/r`` blocks of ``r`` consecutive features (``r`` must divide ``m``).
    neighbouring : {"replace-one", "add/remove-one"}
    lower_starts : int
        Random starts of the lower-bound search.

    Returns
    -------
    SketchSensitivity
    """
    om = _check_omega(omega)
    check_neighbouring(neighbouring)
    if mask not in SUBSAMPLING_MASKS:
        raise param_error("mask", "'uniform' or 'block'", mask)
    m = om.shape[1]
    r = m if features_per_sample is None else check_int("features_per_sample", features_per_sample, minimum=1,
                                                        maximum=m)
    scale = m / r  # 1/alpha
    col = np.linalg.norm(om, axis=0)
    if r == m:
        spec = float(np.linalg.norm(om, 2))
        l1, (l2, how) = spec ** 2, _l2_upper(spec, col)
        lower = two_to_four_lower(om, starts=lower_starts)[0]
        how = f"L1 = ||Omega||_2^2 (exact); L2 <= {how}"
    elif mask == "block":
        if m % r:
            raise param_error("features_per_sample", f"a divisor of m={m} for block masks", r)
        l1 = l2 = lower = 0.0
        how = ""
        for b0 in range(0, m, r):
            blk = om[:, b0:b0 + r]
            spec = float(np.linalg.norm(blk, 2))
            up, how = _l2_upper(spec, col[b0:b0 + r])
            l1, l2 = max(l1, spec ** 2), max(l2, up)
            lower = max(lower, two_to_four_lower(blk, starts=2, iterations=50)[0])
        how = "block masks: L1 = (m/r) max_b ||Omega_b||_2^2 (exact); L2 <= (m/r) max_b of the smallest bound"
    else:
        spec_full = float(np.linalg.norm(om, 2))
        top = np.sort(col)[::-1][:r]
        b2 = min(spec_full, math.sqrt(float(np.sum(top ** 2))))
        l1 = b2 ** 2
        l2 = min(b2 ** 2, float(col.max()) * b2, math.sqrt(float(np.sum(top ** 4))))
        x = two_to_four_lower(om, starts=lower_starts)[1]
        u2 = (om.T @ x) ** 2
        u4 = np.sort(u2 * u2)[::-1][:r]
        lower = math.sqrt(float(np.sum(u4)))
        how = ("uniform masks: sup_h ||Omega_h||_2 <= min(||Omega||_2, sqrt(sum of the r largest ||omega_j||^2)); "
               "L2 as without masks on that bound, or sqrt(sum of the r largest ||omega_j||^4)")
    l1, l2, lower = scale * l1, scale * l2, scale * lower
    if neighbouring == REPLACE_ONE:
        l1, l2 = 2.0 * l1, math.sqrt(2.0) * l2  # the lower bound stays: x' = 0 is a valid record
        how += "; replace-one: L1 x 2, L2 x sqrt(2) (non-negative features)"
    return SketchSensitivity(l1=float(l1), l2=float(l2), l2_lower=float(min(lower, l2)), neighbouring=neighbouring,
                             how=how)
