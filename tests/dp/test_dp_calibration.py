"""Gaussian calibrations (analytic vs classic), zCDP conversion, discrete-Gaussian delta bounds."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_errors import error_for
from scipy import integrate, stats

from dpdpca.dp import (
    calibrate_discrete_gaussian,
    calibrate_gaussian,
    discrete_gaussian_delta,
    discrete_gaussian_delta_1d,
    gaussian_delta,
    zcdp_delta,
)
from dpdpca.errors import ParameterError

EPSILONS = [0.01, 0.1, 0.5, 1.0, 4.0, 10.0]
DELTAS = [1e-10, 1e-5, 1e-2]


def _delta_by_integration(eps: float, sigma: float, sens: float) -> float:
    """delta = integral of (p(y) - e^eps q(y))_+ for p = N(0, s^2), q = N(sens, s^2); independent of our formula."""
    cut = sens / 2 - eps * sigma ** 2 / sens  # p > e^eps q iff y < cut
    f = lambda y: stats.norm.pdf(y, 0, sigma) - math.exp(eps) * stats.norm.pdf(y, sens, sigma)  # noqa: E731
    val, _ = integrate.quad(f, -np.inf, cut, epsabs=1e-16, epsrel=1e-12, limit=200)
    return val


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_analytic_below_classic_and_satisfies_balle_wang_identity(eps, delta):
    a = calibrate_gaussian(epsilon=eps, delta=delta, sensitivity=1.0)
    c = calibrate_gaussian(epsilon=eps, delta=delta, sensitivity=1.0, calibration="classic")
    if eps <= 4.0:
        assert a < c
    else:  # far outside eps < 1 the classic sigma is too small: it does not even meet delta
        assert gaussian_delta(eps, c) > delta
    assert c == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) / eps, rel=1e-15)
    achieved = gaussian_delta(eps, a)
    assert achieved <= delta
    assert abs(achieved - delta) <= 1e-9 * delta
    # a smaller sigma would violate the budget: a is the smallest such sigma (to 1e-9)
    assert gaussian_delta(eps, a * (1 - 1e-6)) > delta


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-5), (4.0, 1e-5), (2.0, 1e-3)])
def test_balle_wang_delta_agrees_with_direct_integration(eps, delta):
    sigma = calibrate_gaussian(epsilon=eps, delta=delta, sensitivity=3.0)
    assert _delta_by_integration(eps, sigma, 3.0) == pytest.approx(delta, rel=1e-6)


def test_calibration_is_scale_free_for_huge_sensitivities():
    base = calibrate_gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    big = 2**60 + 7
    assert calibrate_gaussian(epsilon=1.0, delta=1e-5, sensitivity=big) == pytest.approx(base * big, rel=1e-15)
    assert calibrate_gaussian(epsilon=1.0, delta=1e-5, sensitivity=0.0) == 0.0


def test_classic_is_invalid_above_epsilon_one_and_we_can_see_it():
    """At eps >= 1 the classic sigma can give a delta above the requested one (Dwork-Roth needs eps < 1)."""
    sigma = calibrate_gaussian(epsilon=8.0, delta=0.05, sensitivity=1.0, calibration="classic")
    assert gaussian_delta(8.0, sigma) > 0.05
    sigma = calibrate_gaussian(epsilon=0.5, delta=1e-5, sensitivity=1.0, calibration="classic")
    assert gaussian_delta(0.5, sigma) < 1e-5


def test_zcdp_delta_is_a_valid_and_reasonable_bound():
    # Gaussian with sigma=1, sensitivity 1 is rho=1/2-zCDP; zCDP conversion must upper-bound the exact delta
    for eps in (0.5, 1.0, 3.0):
        exact = gaussian_delta(eps, 1.0)
        bound = zcdp_delta(0.5, eps)
        assert exact <= bound <= 10 * exact
    # never above the Bun-Steinke bound
    assert zcdp_delta(0.01, 1.0) <= math.exp(-(1.0 - 0.01) ** 2 / 0.04)


@pytest.mark.parametrize("sens", [1, 2, 5])
@pytest.mark.parametrize("sigma2", [Fraction(1, 2), 2, 9, Fraction(121, 4)])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_reported_discrete_delta_is_never_below_the_exact_scalar_delta(sens, sigma2, eps):
    exact = discrete_gaussian_delta_1d(eps, sigma2, sens)
    assert discrete_gaussian_delta(eps, sigma2, sens) >= exact


def _exact_delta_2d(eps: float, sigma2: float, shift: tuple[int, int], width: int = 20) -> float:
    r = int(width * math.sqrt(sigma2)) + 6
    ys = np.arange(-r, r + 1)
    y1, y2 = np.meshgrid(ys, ys, indexing="ij")
    w = np.exp(-(y1 ** 2 + y2 ** 2) / (2 * sigma2))
    w_shift = np.exp(-((y1 - shift[0]) ** 2 + (y2 - shift[1]) ** 2) / (2 * sigma2))
    z = w.sum()
    return float(np.maximum(w - math.exp(eps) * w_shift, 0).sum() / z)


@pytest.mark.parametrize("shift", [(1, 1), (2, 1), (3, 4)])
def test_reported_discrete_delta_bounds_two_dimensional_shifts(shift):
    sens = math.isqrt(shift[0] ** 2 + shift[1] ** 2 - 1) + 1  # smallest integer >= the L2 norm
    for sigma2 in (Fraction(9, 4), 4, 16):
        for eps in (0.5, 1.5):
            assert discrete_gaussian_delta(eps, sigma2, sens) >= _exact_delta_2d(eps, float(sigma2), shift)


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-5), (4.0, 1e-9)])
def test_discrete_calibration_meets_delta_and_costs_little_over_analytic(eps, delta):
    for sens in (1, 3, 2**60 + 1):
        s2 = calibrate_discrete_gaussian(epsilon=eps, delta=delta, sensitivity=sens)
        assert isinstance(s2, Fraction)
        assert discrete_gaussian_delta(eps, s2, sens) <= delta
        ratio = math.sqrt(s2 / Fraction(sens) ** 2) / calibrate_gaussian(epsilon=eps, delta=delta, sensitivity=1.0)
        assert 1.0 < ratio < 1.15


def test_discrete_classic_calibration():
    s2 = calibrate_discrete_gaussian(epsilon=0.5, delta=1e-5, sensitivity=4, calibration="classic")
    assert math.sqrt(s2) == pytest.approx(4 * math.sqrt(2 * math.log(1.25e5)) / 0.5, rel=1e-9)
    assert math.sqrt(s2) >= 4 * math.sqrt(2 * math.log(1.25e5)) / 0.5


@pytest.mark.parametrize("kw,match", [
    (dict(epsilon=0.0), r"^epsilon must be > 0, got 0.0$"),
    (dict(epsilon=-1.0), r"^epsilon must be > 0, got -1.0$"),
    (dict(epsilon=float("nan")), r"^epsilon must be finite, got nan$"),
    (dict(delta=0.0), r"^delta must be in \(0, 1\), got 0.0$"),
    (dict(delta=1.0), r"^delta must be in \(0, 1\), got 1.0$"),
    (dict(sensitivity=-0.5), r"^sensitivity must be >= 0, got -0.5$"),
    (dict(sensitivity=float("inf")), r"^sensitivity must be finite, got inf$"),
    (dict(sensitivity="1"), r"^sensitivity must be a real number, got '1'$"),
    (dict(calibration="optimal"), r"^calibration must be one of 'analytic', 'classic', got 'optimal'$"),
])
def test_gaussian_calibration_validation(kw, match):
    args = dict(epsilon=1.0, delta=1e-5, sensitivity=1.0) | kw
    with pytest.raises(error_for(match), match=match):
        calibrate_gaussian(**args)


@pytest.mark.parametrize("kw,match", [
    (dict(sensitivity=2.0), r"^sensitivity must be an integer, got 2.0$"),
    (dict(sensitivity=-3), r"^sensitivity must be >= 0, got -3$"),
    (dict(sensitivity=Fraction(1, 2)), r"^sensitivity must be an integer, got Fraction\(1, 2\)$"),
    (dict(calibration="exact"), r"^calibration must be one of 'analytic', 'zcdp', 'classic', got 'exact'$"),
    (dict(calibration="analytic", dimension=0), r"^dimension must be >= 1, got 0$"),
    (dict(epsilon=0), r"^epsilon must be > 0, got 0$"),
    (dict(delta=2), r"^delta must be in \(0, 1\), got 2$"),
])
def test_discrete_calibration_validation(kw, match):
    args = dict(epsilon=1.0, delta=1e-5, sensitivity=3) | kw
    with pytest.raises(error_for(match), match=match):
        calibrate_discrete_gaussian(**args)


def test_delta_helpers_validation():
    with pytest.raises(ParameterError, match=r"^sigma must be > 0, got 0.0$"):
        gaussian_delta(1.0, 0.0)
    with pytest.raises(ParameterError, match=r"^rho must be > 0, got 0$"):
        zcdp_delta(0, 1.0)
    with pytest.raises(ParameterError, match=r"^sigma_squared must be > 0, got 0$"):
        discrete_gaussian_delta(1.0, 0, 1)
    assert discrete_gaussian_delta(1.0, 4, 0) == 0.0


def test_zcdp_rho_search_covers_large_and_small_budgets():
    from dpdpca.dp.calibration import zcdp_rho_for
    for eps, delta in ((50.0, 1e-3), (1e-3, 1e-12)):
        rho = zcdp_rho_for(eps, delta)
        assert zcdp_delta(rho, eps) <= delta < zcdp_delta(rho * (1 + 1e-9), eps)


def test_exact_scalar_delta_extremes():
    # eps -> 0, sigma^2 = 1, shift 1: delta = P[Y >= 0] - e^eps P[Y >= 1] -> P[Y = 0]
    from dp_stats import discrete_gaussian_pmf
    assert discrete_gaussian_delta_1d(1e-9, 1, 1) == pytest.approx(discrete_gaussian_pmf(1.0)(0), rel=1e-6)
    # a huge epsilon leaves both tails beyond the summed range: delta = 0
    assert discrete_gaussian_delta_1d(500.0, 1, 1) == 0.0


@pytest.mark.parametrize("rho,eps", [(1e6, 0.5), (1e6, 1e3), (1e-6, 1e-3), (1e-4, 1.0), (3.0, 50.0)])
def test_zcdp_delta_is_robust_at_extremes(rho, eps):
    d = zcdp_delta(rho, eps)
    assert 0.0 <= d <= 1.0
    if eps > rho:
        assert d <= math.exp(-((eps - rho) ** 2) / (4 * rho)) * (1 + 1e-9)


def test_budgets_out_of_double_precision_are_one_line_errors_not_overflows():
    """The library refuses what the CLI refuses: one validated range for epsilon ([1e-6, 1e9], the privacy
    setting's and every baseline's), and the calibrations themselves raise a ParameterError (or give a sound
    bound) instead of an OverflowError or scipy's ValueError far outside it."""
    from dpdpca._validation import MAX_EPSILON, MIN_EPSILON, check_epsilon
    from dpdpca.baselines._common import check_budget
    from dpdpca.dp.calibration import analytic_gaussian_sigma, rounding_tv_bound
    from dpdpca.protocol.config import ReleaseOptions

    assert check_epsilon("epsilon", MIN_EPSILON) == 1e-6 and check_epsilon("epsilon", MAX_EPSILON) == 1e9
    for eps in (1e-300, 9e-7, 1.1e9, 1e308):
        for refuse in (lambda e: check_budget(e, 1e-5), lambda e: ReleaseOptions(epsilon=e, delta=1e-5)):
            with pytest.raises(ParameterError, match=r"^epsilon must be in \[1e-06, 1e\+09\], got"):
                refuse(eps)
    with pytest.raises(ParameterError, match="^epsilon must be small enough for the calibration to stay in double"):
        analytic_gaussian_sigma(1e308, 1e-5)  # was scipy's "The function value at x=-60.0 is NaN"
    # sigma^2 = 10^600 (epsilon 1e-300) was an OverflowError converting it to a float: the bound stays sound
    assert rounding_tv_bound(Fraction(10) ** 600) == 1e-300 >= rounding_tv_bound(10 ** 299)
    assert zcdp_delta(1.0, 1e300) == 0.0  # was OverflowError in (epsilon - rho) ** 2


def test_discrete_classic_with_a_huge_epsilon_reports_the_true_bound():
    from dpdpca.dp import DiscreteGaussianMechanism
    m = DiscreteGaussianMechanism(epsilon=1e4, delta=0.5, sensitivity=1, calibration="classic")
    assert m.achieved_delta == 1.0 and m.privacy("proxy").delta == 1.0


@pytest.mark.parametrize("eps,sigma2,sens", [(1.0, 4, 1), (0.5, 9, 3), (2.0, Fraction(121, 4), 5)])
def test_scalar_theorem_7_delta_equals_the_hockey_stick_sum(eps, sigma2, sens):
    """CKS Thm 7 (tail form) against the definition: max_k sum_y (p(y) - e^eps p(y - k))_+."""
    s2 = float(sigma2)
    ys = np.arange(-400, 401)
    p = lambda y: np.exp(-(y.astype(float) ** 2) / (2 * s2))  # noqa: E731
    z = p(np.arange(-600, 601)).sum()
    direct = max(float(np.maximum(p(ys) - math.exp(eps) * p(ys - k), 0).sum() / z) for k in range(1, sens + 1))
    assert discrete_gaussian_delta_1d(eps, sigma2, sens) == pytest.approx(direct, rel=1e-9)


def _cks_delta_by_stationary_point(rho: float, eps: float) -> float:
    """Independent evaluation of CKS Cor. 13: bisect for the alpha where d/dalpha log(bound) = 0."""
    lo, hi = 1.0 + 1e-9, (eps + 1) / (2 * rho) + 2
    for _ in range(300):
        a = (lo + hi) / 2
        if (2 * a - 1) * rho - eps + math.log1p(-1 / a) < 0:
            lo = a
        else:
            hi = a
    a = (lo + hi) / 2
    return min(1.0, math.exp((a - 1) * (a * rho - eps) + a * math.log1p(-1 / a)) / (a - 1))


@pytest.mark.parametrize("rho,eps", [(0.025, 1.0), (0.5, 1.0), (0.01, 0.1), (1e-3, 0.5), (2.0, 10.0)])
def test_zcdp_delta_matches_an_independent_evaluation(rho, eps):
    ref = _cks_delta_by_stationary_point(rho, eps)
    assert ref <= zcdp_delta(rho, eps) <= ref * (1 + 2e-9)


@pytest.mark.parametrize("eps,delta", [(1e-9, 1e-10), (1e-15, 1e-5), (100.0, 1e-5), (1000.0, 1e-300), (1e-3, 1e-300)])
def test_analytic_calibration_at_extreme_budgets(eps, delta):
    c = calibrate_gaussian(epsilon=eps, delta=delta, sensitivity=1.0)
    achieved = gaussian_delta(eps, c)
    assert achieved <= delta
    assert achieved >= delta * (1 - 1e-6)  # within 1e-6 even where the two terms nearly cancel
    if eps < 1e-12:  # epsilon -> 0: delta = P[|N(0,1)| < 1/(2c)] -> 1/(c sqrt(2 pi))
        assert c == pytest.approx(1 / (delta * math.sqrt(2 * math.pi)), rel=1e-6)
