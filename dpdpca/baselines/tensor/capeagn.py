"""capeAGN (Imtiaz & Sarwate 2018, Algorithm 3): distributed DP orthogonal tensor decomposition.

Two noisy stages, each a CAPE release (:class:`dpdpca.dp.CapeNoisePlan`), with
every noise term drawn by the party that owns it:

1. **Whitening** (budget ``(epsilon_1, delta_1)``).  The noise generator draws
   symmetric ``E_2^s`` with ``sum_s mu_s E_2^s = 0`` (exactly 0 for equal
   sites), the aggregator ``F_2^s``, site ``s`` its ``G_2^s``; site ``s`` sends
   ``M_2^s + E_2^s + F_2^s + G_2^s``.  The aggregator forms
   ``M_2_hat = sum_s mu_s (M_2_hat^s - F_2^s)`` (pooled noise level), takes its
   top-K eigenpairs ``U, D`` and sends ``W = U D^{-1/2}`` to the sites.
2. **Third moment** (budget ``(epsilon_2, delta_2)``).  Symmetric ``E_3^s``,
   ``F_3^s``, ``G_3^s``, each from ``C(D+2, 3)`` i.i.d. entries; site ``s`` sends
   the K x K x K tensor ``(M_3^s + E_3^s + F_3^s + G_3^s)(W, W, W)`` and the
   aggregator computes ``sum_s mu_s (M_3_tilde^s - F_3^s(W, W, W))``.  (The
   ``E_3^s`` cancel exactly before the projection; after it, up to float64
   rounding of the linear map, about ``1e-16`` of their size.)

The tensor power method with deflation on the result gives ``w_k`` and ``a_k``
(:mod:`~dpdpca.baselines.tensor.power`).  Each site's two releases are
``(epsilon_1, delta_1)`` and ``(epsilon_2, delta_2)``-DP against the
aggregator's joint view of all S releases of the stage (the ``E^s`` are
correlated, so the sites do not compose in parallel against it; see
:mod:`dpdpca.dp.cape`) and against everyone else; ``W`` is post-processing of
stage 1, so by basic composition the whole run is
``(epsilon_1 + epsilon_2, delta_1 + delta_2)``-DP.  The paper splits
``epsilon`` and ``delta`` equally (``budget_split=0.5``).

``cape_variances="rigorous"`` (default) uses
:meth:`dpdpca.dp.CapeNoisePlan.joint_safe` in both stages (``G^s`` 1% larger,
so is the aggregate's noise variance; ``E^s`` inflated, it cancels);
``"paper"`` keeps the paper's variances, whose reports carry the delta really
achieved against the joint view.  Either way the guarantee assumes a noise
generator and sites that do not collude with the aggregator (a colluding site
knows its own ``E^j``, which removes the correlated noise).

``variant="conv"`` is the ``conv`` baseline: each site adds only its own
``G^s`` at the full local level ``tau_s`` and the aggregator averages;
``variant="local"`` is ``conv`` on one site alone.  The registry
(:mod:`dpdpca.pipelines`) lists them as ``capeagn``, ``capeagn-conv``,
``capeagn-local`` and ``capeagn-nonprivate`` (kind ``"tensor-factors"``).

Defaults are rigorous; ``sensitivity_mode="paper"`` with ``calibration="classic"``
reproduces the paper (its MOG ``M_2`` sensitivity ``1/N_s`` is too small by
``sqrt(2)`` for the Gaussian mechanism, its MOG ``M_3`` value ``(2 + 6 D sigma^2)/N_s``
is valid but loose; see :func:`dpdpca.dp.tensor_moment_sensitivity`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_epsilon, check_int, check_nonnegative, check_open_unit, check_positive, param_error
from dpdpca.baselines._common import CAPE_BASIS, CAPE_TRUST, parallel_report
from dpdpca.baselines.tensor.models import check_components, check_model_kind
from dpdpca.baselines.tensor.moments import (WORD_MODES, SiteMoments, default_mog_scale, mog_moments,
                                             prepare_mog_records, project, stm_moments)
from dpdpca.baselines.tensor.power import (project_to_simplex_rows, recover_components, tensor_power_method,
                                           whiten)
from dpdpca.dp import (REPLACE_ONE, CapeNoisePlan, PrivacyReport, calibrate_gaussian, check_cape_variances,
                       compose_basic, resolve_source, symmetric_gaussian_matrix, symmetric_gaussian_tensor,
                       tensor_moment_sensitivity)
from dpdpca.dp.mechanisms import check_sensitivity_mode
from dpdpca.errors import DataError
from dpdpca.estimator import TensorEstimator
from dpdpca.result import TensorResult
from dpdpca.timing import Timings
from dpdpca.triangle import upper_triangle_size

__all__ = ["CapeAGN", "NonPrivateTensorDecomposition", "site_moments", "check_budget_split", "VARIANTS"]

_CAPE_PARTIES = "noise-generator,aggregator,site"
CALIBRATIONS = ("analytic", "classic")


def check_budget_split(value: Any) -> float:
    """The share of ``epsilon`` and ``delta`` spent on stage 1 (``M_2``), in (0, 1)."""
    return check_open_unit("budget_split", value)


def site_moments(partitions: Any, *, model: str, n_components: int, n_features: int | None = None,
                 noise_variance: float | None = None, sample_scale: float | None = None,
                 words: str = "all") -> tuple[list[SiteMoments], float, float]:
    """Each site's ``M_2``, ``M_3`` after the public preprocessing of its model.

    Returns
    -------
    moments : list of SiteMoments
    scale : float
        MOG: the public record scale ``zeta`` (means are multiplied by it at the
        end); STM: 1.
    scaled_noise_variance : float
        MOG: ``sigma^2 / zeta^2``, the variance the sensitivity uses; STM: 0.

    Raises
    ------
    ParameterError
        Unknown model, ``K > D``, a missing ``noise_variance`` (MOG) or
        ``n_features`` (STM), ``L < 3``.
    DataError
        Malformed partitions.
    """
    kind = check_model_kind(model)
    if not isinstance(partitions, (list, tuple)) or not partitions:
        raise DataError("partitions must be a non-empty list of per-site arrays")
    if kind == "mog":
        parts = [np.asarray(p, dtype=np.float64) for p in partitions]
        if any(p.ndim != 2 or p.shape[0] < 1 for p in parts):
            raise DataError("partitions must be 2-D arrays (N_s, D) with N_s >= 1")
        d = parts[0].shape[1]
        if any(p.shape[1] != d for p in parts):
            raise DataError(f"partitions must all have D = {d} columns, got {[p.shape[1] for p in parts]}")
        if not all(np.all(np.isfinite(p)) for p in parts):
            raise DataError("partitions must be finite (no NaN or inf)")
        check_components(n_components, d)
        if noise_variance is None:
            raise param_error("noise_variance", "given (the MOG sigma^2 is a public model parameter)", None)
        s2 = check_positive("noise_variance", noise_variance)
        zeta = default_mog_scale(d, s2) if sample_scale is None else check_positive("sample_scale", sample_scale)
        scaled = s2 / zeta ** 2
        return [mog_moments(prepare_mog_records(p, zeta), scaled) for p in parts], zeta, scaled
    if n_features is None:
        raise param_error("n_features", "given for the STM (the vocabulary size is public)", None)
    _, d = check_components(n_components, n_features)
    if words not in WORD_MODES:
        raise param_error("words", "'all' or 'first'", words)
    return [stm_moments(p, d, words=words) for p in partitions], 1.0, 0.0


class _MomentTensorEstimator(TensorEstimator):
    """Shared by capeAGN and the non-private reference: moments -> released (M_2, M_3(W, W, W)) -> factors.

    A subclass implements ``_release(moments, k, scaled_s2, timings)``, returning
    the aggregated ``M_2``, a function ``W -> aggregated M_3(W, W, W)``, the
    privacy report and the method name.
    """

    n_components: int
    model: str
    noise_variance: float | None
    n_features: int | None
    sample_scale: float | None
    words: str
    n_restarts: int
    n_iter: int
    random_state: Any

    def _moment_options(self) -> dict[str, Any]:
        return {"model": self.model, "noise_variance": self.noise_variance, "n_features": self.n_features,
                "sample_scale": self.sample_scale, "words": self.words}

    def _fit_result(self, partitions: list[Any]) -> TensorResult:
        self._check_params()
        timings = Timings(parallel_roles=("site",))
        with timings.measure("sites", "moments"):
            moments, scale, scaled_s2 = site_moments(partitions, n_components=self.n_components,
                                                     **self._moment_options())
        return self._result_from_moments(moments, scale, scaled_s2, timings)

    def fit_moments(self, moments: Sequence[SiteMoments], *, scale: float = 1.0,
                    scaled_noise_variance: float = 0.0) -> "_MomentTensorEstimator":
        """Fit on precomputed per-site moments (from :func:`site_moments`); return ``self``.

        ``scale`` and ``scaled_noise_variance`` are the values :func:`site_moments`
        returned with them (MOG: ``zeta`` and ``sigma^2/zeta^2``).
        """
        self._check_params()
        if not moments:
            raise DataError("moments must hold at least one site")
        result = self._result_from_moments(list(moments), check_positive("scale", scale),
                                           check_nonnegative("scaled_noise_variance", scaled_noise_variance),
                                           Timings(parallel_roles=("site",)))
        self._store_result(result)
        return self

    def _result_from_moments(self, moments: list[SiteMoments], scale: float, scaled_s2: float,
                             timings: Timings) -> TensorResult:
        k, d = check_components(self.n_components, moments[0].m2.shape[0])
        moments = self._sites_used(moments)
        m2, project_m3, privacy, method = self._release(moments, k, scaled_s2, timings)
        with timings.measure("aggregator", "whiten"):
            W, U, evals = whiten(m2, k)
        tensor = project_m3(W)
        rng = self.random_state if isinstance(self.random_state, np.random.Generator) else np.random.default_rng()
        with timings.measure("aggregator", "power-method"):
            lam, vecs = tensor_power_method(tensor, k, n_restarts=self.n_restarts, n_iter=self.n_iter, rng=rng)
            weights, means = recover_components(lam, vecs, U, evals)
        means = project_to_simplex_rows(means) if self.model == "stm" else means * scale
        self.eigenvalues_ = lam
        self.whitening_ = W
        self.projected_tensor_ = tensor
        self.sample_scale_ = scale
        n_sites = len(moments)
        float_bytes = 8
        bytes_sent = {f"site:{s + 1}": float_bytes * (upper_triangle_size(d) + k * (k + 1) * (k + 2) // 6)
                      for s in range(n_sites)}
        bytes_sent["aggregator"] = float_bytes * d * k * n_sites
        return TensorResult(method=method, weights=weights, means=means, privacy=privacy, timings=timings,
                            bytes_sent=bytes_sent,
                            params={"n_components": k, "model": self.model, "n_sites": n_sites},
                            extra={"sample_scale": scale, "eigenvalues": lam.tolist(),
                                   "n_samples": [m.n_samples for m in moments]})

    def _check_params(self) -> None:
        check_model_kind(self.model)
        check_int("n_restarts", self.n_restarts, minimum=1)
        check_int("n_iter", self.n_iter, minimum=1)
        if self.random_state is not None and not isinstance(self.random_state, np.random.Generator):
            raise param_error("random_state", "None or a numpy.random.Generator (power-method starts)",
                              self.random_state)

    def _sites_used(self, moments: list[SiteMoments]) -> list[SiteMoments]:
        """The sites whose moments enter the release (all, unless a subclass says otherwise)."""
        return moments

    def _release(self, moments: list[SiteMoments], k: int, scaled_s2: float,
                 timings: Timings) -> tuple[Any, Any, PrivacyReport, str]:
        raise NotImplementedError  # pragma: no cover - abstract


class NonPrivateTensorDecomposition(_MomentTensorEstimator):
    """The ``nonprivate`` reference: tensor power method on the pooled moments, no noise.

    The pooled moments are the ``N_s/N``-weighted averages of the site moments
    (both moments are linear in the per-record terms and the mean).
    ``epsilon`` and ``delta`` are accepted for the common signature and ignored.
    Other parameters as in :class:`CapeAGN`.

    Examples
    --------
    >>> from dpdpca.baselines.tensor import make_mog, sample_partitions
    >>> rng = np.random.default_rng(0)
    >>> m = make_mog(6, 2, rng=rng)
    >>> est = NonPrivateTensorDecomposition(2, noise_variance=0.05, random_state=rng)
    >>> est.fit(sample_partitions(m, 2, 20000, rng)).means_.shape
    (2, 6)
    """

    def __init__(self, n_components: int, epsilon: float | None = None, delta: float | None = None, *,
                 model: str = "mog", noise_variance: float | None = None, n_features: int | None = None,
                 sample_scale: float | None = None, words: str = "all", n_restarts: int = 10, n_iter: int = 100,
                 random_state: Any = None) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.model = model
        self.noise_variance = noise_variance
        self.n_features = n_features
        self.sample_scale = sample_scale
        self.words = words
        self.n_restarts = n_restarts
        self.n_iter = n_iter
        self.random_state = random_state

    def _release(self, moments: list[SiteMoments], k: int, scaled_s2: float,
                 timings: Timings) -> tuple[Any, Any, PrivacyReport, str]:
        sizes = np.array([m.n_samples for m in moments], dtype=np.float64)
        mus = sizes / sizes.sum()
        with timings.measure("aggregator", "aggregate"):
            m2 = sum(mu * m.m2 for mu, m in zip(mus, moments))
            m3 = sum(mu * m.m3 for mu, m in zip(mus, moments))
        return m2, (lambda W: project(m3, W)), PrivacyReport.non_private(), "capeagn-nonprivate"


VARIANTS = ("capeagn", "conv", "local")


class CapeAGN(_MomentTensorEstimator):
    """Distributed DP orthogonal tensor decomposition with CAPE noise (capeAGN), ``conv`` or ``local``.

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float, > 0
        Total epsilon of each site's two releases.
    delta : float, in (0, 1)
        Total delta.
    model : {"mog", "stm"}
    noise_variance : float, > 0
        MOG ``sigma^2`` (public; required for MOG).
    n_features : int
        STM vocabulary size ``D`` (public; required for STM).
    sample_scale : float, > 0, optional
        MOG public record scale ``zeta`` (default
        :func:`~dpdpca.baselines.tensor.moments.default_mog_scale`); records are
        divided by it and clipped to norm 1.  Never computed from the data.
    words : {"all", "first"}
        STM moment estimator (see :func:`~dpdpca.baselines.tensor.moments.stm_moments`).
    variant : {"capeagn", "conv", "local"}
        ``"capeagn"`` (CAPE, needs >= 2 sites); ``"conv"`` (each site adds its
        own noise at the local level, the aggregator averages); ``"local"``
        (``conv`` on site ``site`` alone).
    site : int, >= 0
        The site ``"local"`` uses.
    budget_split : float, in (0, 1)
        ``epsilon_1 = budget_split * epsilon``, ``delta_1 = budget_split * delta``
        for ``M_2``; the rest for ``M_3``.  0.5 as in the paper.
    sensitivity_mode : {"rigorous", "paper"}
        See :func:`dpdpca.dp.tensor_moment_sensitivity`.  ``"rigorous"`` (default)
        uses the distinct-entry bounds we prove; ``"paper"`` the appendix-C values.
    calibration : {"analytic", "classic"}
        ``"analytic"`` (default, Balle & Wang 2018, exact for every epsilon);
        ``"classic"`` (the paper's ``sqrt(2 ln(1.25/delta))/epsilon``, proven only
        for epsilon < 1).
    scheme : {"projection", "paper"}
        CAPE variance assignment for unequal sites
        (:meth:`dpdpca.dp.CapeNoisePlan.unequal`); equal sites always use eq. (2).
    cape_variances : {"rigorous", "paper"}
        ``"rigorous"`` (default): DP against the aggregator's joint view
        (:meth:`dpdpca.dp.CapeNoisePlan.joint_safe`); ``"paper"``: the paper's
        variances, for reproduction, reporting the delta really achieved
        against that view.  Only ``variant="capeagn"`` uses it.
    n_restarts, n_iter : int
        Tensor power method settings.
    rng : None or numpy.random.Generator
        Privacy noise.  ``None`` (default): OS entropy.  A Generator: experiments only.
    random_state : None or numpy.random.Generator
        Random starts of the power method (not privacy noise).

    Attributes
    ----------
    weights_ : array of shape (K,)
        Recovered ``w_k``.
    means_ : array of shape (K, D)
        Recovered ``a_k`` (rows); STM rows post-processed onto the simplex.
    eigenvalues_ : array of shape (K,)
        Tensor eigenvalues ``lambda_k = 1/sqrt(w_k)``.
    whitening_ : array of shape (D, K)
        The released ``W``.
    projected_tensor_ : array of shape (K, K, K)
        The released, aggregated ``M_3(W, W, W)``.
    privacy_ : PrivacyReport
        Basic composition of the two stages (``parts``), each the parallel
        composition of the sites' reports.
    noise_variances_ : dict
        Per stage: the per-site ``tau_s^2`` and the aggregate's noise variance.
    result_ : TensorResult
        Also ``n_components_``, ``n_features_in_``, ``timings_``, ``bytes_sent_``.

    Raises
    ------
    ParameterError
        ``K > D``, ``epsilon <= 0``, ``delta`` outside (0, 1), a bad split, mode,
        calibration or variant, CAPE with one site.

    References
    ----------
    H. Imtiaz, A. D. Sarwate, "Distributed Differentially Private Algorithms for
    Matrix and Tensor Factorization", IEEE JSTSP 2018, Algorithm 3, App. B-C.
    A. Anandkumar et al., "Tensor decompositions for learning latent variable
    models", JMLR 2014, Algorithm 1.

    Examples
    --------
    >>> from dpdpca.baselines.tensor import make_mog, sample_partitions
    >>> rng = np.random.default_rng(0)
    >>> m = make_mog(6, 2, rng=rng)
    >>> est = CapeAGN(2, epsilon=1.0, delta=0.01, noise_variance=0.05, rng=rng, random_state=rng)
    >>> est = est.fit(sample_partitions(m, 3, 2000, rng))
    >>> est.means_.shape, est.privacy_.epsilon
    ((2, 6), 1.0)
    """

    def __init__(self, n_components: int, *, epsilon: float, delta: float, model: str = "mog",
                 noise_variance: float | None = None, n_features: int | None = None,
                 sample_scale: float | None = None, words: str = "all", variant: str = "capeagn", site: int = 0,
                 budget_split: float = 0.5, sensitivity_mode: str = "rigorous", calibration: str = "analytic",
                 scheme: str = "projection", cape_variances: str = "rigorous", n_restarts: int = 10,
                 n_iter: int = 100, rng: Any = None, random_state: Any = None) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.model = model
        self.noise_variance = noise_variance
        self.n_features = n_features
        self.sample_scale = sample_scale
        self.words = words
        self.variant = variant
        self.site = site
        self.budget_split = budget_split
        self.sensitivity_mode = sensitivity_mode
        self.calibration = calibration
        self.scheme = scheme
        self.cape_variances = cape_variances
        self.n_restarts = n_restarts
        self.n_iter = n_iter
        self.rng = rng
        self.random_state = random_state

    def _check_params(self) -> None:
        super()._check_params()
        check_epsilon("epsilon", self.epsilon)
        check_open_unit("delta", self.delta)
        check_budget_split(self.budget_split)
        check_sensitivity_mode(self.sensitivity_mode)
        if self.calibration not in CALIBRATIONS:
            raise param_error("calibration", "'analytic' or 'classic'", self.calibration)
        if self.scheme not in ("projection", "paper"):
            raise param_error("scheme", "'projection' or 'paper'", self.scheme)
        check_cape_variances(self.cape_variances)
        if self.variant not in VARIANTS:
            raise param_error("variant", "'capeagn', 'conv' or 'local'", self.variant)
        check_int("site", self.site, minimum=0)
        resolve_source(self.rng)  # refuses an int seed before any work

    def _sites_used(self, moments: list[SiteMoments]) -> list[SiteMoments]:
        if self.variant != "local":
            return moments
        return [moments[check_int("site", self.site, minimum=0, maximum=len(moments) - 1)]]

    @property
    def stage_budgets(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """``((epsilon_1, delta_1), (epsilon_2, delta_2))`` from ``budget_split``."""
        split = check_budget_split(self.budget_split)
        eps, delta = float(self.epsilon), float(self.delta)
        return (split * eps, split * delta), ((1.0 - split) * eps, (1.0 - split) * delta)

    def _sensitivity_numerator(self, order: int, d: int, scaled_s2: float) -> float:
        """``Delta`` in the per-site sensitivity ``Delta / N_s``."""
        return tensor_moment_sensitivity(1, model=self.model, order=order, dimension=d,
                                         noise_variance=check_nonnegative("noise_variance", scaled_s2),
                                         mode=self.sensitivity_mode)

    def _release(self, moments: list[SiteMoments], k: int, scaled_s2: float,
                 timings: Timings) -> tuple[Any, Any, PrivacyReport, str]:
        if self.variant == "capeagn" and len(moments) < 2:
            raise param_error("partitions", ">= 2 sites for CAPE (use variant='local' for one site)", len(moments))
        correlated = self.variant == "capeagn"
        d = moments[0].m2.shape[0]
        sizes = [m.n_samples for m in moments]
        (eps1, del1), (eps2, del2) = self.stage_budgets
        src = resolve_source(self.rng)
        stage1 = _NoisyStage(self, correlated, 2, sizes, eps1, del1, self._sensitivity_numerator(2, d, scaled_s2))
        with timings.measure("sites", "m2-noise"):
            m2 = stage1.aggregate([m.m2 for m in moments], (d, d), src, lambda x: x)
        stage2 = _NoisyStage(self, correlated, 3, sizes, eps2, del2, self._sensitivity_numerator(3, d, scaled_s2))
        m3s = [m.m3 for m in moments]
        self.noise_variances_ = {"m2": stage1.variances(), "m3": stage2.variances()}
        privacy = compose_basic([stage1.report(), stage2.report()],
                                notes=f"budget_split={float(self.budget_split)}: stage 1 (M2, whitening) "
                                      f"({eps1:.6g}, {del1:.6g}), stage 2 (M3) ({eps2:.6g}, {del2:.6g})")

        def project_m3(W: np.ndarray) -> np.ndarray:
            with timings.measure("sites", "m3-noise-and-projection"):
                return stage2.aggregate(m3s, (d, d, d), src, lambda x: project(x, W))

        method = "capeagn" if correlated else f"capeagn-{self.variant}"
        return m2, project_m3, privacy, method


class _NoisyStage:
    """One stage of capeAGN / conv: per-site noisy releases and their aggregate."""

    def __init__(self, est: CapeAGN, correlated: bool, order: int, sizes: list[int], epsilon: float, delta: float,
                 numerator: float) -> None:
        self.est, self.order, self.sizes = est, order, sizes
        self.epsilon, self.delta, self.numerator = epsilon, delta, numerator
        total = sum(sizes)
        self.weights = [n / total for n in sizes]
        self.taus = [calibrate_gaussian(epsilon=epsilon, delta=delta, sensitivity=numerator / n,
                                        calibration=est.calibration) for n in sizes]
        self.plan: CapeNoisePlan | None = None
        if correlated:
            self.plan = CapeNoisePlan.from_budgets(
                epsilons=[epsilon] * len(sizes), deltas=[delta] * len(sizes), sizes=sizes,
                sensitivity_numerator=numerator, calibration=est.calibration, method=est.scheme,
                variances=est.cape_variances)

    def aggregate(self, stats: list[np.ndarray], shape: tuple[int, ...], src: Any, post: Any) -> np.ndarray:
        """``sum_s mu_s (post(stat_s + noise_s) - post(F_s))``; ``post`` is linear (identity or projection)."""
        d = shape[0]
        if self.plan is None:  # conv / local: each site's own noise at the local level
            draw = symmetric_gaussian_matrix if len(shape) == 2 else symmetric_gaussian_tensor
            releases = [post(x + draw(d, tau, rng=src)) for x, tau in zip(stats, self.taus)]
            return sum(mu * r for mu, r in zip(self.weights, releases))
        e_terms = self.plan.noise_generator_terms(shape, symmetric=True, rng=src)     # noise generator
        f_terms = self.plan.aggregator_terms(shape, symmetric=True, rng=src)          # aggregator
        releases = []
        for i, x in enumerate(stats):                                                 # site i
            g = self.plan.site_term(i, shape, symmetric=True, rng=src)
            releases.append(post(x + e_terms[i] + f_terms[i] + g))
        return self.plan.aggregate(releases, [post(f) for f in f_terms])

    def variances(self) -> dict[str, Any]:
        site = [t * t for t in self.taus]
        agg = self.plan.aggregator_noise_variance if self.plan else math.fsum(
            mu * mu * v for mu, v in zip(self.weights, site))
        return {"site_tau2": site, "aggregate_variance": agg}

    def report(self) -> PrivacyReport:
        label = f"M{self.order}"
        if self.plan is not None:
            reports = [self.plan.privacy(i) for i in range(len(self.sizes))]
            reports = [_with_mode(r, self.est.sensitivity_mode) for r in reports]
            return parallel_report(reports, mechanism="cape", noise_added_by=_CAPE_PARTIES,
                                   notes=f"capeAGN {label}; {CAPE_TRUST}", basis=CAPE_BASIS)
        reports = [PrivacyReport(epsilon=self.epsilon, delta=self.delta, mechanism="gaussian",
                                 calibration=self.est.calibration, sensitivity=self.numerator / n,
                                 neighbouring=REPLACE_ONE, noise_added_by="site", sigma=tau,
                                 sensitivity_mode=self.est.sensitivity_mode)
                   for n, tau in zip(self.sizes, self.taus)]
        return parallel_report(reports, mechanism="gaussian", noise_added_by="site", notes=f"conv {label}")


def _with_mode(report: PrivacyReport, mode: str) -> PrivacyReport:
    import dataclasses

    return dataclasses.replace(report, sensitivity_mode=mode)
