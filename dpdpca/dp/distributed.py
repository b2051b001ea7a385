"""Distributed noise: the distributed discrete Gaussian (Kairouz, Liu & Steinke 2021).

Each data owner adds its own share of integer noise, ``N_Z(0, s_j^2)`` per
coordinate of block j, to its statistics before they leave it.  Whoever
aggregates and reads the sum cannot remove the noise of owners outside their
coalition: if at least ``n`` honest owners take part, the release carries the
sum of ``n`` independent discrete Gaussians, whatever the others add.  (What
each party of the protocol faces is :func:`dpdpca.protocol.add_remove.coalition_report`'s.)

Why this mechanism.  The alternative, Skellam noise (Agarwal, Kairouz & Liu
2021), is closed under summation but needs exact Poisson samples with means
near 1e20 in our integer units, for which no exact sampler from uniform bits
is practical.  The sum of discrete Gaussians is not a discrete Gaussian, but
Kairouz, Liu & Steinke bound the gap with ``tau``, and at our scales
(``s`` of 1e5 to 1e19 integer units) ``tau`` is below ``1e-300``: the
accountant below is then the discrete Gaussian's own RDP curve at the summed
variance, and the exact sampler of :mod:`dpdpca.dp.discrete` does the work.

The accountant, exactly as published
------------------------------------
Kairouz, Liu & Steinke, "The Distributed Discrete Gaussian Mechanism for
Federated Learning with Secure Aggregation", ICML 2021:

* Theorem 1: ``tau = 10 * sum_{k=1}^{n-1} exp(-2 pi^2 s^2 k/(k+1))`` for
  ``n`` summands ``N_Z(0, s^2)``;
* Proposition 14 (eq. 17): a query of L2 sensitivity ``D2`` and L1
  sensitivity ``D1`` in dimension ``m``, with the sum of ``n`` local noises
  of variance ``s^2``, so ``sigma^2 = n s^2``, is ``(alpha, eps(alpha))``-RDP for
  every integer ``alpha > 1`` with
  ``eps(alpha) = min(alpha D2^2/(2 sigma^2) + tau m,
  alpha/2 (D2^2/sigma^2 + 2 D1 tau/sigma + tau^2 m),
  alpha/2 (D2/sigma + tau sqrt(m))^2)``;
  we use ``D1 = sqrt(m) D2`` (as the authors' code does without a finer bound).

Independent blocks (R, v, N with their own variances) compose: their RDP
curves add at every order.  The curve converts to (epsilon, delta) by CKS
Prop. 12 (:func:`dpdpca.dp.accountant.rdp_to_epsilon`) on the integer orders
of :data:`DDG_ORDERS`; at a non-integer order we use the next integer's value
(an RDP curve is non-decreasing in alpha).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from dpdpca._validation import check_delta, check_epsilon, check_int, param_error
from dpdpca.dp.accountant import ReleaseCost, rdp_to_epsilon
from dpdpca.dp.release import BLOCKS, block_counts, block_scales, split_weights
from dpdpca.dp.report import ADD_REMOVE_ONE, PrivacyReport

__all__ = [
    "DDG_ORDERS",
    "DistributedCalibration",
    "calibrate_distributed",
    "ddg_rdp",
    "ddg_tau",
    "honest_present",
]

#: Integer orders of Proposition 14.
DDG_ORDERS: tuple[int, ...] = tuple(range(2, 257)) + (320, 384, 512, 768, 1024, 2048)
#: A positive float above every tau we cannot resolve (exp underflows): keeps the bound sound.
_TAU_FLOOR = 1e-300


def ddg_tau(local_sigma_squared: Fraction | float, n: int) -> float:
    """``tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 s^2 k / (k+1))`` (KLS 2021, Theorem 1), rounded up.

    Returns 0 for ``n = 1`` (one discrete Gaussian) and at least ``1e-300``
    otherwise (an underflowed exponential must not round the bound down).
    """
    n = check_int("n", n, minimum=1)
    s2 = float(Fraction(local_sigma_squared))
    if not s2 > 0:
        raise param_error("local_sigma_squared", "> 0", local_sigma_squared)
    if n == 1:
        return 0.0
    total = math.fsum(math.exp(-2.0 * math.pi ** 2 * s2 * k / (k + 1)) for k in range(1, n))
    return max(10.0 * total * (1 + 1e-12), _TAU_FLOOR)


def ddg_rdp(alpha: int, *, l2: float, l1: float, sigma: float, tau: float, dim: int) -> float:
    """KLS 2021 Proposition 14 (eq. 17): RDP of order ``alpha`` of the distributed discrete Gaussian.

    Parameters
    ----------
    alpha : int > 1
    l2, l1 : float
        L2 and L1 sensitivities (integer units).
    sigma : float
        Standard deviation of the *summed* noise, ``sqrt(n) s``.
    tau : float
        :func:`ddg_tau`.
    dim : int
        Coordinates of the query.
    """
    a = check_int("alpha", alpha, minimum=2)
    l2_scale, l1_scale = l2 / sigma, l1 / sigma
    term_1 = a / 2.0 * l2_scale ** 2 + tau * dim
    term_2 = a / 2.0 * (l2_scale ** 2 + 2.0 * l1_scale * tau + tau ** 2 * dim)
    term_3 = a / 2.0 * (l2_scale + math.sqrt(dim) * tau) ** 2
    return min(term_1, term_2, term_3)


def honest_present(*, owners: int, honest: int, present: int) -> int:
    """Honest owners certainly among ``present``: ``present - (owners - honest)`` (at least 0)."""
    return max(0, present - (owners - honest))


@dataclass(frozen=True)
class DistributedCalibration:
    """Per-owner noise of the add/remove release under distributed noise.

    Attributes
    ----------
    epsilon, delta : float
        The target against a coalition that leaves ``n_sized`` honest owners'
        noise in place.
    owners, honest, quorum : int
        L, the t honest owners assumed, the fewest owners aggregated.
    n_sized : int
        Honest owners the shares are sized for: ``t - (L - quorum)`` (the worst
        case: every dropped owner honest).
    local_sigma_squared_int : dict of Fraction
        Each owner's discrete-Gaussian parameter per block, integer units.
    d, frac_bits : int
    weights : dict
        The split of the budget between R, v and N (:func:`split_weights`).
    """

    epsilon: float
    delta: float
    owners: int
    honest: int
    quorum: int
    n_sized: int
    d: int
    frac_bits: int
    weights: dict[str, float]
    local_sigma_squared_int: dict[str, Fraction]

    @property
    def counts(self) -> dict[str, int]:
        return block_counts(self.d)

    def rdp(self, alpha: float, n: int) -> float:
        """RDP at order ``alpha`` with the noise of ``n`` honest owners (0 owners: infinite)."""
        if n < 1:
            return math.inf
        a = max(2, math.ceil(alpha))
        sens = block_scales(self.frac_bits)
        total = 0.0
        for b in BLOCKS:
            s2 = self.local_sigma_squared_int[b]
            m = self.counts[b]
            total += ddg_rdp(a, l2=float(sens[b]), l1=float(sens[b]) * math.sqrt(m),
                             sigma=math.sqrt(float(s2) * n), tau=ddg_tau(s2, n), dim=m)
        return total

    def epsilon_for(self, n: int, delta: float | None = None) -> float:
        """epsilon at ``delta`` (default the target) with the noise of ``n`` honest owners."""
        dl = self.delta if delta is None else delta
        return rdp_to_epsilon(DDG_ORDERS, [self.rdp(a, n) for a in DDG_ORDERS], dl)[0]

    def sigma(self, block: str, n: int) -> float:
        """Std. deviation of the summed noise of ``n`` owners in ``block``, data units."""
        return math.sqrt(float(self.local_sigma_squared_int[block]) * n) / block_scales(self.frac_bits)[block]

    def cost(self, n: int, *, label: str = "") -> ReleaseCost:
        """The ledger cost with ``n`` honest owners' noise."""
        return ReleaseCost.from_rdp(lambda a: self.rdp(a, n), epsilon=self.epsilon_for(n), delta=self.delta,
                                    neighbouring=ADD_REMOVE_ONE, mechanism="distributed-discrete-gaussian",
                                    label=label)

    def report(self, present: int) -> PrivacyReport:
        """The release's report: the guarantee reached with the noise of the honest owners present alone."""
        n_t = honest_present(owners=self.owners, honest=self.honest, present=present)
        eps = self.epsilon_for(n_t) if n_t >= 1 else math.inf
        split = ", ".join(f"{b} {self.weights[b]:.3f}" for b in BLOCKS)
        notes = (f"noise by owners (distributed discrete Gaussian, Kairouz-Liu-Steinke 2021 Thm 1 + Prop 14, "
                 f"RDP -> (eps, delta) by CKS Prop 12): {self.owners} owners, {self.honest} assumed honest, "
                 f"quorum {self.quorum}, shares sized for {self.n_sized} honest present; {present} present -> "
                 f"{n_t} honest shares at least; guarantee with those shares alone (whoever holds the other "
                 f"{self.owners - self.honest} owners' noise); split {split}; "
                 f"sigma_R={self.sigma('R', max(n_t, 1)):.4g}")
        return PrivacyReport(epsilon=eps, delta=self.delta, mechanism="distributed-discrete-gaussian",
                             calibration="ddg-rdp", sensitivity=1.0, neighbouring=ADD_REMOVE_ONE,
                             noise_added_by="owners", sigma=self.sigma("R", max(n_t, 1)),
                             sensitivity_mode="rigorous", notes=notes)


#: Largest common noise scale c^2 the calibration tries (the variances stay far inside double precision).
_MAX_SCALE = Fraction(2) ** 200


def calibrate_distributed(*, epsilon: float, delta: float, d: int, frac_bits: int, owners: int, honest: int,
                          quorum: int | None = None, mean_norm_bound: float = 1.0) -> DistributedCalibration:
    """Each owner's noise so that ``t - (L - quorum)`` honest shares alone give (epsilon, delta).

    Parameters
    ----------
    epsilon : float > 0
    delta : float in (0, 1)
    d, frac_bits : int
    owners : int >= 1
        L.
    honest : int in [1, L]
        t: the guarantee must hold with the noise of t owners alone (against
        everyone else together, ``L - t`` owners included).
    quorum : int in [L - t + 1, L] or None
        The fewest owners whose shares are aggregated (default L).
        Dropouts are handled by sizing: each share is calibrated for
        ``n = t - (L - quorum)`` honest present owners.
    mean_norm_bound : float
        For the split (:func:`dpdpca.dp.release.split_weights`).

    Returns
    -------
    DistributedCalibration

    Raises
    ------
    ParameterError
        honest outside [1, L], a quorum that could leave no honest share, or
        an epsilon below what any noise reaches at this delta (the RDP orders'
        floor).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    d = check_int("d", d, minimum=1)
    owners = check_int("owners", owners, minimum=1)
    honest = check_int("honest_owners", honest, minimum=1, maximum=owners)
    q = owners if quorum is None else check_int("quorum", quorum, minimum=1, maximum=owners)
    n = honest_present(owners=owners, honest=honest, present=q)
    if n < 1:
        raise param_error("quorum", f"> L - t = {owners - honest} so that an honest owner's noise is always present",
                          q)
    weights = split_weights(d, mean_norm_bound=mean_norm_bound)
    scales = block_scales(frac_bits)

    def build(c2: Fraction) -> DistributedCalibration:
        local = {b: c2 * scales[b] ** 2 / Fraction(weights[b]) / n for b in BLOCKS}
        return DistributedCalibration(epsilon=epsilon, delta=delta, owners=owners, honest=honest, quorum=q,
                                      n_sized=n, d=d, frac_bits=frac_bits, weights=weights,
                                      local_sigma_squared_int=local)

    # eps is decreasing in the common scale c^2: bracket, then bisect on a 1e-6 grid (rounded up).
    lo, hi = Fraction(1, 10 ** 6), Fraction(1)
    while (reached := build(hi).epsilon_for(n)) > epsilon:
        if hi > _MAX_SCALE:
            # The RDP orders bound how small epsilon can get (about log(1/delta) / (max order - 1)):
            # more noise no longer helps, and the variance would soon leave double precision.
            raise param_error("epsilon", f">= {reached:.3g}, the smallest the owners' distributed noise reaches at "
                              f"delta={delta} (noise by owners)", epsilon)
        lo, hi = hi, hi * 4
    while (hi - lo) > hi / 1_000_000:
        mid = Fraction(math.nextafter(float((lo + hi) / 2), math.inf))
        if not lo < mid < hi:
            break
        if build(mid).epsilon_for(n) <= epsilon:
            hi = mid
        else:
            lo = mid
    return build(hi)


def local_sigma_table(cal: DistributedCalibration) -> Mapping[str, float]:
    """Each owner's noise std. deviation per block, data units (for reports)."""
    scales = block_scales(cal.frac_bits)
    return {b: math.sqrt(float(cal.local_sigma_squared_int[b])) / scales[b] for b in BLOCKS}
