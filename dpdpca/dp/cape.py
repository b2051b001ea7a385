"""CAPE: correlated noise for distributed DP (Imtiaz & Sarwate 2018, §III).

Site ``s`` releases ``a_s + e_s + f_s + g_s``:

* ``e_s`` from the **noise generator**, with ``sum_s mu_s e_s = 0``;
* ``f_s`` from the **aggregator**, who later subtracts it;
* ``g_s`` drawn by the **site** itself.

The aggregator computes ``sum_s mu_s (a_hat_s - f_s) = sum_s mu_s a_s + sum_s mu_s g_s``,
whose noise variance is ``tau_c^2 = sum_s mu_s^2 tau_gs^2``: the pooled-data level
(Lemma 1).  The paper checks each release *alone*: against the aggregator (who
knows ``f_s``: the protecting noise is ``e_s + g_s``) and against anyone else
(``f_s + g_s``), ``tau_es^2 + tau_gs^2 >= tau_s^2`` and
``tau_fs^2 + tau_gs^2 >= tau_s^2`` (checked here; :class:`InfeasibleError` if
not), and composes the sites in parallel.

**The aggregator's joint view.**  The aggregator receives *all* S releases, and
the ``e_s`` are correlated (``sum_s mu_s e_s = 0``), so parallel composition
does not apply to it.  Per coordinate its view ``z_s = a_s + e_s + g_s``
(``f_s`` subtracted) has noise covariance ``Sigma = Cov(e) + diag(tau_g2)``
(:meth:`CapeNoisePlan.joint_covariance`), and a change of ``Delta_s`` at site s
is a Gaussian mechanism of whitened sensitivity ``Delta_s sqrt((Sigma^-1)_ss)``.
Site s is therefore (eps_s, delta_s)-DP against the joint view iff
``tau_s^2 (Sigma^-1)_ss <= 1`` (:meth:`CapeNoisePlan.joint_factor`).  The
paper's variances (eq. (2)) give ``2S/(S+1)`` for equal sites: up to ``sqrt(2)``
more sensitivity than calibrated (at S = 4, epsilon = 1 a delta of 2.5e-4
instead of 1e-5).  Anyone else sees ``Cov(e) + diag(tau_f2 + tau_g2) >= Sigma``
(protected whenever the aggregator is); the noise generator, who knows the
``e_s``, sees independent ``f_s + g_s`` per site, where parallel composition
does hold.

**Rigorous variances** (:meth:`CapeNoisePlan.joint_safe`, the default of
:meth:`~CapeNoisePlan.from_budgets`): the aggregate's noise is
``sum_s mu_s g_s`` whatever ``e`` is, so inflating the correlated noise costs no
utility.  As ``Cov(e)`` grows, ``(Sigma^-1)_ss`` falls monotonically to
``mu_s^2 / sum_j mu_j^2 tau_gj^2``, which the plans meet with equality
(``mu_s^2 tau_s^2 = tau_c^2``); so ``g`` gets a slack ``1 + eta``
(:data:`JOINT_SLACK`, the aggregate's noise variance grows by that factor) and
``e`` the smallest inflation giving ``joint_factor() <= 1``.  The guarantee is
against the aggregator's joint view with a noise generator that does not
collude and sites that do not collude with the aggregator: a site colluding
with the aggregator knows its own ``e_j``, which removes the correlated noise,
and no CAPE calibration at the pooled noise level survives that (the
aggregate itself then carries only ``g``).  The paper's variances
(``variances="paper"``) stay available for reproduction; their
:meth:`~CapeNoisePlan.privacy` carries the delta really achieved against the
joint view.

:class:`CapeNoisePlan` holds only public numbers (the variances).  Each party
calls the method for *its own* terms with its own random source:
:meth:`~CapeNoisePlan.noise_generator_terms`,
:meth:`~CapeNoisePlan.aggregator_terms`, :meth:`~CapeNoisePlan.site_term`.

**"Exactly zero".**  With equal weights (the equal-sites scheme, eq. (2)) the
generator draws i.i.d. ``e_hat_s ~ N(0, tau_e^2 S/(S-1))`` and centres them
(``e_s = e_hat_s - mean``, variance ``(1 - 1/S) tau_e^2 S/(S-1) = tau_e^2``).  It then
rounds the first ``S - 1`` terms to a common power-of-two grid ``q`` (about
``2^-50`` times the largest term, so the change is far below the noise scale) and
sets the last term to minus their sum (:func:`exact_zero_sum`).  All terms and all partial sums are
multiples of ``q`` below ``2^53 q``, so float64 addition is exact and
``sum_s E_s == 0`` holds **exactly, in any summation order**.  With unequal
weights (§III-A), ``sum_s mu_s e_s`` is zero only up to float64 rounding of the
products ``mu_s e_s`` (documented, not exact).

**Unequal sites.**  The printed §III-A closed form (``method="paper"``) is
often infeasible (with ``mu_s = N_s/N`` and equal budgets it needs ``S <= 3``);
the default ``method="projection"`` is our generalisation of eq. (2) that is
feasible whenever CAPE can help, see :meth:`CapeNoisePlan.unequal`.

References
----------
H. Imtiaz, A. D. Sarwate, "Distributed Differentially Private Algorithms for
Matrix and Tensor Factorization", IEEE JSTSP 2018: §III eq. (2), Algorithm 1,
Lemma 1, Theorem 1, Proposition 1, §III-A (unequal privacy and sample sizes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_int, check_nonnegative, check_open_unit, check_positive, param_error
from dpdpca.dp.calibration import calibrate_gaussian, gaussian_delta
from dpdpca.dp.noise import (symmetric_from_upper, symmetric_tensor_from_entries, symmetric_tensor_size,
                             upper_triangle_size)
from dpdpca.dp.randomness import resolve_source
from dpdpca.dp.report import REPLACE_ONE, PrivacyReport, raise_delta
from dpdpca.dp.settings import PAPER, RIGOROUS
from dpdpca.errors import InfeasibleError

__all__ = ["CapeNoisePlan", "CAPE_VARIANCES", "JOINT_SLACK", "check_cape_variances", "cape_gain", "cape_gain_max", "exact_zero_sum"]

_REL_TOL = 1e-9
#: The rigorous plans' slack ``eta`` on every site's own noise: ``tau_g2`` grows by ``1 + eta``, and so does
#: the aggregate's noise variance; it lets a finite inflation of the correlated noise reach ``joint_factor <= 1``.
JOINT_SLACK = 0.01
#: The variance assignments: ``"rigorous"`` (DP against the aggregator's joint view, the default) and
#: ``"paper"`` (the paper's, each release checked alone; for reproduction).
CAPE_VARIANCES = (RIGOROUS, PAPER)
_MAX_INFLATION = 2.0 ** 60


def check_cape_variances(value: Any, name: str = "cape_variances") -> str:
    """``value`` if it is one of :data:`CAPE_VARIANCES`, else a one-line ParameterError naming ``name``."""
    if value not in CAPE_VARIANCES:
        raise param_error(name, "'rigorous' or 'paper'", value)
    return str(value)


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


def exact_zero_sum(rows: np.ndarray, *, copy: bool = True) -> np.ndarray:
    """Adjust ``rows`` (shape (S, ...)) so that their float64 sum over axis 0 is exactly 0.

    Rows ``0..S-2`` are rounded to a power-of-two grid ``q`` with
    ``q = 2^(ceil(log2(S * max|rows|)) - 50)``; the last row is set to minus their
    sum, computed exactly.  Every partial sum is then a multiple of ``q`` of
    magnitude below ``2^53 q``, so float64 addition in any order is exact.
    ``copy=False`` works in place on a float64 ``rows``.
    """
    x = np.array(rows, dtype=np.float64, copy=True) if copy else np.asarray(rows, dtype=np.float64)
    s = x.shape[0]
    if s < 2:
        return np.zeros_like(x)
    peak = max(float(x.max()), -float(x.min())) if x.size else 0.0
    if peak == 0.0:
        return np.zeros_like(x)
    q = 2.0 ** (math.ceil(math.log2(s * peak)) - 50)
    head = x[:-1]
    head /= q  # exact: q is a power of two
    np.round(head, out=head)
    head *= q
    np.sum(head, axis=0, out=x[-1])
    np.negative(x[-1], out=x[-1])
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
        ``"equal"`` (eq. (2)), ``"projection"`` (our generalisation, the default for
        unequal sites) or ``"paper"`` (the §III-A closed form).
    e_proposal, e_coupling : tuple of float
        For ``"projection"``: the generator draws ``e_hat_s ~ N(0, e_proposal[s])``
        and sets ``e_s = e_hat_s - e_coupling[s] * sum_j mu_j e_hat_j``.
    variances : {"paper", "rigorous"}
        ``"paper"``: the variances as the scheme prints them (each release
        checked alone).  ``"rigorous"`` (:meth:`joint_safe`): ``joint_factor() <= 1``,
        checked by the constructor (:class:`InfeasibleError` if not).
    e_scale, g_scale : float
        The factors :meth:`joint_safe` applied to the scheme's ``e`` and ``g``
        variances (1 for the paper's).
    """

    tau_s2: tuple[float, ...]
    weights: tuple[float, ...]
    tau_e2: tuple[float, ...]
    tau_f2: tuple[float, ...]
    tau_g2: tuple[float, ...]
    tau_c2: float
    scheme: str
    e_proposal: tuple[float, ...] = field(default=())
    e_coupling: tuple[float, ...] = field(default=())
    epsilons: tuple[float, ...] = field(default=())
    deltas: tuple[float, ...] = field(default=())
    sensitivities: tuple[float, ...] = field(default=())
    neighbouring: str = REPLACE_ONE
    calibration: str = "analytic"
    variances: str = PAPER
    e_scale: float = 1.0
    g_scale: float = 1.0

    def __post_init__(self) -> None:
        check_cape_variances(self.variances, "variances")
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
        if self.variances == RIGOROUS:
            factor = self.joint_factor()
            if factor > 1 + _REL_TOL:
                raise InfeasibleError(f"joint_factor max_s tau_s2[s] (Sigma^-1)_ss must be <= 1 for rigorous CAPE "
                                      f"variances (the aggregator's joint view), got {factor!r}")

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
                method: str = "projection", **meta: Any) -> "CapeNoisePlan":
        r"""Unequal privacy / sample sizes (§III-A): per-site ``tau_s``, weights ``mu_s``, target ``tau_c``.

        ``method="projection"`` (default, ours; always feasible when CAPE can help)
            With ``C = sum_s mu_s^2 tau_s^2`` (the conventional scheme's variance),
            ``lambda = tau_c^2 / C`` (needs ``lambda <= 1``) and shares
            ``p_s = mu_s^2 tau_s^2 / C``:

            * ``tau_gs^2 = lambda tau_s^2`` so ``sum mu_s^2 tau_gs^2 = tau_c^2``;
            * ``tau_fs^2 = (1 - lambda) tau_s^2``;
            * the generator draws ``e_hat_s ~ N(0, kappa tau_s^2)`` with
              ``kappa = (1 - lambda)/(1 - max_s p_s)`` and sets
              ``e_s = e_hat_s - c_s sum_j mu_j e_hat_j``, ``c_s = mu_s tau_s^2 / C``.
              Then ``sum_s mu_s e_s = 0`` and
              ``tau_es^2 = kappa tau_s^2 (1 - p_s) >= (1 - lambda) tau_s^2``.

            For equal sites (``mu_s = 1/S``, equal ``tau_s``) this is exactly eq. (2):
            ``lambda = 1/S``, ``kappa = 1``, ``e_s = e_hat_s - mean(e_hat)``.

        ``method="paper"`` (the printed closed form; site S closes the sum)
            With ``D = tau_c^2 - sum_{s<S} mu_s^2 tau_s^2``:
            ``tau_gS^2 = tau_S^2/2 + D/(2 mu_S^2)``, ``tau_eS^2 = tau_fS^2 = tau_S^2/2 - D/(2 mu_S^2)``;
            for ``s < S``: ``tau_es^2 = tau_fs^2 = mu_S^2 tau_eS^2 / ((S-1) mu_s^2)``,
            ``tau_gs^2 = tau_s^2 - tau_es^2``; ``e_S = -(1/mu_S) sum_{s<S} mu_s e_s``.
            (The printed ``s < S`` denominator reads ``mu_S^2 (S-1)``; the relation
            ``sum_{s<S} mu_s^2 tau_es^2 = mu_S^2 tau_eS^2`` it comes from requires
            ``mu_s^2 (S-1)``, used here.)  This form is often infeasible: with
            ``mu_s = N_s/N`` and equal epsilon it gives ``tau_gS^2 = (3 - S) tau_S^2 / 2``,
            negative for ``S >= 4`` even though eq. (2) works; :class:`InfeasibleError`.

        Raises
        ------
        InfeasibleError
            If a variance would be negative or a privacy constraint fails.
        ParameterError
            Bad lengths, weights not summing to 1, non-positive taus.
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
        if method not in ("projection", "paper"):
            raise param_error("method", "'projection' or 'paper'", method)
        tc2 = check_positive("tau_c", tau_c) ** 2
        t2 = [v * v for v in taus]
        if method == "projection":
            conv = math.fsum(mus[i] ** 2 * t2[i] for i in range(s))
            lam = tc2 / conv
            if lam > 1.0:
                raise InfeasibleError(f"tau_c^2 must be <= sum mu_s^2 tau_s^2 = {conv!r} (CAPE cannot add "
                                      f"noise beyond the conventional scheme), got {tc2!r}")
            shares = [mus[i] ** 2 * t2[i] / conv for i in range(s)]
            if max(shares) >= 1.0:
                raise InfeasibleError(f"weights must give at least two sites a share of the noise, got shares {shares}")
            kappa = (1.0 - lam) / (1.0 - max(shares))
            e = [kappa * t2[i] * (1.0 - shares[i]) for i in range(s)]
            f = [(1.0 - lam) * t2[i] for i in range(s)]
            g = [lam * t2[i] for i in range(s)]
            return cls(tau_s2=tuple(t2), weights=tuple(mus), tau_e2=tuple(e), tau_f2=tuple(f), tau_g2=tuple(g),
                       tau_c2=tc2, scheme="projection", e_proposal=tuple(kappa * v for v in t2),
                       e_coupling=tuple(mus[i] * t2[i] / conv for i in range(s)), **meta)
        if mus[-1] == 0:
            raise param_error("weights[-1]", "> 0 (the last site closes sum mu_s e_s = 0)", mus[-1])
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
        # a value that is zero in exact arithmetic may come out as -1e-21: clamp at the rounding level
        e = [0.0 if -_REL_TOL * t2[i] < e[i] < 0 else e[i] for i in range(s)]
        g = [0.0 if -_REL_TOL * t2[i] < g[i] < 0 else g[i] for i in range(s)]
        return cls(tau_s2=tuple(t2), weights=tuple(mus), tau_e2=tuple(e), tau_f2=tuple(e), tau_g2=tuple(g),
                   tau_c2=tc2, scheme="paper", **meta)

    @classmethod
    def from_budgets(cls, *, epsilons: Sequence[float], deltas: Sequence[float], sizes: Sequence[int],
                     sensitivity_numerator: float = 1.0, weights: Sequence[float] | None = None,
                     calibration: str = "analytic", neighbouring: str = REPLACE_ONE,
                     method: str = "projection", variances: str = RIGOROUS,
                     slack: float = JOINT_SLACK) -> "CapeNoisePlan":
        """Plan from per-site budgets: ``tau_s = calibrate(eps_s, delta_s, Delta/N_s)``.

        ``sensitivity_numerator`` is ``Delta`` in a per-site sensitivity ``Delta/N_s``
        (e.g. ``sqrt(2)`` for a second-moment matrix under replace-one, see
        :func:`dpdpca.dp.sensitivity.second_moment_sensitivity`).  Weights default to
        ``N_s/N``; the target is the pooled level ``tau_c = calibrate(min eps, min delta,
        Delta/N)``.  Equal budgets, sizes and weights give the equal-sites scheme;
        otherwise :meth:`unequal` with ``method``.

        ``variances="rigorous"`` (default) returns :meth:`joint_safe` ``(slack)`` of
        that plan: (eps_s, delta_s)-DP against the aggregator's joint view.
        ``variances="paper"`` keeps the paper's variances (each release checked
        alone), for reproduction; :meth:`privacy` then reports the delta really
        achieved against the joint view.

        Raises
        ------
        InfeasibleError
            A negative variance, a failed per-release constraint, or (rigorous)
            no inflation of the correlated noise reaching ``joint_factor() <= 1``.
        """
        check_cape_variances(variances, "variances")
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
            plan = cls.equal(n_sites=len(ns), tau_s=taus[0], **meta)
        else:
            tau_c = calibrate_gaussian(epsilon=min(eps), delta=min(dels), sensitivity=num / total,
                                       calibration=calibration)
            plan = cls.unequal(site_taus=taus, weights=mus, tau_c=tau_c, method=method, **meta)
        return plan.joint_safe(slack) if variances == RIGOROUS else plan

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
        """``conventional_variance / aggregator_noise_variance``: CAPE's gain at the same weights."""
        return self.conventional_variance / self.aggregator_noise_variance

    @property
    def gain_over_unweighted_average(self) -> float:
        """Proposition 1's ``G(n) = tau_ag^2 / tau_c^2`` with ``tau_ag^2 = sum_s tau_s^2 / S^2``.

        For ``tau_s = c/N_s`` and ``mu_s = N_s/N`` this is ``N^2/S^2 sum_s 1/N_s^2``
        (:func:`cape_gain`).
        """
        return math.fsum(self.tau_s2) / self.n_sites ** 2 / self.aggregator_noise_variance

    # -- the aggregator's joint view --------------------------------------------
    def _generator_map(self) -> tuple[np.ndarray, np.ndarray]:
        """``(M, v)`` with the generator's ``e = M e_hat``, ``e_hat_j ~ N(0, v_j)`` independent."""
        s = self.n_sites
        mus = np.asarray(self.weights, dtype=np.float64)
        if self.scheme == "equal":  # e = e_hat - mean(e_hat), e_hat_j ~ N(0, tau_e2 S/(S-1))
            return np.eye(s) - 1.0 / s, np.full(s, self.tau_e2[0] * s / (s - 1))
        if self.scheme == "projection":  # e = e_hat - c (mu^T e_hat)
            return np.eye(s) - np.outer(self.e_coupling, mus), np.asarray(self.e_proposal, dtype=np.float64)
        # paper: e_s ~ N(0, tau_e2[s]) for s < S, e_S = -(1/mu_S) sum_{s<S} mu_s e_s
        m = np.eye(s)
        m[-1] = 0.0
        m[-1, :-1] = -mus[:-1] / mus[-1]
        return m, np.array([*self.tau_e2[:-1], 0.0])

    def generator_covariance(self) -> np.ndarray:
        """``Cov(e)`` (S x S, per coordinate) of the noise generator's terms, from the scheme's construction.

        ``"equal"``: ``tau_e2 S/(S-1) (I - 1 1^T/S)``; ``"projection"``:
        ``(I - c mu^T) diag(e_proposal) (I - c mu^T)^T``; ``"paper"``: the first
        ``S - 1`` terms independent, the last ``-(1/mu_S) sum_{s<S} mu_s e_s``.
        (The exact-zero-sum rounding changes the terms by about ``2^-50`` of their size.)
        """
        m, v = self._generator_map()
        return (m * v) @ m.T  # type: ignore[no-any-return]

    def joint_covariance(self) -> np.ndarray:
        """``Sigma = Cov(e) + diag(tau_g2)``: the noise of the aggregator's joint view ``(z_1..z_S)`` per coordinate."""
        return self.generator_covariance() + np.diag(np.asarray(self.tau_g2, dtype=np.float64))

    def joint_factors(self) -> tuple[float, ...]:
        """Per site ``tau_s2[s] (Sigma^-1)_ss``: the squared whitened sensitivity of the joint view over a single release's.

        Site s's ``tau_s`` is calibrated to (eps_s, delta_s) at its sensitivity,
        so site s is (eps_s, delta_s)-DP against the aggregator's joint view iff
        its factor is <= 1; otherwise the whitened sensitivity is ``sqrt(factor)``
        times the calibrated one.
        """
        sigma = self.joint_covariance()
        try:
            inv = np.linalg.inv(sigma)
        except np.linalg.LinAlgError:  # a site with no noise of its own is not private against the joint view
            return tuple(math.inf for _ in self.tau_s2)
        return tuple(float(t * inv[i, i]) if inv[i, i] > 0 else math.inf for i, t in enumerate(self.tau_s2))

    def joint_factor(self) -> float:
        """``max_s tau_s2[s] (Sigma^-1)_ss`` (:meth:`joint_factors`); <= 1 iff every site is DP against the joint view."""
        return max(self.joint_factors())

    def _scaled(self, e_factor: float, g_factor: float, variances: str) -> "CapeNoisePlan":
        return replace(self, tau_e2=tuple(e_factor * v for v in self.tau_e2),
                       e_proposal=tuple(e_factor * v for v in self.e_proposal),
                       tau_g2=tuple(g_factor * v for v in self.tau_g2), variances=variances,
                       e_scale=self.e_scale * e_factor, g_scale=self.g_scale * g_factor)

    def paper_variances(self) -> "CapeNoisePlan":
        """The plan with the paper's variances this one was built from (itself if it has them)."""
        if self.variances == PAPER:
            return self
        return self._scaled(1.0 / self.e_scale, 1.0 / self.g_scale, PAPER)

    def joint_safe(self, slack: float = JOINT_SLACK) -> "CapeNoisePlan":
        """This plan with rigorous variances: ``tau_g2 * (1 + slack)``, the correlated noise inflated just enough.

        The aggregate's noise variance grows by ``1 + slack`` (the ``e_s`` cancel
        in it); every ``e_s`` variance (and ``e_proposal``) is multiplied by the
        smallest ``k >= 1`` with :meth:`joint_factor` ``<= 1``, found by bisection:
        ``Sigma(k) = k Cov(e) + diag(tau_g2)`` grows with ``k``, so
        ``(Sigma^-1)_ss`` falls monotonically, to ``mu_s^2 / sum_j mu_j^2 tau_gj^2``
        (``Cov(e)`` has null space ``mu``).  ``tau_f2`` is unchanged, so every
        per-release constraint still holds.  Applied to a rigorous plan it
        starts again from that plan's variances.

        Raises
        ------
        ParameterError
            ``slack`` not > 0.
        InfeasibleError
            ``mu_s^2 tau_s2[s] > (1 + slack) sum_j mu_j^2 tau_gj^2`` for a site
            (the aggregate alone is then not (eps_s, delta_s)-DP for it), or the
            correlated noise has too few degrees of freedom.
        """
        eta = check_positive("slack", slack)
        limit_var = (1.0 + eta) * self.aggregator_noise_variance
        for i, (m, t) in enumerate(zip(self.weights, self.tau_s2)):
            if m * m * t > limit_var * (1 - _REL_TOL):
                raise InfeasibleError(f"weights[{i}]^2 tau_s2[{i}] must be < (1 + slack) sum_j mu_j^2 tau_g2[j] = "
                                      f"{limit_var!r} for CAPE to be DP against the aggregator's joint view, "
                                      f"got {m * m * t!r}")
        base = self.paper_variances()

        def factor(k: float) -> float:
            return base._scaled(k, 1.0 + eta, PAPER).joint_factor()

        lo, hi = 1.0, 1.0
        while factor(hi) > 1.0:
            lo, hi = hi, hi * 2.0
            if hi > _MAX_INFLATION:
                raise InfeasibleError(f"joint_factor must reach <= 1 by inflating the correlated noise (scheme "
                                      f"{self.scheme}), got {factor(hi)!r} at {hi:.3g} times its variance")
        if hi > 1.0:
            for _ in range(200):
                if hi - lo <= 1e-9 * hi:
                    break
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if factor(mid) <= 1.0 else (mid, hi)
        return base._scaled(hi, 1.0 + eta, RIGOROUS)

    # -- draws, one method per party -------------------------------------------
    def _draw(self, variances: Sequence[float], shape: Any, symmetric: bool, rng: Any) -> list[np.ndarray]:
        count, out_shape, d = self._geometry(shape, symmetric)
        src = resolve_source(rng)
        rows = [src.standard_normal(count, scale=math.sqrt(v)) for v in variances]
        return [self._shape(r, out_shape, d) for r in rows]

    @staticmethod
    def _geometry(shape: Any, symmetric: bool) -> tuple[int, tuple[int, ...], int | None]:
        shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        shp = tuple(check_int("shape[i]", v, minimum=1) for v in shp)
        if symmetric:
            if len(shp) not in (2, 3) or len(set(shp)) != 1:
                raise param_error("shape", "(d, d) or (d, d, d) when symmetric=True", shp)
            size = upper_triangle_size(shp[0]) if len(shp) == 2 else symmetric_tensor_size(shp[0])
            return size, shp, shp[0]
        return int(np.prod(shp)), shp, None

    @staticmethod
    def _shape(row: np.ndarray, shape: tuple[int, ...], d: int | None) -> np.ndarray:
        if d is None:
            return row.reshape(shape)
        return symmetric_from_upper(row, d) if len(shape) == 2 else symmetric_tensor_from_entries(row, d)

    def noise_generator_terms(self, shape: Any = 1, *, symmetric: bool = False, rng: Any = None) -> list[np.ndarray]:
        """The noise generator's ``E_1..E_S``, with ``sum_s mu_s E_s = 0``.

        Exactly 0 in float64 (any summation order) when all weights are equal;
        otherwise zero up to float64 rounding.

        ``symmetric=True``: shape (d, d) gives i.i.d. upper triangles, mirrored;
        shape (d, d, d) gives symmetric tensors from ``C(d+2, 3)`` i.i.d. entries
        each (capeAGN's ``E_3``, Algorithm 3 step 1), copied to every permutation,
        so the exact zero sum holds entry by entry.
        """
        count, out_shape, d = self._geometry(shape, symmetric)
        src = resolve_source(rng)
        s = self.n_sites
        mus = np.asarray(self.weights)
        if self.scheme == "equal":
            rows = src.standard_normal((s, count), scale=math.sqrt(self.tau_e2[0] * s / (s - 1)))
            rows -= rows.mean(axis=0, keepdims=True)
        elif self.scheme == "projection":
            raw = src.standard_normal((s, count)) * np.sqrt(np.asarray(self.e_proposal))[:, None]
            rows = raw - np.asarray(self.e_coupling)[:, None] * (mus[:, None] * raw).sum(axis=0, keepdims=True)
        else:  # paper: the last site closes the weighted sum
            rows = np.empty((s, count))
            for i in range(s - 1):
                rows[i] = src.standard_normal(count, scale=math.sqrt(self.tau_e2[i]))
            rows[-1] = -(mus[:-1, None] * rows[:-1]).sum(axis=0) / mus[-1]
        if np.all(mus == mus[0]):
            rows = exact_zero_sum(rows, copy=False)  # equal weights: sum_s E_s == 0 exactly in float64
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

    def joint_delta(self, site: int, *, epsilon: float, sigma: float, sensitivity: float) -> float:
        """The delta site ``site`` really has at ``epsilon`` against the aggregator's joint view.

        ``sigma`` and ``sensitivity`` are the site's single-release noise and the
        sensitivity it was calibrated to (in any common unit); the joint view's
        whitened sensitivity is ``sqrt(joint_factors()[site]) * sensitivity / sigma``
        (:func:`~dpdpca.dp.calibration.gaussian_delta`, exact for the Gaussian).
        """
        i = check_int("site", site, minimum=0, maximum=self.n_sites - 1)
        factor = self.joint_factors()[i]
        if not math.isfinite(factor):
            return 1.0
        return gaussian_delta(check_positive("epsilon", epsilon), check_positive("sigma", sigma),
                              check_nonnegative("sensitivity", sensitivity) * math.sqrt(factor))

    def joint_note(self) -> str:
        """What the plan's variances promise against the aggregator's joint view, for a report's notes."""
        factor, s = self.joint_factor(), self.n_sites
        if self.variances == RIGOROUS:
            return (f"rigorous CAPE variances: DP against the aggregator's joint view of all {s} releases (E_s "
                    f"correlated, F_s known to it; noise covariance Cov(E)+diag(tau_g2)), max_s tau_s2 "
                    f"(Sigma^-1)_ss = {factor:.4g} <= 1; G_s variance x{self.g_scale:.4g} (the aggregate's noise "
                    f"variance grows by that factor), E_s variance x{self.e_scale:.4g} (it cancels in the aggregate)")
        return (f"the paper's CAPE variances (for reproduction): the paper's per-release claim (E_s+G_s >= tau_s2 "
                f"against the aggregator, parallel composition over disjoint sites) ignores that the aggregator sees "
                f"all {s} releases with correlated E_s; its joint view has max_s tau_s2 (Sigma^-1)_ss = "
                + (f"{factor:.4g} > 1, so the delta reported is the one really achieved against it" if factor > 1
                   else f"{factor:.4g} <= 1, so the requested delta holds against it"))

    def against_joint_view(self, site: int, report: PrivacyReport, *,
                           sensitivity: float | None = None) -> PrivacyReport:
        """Site ``site``'s per-release ``report`` with the delta it really has against the joint view, if larger.

        ``report``'s ``sigma`` and ``sensitivity`` are the release's noise and
        the sensitivity it was calibrated to (:meth:`joint_delta`); where the
        joint view's delta at ``report.epsilon`` exceeds ``report.delta`` (the
        paper's variances), it replaces it and a note names the per-release
        claim (:func:`~dpdpca.dp.report.raise_delta`).  ``sensitivity``: the
        statistic's proven sensitivity when the scale was calibrated to a
        smaller one (the papers' sensitivity mode); default ``report.sensitivity``.
        """
        if report.sigma is None:
            raise param_error("report.sigma", "the release's noise standard deviation", None)
        sens = report.sensitivity if sensitivity is None else float(sensitivity)
        real = self.joint_delta(site, epsilon=report.epsilon, sigma=report.sigma, sensitivity=sens)
        at = "" if sens == report.sensitivity else f" and the statistic's proven L2 sensitivity {sens:.4g}"
        return raise_delta(report, real, why=f"against the aggregator's joint view at epsilon={report.epsilon:g}{at}",
                           claim="the paper's per-release claim")

    def privacy(self, site: int, *, noise_added_by: str = "noise-generator,aggregator,site") -> PrivacyReport:
        """The report of site ``site``'s release against the aggregator's joint view (needs :meth:`from_budgets`).

        Rigorous variances: the requested (eps_s, delta_s).  The paper's: eps_s
        and the larger delta really achieved against the joint view
        (:meth:`joint_delta`), with a note naming the paper's per-release claim.
        """
        i = check_int("site", site, minimum=0, maximum=self.n_sites - 1)
        if not self.epsilons:
            raise param_error("plan", "built with from_budgets() to report privacy", "a plan without budgets")
        notes = (f"CAPE {self.scheme}: per release, min(tau_e2+tau_g2, tau_f2+tau_g2) >= tau_s2; "
                 f"aggregator variance {self.aggregator_noise_variance:.6g}; {self.joint_note()}")
        return self.against_joint_view(i, PrivacyReport(
            epsilon=self.epsilons[i], delta=self.deltas[i], mechanism="cape", calibration=self.calibration,
            sensitivity=self.sensitivities[i], neighbouring=self.neighbouring, noise_added_by=noise_added_by,
            sigma=math.sqrt(self.tau_s2[i]), notes=notes))
