"""Noise calibration: from (epsilon, delta, sensitivity) to a noise scale, and back.

Gaussian (continuous)
    * ``"analytic"`` (default): the analytic Gaussian mechanism of Balle & Wang
      (2018), Theorem 8.  The smallest sigma with
      ``Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D) <= delta``.
      Exact for every epsilon > 0.
    * ``"classic"``: ``sigma = D sqrt(2 ln(1.25/delta)) / epsilon`` (Dwork & Roth
      2014, Theorem A.1), the calibration every reproduced paper uses.  Its proof holds
      only for ``epsilon < 1``; for ``epsilon >= 1`` we do not refuse (the papers'
      experiments use it) but :func:`gaussian_delta` gives the delta it really
      achieves, and the mechanisms report that delta when it is larger.

Both are scale-free: ``sigma = D * c(epsilon, delta)``, so a huge integer
sensitivity is calibrated by computing ``c`` once.

Discrete Gaussian (Canonne, Kamath & Steinke 2020)
    ``N_Z(0, sigma^2)^m`` added to an integer vector whose L2 sensitivity is
    ``D`` satisfies ``rho``-zCDP with ``rho = D^2 / (2 sigma^2)`` in *any*
    dimension m: the Renyi divergence of order alpha between ``N_Z(mu, sigma^2)``
    and ``N_Z(nu, sigma^2)`` for integers mu, nu is at most
    ``alpha (mu - nu)^2 / (2 sigma^2)`` (CKS, concentrated DP of the discrete
    Gaussian), and Renyi divergences of product distributions add up over the
    coordinates, giving ``alpha ||x - x'||^2 / (2 sigma^2)``.  The discrete Gaussian is not rotation
    invariant, so the exact one-dimensional delta of CKS Theorem 7 does not carry
    over to vectors under an L2 bound; we therefore report
    ``delta = inf_{alpha > 1} exp((alpha - 1)(alpha rho - eps)) / (alpha - 1) * (1 - 1/alpha)^alpha``
    (CKS Corollary 13), a provable upper bound for every m, and calibrate
    ``sigma^2`` (a rational, rounded up) so that this bound is at most the
    requested delta.  :func:`discrete_gaussian_delta_1d` gives the exact
    Theorem 7 delta of a scalar release by direct summation, used by the tests
    to check that the reported bound is never below the truth.

Discrete Gaussian, tighter: the rounding coupling (``"analytic"``, with a dimension)
    The zCDP route above costs 7-10% more sigma than the analytic continuous
    Gaussian.  For the large sigmas of the protocol (1e9 and more in integer
    units) we recover it with a bound of our own, proved in
    :func:`discrete_gaussian_blocks_delta`: the discrete Gaussian is within a
    total-variation distance ``tv(sigma) <= (sqrt(2)/sigma^2 + sqrt(6)/sigma^3)/48
    + q/(1-q)``, ``q = exp(-2 pi^2 sigma^2)``, of the *rounded* continuous
    Gaussian, whose mechanism is post-processing of the continuous Gaussian
    mechanism.  Hence, for m coordinates,
    ``delta_DG(eps) <= delta_BW(eps; D) + (1 + e^eps) * sum_j tv(sigma_j)`` with
    ``delta_BW`` the exact analytic-Gaussian delta (Balle & Wang 2018, Thm 8)
    at the whitened sensitivity ``D^2 = max sum_j (q_j(x) - q_j(x'))^2 / sigma_j^2``.
    We report the smaller of this and the zCDP bound (both are valid).  For
    small sigma the tv term dominates and the zCDP bound wins.

References
----------
B. Balle, Y.-X. Wang, "Improving the Gaussian Mechanism for Differential
Privacy: Analytical Calibration and Optimal Denoising", ICML 2018, Theorem 8.
C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy",
2014, Theorem A.1.
C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, arXiv:2004.00010: Theorem 7 (exact scalar delta),
the concentrated-DP bound of the discrete Gaussian, Corollary 13 (zCDP to
(epsilon, delta)); cross-checked against the authors' reference code
(``cdp2adp.py``), which uses the same ``rho = 1/(2 sigma^2)`` per unit
sensitivity and the same conversion.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import optimize, special

from dpdpca._validation import check_delta, check_int, check_nonnegative, check_positive, param_error

from dpdpca.dp.settings import CALIBRATIONS

__all__ = [
    "rounding_tv_bound",
    "discrete_gaussian_blocks_delta",
    "rounding_coupling_delta",
    "GAUSSIAN_CALIBRATIONS",
    "check_calibration",
    "DISCRETE_GAUSSIAN_CALIBRATIONS",
    "calibrate_gaussian",
    "classic_gaussian_sigma",
    "analytic_gaussian_sigma",
    "gaussian_delta",
    "zcdp_delta",
    "zcdp_rho_for",
    "calibrate_discrete_gaussian",
    "discrete_gaussian_delta",
    "discrete_gaussian_delta_1d",
    "check_sensitivity",
    "check_integer_sensitivity",
]

GAUSSIAN_CALIBRATIONS = CALIBRATIONS  # the names of dpdpca.dp.settings
#: ``"analytic"``: the rounding-coupling bound (needs the dimension; the
#: tightest for large sigma); ``"zcdp"``: CKS Cor. 13 in any dimension;
#: ``"classic"``: the papers' formula.
DISCRETE_GAUSSIAN_CALIBRATIONS = ("analytic", "zcdp", "classic")
# Reported deltas are computed in float64: we inflate them by this factor so
# that rounding in exp/log/erfc cannot make a bound smaller than the truth.
_ROUND_UP = 1.0 + 1e-9


def check_sensitivity(value: Any, name: str = "sensitivity") -> float:
    """A finite sensitivity ``>= 0`` (one-line ParameterError otherwise)."""
    return check_nonnegative(name, value)


def check_integer_sensitivity(value: Any, name: str = "sensitivity") -> int:
    """A Python int ``>= 0`` of any size, for the integer mechanisms.

    A float, even an integral one like ``2.0``, is refused: integer noise must be
    calibrated to an integer sensitivity computed exactly (use ``math.ceil`` on
    a bound you derived).
    """
    return check_int(name, value, minimum=0)


def check_calibration(calibration: str, allowed: tuple[str, ...]) -> str:
    """``calibration`` if it is one of ``allowed``, else a one-line ParameterError naming them."""
    if calibration not in allowed:
        raise param_error("calibration", "one of " + ", ".join(repr(a) for a in allowed), calibration)
    return calibration


# --- continuous Gaussian ----------------------------------------------------

def classic_gaussian_sigma(epsilon: float, delta: float) -> float:
    """``c = sqrt(2 ln(1.25/delta)) / epsilon`` (sigma per unit sensitivity), Dwork & Roth Thm A.1."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def _log_gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    """``log`` of :func:`gaussian_delta`, accurate down to the smallest deltas (log-space)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    log_first = float(special.log_ndtr(a - b))
    ratio = epsilon + float(special.log_ndtr(-a - b)) - log_first  # log(second / first) < 0
    if ratio >= 0.0:
        return -math.inf
    return log_first + math.log1p(-math.exp(ratio))


def gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    """The exact delta(epsilon) of the Gaussian mechanism N(0, sigma^2) (Balle & Wang 2018, Thm 8).

    ``delta = Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D)``, evaluated in
    log space (``log Phi`` of both terms) so that tiny deltas keep full precision.
    """
    epsilon = check_positive("epsilon", epsilon)
    sigma = check_positive("sigma", sigma)
    sensitivity = check_positive("sensitivity", sensitivity)
    return math.exp(_log_gaussian_delta(epsilon, sigma, sensitivity))


def analytic_gaussian_sigma(epsilon: float, delta: float) -> float:
    """Smallest ``c`` (sigma per unit sensitivity) with ``gaussian_delta(eps, c) <= delta``.

    Root of the Balle-Wang identity in log space, found by Brent's method on
    ``log c``, then nudged up by ulps until the identity gives a delta no larger
    than requested.

    Raises
    ------
    ParameterError
        A budget whose root leaves double precision (e.g. epsilon = 1e100), or
        epsilon, delta out of range.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta("delta", delta)
    log_target = math.log(delta)

    def excess(log_c: float) -> float:
        value = _log_gaussian_delta(epsilon, math.exp(log_c))
        return max(value, -1e6) - log_target

    lo, hi = -60.0, 60.0  # c from e^-60 to e^60
    try:
        log_c = optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    except ValueError:  # no sign change (or NaN) in the bracket: the budget is out of double precision's reach
        raise param_error("epsilon", "small enough for the calibration to stay in double precision (at most "
                          "about 1e30)", epsilon) from None
    c = math.exp(log_c)
    while gaussian_delta(epsilon, c) > delta:
        c = math.nextafter(c, math.inf)
    return c


def calibrate_gaussian(*, epsilon: float, delta: float, sensitivity: float,
                       calibration: str = "analytic") -> float:
    """Standard deviation of Gaussian noise for (epsilon, delta)-DP at L2 ``sensitivity``.

    Parameters
    ----------
    epsilon : float, > 0
    delta : float, in (0, 1)
    sensitivity : float, >= 0
        L2 sensitivity under the neighbouring relation the caller states.
    calibration : {"analytic", "classic"}
        ``"analytic"`` (default, Balle & Wang 2018, exact for all epsilon) or
        ``"classic"`` (Dwork & Roth Thm A.1, paper-faithful, proven only for
        epsilon < 1; not refused for epsilon >= 1, see :func:`gaussian_delta`).

    Returns
    -------
    float
        sigma ``= sensitivity * c(epsilon, delta)`` (0 when the sensitivity is 0).

    Raises
    ------
    ParameterError
        epsilon <= 0, delta outside (0, 1), a negative or non-finite sensitivity,
        or an unknown calibration.

    Examples
    --------
    >>> s_a = calibrate_gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    >>> s_c = calibrate_gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0, calibration="classic")
    >>> s_a < s_c
    True
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta("delta", delta)
    sensitivity = check_sensitivity(sensitivity)
    check_calibration(calibration, GAUSSIAN_CALIBRATIONS)
    if calibration == "classic":
        c = classic_gaussian_sigma(epsilon, delta)
    else:
        c = analytic_gaussian_sigma(epsilon, delta)
    return sensitivity * c


# --- zCDP and the discrete Gaussian -----------------------------------------

def zcdp_delta(rho: float, epsilon: float) -> float:
    """Upper bound on delta(epsilon) of a rho-zCDP mechanism (CKS 2020, Corollary 13).

    ``inf_{alpha > 1} exp((alpha-1)(alpha rho - eps)) / (alpha-1) * (1-1/alpha)^alpha``;
    every alpha gives a valid bound, so an imprecise minimiser only loosens it.
    Also never above ``exp(-(eps - rho)^2 / (4 rho))`` (Bun & Steinke 2016, Prop. 1.3).
    """
    rho = check_positive("rho", rho)
    epsilon = check_positive("epsilon", epsilon)

    def log_delta(alpha: float) -> float:
        if not alpha > 1.0:
            return math.inf
        return ((alpha - 1.0) * (alpha * rho - epsilon) + alpha * math.log1p(-1.0 / alpha)
                - math.log(alpha - 1.0))

    a_star = (epsilon + rho) / (2.0 * rho) + 1.0  # near the optimum
    hi = math.log(a_star) + 5.0
    res = optimize.minimize_scalar(lambda la: log_delta(1.0 + math.exp(la)), bounds=(-30.0, hi),
                                   method="bounded", options={"xatol": 1e-10})
    best = log_delta(1.0 + math.exp(float(res.x)))
    best = min(best, log_delta(a_star))
    if epsilon > rho:  # t * t: a product overflows to inf (delta 0), where ** 2 would raise
        t = epsilon - rho
        best = min(best, -(t * t) / (4.0 * rho))
    if best >= 0.0:  # also avoids overflow in exp for huge rho
        return 1.0
    return min(1.0, math.exp(best) * _ROUND_UP)


@functools.lru_cache(maxsize=256)
def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """Largest rho (to 1e-12 relative, rounded down) with ``zcdp_delta(rho, epsilon) <= delta``.

    A pure function of its two numbers, remembered (a bisection of about 60
    bounded minimisations, 4 ms): a proxy prices, checks and draws one
    release's noise from the same (epsilon, delta) several times.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta("delta", delta)
    lo, hi = 1e-12, 1.0
    while zcdp_delta(hi, epsilon) <= delta:
        lo, hi = hi, hi * 4.0
    while zcdp_delta(lo, epsilon) > delta:
        lo /= 4.0
    for _ in range(200):
        if hi - lo <= 1e-13 * lo:
            break
        mid = 0.5 * (lo + hi)
        if zcdp_delta(mid, epsilon) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


def calibrate_discrete_gaussian(*, epsilon: float, delta: float, sensitivity: int,
                                calibration: str = "zcdp", dimension: int | None = None) -> Fraction:
    """Exact rational ``sigma^2`` of discrete Gaussian noise for an integer L2 ``sensitivity``.

    Parameters
    ----------
    epsilon : float, > 0
    delta : float, in (0, 1)
    sensitivity : int, >= 0
        Python int of any size (e.g. ``ceil(N * Delta * 2**(2f))``).
    calibration : {"zcdp", "classic"}
        ``"zcdp"`` (default, rigorous in any dimension): ``sigma^2 = D^2 r`` with the
        rational ``r >= 1/(2 rho*)`` rounded up, ``rho* = zcdp_rho_for(eps, delta)``.
        ``"classic"`` (paper-faithful): ``sigma = D sqrt(2 ln(1.25/delta))/eps``
        rounded up; its true delta is given by :func:`discrete_gaussian_delta`.
        ``"analytic"`` (needs ``dimension``): the smallest sigma^2 (to 1e-6
        relative, never above the zCDP one) whose
        :func:`discrete_gaussian_blocks_delta` is at most delta.
    dimension : int or None
        Number of noisy coordinates m (``"analytic"`` only; without it
        ``"analytic"`` falls back to ``"zcdp"``).

    Returns
    -------
    fractions.Fraction
        ``sigma^2`` (0 when the sensitivity is 0).
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta("delta", delta)
    sensitivity = check_integer_sensitivity(sensitivity)
    check_calibration(calibration, DISCRETE_GAUSSIAN_CALIBRATIONS)
    if calibration == "analytic" and dimension is None:
        calibration = "zcdp"
    if calibration == "classic":
        c2 = classic_gaussian_sigma(epsilon, delta) ** 2
    else:
        c2 = 1.0 / (2.0 * zcdp_rho_for(epsilon, delta))
    ratio = Fraction(math.nextafter(c2 * (1.0 + 1e-12), math.inf))  # exact, rounded up
    if calibration != "classic":
        # the reported bound is computed from the exact rational sigma^2: make sure it holds
        while discrete_gaussian_delta(epsilon, ratio, 1) > delta:
            ratio *= Fraction(1_000_001, 1_000_000)
    if calibration == "analytic" and sensitivity > 0:
        m = check_int("dimension", dimension, minimum=1)
        sens2 = Fraction(sensitivity) ** 2

        def ok(r: Fraction) -> bool:
            return discrete_gaussian_blocks_delta(epsilon, [(sens2 * r, m)], 1 / r) <= delta

        ratio = smallest_passing_ratio(ok, analytic_gaussian_sigma(epsilon, delta) ** 2, ratio)
    return Fraction(sensitivity) ** 2 * ratio


def smallest_passing_ratio(ok: Any, start: float, ceiling: Fraction) -> Fraction:
    """Smallest rational ``r`` in ``[start, ceiling]`` with ``ok(r)`` (to 1e-6 relative), else ``ceiling``.

    ``ok`` must be monotone (more noise never hurts).  Geometric steps of 0.1%
    up from ``start``, then bisection between the last failure and the first
    success; every returned value has passed ``ok`` (or is the ceiling, which
    the caller has checked).
    """
    lo = Fraction(math.nextafter(start * (1.0 + 1e-12), math.inf))
    if lo >= ceiling:
        return ceiling
    if ok(lo):
        return lo
    hi = lo
    while True:
        hi = hi * Fraction(1001, 1000)
        if hi >= ceiling:
            hi = ceiling
            break
        if ok(hi):
            break
        lo = hi
    while (hi - lo) > hi / 1_000_000:
        mid = Fraction(math.nextafter(float((lo + hi) / 2), math.inf))
        if not lo < mid < hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


#: Above this sigma^2 the rounding bound is below 1e-300: :func:`rounding_tv_bound` returns that (a float could
#: not hold sigma^2 itself past 1.8e308).
_HUGE_SIGMA_SQUARED = 10 ** 300
_TV_FLOOR = 1e-300


def rounding_tv_bound(sigma_squared: Fraction | int | float) -> float:
    r"""Upper bound on ``TV(N_Z(0, s^2), round(N(0, s^2)))`` (a proof of ours, below).

    ``tv <= (sqrt(2)/s^2 + sqrt(6)/s^3) / 48 + q/(1 - q)``, ``q = exp(-2 pi^2 s^2)``.

    Proof.  Let ``phi`` be the N(0, s^2) density, ``p_R(k)`` its integral over
    ``I_k = [k - 1/2, k + 1/2]`` (the rounded Gaussian) and ``p_D(k) = phi(k)/Z``,
    ``Z = sum_k phi(k)`` (the discrete Gaussian).  (i) Midpoint rule:
    ``p_R(k) - phi(k) = phi2(xi_k)/24`` for some ``xi_k`` in ``I_k`` (``phi2``,
    ``phi3``: second and third derivatives), and for a C^1 function on an
    interval of length 1, ``sup |g| <= int |g| + int |g'|``; so
    ``sum_k |p_R(k) - phi(k)| <= (int |phi2| + int |phi3|) / 24``.  With
    ``U = x/s`` standard normal, ``int |phi2| = E|U^2 - 1| / s^2 <= sqrt(2)/s^2``
    and ``int |phi3| = E|U^3 - 3U| / s^3 <= sqrt(6)/s^3`` (Cauchy-Schwarz:
    ``E(U^2-1)^2 = 2``, ``E(U^3-3U)^2 = 6``).  (ii) Poisson summation gives
    ``Z = sum_m exp(-2 pi^2 s^2 m^2)``, in ``[1, 1 + 2q/(1-q)]`` (Canonne, Kamath
    & Steinke 2020 use the same identity for the discrete Gaussian's
    normaliser), so ``sum_k |phi(k) - p_D(k)| = Z - 1 <= 2q/(1-q)``.  TV is half
    the sum of (i) and (ii).

    Parameters
    ----------
    sigma_squared : Fraction, int or float, > 0

    Returns
    -------
    float
        The bound, rounded up (``inf`` for ``s^2 < 1/4``, where it is useless).
    """
    exact = Fraction(sigma_squared)
    if not exact > 0:
        raise param_error("sigma_squared", "> 0", sigma_squared)
    if exact > _HUGE_SIGMA_SQUARED:  # beyond float (1e600 at epsilon = 1e-300): the bound is below 1e-300
        return _TV_FLOOR
    s2 = float(exact)
    if s2 < 0.25:
        return math.inf
    s = math.sqrt(s2)
    q = math.exp(-2.0 * math.pi ** 2 * s2)
    return ((math.sqrt(2.0) / s2 + math.sqrt(6.0) / (s2 * s)) / 48.0 + q / (1.0 - q)) * _ROUND_UP


def discrete_gaussian_blocks_delta(epsilon: float, blocks: Any,
                                   whitened_sensitivity_squared: Fraction | float) -> float:
    r"""Provable delta(epsilon) of independent discrete Gaussians on an integer query (tighter than zCDP).

    The mechanism adds ``N_Z(0, sigma_j^2)`` to each integer coordinate j of a
    query q (coordinates grouped in blocks sharing one sigma), and
    ``D^2 = max over neighbours of sum_j (q_j(x) - q_j(x'))^2 / sigma_j^2``.

    Returns ``min(zCDP bound, coupling bound)``, both valid:

    * zCDP: the mechanism is ``D^2/2``-zCDP (the discrete Gaussian's Renyi
      divergence bound, Canonne, Kamath & Steinke 2020, additive over
      coordinates), converted by :func:`zcdp_delta` (CKS Cor. 13).
    * coupling (ours): ``delta_BW(eps; D) + (1 + e^eps) * sum_j tv(sigma_j)``.
      Proof: let ``M_R(x) = q(x) + round(G)``, ``G ~ N(0, diag(sigma^2))``.  As
      ``q(x)`` is an integer vector, ``M_R(x) = round(q(x) + G)`` is
      post-processing of the continuous Gaussian mechanism, whose privacy curve
      depends only on the Mahalanobis length of the shift, at most Balle &
      Wang's ``delta_BW(eps; D)`` (2018, Thm 8).  Couple ``M_DG(x)`` with
      ``M_R(x)`` coordinate by coordinate (total variation
      ``T <= sum_j tv(sigma_j)``, :func:`rounding_tv_bound`).  For every set S,
      ``P[M_DG(x) in S] <= P[M_R(x) in S] + T <= e^eps P[M_R(x') in S] + delta_BW + T
      <= e^eps P[M_DG(x') in S] + delta_BW + (1 + e^eps) T``.

    Parameters
    ----------
    epsilon : float > 0
    blocks : sequence of (sigma_squared, count)
        Exact rational sigma^2 of each block and its number of coordinates.
    whitened_sensitivity_squared : Fraction or float, >= 0
        ``D^2``, computed exactly by the caller from integer sensitivities.

    Returns
    -------
    float
        The delta bound (rounded up), at most 1.
    """
    epsilon = check_positive("epsilon", epsilon)
    d2 = float(Fraction(whitened_sensitivity_squared))
    if d2 < 0:
        raise param_error("whitened_sensitivity_squared", ">= 0", whitened_sensitivity_squared)
    if d2 == 0:
        return 0.0
    parts = [(Fraction(s2), check_int("count", c, minimum=0)) for s2, c in blocks]
    zcdp = zcdp_delta(d2 / 2.0, epsilon)
    return min(1.0, zcdp, rounding_coupling_delta(epsilon, parts, d2))


def rounding_coupling_delta(epsilon: float, blocks: Any, whitened_sensitivity_squared: Fraction | float) -> float:
    """The coupling bound alone: ``delta_BW(eps; D) + (1 + e^eps) sum_j tv(sigma_j)`` (may exceed 1).

    See :func:`discrete_gaussian_blocks_delta` for the proof and the arguments.
    """
    epsilon = check_positive("epsilon", epsilon)
    d2 = float(Fraction(whitened_sensitivity_squared))
    if d2 <= 0:
        return 0.0
    tv = math.fsum(int(c) * rounding_tv_bound(s2) for s2, c in blocks if c)
    if not math.isfinite(tv) or epsilon > 700.0:  # e^eps would overflow: the bound is useless there anyway
        return math.inf
    d = math.nextafter(math.sqrt(d2) * _ROUND_UP, math.inf)
    return (gaussian_delta(epsilon, 1.0, d) + (1.0 + math.exp(epsilon)) * tv) * _ROUND_UP


def discrete_gaussian_delta(epsilon: float, sigma_squared: Fraction | int, sensitivity: int) -> float:
    """Provable upper bound on delta(epsilon) of N_Z(0, sigma^2)^m at integer L2 sensitivity, any m.

    ``rho = sensitivity^2 / (2 sigma^2)`` (discrete-Gaussian concentrated DP,
    additive over coordinates), converted by :func:`zcdp_delta` (CKS Corollary 13).
    """
    sensitivity = check_integer_sensitivity(sensitivity)
    s2 = Fraction(sigma_squared)
    if s2 <= 0:
        raise param_error("sigma_squared", "> 0", sigma_squared)
    if sensitivity == 0:
        return 0.0
    rho = float(Fraction(sensitivity) ** 2 / (2 * s2))
    return zcdp_delta(rho, epsilon)


def discrete_gaussian_delta_1d(epsilon: float, sigma_squared: Fraction | int, sensitivity: int,
                               *, width: float = 40.0) -> float:
    """Exact delta(epsilon) of a *scalar* discrete Gaussian release (CKS Theorem 7), by summation.

    ``max over shifts k = 1..D of P[Y > eps sigma^2/k - k/2] - e^eps P[Y > eps sigma^2/k + k/2]``
    with ``Y ~ N_Z(0, sigma^2)``, summed directly over ``|y| <= width * sigma``
    (the neglected tail is below ``exp(-width^2/2)``, i.e. 0 in float64).  Meant
    for small sigma (tests, scalar releases); cost O(sigma * width + D).
    """
    epsilon = check_positive("epsilon", epsilon)
    sensitivity = check_int("sensitivity", sensitivity, minimum=1)
    s2 = float(Fraction(sigma_squared))
    bound = int(math.ceil(width * math.sqrt(s2))) + sensitivity + 2
    ys = np.arange(-bound, bound + 1, dtype=np.float64)
    w = np.exp(-ys * ys / (2.0 * s2))
    pmf = w / math.fsum(w)
    # tail[i] = P[Y > ys[i]] (strict)
    tail = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])
    best = 0.0
    for k in range(1, sensitivity + 1):
        def p_greater(x: float) -> float:
            # P[Y > x] = P[Y > floor(x)]; x >= -k/2 > -bound, so idx >= 0
            idx = int(math.floor(x)) + bound
            if idx >= ys.size:
                return 0.0
            return float(tail[idx])
        d = p_greater(epsilon * s2 / k - k / 2.0) - math.exp(epsilon) * p_greater(epsilon * s2 / k + k / 2.0)
        best = max(best, d)
    return best
