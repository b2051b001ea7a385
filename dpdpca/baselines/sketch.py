"""DP compressive PCA: quadratic random-feature sketches (Chatalic et al. 2022) and a low-rank decoder.

The sketch
----------
Each record contributes ``phi(x) = (Omega^T x)^2`` (entrywise), ``m`` numbers;
``Omega`` (d x m) is public, drawn from a public seed shared by every site:

* ``"gaussian"``: i.i.d. ``N(0, 1)`` entries (cost O(d m) per record);
* ``"orthonormal"``: a union of ``m/d'`` orthonormal bases of ``R^{d'}``
  (``d'`` the next power of two >= d, records padded with zeros), each
  ``H D3 H D2 H D1`` with ``H`` the normalised Walsh-Hadamard matrix and
  ``D_i`` random sign diagonals: structured, applied in O(m log d') per record
  by the fast Walsh-Hadamard transform.  ``m`` is rounded up to a multiple of
  ``d'``; the result reports the ``m`` used.

A site's sketch is the *sum* ``sum_i phi(x_i)`` and its count, so sites'
sketches add up.  For centred rows the sketch measures the second moment:
``E[phi_j] = omega_j^T C omega_j`` with ``C = X^T X / N``.

Feature subsampling: each record computes only ``r < m`` features (a uniform
subset, or one block of ``r`` consecutive features, e.g. one orthonormal basis
with ``r = d'``), rescaled by ``m/r`` so the sketch stays unbiased.  The mask
randomness does not affect privacy (the sensitivity bound holds for every
mask), so it comes from a numpy Generator (seeded from the OS unless the
caller passes one).

Privacy (per site, before anything leaves it)
---------------------------------------------
* ``noise="gaussian"``: Gaussian (``calibration``: analytic by default, or
  classic) at the L2 sensitivity; ``"laplace"``: pure epsilon at the L1
  sensitivity (:mod:`dpdpca.dp.quadratic_sketch`).
* ``neighbouring="add-remove"`` (default, as every pipeline here, and the
  paper's table): the count is released with noise too (Laplace, or Gaussian
  at sensitivity 1), taking ``count_fraction`` of epsilon (and half of delta
  for Gaussian noise), basic composition.  ``"replace-one"``: the count is
  public, the whole budget goes to the sum.
* Sites hold disjoint rows: the release is (epsilon, delta)-DP overall
  (parallel composition).  The aggregator forms ``z = (sum_s S_s + xi) / (sum_s n_s + zeta)``.

The decoder
-----------
We fit a PSD matrix ``V V^T`` of rank ``k + 5`` (``V`` d x (k + 5); at most d)
to the sketch by least squares, ``min_V sum_j (||V^T omega_j||^2 - z_j)^2`` (Burer-Monteiro
factorisation), by L-BFGS (scipy) from a spectral start: the top-``k``
eigenvectors of ``sum_j z_j omega_j omega_j^T - shift I``, computed matrix-free
by subspace iteration (for rotation-invariant frequencies this matrix is
proportional to ``2 C + tr(C) I`` in expectation, and the shift
``sum_j z_j ||omega_j||^2 / (d + 2)`` removes the ``tr(C) I`` part).  Why this
decoder: it is the maximum-likelihood fit under Gaussian noise, costs O(m d k)
per iteration and O(m d) memory (no d x d matrix in the loop), and with
``m >= c k d`` measurements of a rank-k PSD matrix the factorised problem has
no spurious local minima in the noiseless case, so it recovers the subspace
exactly.  The components are the top-k left singular vectors of ``V``; the
eigenvalues are ``sigma_i(V)^2`` (second-moment units).  Fitting k + 5
directions and keeping k stops the energy beyond the k-th component from being forced
into the top k.
"""

from __future__ import annotations

import dataclasses

import functools
import math
import os
from typing import Any

import numpy as np
import scipy.optimize

from dpdpca._validation import check_int, check_open_unit, param_error
from dpdpca.baselines._common import FLOAT_BYTES, SiteEstimator, check_budget, parallel_report
from dpdpca.data.preprocessing import check_partitions
from dpdpca.dp import (ADD_REMOVE_ONE, GaussianMechanism, LaplaceMechanism, PrivacyReport,
                       compose_basic, resolve_source)
from dpdpca.dp.calibration import check_calibration
from dpdpca.dp.mechanisms import check_sensitivity_mode
from dpdpca.dp.settings import CALIBRATIONS, RIGOROUS, relation_of
from dpdpca.errors import UnsupportedSettingError
from dpdpca.dp.quadratic_sketch import SUBSAMPLING_MASKS, SketchSensitivity, quadratic_sketch_bounds
from dpdpca.linalg import flip_signs
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["QuadraticSketchOperator", "site_sketch", "decode_subspace", "SketchPCA",
           "FREQUENCY_KINDS", "SKETCH_NOISES"]

FREQUENCY_KINDS = ("gaussian", "orthonormal")
SKETCH_NOISES = ("gaussian", "laplace")
_CHUNK_VALUES = 1 << 22  # floats per temporary (32 MiB)
#: Up to this padded dimension a dense ``X @ Omega`` (BLAS) beats the numpy fast transform.
_DENSE_MAX_DPAD = 256


def _fwht(a: np.ndarray) -> np.ndarray:
    """Normalised fast Walsh-Hadamard transform along axis 1 (length a power of two), in place."""
    n, L = a.shape
    h = 1
    while h < L:
        v = a.reshape(n, L // (2 * h), 2, h)
        x = v[:, :, 0, :].copy()
        v[:, :, 0, :] += v[:, :, 1, :]
        v[:, :, 1, :] *= -1.0
        v[:, :, 1, :] += x
        h *= 2
    a *= 1.0 / math.sqrt(L)
    return a


class QuadraticSketchOperator:
    """The public frequencies ``Omega`` (d x m) and the feature map ``(Omega^T x)^2``.

    Parameters
    ----------
    n_features : int, >= 1
    sketch_size : int, >= 1
        ``m`` (rounded up to a multiple of ``d'`` for ``"orthonormal"``).
    kind : {"gaussian", "orthonormal"}
    seed : int
        Public seed: every site must build the same ``Omega``.

    Examples
    --------
    >>> import numpy as np
    >>> op = QuadraticSketchOperator(5, 16, kind="orthonormal", seed=0)
    >>> op.m, op.omega.shape
    (16, (5, 16))
    >>> x = np.ones((1, 5)) / np.sqrt(5)
    >>> round(float(op.features(x).sum()), 12)  # two orthonormal bases: ||x||^2 each
    2.0
    """

    def __init__(self, n_features: int, sketch_size: int, *, kind: str = "orthonormal", seed: int = 0) -> None:
        self.d = check_int("n_features", n_features, minimum=1)
        m = check_int("sketch_size", sketch_size, minimum=1)
        if kind not in FREQUENCY_KINDS:
            raise param_error("kind", "'gaussian' or 'orthonormal'", kind)
        self.kind = kind
        self.seed = check_int("seed", seed, minimum=0)
        rng = np.random.default_rng(self.seed)
        if kind == "gaussian":
            self.m = m
            self._omega = rng.normal(size=(self.d, m))
        else:
            self.d_pad = 1 << max(0, (self.d - 1).bit_length())
            self.n_bases = -(-m // self.d_pad)
            self.m = self.n_bases * self.d_pad
            self._signs = rng.choice(np.array([-1.0, 1.0]), size=(self.n_bases, 3, self.d_pad))
            self._omega = self._fast_linear(np.eye(self.d), None)

    @property
    def omega(self) -> np.ndarray:
        """The dense (d, m) frequency matrix (read-only view)."""
        view = self._omega.view()
        view.flags.writeable = False
        return view

    def linear(self, X: np.ndarray, block: int | None = None) -> np.ndarray:
        """``X Omega`` (n, m), or only the columns of one orthonormal basis ``block`` (n, d')."""
        if self.kind == "gaussian" or self.d_pad <= _DENSE_MAX_DPAD:
            # small d: the dense product is faster than log2(d') numpy passes (same values, to rounding)
            return X @ (self._omega if block is None else self._omega[:, block * self.d_pad:(block + 1) * self.d_pad])
        return self._fast_linear(X, block)

    def _fast_linear(self, X: np.ndarray, block: int | None) -> np.ndarray:
        """``X Omega`` by the fast Walsh-Hadamard transform, O(m log d') per row."""
        signs = self._signs if block is None else self._signs[block:block + 1]
        nb = signs.shape[0]
        a = np.zeros((X.shape[0], nb, self.d_pad))  # every basis at once: one transform call per step
        a[:, :, :self.d] = X[:, None, :]
        flat = a.reshape(-1, self.d_pad)
        for step in range(3):
            a *= signs[:, step, :]
            _fwht(flat)
        return a.reshape(X.shape[0], nb * self.d_pad)

    def features(self, X: np.ndarray) -> np.ndarray:
        """``(X Omega)^2`` of shape (n, m)."""
        u = self.linear(X)
        u *= u
        return u


@functools.lru_cache(maxsize=16)
def _operator(d: int, m: int, kind: str, seed: int) -> QuadraticSketchOperator:
    """The operator for public parameters (cached: sweeps rebuild the same one many times)."""
    return QuadraticSketchOperator(d, m, kind=kind, seed=seed)


@functools.lru_cache(maxsize=16)
def _bounds(d: int, m: int, kind: str, seed: int, r: int | None, mask: str, neighbouring: str) -> SketchSensitivity:
    """Sensitivities of that operator (cached; they depend on public parameters only, never on data)."""
    return quadratic_sketch_bounds(_operator(d, m, kind, seed).omega, features_per_sample=r, mask=mask,
                                   neighbouring=neighbouring)


def _mask_generator(rng: Any) -> np.random.Generator:
    """Masks need no CSPRNG (the bound holds for every mask): the caller's Generator, or one seeded by the OS."""
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(int.from_bytes(os.urandom(16), "little"))


def site_sketch(X: np.ndarray, op: QuadraticSketchOperator, *, features_per_sample: int | None = None,
                mask: str = "uniform", rng: Any = None) -> np.ndarray:
    """The sum of the (subsampled, rescaled) features of the rows of ``X``: shape (m,).

    Rows are processed in chunks (temporaries of at most ~32 MiB).
    """
    n, d = X.shape
    m = op.m
    r = m if features_per_sample is None else check_int("features_per_sample", features_per_sample, minimum=1,
                                                        maximum=m)
    total = np.zeros(m)
    if r == m:
        step = max(1, _CHUNK_VALUES // m)
        for i in range(0, n, step):
            total += op.features(X[i:i + step]).sum(axis=0)
        return total
    gen = _mask_generator(rng)
    scale = m / r
    if mask == "block":
        if m % r:
            raise param_error("features_per_sample", f"a divisor of m={m} for block masks", r)
        blocks = gen.integers(0, m // r, size=n)
        for b in range(m // r):
            rows = X[blocks == b]
            if not rows.shape[0]:
                continue
            if op.kind == "orthonormal" and r == op.d_pad:
                u = op.linear(rows, block=b)
            else:
                u = rows @ op.omega[:, b * r:(b + 1) * r]
            total[b * r:(b + 1) * r] += scale * np.einsum("ij,ij->j", u, u)
        return total
    om = op.omega
    step = max(1, _CHUNK_VALUES // max(m, r * d))
    for i in range(0, n, step):
        chunk = X[i:i + step]
        idx = np.argpartition(gen.random((chunk.shape[0], m)), r - 1, axis=1)[:, :r]  # uniform r-subsets
        u = np.einsum("nd,dnr->nr", chunk, om[:, idx])
        total += scale * np.bincount(idx.ravel(), weights=(u * u).ravel(), minlength=m)
    return total


def _subspace_iteration(op_apply: Any, d: int, k: int, *, iterations: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k eigenpairs of a symmetric operator given as ``V -> M V`` (randomised subspace iteration)."""
    p = min(d, k + 8)
    V = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, p)))[0]
    for _ in range(iterations):
        V = np.linalg.qr(op_apply(V))[0]
    H = V.T @ op_apply(V)
    w, Y = np.linalg.eigh((H + H.T) / 2)
    order = np.argsort(w)[::-1][:k]
    return w[order], V @ Y[:, order]


def decode_subspace(z: np.ndarray, omega: np.ndarray, k: int, *, fit_rank: int | None = None, max_iter: int = 300,
                    init_iterations: int = 40) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Least-squares low-rank PSD fit to the sketch (Burer-Monteiro, L-BFGS, spectral start); its top-k subspace.

    Parameters
    ----------
    z : array of shape (m,)
        The (noisy) normalised sketch.
    omega : array of shape (d, m)
    k : int
        Components returned.
    fit_rank : int or None
        Rank of the fitted ``V V^T`` (default ``min(d, k + 5)``).  Fitting a few
        more directions than returned keeps the energy beyond the k-th
        component from being forced into the top k (measured at k = 3: q/q_o
        0.90 -> 0.98 with 3 more directions, 1.00 with 7, at m = 4 k d').

    Returns
    -------
    components : (d, k), orthonormal columns
    eigenvalues : (k,), non-increasing (``sigma_i(V)^2``)
    info : dict
        ``iterations``, ``converged``, ``relative_residual``.
    """
    d, m = omega.shape
    k_out = check_int("n_components", k, minimum=1, maximum=d)
    k = min(d, k_out + 5) if fit_rank is None else check_int("fit_rank", fit_rank, minimum=k_out, maximum=d)
    z = np.asarray(z, dtype=np.float64)
    scale = float(np.mean(np.abs(z))) or 1.0
    zs = z / scale
    col_sq = np.einsum("ij,ij->j", omega, omega)
    shift = float(zs @ col_sq) / (d + 2)

    def apply(V: np.ndarray) -> np.ndarray:
        return omega @ (zs[:, None] * (omega.T @ V)) - shift * V

    w, U = _subspace_iteration(apply, d, k, iterations=init_iterations, seed=0)
    W = U * np.sqrt(np.maximum(w, 1e-12 * max(float(w[0]), 1e-300)))
    a = np.sum((omega.T @ W) ** 2, axis=1)
    t = float(a @ zs) / float(a @ a) if float(a @ a) > 0 else 1.0
    V0 = W * math.sqrt(max(t, 1e-12))

    def fun(v: np.ndarray) -> tuple[float, np.ndarray]:
        V = v.reshape(d, k)
        P = omega.T @ V
        res = np.einsum("ij,ij->i", P, P) - zs
        grad = (2.0 / m) * (omega @ (res[:, None] * P))
        return 0.5 * float(res @ res) / m, grad.ravel()

    opt = scipy.optimize.minimize(fun, V0.ravel(), jac=True, method="L-BFGS-B",
                                  options={"maxiter": max_iter, "gtol": 1e-12, "ftol": 1e-15})
    V = opt.x.reshape(d, k)
    Uv, sv, _ = np.linalg.svd(V, full_matrices=False)
    resid = math.sqrt(2.0 * m * float(opt.fun)) / max(float(np.linalg.norm(zs)), 1e-300)
    return Uv[:, :k_out], sv[:k_out] ** 2 * scale, {"iterations": int(opt.nit), "converged": bool(opt.success),
                                                    "relative_residual": resid, "fit_rank": k}


class SketchPCA(SiteEstimator):
    """DP compressive PCA: every site releases a noisy quadratic sketch; the aggregator decodes.

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float > 0
    delta : float in (0, 1)
        Used by Gaussian noise (ignored by Laplace: pure epsilon-DP).
    sketch_size : int or None
        ``m`` (default ``min(4 K D, D (D + 1))``: the ``c k d`` regime, and never
        more than twice the unknowns of a full D x D second moment; rounded up
        to a multiple of ``d'`` for orthonormal frequencies).
    kind : {"orthonormal", "gaussian"}
    noise : {"gaussian", "laplace"}
    private : bool
        False: no noise (for utility references; the report says not DP).
    neighbouring : {"add-remove", "replace-one"}
        ``"add-remove"`` (default, also spelled ``"add/remove-one"``): the
        count is released with noise too (``count_fraction``) and everything
        public uses the noisy total (``extra["n_released"]``; the exact
        ``extra["n_samples"]`` only where the count is public).
    calibration : {"analytic", "classic"}
        Of the Gaussian noise (ignored by Laplace).
    sensitivity_mode : {"rigorous"}
        The sketch's sensitivity is computed, not taken from the paper;
        ``"paper"`` is refused.
    count_fraction : float in (0, 1)
        Share of epsilon spent on the count under add/remove-one.
    features_per_sample : int or None
        ``r`` for feature subsampling (None: all ``m``).
    mask : {"uniform", "block"}
    seed : int
        Public seed of ``Omega``.
    rng : None or numpy.random.Generator

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(500, 6)) * [1, .8, .1, .1, .1, .1] / 3
    >>> est = SketchPCA(2, 1.0, 1e-5, private=False).fit([X[:250], X[250:]])
    >>> est.components_.shape, est.result_.params["sketch_size"]
    ((2, 6), 48)
    """

    method_name = "sketch"

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 sketch_size: int | None = None, kind: str = "orthonormal", noise: str = "gaussian",
                 private: bool = True, neighbouring: str = "add-remove", calibration: str = "analytic",
                 sensitivity_mode: str = "rigorous", count_fraction: float = 0.1,
                 features_per_sample: int | None = None, mask: str = "uniform", seed: int = 0,
                 rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, rng=rng)
        self.sketch_size = sketch_size
        self.kind = kind
        self.noise = noise
        self.private = private
        self.neighbouring = neighbouring
        self.calibration = calibration
        self.sensitivity_mode = sensitivity_mode
        self.count_fraction = count_fraction
        self.features_per_sample = features_per_sample
        self.mask = mask
        self.seed = seed

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        if self.private:
            parts, k = super()._validate(partitions)
        else:
            parts = check_partitions(partitions)
            k = self._check_components(parts)
            check_budget(self.epsilon, self.delta)  # validated even when unused
        if self.noise not in SKETCH_NOISES:
            raise param_error("noise", "'gaussian' or 'laplace'", self.noise)
        if self.mask not in SUBSAMPLING_MASKS:
            raise param_error("mask", "'uniform' or 'block'", self.mask)
        relation_of(self.neighbouring)
        check_calibration(self.calibration, CALIBRATIONS)
        check_sensitivity_mode(self.sensitivity_mode)
        if self.private and self.sensitivity_mode != RIGOROUS:
            raise UnsupportedSettingError(f"sensitivity_mode {self.sensitivity_mode!r} of sketch: the paper's "
                                          "sensitivity is the rigorous one computed here (use 'rigorous')")
        check_open_unit("count_fraction", self.count_fraction)
        resolve_source(self.rng)
        return parts, k

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        d = parts[0].shape[1]
        m_req = (min(4 * k * d, d * (d + 1)) if self.sketch_size is None
                 else check_int("sketch_size", self.sketch_size, minimum=k))
        if self.kind not in FREQUENCY_KINDS:
            raise param_error("kind", "'gaussian' or 'orthonormal'", self.kind)
        op = _operator(d, m_req, self.kind, check_int("seed", self.seed, minimum=0))
        r = None if self.features_per_sample is None else check_int("features_per_sample", self.features_per_sample,
                                                                    minimum=1, maximum=op.m)
        timings = Timings(parallel_roles=("site",))
        source = resolve_source(self.rng) if self.private else None
        neighbouring = relation_of(self.neighbouring)
        sens = _bounds(d, m_req, self.kind, self.seed, r, self.mask, neighbouring) if self.private else None
        sums, counts, reports = [], [], []
        for i, X in enumerate(parts, start=1):
            with timings.measure(f"site:{i}", "sketch"):
                s = site_sketch(X, op, features_per_sample=r, mask=self.mask, rng=self.rng)
            n_s = float(X.shape[0])
            if self.private:
                assert sens is not None and source is not None
                with timings.measure(f"site:{i}", "noise"):
                    s, n_s, rep = self._privatise(s, n_s, sens, source)
                reports.append(rep)
            sums.append(s)
            counts.append(n_s)
        n_used = max(float(np.sum(counts)), 1.0)  # the sum of the noisy counts under add/remove-one
        with timings.measure("aggregator", "decode"):
            z = np.sum(sums, axis=0) / n_used
            V, w, info = decode_subspace(z, op.omega, k)
        if self.private:
            privacy = parallel_report(reports, mechanism=reports[0].mechanism, noise_added_by="site",
                                      notes=f"quadratic sketch, m={op.m}; {sens.how if sens else ''}")
        else:
            privacy = PrivacyReport.non_private()
        bytes_sent = {f"site:{i}": FLOAT_BYTES * (op.m + 1) for i in range(1, len(parts) + 1)}
        params = {"n_components": k, "epsilon": float(self.epsilon), "delta": float(self.delta),
                  "sketch_size": op.m, "kind": self.kind, "noise": self.noise if self.private else "none",
                  "neighbouring": neighbouring, "calibration": self.calibration, "features_per_sample": r, "mask": self.mask,
                  "seed": self.seed, "n_sites": len(parts)}
        extra: dict[str, Any] = {"decoder": info, "sensitivity_l1": sens.l1 if sens else 0.0,
                                 "sensitivity_l2": sens.l2 if sens else 0.0,
                                 "sensitivity_l2_lower": sens.l2_lower if sens else 0.0}
        if self.private and neighbouring == ADD_REMOVE_ONE:
            # the count is private: everything public (explained_variance_, singular_values_) uses the noisy one
            extra["n_released"] = n_used
        else:
            extra["n_samples"] = int(sum(X.shape[0] for X in parts))
        return PCAResult(method=self.method_name, components=flip_signs(V), eigenvalues=w, privacy=privacy,
                         timings=timings, bytes_sent=bytes_sent, params=params, extra=extra)

    def _privatise(self, s: np.ndarray, n_s: float, sens: SketchSensitivity,
                   source: Any) -> tuple[np.ndarray, float, PrivacyReport]:
        """Noise on the site's sum (and on its count under add/remove-one)."""
        eps, delta = check_budget(self.epsilon, self.delta)
        neighbouring = relation_of(self.neighbouring)
        count_noise = neighbouring == ADD_REMOVE_ONE
        eps_sum = eps * (1.0 - self.count_fraction) if count_noise else eps
        eps_cnt = eps * self.count_fraction
        d_sum = delta / 2 if count_noise else delta
        mode = "rigorous"
        mech: GaussianMechanism | LaplaceMechanism
        cmech: GaussianMechanism | LaplaceMechanism
        if self.noise == "gaussian":
            mech = GaussianMechanism(epsilon=eps_sum, delta=d_sum, sensitivity=sens.l2, calibration=self.calibration,
                                     neighbouring=neighbouring, sensitivity_mode=mode)
            cmech = GaussianMechanism(epsilon=eps_cnt, delta=delta / 2, sensitivity=1.0, calibration=self.calibration,
                                      neighbouring=neighbouring, sensitivity_mode=mode)
        else:
            mech = LaplaceMechanism(epsilon=eps_sum, sensitivity=sens.l1, neighbouring=neighbouring,
                                    sensitivity_mode=mode)
            cmech = LaplaceMechanism(epsilon=eps_cnt, sensitivity=1.0, neighbouring=neighbouring,
                                     sensitivity_mode=mode)
        noisy = s + mech.sample(s.shape, source)
        rep = mech.privacy("site", notes=f"sketch sum, {sens.how}; computed L2 lower bound {sens.l2_lower:.4g}")
        if not count_noise:
            return noisy, n_s, rep
        n_noisy = n_s + float(cmech.sample(1, source)[0])
        composed = compose_basic([rep, cmech.privacy("site", notes="count |X|")],
                                 notes="sketch sum and count, basic composition")
        # the composition is basic; the noise of both parts is calibrated as asked: the row says so
        return noisy, n_noisy, dataclasses.replace(composed, calibration=rep.calibration,
                                                   sensitivity_mode=rep.sensitivity_mode)
