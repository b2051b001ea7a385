"""CAPE: correlated noise for distributed DP (Imtiaz & Sarwate 2018, §III).

Site ``s`` releases ``a_s + e_s + f_s + g_s``:

* ``e_s`` from the **noise generator**, with ``sum_s mu_s e_s = 0``;
* ``f_s`` from the **aggregator**, who later subtracts it;
* ``g_s`` drawn by the **site** itself.

The aggregator computes ``sum_s mu_s (a_hat_s - f_s) = sum_s mu_s a_s + sum_s mu_s g_s``,
whose noise variance is ``tau_c^2 = sum_s mu_s^2 tau_gs^2``: the pooled-data level
(Lemma 1).  Each site's release stays (eps_s, delta_s)-DP against the aggregator
(who knows ``f_s``: the protecting noise is ``e_s + g_s``) and against anyone
else (``f_s + g_s``), because ``tau_es^2 + tau_gs^2 >= tau_s^2`` and
``tau_fs^2 + tau_gs^2 >= tau_s^2`` (checked here; :class:`InfeasibleError` if not).

:class:`CapeNoisePlan` holds only public numbers (the variances).  Each party
calls the method for *its own* terms with its own random source:
:meth:`~CapeNoisePlan.noise_generator_terms`,
:meth:`~CapeNoisePlan.aggregator_terms`, :meth:`~CapeNoisePlan.site_term`.

**"Exactly zero".**  With equal weights (the equal-sites scheme, eq. (2)) the
generator draws i.i.d. ``e_hat_s ~ N(0, tau_e^2 S/(S-1))`` and centres them
(``e_s = e_hat_s - mean``, variance ``(1 - 1/S) tau_e^2 S/(S-1) = tau_e^2``).  It then
rounds the first ``S - 1`` terms to a common power-of-two grid ``q`` (about
``2^-50`` times the largest term, so the change is far below the noise scale) and
sets the last term to minus their sum.  All terms and all partial sums are
multiples of ``q`` below ``2^53 q``, so float64 addition is exact and
``sum_s E_s == 0`` holds **exactly, in any summation order**.  With unequal
weights (§III-A) ``e_S = -(1/mu_S) sum_{s<S} mu_s e_s``; ``sum mu_s e_s`` is then zero
up to float64 rounding of the products (documented, not exact).

References
----------
H. Imtiaz, A. D. Sarwate, "Distributed Differentially Private Algorithms for
Matrix and Tensor Factorization", IEEE JSTSP 2018: §III eq. (2), Algorithm 1,
Lemma 1, Proposition 1, §III-A (unequal privacy and sample sizes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_int, check_nonnegative, check_open_unit, check_positive, param_error
from dpdpca.dp.calibration import calibrate_gaussian
from dpdpca.dp.noise import symmetric_from_upper, upper_triangle_size
from dpdpca.dp.randomness import resolve_source
from dpdpca.dp.report import REPLACE_ONE, PrivacyReport
from dpdpca.errors import InfeasibleError

__all__ = ["CapeNoisePlan", "cape_gain", "cape_gain_max", "exact_zero_sum"]

_REL_TOL = 1e-9


def cape_gain(sizes: Sequence[int]) -> float:
    """Proposition 1 gain ``G(n) = N^2/S^2 * sum_s 1/N_s^2`` of CAPE over conventional averaging."""
    ns = [check_int("sizes[i]", v, minimum=1) for v in sizes]
    if not ns:
        raise param_error("sizes", "non-empty", list(sizes))
    total, s = sum(ns), len(ns)
    return total ** 2 / s ** 2 * math.fsum(1.0 / v ** 2 for v in ns)


def cape_gain_max(n_total: int, n_sites: int) -> float:
    """Proposition 1 maximum ``N^2/S^2 (1/(N-S+1)^2 + S - 1)``, at ``n = [1, ..., 1, N-S+1]``."""
    s = check_int("n_sites", n_sites, minimum=1)
    n = check_int("n_total", n_total, minimum=s)
    return n ** 2 / s ** 2 * (1.0 / (n - s + 1) ** 2 + s - 1)


def exact_zero_sum(rows: np.ndarray) -> np.ndarray:
    """Adjust ``rows`` (shape (S, ...)) so that their float64 sum over axis 0 is exactly 0.

    Rows ``0..S-2`` are rounded to a power-of-two grid ``q`` with
    ``q = 2^(ceil(log2(S * max|rows|)) - 50)``; the last row is set to minus their
    sum, computed exactly.  Every partial sum is then a multiple of ``q`` of
    magnitude below ``2^53 q``, so float64 addition in any order is exact.
    """
    x = np.array(rows, dtype=np.float64, copy=True)
    s = x.shape[0]
    if s < 2:
        return np.zeros_like(x)
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak == 0.0:
        return np.zeros_like(x)
    q = 2.0 ** (math.ceil(math.log2(s * peak)) - 50)
    x[:-1] = np.round(x[:-1] / q) * q
    x[-1] = -np.sum(x[:-1], axis=0)
    return x


@dataclass(frozen=True)
class CapeNoisePlan:
    """Public CAPE noise variances for ``S`` sites, and per-party noise draws.

    Build with :meth:`equal`, :meth:`unequal` or :meth:`from_budgets`; the
    constructor validates every constraint.

    Attributes
    ----------
    tau_s2 : tuple of float
        Per-site target variances ``tau_s^2`` (what local DP alone would need).
    weights : tuple of float
        Aggregation weights ``mu_s`` (>= 0, sum 1).
    tau_e2, tau_f2, tau_g2 : tuple of float
        Variances of the generator's, aggregator's and site's terms.
    tau_c2 : float
        Target variance of the aggregator's estimate (pooled-data level).
    scheme : str
        ``"equal"`` (eq. (2)) or ``"unequal"`` (§III-A closed form).
    """

    tau_s2: tuple[float, ...]
    weights: tuple[float, ...]
    tau_e2: tuple[float, ...]
    tau_f2: tuple[float, ...]
    tau_g2: tuple[float, ...]
    tau_c2: float
    scheme: str
    epsilons: tuple[float, ...] = field(default=())
    deltas: tuple[float, ...] = field(default=())
    sensitivities: tuple[float, ...] = field(default=())
    neighbouring: str = REPLACE_ONE
    calibration: str = "analytic"

    def __post_init__(self) -> None:
        s = len(self.tau_s2)
        if s < 2:
            raise param_error("n_sites", ">= 2", s)
        for name in ("weights", "tau_e2", "tau_f2", "tau_g2"):
            if len(getattr(self, name)) != s:
                raise param_error(name, f"of length {s}", len(getattr(self, name)))
        for name in ("tau_e2", "tau_f2", "tau_g2"):
            for i, v in enumerate(getattr(self, name)):
                if not (math.isfinite(v) and v >= 0):
                    raise InfeasibleError(f"{name}[{i}] must be >= 0, got {v!r} (CAPE variances infeasible)")
        for i in range(s):
            need = self.tau_s2[i] * (1 - _REL_TOL)
            if self.tau_f2[i] + self.tau_g2[i] < need:
                raise InfeasibleError(f"tau_f2[{i}] + tau_g2[{i}] must be >= tau_s2[{i}] = {self.tau_s2[i]!r}, "
                                      f"got {self.tau_f2[i] + self.tau_g2[i]!r}")
            if self.tau_e2[i] + self.tau_g2[i] < need:
                raise InfeasibleError(f"tau_e2[{i}] + tau_g2[{i}] must be >= tau_s2[{i}] = {self.tau_s2[i]!r}, "
                                      f"got {self.tau_e2[i] + self.tau_g2[i]!r}")

    # -- constructors ---------------------------------------------------------
    @classmethod
    def equal(cls, *, n_sites: int, tau_s: float, **meta: Any) -> "CapeNoisePlan":
        """Equal sites (eq. (2)): ``tau_e^2 = tau_f^2 = (1 - 1/S) tau_s^2``, ``tau_g^2 = tau_s^2/S``.

        ``tau_c^2 = tau_s^2 / S^2`` with weights ``1/S`` (Lemma 1).
        """
        s = check_int("n_sites", n_sites, minimum=2)
        t2 = check_positive("tau_s", tau_s) ** 2
        ef = (1.0 - 1.0 / s) * t2
        return cls(tau_s2=(t2,) * s, weights=(1.0 / s,) * s, tau_e2=(ef,) * s, tau_f2=(ef,) * s,
                   tau_g2=(t2 / s,) * s, tau_c2=t2 / s ** 2, scheme="equal", **meta)

    @classmethod
    def unequal(cls, *, site_taus: Sequence[float], weights: Sequence[float], tau_c: float,
                **meta: Any) -> "CapeNoisePlan":
        r"""Unequal privacy / sample sizes (§III-A closed form).

        With ``D = tau_c^2 - sum_{s<S} mu_s^2 tau_s^2``:

        * ``tau_gS^2 = tau_S^2/2 + D/(2 mu_S^2)``, ``tau_eS^2 = tau_fS^2 = tau_S^2/2 - D/(2 mu_S^2)``;
        * for ``s < S``: ``tau_es^2 = tau_fs^2 = mu_S^2 tau_eS^2 / ((S-1) mu_s^2)`` and
          ``tau_gs^2 = tau_s^2 - tau_es^2``.

        (The printed paper has ``mu_S^2 (S-1)`` in the ``s < S`` denominator; the
        relation ``sum_{s<S} mu_s^2 tau_es^2 = mu_S^2 tau_eS^2`` it is derived from
        requires ``mu_s^2 (S-1)``, which we use.)  Then
        ``sum_s mu_s^2 tau_gs^2 = tau_c^2`` exactly, and both privacy constraints hold
        with equality.  The closed form is not always feasible (e.g. equal sites
        with S >= 4 make ``tau_gS^2 < 0``): :class:`InfeasibleError` then.
        """
        taus = [check_positive("site_taus[i]", v) for v in site_taus]
        mus = [check_nonnegative("weights[i]", v) for v in weights]
        s = len(taus)
        if s < 2:
            raise param_error("site_taus", "of length >= 2", s)
        if len(mus) != s:
            raise param_error("weights", f"of length {s} like site_taus", len(mus))
        if abs(math.fsum(mus) - 1.0) > 1e-9:
            raise param_error("weights", "summing to 1", math.fsum(mus))
        if mus[-1] == 0:
            raise param_error("weights[-1]", "> 0 (the last site closes sum mu_s e_s = 0)", mus[-1])
        tc2 = check_positive("tau_c", tau_c) ** 2
        t2 = [v * v for v in taus]
        d = tc2 - math.fsum(mus[i] ** 2 * t2[i] for i in range(s - 1))
        e_last = t2[-1] / 2 - d / (2 * mus[-1] ** 2)
        g_last = t2[-1] / 2 + d / (2 * mus[-1] ** 2)
        e = []
        for i in range(s - 1):
            if mus[i] == 0:
                raise param_error(f"weights[{i}]", "> 0", mus[i])
            e.append(mus[-1] ** 2 * e_last / ((s - 1) * mus[i] ** 2))
        e.append(e_last)
        g = [t2[i] - e[i] for i in range(s - 1)] + [g_last]
        return cls(tau_s2=tuple(t2), weights=tuple(mus), tau_e2=tuple(e), tau_f2=tuple(e), tau_g2=tuple(g),
                   tau_c2=tc2, scheme="unequal", **meta)

    @classmethod
    def from_budgets(cls, *, epsilons: Sequence[float], deltas: Sequence[float], sizes: Sequence[int],
                     sensitivity_numerator: float = 1.0, weights: Sequence[float] | None = None,
                     calibration: str = "analytic", neighbouring: str = REPLACE_ONE) -> "CapeNoisePlan":
        """Plan from per-site budgets: ``tau_s = calibrate(eps_s, delta_s, Delta/N_s)``.

        ``sensitivity_numerator`` is ``Delta`` in a per-site sensitivity ``Delta/N_s``
        (e.g. ``sqrt(2)`` for a second-moment matrix under replace-one, see
        :func:`dpdpca.dp.sensitivity.second_moment_sensitivity`).  Weights default to
        ``N_s/N``; the target is the pooled level ``tau_c = calibrate(min eps, min delta,
        Delta/N)``.  Equal budgets, sizes and weights give the equal-sites scheme.
        """
        eps = [check_positive("epsilons[i]", v) for v in epsilons]
        dels = [check_open_unit("deltas[i]", v) for v in deltas]
        ns = [check_int("sizes[i]", v, minimum=1) for v in sizes]
        if not (len(eps) == len(dels) == len(ns)):
            raise param_error("epsilons, deltas, sizes", "of equal lengths", (len(eps), len(dels), len(ns)))
        num = check_positive("sensitivity_numerator", sensitivity_numerator)
        total = sum(ns)
        mus = list(weights) if weights is not None else [v / total for v in ns]
        sens = tuple(num / v for v in ns)
        taus = [calibrate_gaussian(epsilon=eps[i], delta=dels[i], sensitivity=sens[i], calibration=calibration)
                for i in range(len(ns))]
        meta = dict(epsilons=tuple(eps), deltas=tuple(dels), sensitivities=sens, neighbouring=neighbouring,
                    calibration=calibration)
        if len(set(eps)) == 1 and len(set(dels)) == 1 and len(set(ns)) == 1 and len(set(mus)) == 1:
            return cls.equal(n_sites=len(ns), tau_s=taus[0], **meta)
        tau_c = calibrate_gaussian(epsilon=min(eps), delta=min(dels), sensitivity=num / total,
                                   calibration=calibration)
        return cls.unequal(site_taus=taus, weights=mus, tau_c=tau_c, **meta)

    # -- public numbers -------------------------------------------------------
    @property
    def n_sites(self) -> int:
        """S."""
        return len(self.tau_s2)

    @property
    def aggregator_noise_variance(self) -> float:
        """``sum_s mu_s^2 tau_gs^2``: variance of the noise left in the aggregator's estimate."""
        return math.fsum(m * m * g for m, g in zip(self.weights, self.tau_g2))

    @property
    def conventional_variance(self) -> float:
        """Variance of conventional averaging ``sum_s mu_s^2 tau_s^2`` (each site adds only its own noise)."""
        return math.fsum(m * m * t for m, t in zip(self.weights, self.tau_s2))

    @property
    def gain(self) -> float:
        """``conventional_variance / aggregator_noise_variance`` (Proposition 1's G(n))."""
        return self.conventional_variance / self.aggregator_noise_variance

    # -- draws, one method per party -------------------------------------------
    def _draw(self, variances: Sequence[float], shape: Any, symmetric: bool, rng: Any) -> list[np.ndarray]:
        count, out_shape, d = self._geometry(shape, symmetric)
        src = resolve_source(rng)
        rows = [src.standard_normal(count) * math.sqrt(v) for v in variances]
        return [self._shape(r, out_shape, d) for r in rows]

    @staticmethod
    def _geometry(shape: Any, symmetric: bool) -> tuple[int, tuple[int, ...], int | None]:
        shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        shp = tuple(check_int("shape[i]", v, minimum=1) for v in shp)
        if symmetric:
            if len(shp) != 2 or shp[0] != shp[1]:
                raise param_error("shape", "square (d, d) when symmetric=True", shp)
            return upper_triangle_size(shp[0]), shp, shp[0]
        return int(np.prod(shp)), shp, None

    @staticmethod
    def _shape(row: np.ndarray, shape: tuple[int, ...], d: int | None) -> np.ndarray:
        return symmetric_from_upper(row, d) if d is not None else row.reshape(shape)

    def noise_generator_terms(self, shape: Any = 1, *, symmetric: bool = False, rng: Any = None) -> list[np.ndarray]:
        """The noise generator's ``E_1..E_S``, with ``sum_s mu_s E_s = 0`` (exactly 0 for equal weights).

        ``symmetric=True`` (shape (d, d)): i.i.d. upper triangles, mirrored.
        """
        count, out_shape, d = self._geometry(shape, symmetric)
        src = resolve_source(rng)
        s = self.n_sites
        if len(set(self.weights)) == 1 and len(set(self.tau_e2)) == 1:
            scale = math.sqrt(self.tau_e2[0] * s / (s - 1))
            raw = src.standard_normal((s, count)) * scale
            rows = exact_zero_sum(raw - raw.mean(axis=0, keepdims=True))
        else:
            rows = np.empty((s, count))
            for i in range(s - 1):
                rows[i] = src.standard_normal(count) * math.sqrt(self.tau_e2[i])
            mus = np.asarray(self.weights)
            rows[-1] = -(mus[:-1, None] * rows[:-1]).sum(axis=0) / mus[-1]
        return [self._shape(rows[i], out_shape, d) for i in range(s)]

    def aggregator_terms(self, shape: Any = 1, *, symmetric: bool = False, rng: Any = None) -> list[np.ndarray]:
        """The aggregator's ``F_1..F_S`` (independent, variances ``tau_f2``)."""
        return self._draw(self.tau_f2, shape, symmetric, rng)

    def site_term(self, site: int, shape: Any = 1, *, symmetric: bool = False, rng: Any = None) -> np.ndarray:
        """Site ``site``'s own ``G_s`` (variance ``tau_g2[site]``)."""
        i = check_int("site", site, minimum=0, maximum=self.n_sites - 1)
        return self._draw([self.tau_g2[i]], shape, symmetric, rng)[0]

    def aggregate(self, releases: Sequence[Any], aggregator_terms: Sequence[Any]) -> np.ndarray:
        """The aggregator's estimate ``sum_s mu_s (a_hat_s - F_s)`` (Algorithm 1, step 10)."""
        if len(releases) != self.n_sites or len(aggregator_terms) != self.n_sites:
            raise param_error("releases", f"{self.n_sites} releases and terms", (len(releases), len(aggregator_terms)))
        acc = None
        for m, a, f in zip(self.weights, releases, aggregator_terms):
            term = m * (np.asarray(a, dtype=np.float64) - np.asarray(f, dtype=np.float64))
            acc = term if acc is None else acc + term
        assert acc is not None
        return acc

    def privacy(self, site: int, *, noise_added_by: str = "noise-generator,aggregator,site") -> PrivacyReport:
        """The report of site ``site``'s release (needs a plan built by :meth:`from_budgets`)."""
        i = check_int("site", site, minimum=0, maximum=self.n_sites - 1)
        if not self.epsilons:
            raise param_error("plan", "built with from_budgets() to report privacy", "a plan without budgets")
        return PrivacyReport(epsilon=self.epsilons[i], delta=self.deltas[i], mechanism="cape",
                             calibration=self.calibration, sensitivity=self.sensitivities[i],
                             neighbouring=self.neighbouring, noise_added_by=noise_added_by,
                             sigma=math.sqrt(self.tau_s2[i]),
                             notes=f"CAPE {self.scheme}: protecting variance min(tau_e2+tau_g2, tau_f2+tau_g2) "
                                   f">= tau_s2; aggregator variance {self.aggregator_noise_variance:.6g}")
