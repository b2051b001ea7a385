"""Shared parts of the plaintext pipelines: the estimator base, validation, partial roots, bytes.

Conventions (all Imtiaz-Sarwate pipelines):

* rows are individuals; site ``s`` holds ``X_s`` of shape (N_s, D) with
  ``||x|| <= 1`` (clip with :func:`dpdpca.data.clip_rows` first);
* the statistic is the second-moment matrix ``A_s = X_s^T X_s / N_s`` of
  pre-centred data (the papers' ``(1/N_s) X_s X_s^T`` with samples as columns);
* noisy symmetric matrices are decomposed with
  :func:`dpdpca.linalg.top_eigenpairs` (one sign rule everywhere) and the top
  eigenpairs are taken by *algebraic* value (a noisy matrix can have negative
  eigenvalues; a partial square root uses ``sqrt(max(lambda, 0))``);
* parties are ``"site:<s>"`` (parallel: only the slowest counts on the critical
  path), ``"aggregator"`` and ``"noise-generator"``; bytes are float64 (8
  bytes per value) and a symmetric matrix is sent as its upper triangle.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_delta, check_epsilon, check_finite_rows, check_int, param_error
from dpdpca.data.preprocessing import check_partitions, partition
from dpdpca.baselines.release import AddRemoveNoise, moment_from_pieces, scatter_pieces
from dpdpca.dp import (ADD_REMOVE_ONE, REPLACE_ONE, GaussianMechanism, PrivacyReport, at_proven_sensitivity,
                       centred_scatter_sensitivity, resolve_source, second_moment_sensitivity,
                       symmetric_gaussian_matrix)
from dpdpca.dp.mechanisms import check_sensitivity_mode
from dpdpca.dp.settings import PAPER, RIGOROUS, relation_of
from dpdpca.errors import DataError, UnsupportedSettingError
from dpdpca.estimator import PCAEstimator
from dpdpca.linalg import second_moment, top_eigenpairs
from dpdpca.result import PCAResult
from dpdpca.timing import Timings
from dpdpca.triangle import upper_triangle_size

__all__ = ["FLOAT_BYTES", "SiteEstimator", "NoisySiteEstimator", "parallel_report", "partial_square_root",
           "site_eigh_dtype", "check_site_precision", "SITE_PRECISIONS", "CENTERINGS", "symmetric_bytes",
           "check_budget", "check_unit_rows", "CAPE_TRUST", "CAPE_BASIS", "UPLOAD_NOTE"]

FLOAT_BYTES = 8


def symmetric_bytes(d: int) -> int:
    """Bytes of a symmetric d x d float64 matrix sent as its upper triangle."""
    return FLOAT_BYTES * upper_triangle_size(d)


def partial_square_root(M: np.ndarray, r: int, *, dtype: Any = np.float64) -> np.ndarray:
    """``P = U_R Sigma_R^{1/2}`` of a symmetric matrix (DPdisPCA Alg. 1 steps 4-5).

    Negative eigenvalues (possible after noise) are clipped to zero.  ``dtype``
    as in :func:`top_eigenpairs`.
    """
    w, U = top_eigenpairs(M, r, dtype=dtype)
    return U * np.sqrt(np.maximum(w, 0.0))


SITE_PRECISIONS = ("auto", "float64")
#: How a DP pipeline centres (see :class:`NoisySiteEstimator`), the default first.
CENTERINGS = ("site", "none")
_NOISE_MARGIN = 100.0


def check_site_precision(precision: Any) -> str:
    """``precision`` must be one of :data:`SITE_PRECISIONS`."""
    if precision not in SITE_PRECISIONS:
        raise param_error("site_precision", f"one of {', '.join(SITE_PRECISIONS)}", precision)
    return str(precision)


def site_eigh_dtype(precision: str, M: np.ndarray, sigma: float) -> Any:
    """The precision in which a site decomposes its noisy matrix ``M``.

    ``"float64"``: always float64.  ``"auto"``: float32 when float32 rounding is
    negligible against the DP noise already in ``M``, else float64.  The test
    is conservative on both sides:

    * float32 storage plus LAPACK's backward-stable ``ssyevr`` yields the
      exact eigenpairs of ``M + F`` with ``||F||_2 <= (d + 1) eps_32 ||M||_F``
      (taking the usual ``p(d) <= d`` for the backward error constant);
    * the noise ``E`` in ``M`` (i.i.d. ``N(0, sigma^2)`` upper triangle) has
      ``||E||_2 ~ 2 sigma sqrt(d)`` (the semicircle edge);
    * float32 is used when the first is at most 1/100 of the second, so the
      rounding moves the matrix by under 1% of the perturbation the mechanism
      already applied.  On Fashion-MNIST with d = 784, N_s = 6000 the test
      passes with a further 7.5x to spare at epsilon = 1 and 3.9x at
      epsilon = 10, and picks float64 at epsilon = 100.

    ``M`` is the *noisy* matrix, so the choice is post-processing of a DP
    release and costs no privacy.  On one core float32 ``eigh`` at d = 784
    takes ~55% of the float64 time (the tridiagonal reduction dominates).
    """
    if check_site_precision(precision) == "float64":
        return np.float64
    d = M.shape[0]
    rounding = (d + 1) * float(np.finfo(np.float32).eps) * float(np.linalg.norm(M))
    noise = 2.0 * float(sigma) * math.sqrt(d)
    return np.float32 if _NOISE_MARGIN * rounding <= noise else np.float64


def check_budget(epsilon: Any, delta: Any) -> tuple[float, float]:
    """epsilon > 0 and delta in (0, 1)."""
    return check_epsilon("epsilon", epsilon), check_delta("delta", delta)


def check_unit_rows(parts: Sequence[np.ndarray], *, tol: float = 1e-9) -> None:
    """Raise unless every row has L2 norm <= 1 (the papers' assumption; sensitivity depends on it).

    Also the NaN/inf check, in the same pass: a NaN or inf entry makes its row's
    norm non-finite (the first such row is named, as
    :func:`~dpdpca.data.check_partitions` would).
    """
    for i, X in enumerate(parts):
        with np.errstate(over="ignore", invalid="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", X, X))
        if not np.isfinite(norms).all():
            check_finite_rows(f"partitions[{i}]", X)  # else finite entries whose squares overflow: too long
        if norms.max() > 1.0 + tol:
            row = int(np.argmax(norms))
            raise DataError(f"partitions[{i}] rows must have L2 norm <= 1 (clip with dpdpca.data.clip_rows), "
                            f"got {norms[row]:.6g} in row {row}")


class SiteEstimator(PCAEstimator):
    """Base of the plaintext pipelines: the :class:`~dpdpca.estimator.PCAEstimator` contract.

    Subclasses implement ``_fit(parts, k) -> PCAResult`` on validated
    partitions (rows of norm <= 1) with the eigenvalues of the second moment
    they decomposed; this base adds ``explained_variance`` (those eigenvalues
    times ``N/(N - 1)``, ``N`` the rows behind the matrix).  ``n_components=None``
    keeps every feature.
    """

    method_name = ""

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 rng: Any = None) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.rng = rng

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        parts = check_partitions(partitions, check_finite=False)  # check_unit_rows finds NaN/inf in its pass
        k = self._check_components(parts)
        check_budget(self.epsilon, self.delta)
        check_unit_rows(parts)
        return parts, k

    def _check_components(self, parts: Sequence[np.ndarray]) -> int:
        d = int(parts[0].shape[1])
        return d if self.n_components is None else check_int("n_components", self.n_components, minimum=1,
                                                               maximum=d)

    def _n_rows(self, parts: Sequence[np.ndarray]) -> int:
        """Rows behind the matrix decomposed (all of them, unless a pipeline uses fewer)."""
        return sum(int(X.shape[0]) for X in parts)

    def _fit_result(self, partitions: list[Any]) -> PCAResult:
        parts, k = self._validate(partitions)
        result = self._fit(parts, k)
        # the count behind the released numbers: a pipeline whose count is private (add/remove) sets the noisy one
        n = float(result.extra.get("n_released", self._n_rows(parts)))
        bessel = n / max(n - 1.0, 1.0)
        extra = dict(result.extra, n_released=n)
        if "trace" in extra:  # the trace of the matrix decomposed, in the eigenvalues' units
            extra["total_variance"] = float(extra.pop("trace")) * bessel
        ev = result.eigenvalues * bessel if result.explained_variance is None else result.explained_variance
        return dataclasses.replace(result, explained_variance=ev, extra=extra)

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:  # pragma: no cover - abstract
        raise NotImplementedError


class NoisySiteEstimator(SiteEstimator):
    """Base of the DP pipelines: each party's noisy second moment, under either relation, via :mod:`dpdpca.dp`.

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float > 0
    delta : float in (0, 1)
    calibration : {"analytic", "classic"}
        ``"analytic"`` (default): Balle & Wang (2018).  ``"classic"`` (the
        papers'): ``tau = Delta sqrt(2 ln(1.25/delta))/epsilon``, proven only for
        epsilon < 1 (for epsilon >= 1 the report carries the larger delta it
        really achieves).
    sensitivity_mode : {"rigorous", "paper"}
        ``"rigorous"`` (default): the bound proven for the relation used.
        ``"paper"`` (replace-one only, for reproduction): the noise is
        calibrated to ``Delta = 1/N_s`` as the papers state, too small under
        replace-one by ``sqrt(2)`` (see :func:`dpdpca.dp.second_moment_sensitivity`),
        or by ``4 (N_s - 1)/N_s`` for a centred release; the report keeps
        epsilon and states the larger delta that noise really gives at the
        proven sensitivity, with a note naming the delta at the paper's
        (:meth:`_as_ran`).
    centering : {"site", "none"}
        ``"site"`` (default, as scikit-learn's PCA): each party releases the
        *centred* second moment of the rows it holds, paying for the mean
        inside its release (a pooled curator centres with the pooled mean,
        distributed sites with their own).  ``"none"`` (the papers): the rows
        are taken as centred already.
    neighbouring : {"add-remove", "replace-one"}
        ``"add-remove"`` (default, also spelled ``"add/remove-one"``): a
        party releases the protocol's add/remove release of its rows, noisy
        ``R``, ``v`` and ``N`` (:mod:`dpdpca.baselines.release`), and forms its
        second moment from them; its count stays private.  ``"replace-one"``:
        noise on the (centred, per ``centering``) second moment ``A_s`` with
        ``N_s`` public, at sensitivity ``sqrt(2)/N_s`` (uncentred) or
        ``4 (N_s - 1)/N_s^2`` (centred, :func:`dpdpca.dp.centred_scatter_sensitivity`
        divided by ``N_s``); the paper mode keeps ``1/N_s``.
    rng : None or numpy.random.Generator
        ``None``: OS entropy.  A Generator only for experiments.

    Raises
    ------
    UnsupportedSettingError
        ``sensitivity_mode="paper"`` with ``neighbouring="add-remove"`` (the
        papers' ``1/N_s`` needs a public ``N_s``).
    """

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 calibration: str = "analytic", sensitivity_mode: str = "rigorous", centering: str = "site",
                 neighbouring: str = "add-remove", rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, rng=rng)
        self.calibration = calibration
        self.sensitivity_mode = sensitivity_mode
        self.centering = centering
        self.neighbouring = neighbouring

    def _split(self, partitions: Any) -> Any:
        """One (n, d) array split into ``n_sites`` equal sites (rows in order), for estimators with ``n_sites``."""
        n_sites = getattr(self, "n_sites", None)
        if n_sites is None:
            return partitions
        n_sites = check_int("n_sites", n_sites, minimum=1)
        parts = partitions if isinstance(partitions, list) else [partitions]
        if len(parts) == 1:
            return partition(parts[0], n_sites)
        if len(parts) != n_sites:
            raise param_error("n_sites", f"None or the number of partitions given ({len(parts)})", n_sites)
        return parts

    @property
    def _add_remove(self) -> bool:
        return relation_of(self.neighbouring) == ADD_REMOVE_ONE

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        parts, k = super()._validate(self._split(partitions))
        check_sensitivity_mode(self.sensitivity_mode)
        if self.centering not in CENTERINGS:
            raise param_error("centering", f"one of {', '.join(CENTERINGS)}", self.centering)
        if self._add_remove and self.sensitivity_mode == PAPER:
            raise UnsupportedSettingError(
                f"sensitivity_mode 'paper' has no add/remove-one form in {self.method_name}: the papers' "
                f"Delta = 1/N_s needs a public N_s (use neighbouring='replace-one'), got neighbouring "
                f"{self.neighbouring!r}")
        self._mechanism(2)  # validates the calibration before any work
        resolve_source(self.rng)  # refuses an int seed before any work
        return parts, k

    def _mechanism(self, n_rows: int, epsilon: float | None = None, delta: float | None = None) -> GaussianMechanism:
        """The replace-one Gaussian mechanism for a (centred, per ``centering``) second moment over ``n_rows`` records."""
        sens = self._sensitivity(n_rows)
        return GaussianMechanism(epsilon=self.epsilon if epsilon is None else epsilon,
                                 delta=self.delta if delta is None else delta, sensitivity=sens,
                                 calibration=self.calibration, neighbouring=REPLACE_ONE,
                                 sensitivity_mode=self.sensitivity_mode)

    def _add_remove_noise(self, d: int) -> AddRemoveNoise:
        """The protocol's add/remove calibration for ``d`` features (:mod:`dpdpca.baselines.release`)."""
        return AddRemoveNoise.calibrate(epsilon=self.epsilon, delta=self.delta, d=d, calibration=self.calibration)

    def _sensitivity(self, n_rows: int, mode: str | None = None) -> float:
        """Replace-one L2 sensitivity of the second moment a party releases over ``n_rows`` records.

        ``mode``: ``sensitivity_mode`` unless given (``"rigorous"``: the proven one).
        """
        mode = self.sensitivity_mode if mode is None else mode
        if self.centering == "site":
            return float(centred_scatter_sensitivity(n_rows, neighbouring=REPLACE_ONE, mode=mode)) / n_rows
        return second_moment_sensitivity(n_rows, neighbouring=REPLACE_ONE, mode=mode)

    def _as_ran(self, report: PrivacyReport, n_rows: int) -> PrivacyReport:
        """A replace-one release's report with the delta it really has (the paper mode's is larger than claimed).

        ``sensitivity_mode="paper"`` calibrates to the papers' ``1/N_s``; the
        statistic's proven sensitivity is ``sqrt(2)/N_s`` (uncentred) or
        ``4 (N_s - 1)/N_s^2`` (centred), so the report carries the delta the
        noise drawn really gives at it, with a note naming the delta at the
        paper's sensitivity (:func:`dpdpca.dp.at_proven_sensitivity`).  The
        rigorous mode's report is returned unchanged.
        """
        if self.sensitivity_mode != PAPER:
            return report
        return at_proven_sensitivity(report, self._sensitivity(n_rows, RIGOROUS))

    def _moment(self, X: np.ndarray) -> np.ndarray:
        """The second moment a party releases: of its rows as given, or centred (``centering="site"``)."""
        return second_moment(X, center=self.centering == "site")

    def _noisy_moment(self, X: np.ndarray, src: Any, party: str, timings: Timings,
                      noise: AddRemoveNoise | None = None) -> tuple[np.ndarray, float, PrivacyReport, float]:
        """One party's noisy second moment of ``X`` under this estimator's relation.

        Returns ``(A, sigma, report, n)``: the matrix, the std. deviation of
        its noise per entry (for :func:`site_eigh_dtype`), the party's report
        and the count behind ``A`` (the noisy one under add/remove).
        """
        d = X.shape[1]
        if self._add_remove:
            noise = noise or self._add_remove_noise(d)
            with timings.measure(party, "second-moment"):
                pieces = scatter_pieces(X)
            with timings.measure(party, "noise"):
                pieces += noise.draw(src)
                A, n, _ = moment_from_pieces(pieces, d, centred=self.centering == "site")
            return A, noise.sigma("R") / n, noise.privacy(party), n
        mech = self._mechanism(X.shape[0])
        with timings.measure(party, "second-moment"):
            A = self._moment(X)
        with timings.measure(party, "noise"):
            A += symmetric_gaussian_matrix(d, mech.sigma, src)
        return A, float(mech.sigma), self._as_ran(mech.privacy(noise_added_by=party), X.shape[0]), float(X.shape[0])

    def _raw_upload(self, parts: Sequence[np.ndarray]) -> tuple[dict[str, int], dict[str, Any]]:
        """``bytes_sent`` and ``extra`` entries of sites sending their raw rows to a trusted curator.

        Under replace-one the sizes are public and each site's upload is
        listed, ``8 D N_s`` bytes.  Under add/remove-one ``N_s`` is private and
        the upload's size would publish it exactly, so the upload is accounted
        as what it is in this trust model, the curator's own input (inside its
        trust boundary, like the rows it holds): it is left out of
        ``bytes_sent`` and ``extra["upload"]`` says so.
        """
        if not self._add_remove:
            return {f"site:{i}": FLOAT_BYTES * X.size for i, X in enumerate(parts, start=1)}, {}
        return {}, {"upload": UPLOAD_NOTE}

    def _base_params(self, k: int, parts: Sequence[np.ndarray]) -> dict[str, Any]:
        params = {"n_components": k, "epsilon": float(self.epsilon), "delta": float(self.delta),
                  "calibration": self.calibration, "sensitivity_mode": self.sensitivity_mode,
                  "centering": self.centering, "neighbouring": relation_of(self.neighbouring),
                  "n_sites": len(parts)}
        if not self._add_remove:  # under add/remove the sizes are private
            params["site_sizes"] = [int(X.shape[0]) for X in parts]
        return params


#: ``extra["upload"]`` of a raw-upload curator (pooled, MOD-SuLQ) under add/remove-one.
UPLOAD_NOTE = ("each site sends its raw rows (8 D N_s bytes) to the trusted curator: the curator's own input, "
               "inside its trust boundary, not listed in bytes_sent because N_s is private under add/remove-one")

#: The trust assumption of every CAPE report (:mod:`dpdpca.baselines.capepca`).
CAPE_TRUST = ("assumes a noise generator that does not collude with the aggregator, sites that do not collude with "
              "the aggregator (a colluding site knows its own E_j, which removes the correlated noise) and secure "
              "channels")
#: How the per-site guarantees make the whole one under CAPE (the reports' ``basis``).
CAPE_BASIS = ("a record is in one site, and the aggregator's joint view of all releases (correlated E_s) is one "
              "Gaussian mechanism per site")


def parallel_report(reports: Sequence[PrivacyReport], *, mechanism: str, noise_added_by: str,
                    notes: str = "", basis: str = "parallel composition over disjoint sites") -> PrivacyReport:
    """Report of a release built from per-site releases on **disjoint** data.

    A person's record is in one site only, so the whole release is
    (max epsilon_s, max delta_s)-DP (parallel composition, replace-one within a
    site; the site sizes are public).  ``sigma`` (``scale``) is the common
    per-site sigma (Laplace scale), or None when sites differ (see ``parts``).
    ``basis`` opens the notes: why the per-site guarantees make the whole one
    (CAPE's correlated releases are analysed jointly, not composed in parallel).
    """
    first = reports[0]
    sigmas = {r.sigma for r in reports}
    scales = {r.scale for r in reports}
    extra = "; ".join(sorted({r.notes for r in reports if r.notes}))
    text = "; ".join(t for t in (basis, notes, extra) if t)
    return PrivacyReport(epsilon=max(r.epsilon for r in reports), delta=max(r.delta for r in reports),
                         mechanism=mechanism, calibration=first.calibration,
                         sensitivity=max(r.sensitivity for r in reports), neighbouring=first.neighbouring,
                         noise_added_by=noise_added_by, sigma=sigmas.pop() if len(sigmas) == 1 else None,
                         scale=scales.pop() if len(scales) == 1 else None,
                         sensitivity_mode=first.sensitivity_mode, notes=text,
                         parts=tuple(reports) if len(reports) > 1 else ())
