"""capePCA (Imtiaz & Sarwate 2018 JSTSP, Alg. 2) with real correlated noise, and ``conv``.

Three kinds of party draw noise, each with its own randomness, through
:class:`dpdpca.dp.CapeNoisePlan`:

* the **noise generator** draws ``E_1..E_S`` with ``sum_s mu_s E_s = 0`` (exactly 0
  for equal weights) and sends ``E_s`` to site ``s``;
* the **aggregator** draws ``F_1..F_S`` and sends ``F_s`` to site ``s``;
* **site s** draws ``G_s`` and sends ``A_hat_s = A_s + E_s + F_s + G_s``.

The aggregator computes ``A_hat = sum_s mu_s (A_hat_s - F_s) = sum_s mu_s A_s +
sum_s mu_s G_s`` (step 8; with equal sites ``mu_s = 1/S``) and releases the top-K
eigenvectors.  All noise matrices are symmetric (i.i.d. upper triangle); every
symmetric matrix is handled and sent as its upper triangle, and the aggregator
mirrors the sum once.  The
authors' code simulates this with one pooled draw; here every term is drawn by
its party and the cancellation is real.

Variances (public, in the plan): equal sites use eq. (2),
``tau_e^2 = tau_f^2 = (1 - 1/S) tau_s^2`` and ``tau_g^2 = tau_s^2/S``, so the
aggregate carries noise of variance ``tau_s^2/S^2 = tau_c^2``, the pooled level.
Unequal ``N_s`` / ``epsilon_s`` use weights ``mu_s`` (default ``N_s/N``) and the
plan's variance assignment ``scheme`` (:meth:`dpdpca.dp.CapeNoisePlan.unequal`):

* ``"projection"`` (default): the dp layer's generalisation of eq. (2),
  feasible whenever CAPE can help, exactly eq. (2) for equal sites;
* ``"paper"``: the printed §III-A closed form, infeasible for S >= 4 with
  ``mu_s = N_s/N`` (:class:`~dpdpca.errors.InfeasibleError`).

Equal sizes, budgets and weights always use eq. (2) (scheme ``"equal"``).  The
scheme used is in ``params["scheme"]``.

**The aggregator's joint view** (``cape_variances``).  The paper checks each
release alone (``E_s + G_s`` against the aggregator, ``F_s + G_s`` against
others) and composes the sites in parallel; but the aggregator receives all S
releases and the ``E_s`` are correlated, so its joint view leaks more: with
eq. (2) the whitened sensitivity is ``sqrt(2S/(S+1))`` times the calibrated
one (:meth:`dpdpca.dp.CapeNoisePlan.joint_factor`).

* ``"rigorous"`` (default): :meth:`dpdpca.dp.CapeNoisePlan.joint_safe`, i.e.
  ``G_s`` inflated by ``1 + eta`` (:data:`dpdpca.dp.JOINT_SLACK`, 1%: the
  aggregate's noise variance grows by that factor) and ``E_s`` by the smallest
  factor making every site (epsilon_s, delta_s)-DP against the joint view
  (about 75x for S = 4; the ``E_s`` cancel in the aggregate, so this costs no
  utility, except under dropout below).  The report claims the requested
  budget, against the joint view.
* ``"paper"`` (``dpdpca compare --paper``, for reproduction): eq. (2) and
  §III-A unchanged; the report keeps epsilon and carries the larger delta really
  achieved against the joint view, with a note naming the paper's per-release
  claim.

Trust: the guarantee is against the aggregator's joint view with a noise
generator that does not collude with it and sites that do not collude with
it.  A site colluding with the aggregator knows its own ``E_j``, which removes
the correlated noise; no CAPE calibration at the pooled noise level survives
that (the aggregate itself then carries only the ``G_s``).

**Site dropout.**  Sites listed in ``dropped_sites`` receive ``E_s``/``F_s`` but
never send ``A_hat_s``.  The aggregator renormalises the weights over the
active sites; the remaining ``E_s`` no longer cancel (their sum is minus the
dropped sites' terms), so the aggregate is noisier than the pooled level (with
the paper's variances it tends to the conventional level as more sites drop;
with the rigorous variances the left-over ``E_s`` are the inflated ones, so
dropout costs far more).  The aggregator's view of fewer releases reveals no
more than the joint view of all S, so the guarantee is unchanged.

**conv** (``correlated=False``): each site adds only its own ``G_s`` of variance
``tau_s^2`` and the aggregator averages ``sum_s mu_s A_hat_s``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_int, check_open_unit, check_positive, param_error
from dpdpca.baselines._common import (CAPE_BASIS, CAPE_TRUST, FLOAT_BYTES, NoisySiteEstimator, parallel_report,
                                      symmetric_bytes)
from dpdpca.baselines.release import moment_from_pieces, scatter_pieces
from dpdpca.errors import UnsupportedSettingError
from dpdpca.dp import REPLACE_ONE, CapeNoisePlan, PrivacyReport, check_cape_variances, resolve_source
from dpdpca.dp.settings import PAPER, RIGOROUS
from dpdpca.linalg import pack_upper as upper_from_symmetric
from dpdpca.linalg import top_eigenpairs, upper_triangle_size
from dpdpca.linalg import unpack_upper as symmetric_from_upper
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["CapePCA", "SCHEMES"]

SCHEMES = ("projection", "paper")
_CAPE_PARTIES = "noise-generator,aggregator,site"


class CapePCA(NoisySiteEstimator):
    """Distributed DP PCA with CAPE correlated noise (capePCA) or conventional averaging.

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float > 0
        Every site's epsilon unless ``site_epsilons`` is given.
    delta : float in (0, 1)
        Every site's delta unless ``site_deltas`` is given.
    correlated : bool
        ``True``: capePCA.  ``False``: ``conv`` (no correlated noise).
    weights : sequence of float or None
        ``mu_s`` (>= 0, sum 1); ``None`` means ``N_s / N``.
    site_epsilons, site_deltas : sequence of float or None
        Per-site budgets (§III-A).  The report's epsilon/delta are their maxima.
    dropped_sites : sequence of int
        0-based sites that drop out after the noise is distributed.
    scheme : {"projection", "paper"}
        Variance assignment for unequal sites (see the module docstring).
    cape_variances : {"rigorous", "paper"}
        ``"rigorous"`` (default): DP against the aggregator's joint view of all
        releases (``G_s`` 1% larger, ``E_s`` inflated); ``"paper"``: the
        paper's variances, for reproduction, reporting the delta really
        achieved against that view (module docstring).  Ignored by ``conv``.
    keep_noise : bool
        Keep every party's noise in ``noise_`` (``{"E": [...], "F": [...],
        "G": [...]}``) and the aggregate in ``aggregate_``, for tests and
        diagnostics only: they are the parties' secrets.
    calibration : {"analytic", "classic"}
    sensitivity_mode : {"rigorous", "paper"}
    centering : {"site", "none"}
        See :class:`~dpdpca.baselines._common.NoisySiteEstimator` (CAPE
        calibrates every site to the largest site's centred bound).
    neighbouring : {"add-remove", "replace-one"}
        ``"add-remove"`` (default): every site releases the pieces ``(R, v,
        N)`` of its rows (the protocol's add/remove release) with CAPE's
        correlated noise in units of each block's sigma (eq. (2) with
        ``tau_s = 1``), and the aggregator **sums** them (the sizes are
        private, so no weights): the aggregate carries exactly the trusted
        curator's noise, and each site's release alone is the protocol's
        release of its rows.  ``weights``, ``site_epsilons`` and
        ``site_deltas`` have no form here and are refused.
        ``"replace-one"``: the papers' scheme on ``A_s`` (module docstring).
    n_sites : int or None
        With one (n, d) array, split its rows (in order) into this many equal
        sites; with a list of partitions, None or their number.
    rng : None or numpy.random.Generator

    Raises
    ------
    ParameterError
        Fewer than 2 sites for capePCA, bad weights or per-site budgets, all
        sites dropped, a bad scheme.
    InfeasibleError
        ``scheme="paper"`` when the closed form has a negative variance.

    References
    ----------
    H. Imtiaz and A. D. Sarwate, "Distributed differentially private algorithms
    for matrix and tensor factorization", IEEE JSTSP 12(6), 2018: §III eq. (2),
    Algorithm 1 (CAPE), §III-A (unequal budgets), §IV Algorithm 2 (capePCA).

    Examples
    --------
    >>> import numpy as np
    >>> from dpdpca.data import partition, clip_rows
    >>> X = clip_rows(np.random.default_rng(0).normal(size=(400, 6)) / 3)[0]
    >>> est = CapePCA(2, 1.0, 1e-5, rng=np.random.default_rng(1)).fit(partition(X, 4))
    >>> est.privacy_.mechanism, est.components_.shape
    ('cape', (2, 6))
    """

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 correlated: bool = True,
                 weights: Sequence[float] | None = None, site_epsilons: Sequence[float] | None = None,
                 site_deltas: Sequence[float] | None = None, dropped_sites: Sequence[int] = (),
                 scheme: str = "projection", cape_variances: str = RIGOROUS, keep_noise: bool = False,
                 calibration: str = "analytic",
                 sensitivity_mode: str = "rigorous", centering: str = "site", neighbouring: str = "add-remove",
                 n_sites: int | None = None, rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, calibration=calibration,
                         sensitivity_mode=sensitivity_mode, centering=centering, neighbouring=neighbouring, rng=rng)
        self.correlated = correlated
        self.weights = weights
        self.site_epsilons = site_epsilons
        self.site_deltas = site_deltas
        self.dropped_sites = dropped_sites
        self.scheme = scheme
        self.cape_variances = cape_variances
        self.keep_noise = keep_noise
        self.n_sites = n_sites

    @property
    def method_name(self) -> str:  # type: ignore[override]
        return "capepca" if self.correlated else "conv"

    # -- validation -------------------------------------------------------------
    def _site_budgets(self, n_sites: int) -> tuple[list[float], list[float]]:
        eps = [float(self.epsilon)] * n_sites if self.site_epsilons is None else \
            [check_positive(f"site_epsilons[{i}]", v) for i, v in enumerate(self.site_epsilons)]
        dels = [float(self.delta)] * n_sites if self.site_deltas is None else \
            [check_open_unit(f"site_deltas[{i}]", v) for i, v in enumerate(self.site_deltas)]
        if len(eps) != n_sites:
            raise param_error("site_epsilons", f"a sequence of n_sites={n_sites} values", len(eps))
        if len(dels) != n_sites:
            raise param_error("site_deltas", f"a sequence of n_sites={n_sites} values", len(dels))
        return eps, dels

    def _weights(self, sizes: list[int]) -> list[float]:
        if self.weights is None:
            total = sum(sizes)
            return [n / total for n in sizes]
        mus = [float(w) for w in self.weights]
        if len(mus) != len(sizes):
            raise param_error("weights", f"a sequence of n_sites={len(sizes)} values", len(mus))
        if any(not math.isfinite(m) or m < 0 for m in mus) or abs(math.fsum(mus) - 1.0) > 1e-9:
            raise param_error("weights", "finite, >= 0 and summing to 1", mus)
        return mus

    def _dropped(self, n_sites: int) -> list[int]:
        dropped = sorted({check_int("dropped_sites[i]", i, minimum=0, maximum=n_sites - 1)
                          for i in self.dropped_sites})
        if len(dropped) == n_sites:
            raise param_error("dropped_sites", f"fewer than all {n_sites} sites", dropped)
        return dropped

    # -- the CAPE plan ----------------------------------------------------------
    def _plan(self, sizes: list[int], eps: list[float], dels: list[float], mus: list[float]) -> CapeNoisePlan:
        if self.scheme not in SCHEMES:
            raise param_error("scheme", f"one of {', '.join(SCHEMES)}", self.scheme)
        # CAPE takes one numerator Delta for per-site sensitivities Delta/N_s; centred releases have
        # N_s * sensitivity = 4 (N_s - 1)/N_s, increasing in N_s, so the largest site's bounds every site's
        num = self._sensitivity(max(sizes)) * max(sizes)
        return CapeNoisePlan.from_budgets(epsilons=eps, deltas=dels, sizes=sizes, sensitivity_numerator=num,
                                          weights=mus, calibration=self.calibration, neighbouring=REPLACE_ONE,
                                          method=self.scheme, variances=self.cape_variances)

    # -- the pipeline -----------------------------------------------------------
    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        S, d = len(parts), parts[0].shape[1]
        if self.correlated and S < 2:
            raise param_error("n_sites", ">= 2 for capePCA (use conv or local for one site)", S)
        if self.correlated:
            check_cape_variances(self.cape_variances)
        if self._add_remove:
            return self._fit_add_remove(parts, k)
        sizes = [int(X.shape[0]) for X in parts]
        eps, dels = self._site_budgets(S)
        mus = self._weights(sizes)
        dropped = self._dropped(S)
        active = [i for i in range(S) if i not in dropped]
        src = resolve_source(self.rng)
        mechs = [self._mechanism(sizes[i], eps[i], dels[i]) for i in range(S)]
        timings = Timings(parallel_roles=("site",))
        bytes_sent: dict[str, int] = {}
        params = self._base_params(k, parts)
        params.update({"correlated": bool(self.correlated), "weights": mus, "dropped_sites": dropped,
                       "site_epsilons": eps, "site_deltas": dels})
        plan = None
        # Every symmetric matrix travels as its upper triangle (d(d+1)/2 values); the
        # noise terms are i.i.d. per upper-triangle entry, exactly the symmetric
        # noise of Alg. 2, and the aggregator mirrors once at the end.
        n_upper = upper_triangle_size(d)
        if self.correlated:
            plan = self._plan(sizes, eps, dels, mus)
            params["scheme"] = plan.scheme
            params["cape_variances"] = plan.variances
            with timings.measure("noise-generator", "noise"):
                E = plan.noise_generator_terms(n_upper, rng=src)
            bytes_sent["noise-generator"] = S * symmetric_bytes(d)
            with timings.measure("aggregator", "noise"):
                F = plan.aggregator_terms(n_upper, rng=src)
            bytes_sent["aggregator"] = S * symmetric_bytes(d)
        G: list[np.ndarray] = []
        releases: dict[int, np.ndarray] = {}
        for i in active:
            party = f"site:{i + 1}"
            with timings.measure(party, "second-moment"):
                a_hat = upper_from_symmetric(self._moment(parts[i]))
            with timings.measure(party, "noise"):
                if plan is not None:
                    g_i = plan.site_term(i, n_upper, rng=src)
                    a_hat += E[i]
                    a_hat += F[i]
                else:
                    g_i = mechs[i].sample(n_upper, src)
                a_hat += g_i
            if self.keep_noise:
                G.append(g_i)
            releases[i] = a_hat
            bytes_sent[party] = symmetric_bytes(d)
        with timings.measure("aggregator", "aggregate"):
            weight = math.fsum(mus[i] for i in active)
            upper = np.zeros(n_upper)
            for i in active:
                upper += (mus[i] / weight) * (releases[i] - F[i] if plan is not None else releases[i])
            aggregate = symmetric_from_upper(upper, d)
        with timings.measure("aggregator", "eigh"):
            w, V = top_eigenpairs(aggregate, k)
        bytes_sent["aggregator"] = bytes_sent.get("aggregator", 0) + FLOAT_BYTES * d * k
        if self.keep_noise:
            self.noise_ = {name: [symmetric_from_upper(v, d) for v in terms] for name, terms in
                           (("E", E if plan is not None else []), ("F", F if plan is not None else []), ("G", G))}
            self.aggregate_ = aggregate
        privacy = self._report(mechs, sizes, plan, dropped)
        extra: dict[str, Any] = {"trace": float(np.trace(aggregate))}
        if plan is not None:
            extra |= {"aggregator_noise_variance": plan.aggregator_noise_variance,
                     "conventional_noise_variance": plan.conventional_variance, "cape_gain": plan.gain}
        return PCAResult(method=self.method_name, components=V, eigenvalues=w, privacy=privacy, timings=timings,
                         bytes_sent=bytes_sent, params=params, extra=extra)

    def _fit_add_remove(self, parts: list[np.ndarray], k: int) -> PCAResult:
        """CAPE (or conv) on the pieces ``(R, v, N)`` of every site, summed: module docstring, add/remove."""
        for name in ("weights", "site_epsilons", "site_deltas"):
            if getattr(self, name) is not None:
                raise UnsupportedSettingError(
                    f"{name} has no add/remove-one form in {self.method_name}: the sites' sizes are private, so "
                    f"every site runs the same budget and the aggregate is a plain sum (use "
                    f"neighbouring='replace-one'), got {getattr(self, name)!r}")
        S, d = len(parts), parts[0].shape[1]
        dropped = self._dropped(S)
        active = [i for i in range(S) if i not in dropped]
        src = resolve_source(self.rng)
        noise = self._add_remove_noise(d)
        scales = noise.scales()
        n_pieces = scales.shape[0]
        timings = Timings(parallel_roles=("site",))
        bytes_sent: dict[str, int] = {}
        params = self._base_params(k, parts)
        params.update({"correlated": bool(self.correlated), "dropped_sites": dropped, "aggregate": "sum"})
        # In units of each coordinate's sigma: the equal-sites plan of eq. (2) with tau_s = 1, so a site's
        # E_s + G_s (and F_s + G_s) has variance 1 -- its release alone is the protocol's add/remove release --
        # and the sum of the S terms G_s has variance 1 too: the aggregate carries the curator's noise.  The
        # rigorous variances (default) make the aggregator's joint view of the S releases as private as one
        # release: G_s (1 + JOINT_SLACK) larger (so is the aggregate's noise), E_s inflated (it cancels).
        plan = None
        if self.correlated:
            plan = CapeNoisePlan.equal(n_sites=S, tau_s=1.0)
            plan = plan.joint_safe() if self.cape_variances == RIGOROUS else plan
        piece_bytes = FLOAT_BYTES * n_pieces
        if plan is not None:
            params["scheme"] = plan.scheme
            params["cape_variances"] = plan.variances
            with timings.measure("noise-generator", "noise"):
                E = [e * scales for e in plan.noise_generator_terms(n_pieces, rng=src)]
            bytes_sent["noise-generator"] = S * piece_bytes
            with timings.measure("aggregator", "noise"):
                F = [f * scales for f in plan.aggregator_terms(n_pieces, rng=src)]
            bytes_sent["aggregator"] = S * piece_bytes
        G: list[np.ndarray] = []
        releases: dict[int, np.ndarray] = {}
        for i in active:
            party = f"site:{i + 1}"
            with timings.measure(party, "second-moment"):
                pieces = scatter_pieces(parts[i])
            with timings.measure(party, "noise"):
                if plan is not None:
                    g_i = plan.site_term(i, n_pieces, rng=src) * scales
                    pieces += E[i]
                    pieces += F[i]
                else:
                    g_i = noise.draw(src)
                pieces += g_i
            if self.keep_noise:
                G.append(g_i)
            releases[i] = pieces
            bytes_sent[party] = piece_bytes
        with timings.measure("aggregator", "aggregate"):
            total = np.zeros(n_pieces)
            for i in active:
                total += releases[i] - F[i] if plan is not None else releases[i]
            aggregate, n, _ = moment_from_pieces(total, d, centred=self.centering == "site")
        with timings.measure("aggregator", "eigh"):
            w, V = top_eigenpairs(aggregate, k)
        bytes_sent["aggregator"] = bytes_sent.get("aggregator", 0) + FLOAT_BYTES * d * k
        if self.keep_noise:
            self.noise_ = {"E": E if plan is not None else [], "F": F if plan is not None else [], "G": G}
            self.aggregate_ = aggregate
        if plan is None:
            privacy = noise.privacy("site", notes="conv: each site adds the full noise to its own R, v, N; the "
                                                  "aggregator sums; parallel composition over disjoint sites")
        else:
            notes = (f"CAPE on the pieces R, v, N of every site (equal-sites plan of eq. (2) in units of each "
                     f"block's sigma): each release is protected by E_s+G_s against the aggregator and F_s+G_s "
                     f"against others; {CAPE_BASIS}: {plan.joint_note()}; the summed aggregate carries "
                     f"{plan.aggregator_noise_variance * S * S:.4g} times the curator's noise variance; {CAPE_TRUST}")
            if dropped:
                notes += (f"; sites {[i + 1 for i in dropped]} dropped out: the remaining E_s no longer cancel, so "
                          f"the noise exceeds the curator's; the joint view of fewer releases keeps the guarantee")
            privacy = noise.privacy(_CAPE_PARTIES, mechanism="cape", notes=notes, joint_factor=plan.joint_factor())
        extra: dict[str, Any] = {"trace": float(np.trace(aggregate)), "n_released": n}
        if plan is not None:
            extra.update({"aggregator_noise_variance": float(noise.sigma("R")) ** 2 * plan.aggregator_noise_variance
                          * S * S, "conventional_noise_variance": float(noise.sigma("R")) ** 2 * S})
        return PCAResult(method=self.method_name, components=V, eigenvalues=w, privacy=privacy, timings=timings,
                         bytes_sent=bytes_sent, params=params, extra=extra)

    def _cape_report(self, plan: CapeNoisePlan, i: int, report: PrivacyReport, n: int) -> PrivacyReport:
        """Site ``i``'s report: the larger of the deltas really had by its release alone and in the joint view.

        Both at the statistic's proven sensitivity (the paper mode's noise is
        calibrated to a smaller one); each keeps one note naming the claim.
        """
        alone = self._as_ran(report, n)
        proven = None if self.sensitivity_mode != PAPER else self._sensitivity(n, RIGOROUS)
        joint = plan.against_joint_view(i, report, sensitivity=proven)
        return joint if joint.delta >= alone.delta else alone

    def _report(self, mechs: list[Any], sizes: list[int], plan: CapeNoisePlan | None,
                dropped: list[int]) -> PrivacyReport:
        if plan is None:
            reports = [self._as_ran(m.privacy(noise_added_by=f"site:{i + 1}"), sizes[i]) for i, m in enumerate(mechs)]
            return parallel_report(reports, mechanism="gaussian", noise_added_by="site",
                                   notes="conventional averaging: each site adds its own full noise")
        # sigma: the plan's tau_s, which the draws are sized by (calibrated to the largest site's sensitivity
        # numerator, so at least this site's own mechanism's sigma); the delta: against the joint view
        reports = [self._cape_report(plan, i, dataclasses.replace(m.privacy(noise_added_by=_CAPE_PARTIES),
                                                                  mechanism="cape", sigma=math.sqrt(plan.tau_s2[i])),
                                     sizes[i]) for i, m in enumerate(mechs)]
        notes = (f"CAPE scheme {plan.scheme}: each release is protected by E_s+G_s against the aggregator and "
                 f"F_s+G_s against others; {plan.joint_note()}; {CAPE_TRUST}")
        if dropped:
            notes += (f"; sites {[i + 1 for i in dropped]} dropped out: the remaining E_s no longer cancel, so the "
                      f"noise exceeds the pooled level; the joint view of fewer releases keeps the guarantee")
        return parallel_report(reports, mechanism="cape", noise_added_by=_CAPE_PARTIES, notes=notes,
                               basis=CAPE_BASIS)
