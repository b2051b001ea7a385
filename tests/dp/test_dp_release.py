"""The add/remove release: split, calibration, and the rounding-coupling bound of the discrete Gaussian."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpdpca.dp import (
    ADD_REMOVE_ONE,
    calibrate_add_remove,
    calibrate_discrete_gaussian,
    discrete_gaussian_blocks_delta,
    discrete_gaussian_delta_1d,
    rounding_tv_bound,
    split_weights,
)
from dpdpca.dp.calibration import calibrate_gaussian, rounding_coupling_delta
from dpdpca.dp.release import check_release, whitened_sensitivity_squared
from dpdpca.errors import ParameterError


def _exact_tv(sigma2: float) -> float:
    """TV(N_Z(0, s^2), round(N(0, s^2))) by direct summation (independent of the bound's proof)."""
    s = math.sqrt(sigma2)
    k = np.arange(-int(40 * s) - 2, int(40 * s) + 3)
    p_round = stats.norm.cdf(k + 0.5, scale=s) - stats.norm.cdf(k - 0.5, scale=s)
    w = np.exp(-k.astype(float) ** 2 / (2 * sigma2))
    return 0.5 * float(np.abs(p_round - w / w.sum()).sum())


@pytest.mark.parametrize("sigma2", [0.5, 1, 4, 25, 400])
def test_rounding_tv_bound_is_above_the_exact_distance_and_tight_in_order(sigma2):
    exact = _exact_tv(sigma2)
    bound = rounding_tv_bound(sigma2)
    assert bound >= exact
    if sigma2 >= 4:
        assert bound < 20 * exact  # the 1/sigma^2 rate is the true one, not a loose constant


@pytest.mark.parametrize("sigma2", [25, 100, 400])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_coupling_bound_is_above_the_exact_scalar_delta(sigma2, eps):
    for sens in (1, 3):
        exact = discrete_gaussian_delta_1d(eps, sigma2, sens)
        assert rounding_coupling_delta(eps, [(sigma2, 1)], Fraction(sens ** 2, sigma2)) >= exact
        assert discrete_gaussian_blocks_delta(eps, [(sigma2, 1)], Fraction(sens ** 2, sigma2)) >= exact


def _exact_delta_2d(eps: float, s1: float, s2: float, shift: tuple[int, int]) -> float:
    r1, r2 = int(30 * math.sqrt(s1)) + 6, int(30 * math.sqrt(s2)) + 6
    y1, y2 = np.meshgrid(np.arange(-r1, r1 + 1), np.arange(-r2, r2 + 1), indexing="ij")
    w = np.exp(-y1 ** 2 / (2 * s1) - y2 ** 2 / (2 * s2))
    ws = np.exp(-(y1 - shift[0]) ** 2 / (2 * s1) - (y2 - shift[1]) ** 2 / (2 * s2))
    return float(np.maximum(w - math.exp(eps) * ws, 0).sum() / w.sum())


@pytest.mark.parametrize("shift", [(1, 1), (3, 1), (2, 5)])
def test_coupling_bound_with_two_blocks_is_above_the_exact_two_dimensional_delta(shift):
    s1, s2 = 36.0, 100.0
    d2 = Fraction(shift[0] ** 2) / Fraction(36) + Fraction(shift[1] ** 2) / Fraction(100)
    for eps in (0.3, 1.0):
        exact = _exact_delta_2d(eps, s1, s2, shift)
        assert rounding_coupling_delta(eps, [(Fraction(36), 1), (Fraction(100), 1)], d2) >= exact


def test_analytic_discrete_calibration_recovers_most_of_the_zcdp_gap_at_large_sigma():
    sens = 2 ** 40
    a = calibrate_discrete_gaussian(epsilon=1.0, delta=1e-5, sensitivity=sens, calibration="analytic", dimension=2080)
    z = calibrate_discrete_gaussian(epsilon=1.0, delta=1e-5, sensitivity=sens, calibration="zcdp")
    cont = calibrate_gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    ratio = math.sqrt(a / z)
    assert 0.90 < ratio < 0.94  # 6-10% of sigma recovered
    assert math.sqrt(a) / sens == pytest.approx(cont, rel=2e-6)  # essentially the continuous analytic sigma
    assert discrete_gaussian_blocks_delta(1.0, [(a, 2080)], Fraction(sens) ** 2 / a) <= 1e-5
    # small sigma: the coupling term is useless and zCDP is kept
    assert calibrate_discrete_gaussian(epsilon=1.0, delta=1e-5, sensitivity=1, calibration="analytic",
                                       dimension=10) == calibrate_discrete_gaussian(epsilon=1.0, delta=1e-5,
                                                                                    sensitivity=1)


def test_split_weights_sum_to_one_and_minimise_the_first_order_error():
    d = 64
    w = split_weights(d)
    assert math.isclose(sum(w.values()), 1.0)
    a = np.array([d * d, 2.0 * (d + 1), 1.0])

    def error(weights: np.ndarray) -> float:  # sum a_j sigma_j^2 with 1/sigma_j^2 = w_j (D^2 = 1)
        return float(np.sum(a / weights))

    best = error(np.array([w["R"], w["v"], w["N"]]))
    rng = np.random.default_rng(3)
    for _ in range(200):
        other = rng.dirichlet(np.ones(3))
        assert error(other) >= best * (1 - 1e-12)
    assert split_weights(d, mean_norm_bound=0.1)["R"] > w["R"]  # a smaller public mean bound moves budget to R


@pytest.mark.parametrize("calibration", ["analytic", "zcdp", "classic"])
def test_add_remove_calibration_meets_delta_and_reports_the_split(calibration):
    cal = calibrate_add_remove(epsilon=1.0, delta=1e-5, d=16, frac_bits=12, calibration=calibration)
    d2 = whitened_sensitivity_squared(cal.sigma_squared_int, 12)
    assert cal.rho == pytest.approx(float(d2) / 2)
    if calibration != "classic":
        assert cal.delta_bound <= 1e-5
    # the budget shares are those of the split: 1/sigma_j^2 proportional to w_j (data units)
    inv = {b: 1 / cal.sigma(b) ** 2 for b in ("R", "v", "N")}
    total = sum(inv.values())
    for b in inv:
        assert inv[b] / total == pytest.approx(cal.weights[b], rel=1e-9)
    rep = cal.report("proxy")
    assert rep.neighbouring == ADD_REMOVE_ONE and len(rep.parts) == 3
    assert "split" in rep.notes and rep.sigma == pytest.approx(cal.sigma("R"))


def test_analytic_add_remove_sigma_is_below_zcdp_by_seven_percent():
    a = calibrate_add_remove(epsilon=1.0, delta=1e-5, d=64, frac_bits=16)
    z = calibrate_add_remove(epsilon=1.0, delta=1e-5, d=64, frac_bits=16, calibration="zcdp")
    assert 0.90 < a.sigma("R") / z.sigma("R") < 0.94


def test_release_validation():
    with pytest.raises(ParameterError, match=r"^release must be one of 'add-remove', 'centred', got 'x'$"):
        check_release("x")
    with pytest.raises(ParameterError, match=r"^calibration must be one of"):
        calibrate_add_remove(epsilon=1.0, delta=1e-5, d=4, frac_bits=8, calibration="fast")
    with pytest.raises(ParameterError, match=r"^mean_norm_bound must be > 0, got 0$"):
        split_weights(4, mean_norm_bound=0)
