"""Mechanism classes: calibrated scale, empirical sigma, reports, validation."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from dp_errors import error_for
from dp_stats import P_MIN, chi_square_p
from scipy import stats

from dpdpca.dp import (
    ADD_REMOVE_ONE,
    REPLACE_ONE,
    DiscreteGaussianMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    PrivacyReport,
    calibrate_gaussian,
    compose_basic,
    discrete_gaussian_delta,
)
from dpdpca.errors import ParameterTypeError


@pytest.mark.parametrize("calibration", ["analytic", "classic"])
def test_gaussian_empirical_sigma_within_one_percent_at_a_million(calibration):
    m = GaussianMechanism(epsilon=0.5, delta=1e-5, sensitivity=2.0, calibration=calibration)
    assert m.sigma == calibrate_gaussian(epsilon=0.5, delta=1e-5, sensitivity=2.0, calibration=calibration)
    x = m.sample(1_000_000)
    assert abs(x.std() / m.sigma - 1) < 0.01
    assert abs(x.mean()) < 5 * m.sigma / 1000


def test_discrete_gaussian_empirical_sigma_within_two_percent():
    """40 000 exact samples: the standard error of the std is 0.35%, so 2% is 5.7 standard errors (a false
    failure about once in 10**8 runs) and a sampler 5% off in sigma is 8.5 standard errors outside: it fails."""
    m = DiscreteGaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=2**40 + 3)
    x = np.array(m.sample(40_000), dtype=np.float64)
    assert abs(x.std() / m.sigma - 1) < 0.02
    # the power of the check on these very samples: a sigma 5% off either way would be refused
    for wrong in (1.05 * m.sigma, m.sigma / 1.05):
        assert abs(x.std() / wrong - 1) >= 0.02


def test_gaussian_report_and_randomise():
    m = GaussianMechanism(epsilon=1.0, delta=1e-6, sensitivity=math.sqrt(2), neighbouring=ADD_REMOVE_ONE,
                          sensitivity_mode="paper")
    r = m.privacy("site:3", notes="A_s")
    assert r == PrivacyReport(epsilon=1.0, delta=1e-6, mechanism="gaussian", calibration="analytic",
                              sensitivity=math.sqrt(2), neighbouring=ADD_REMOVE_ONE, noise_added_by="site:3",
                              sigma=m.sigma, sensitivity_mode="paper", notes="A_s")
    assert PrivacyReport.from_dict(r.to_dict()) == r
    value = np.ones((3, 3))
    out = m.randomise(value, rng=np.random.default_rng(0))
    assert np.all(value == 1) and out.shape == (3, 3) and not np.allclose(out, 1)


def test_classic_above_epsilon_one_reports_the_delta_it_really_gives():
    m = GaussianMechanism(epsilon=8.0, delta=0.05, sensitivity=1.0, calibration="classic")
    r = m.privacy("proxy")
    assert r.delta > 0.05 and "proven only for epsilon < 1" in r.notes
    ok = GaussianMechanism(epsilon=0.5, delta=1e-5, sensitivity=1.0, calibration="classic").privacy("proxy")
    assert ok.delta == 1e-5 and ok.notes == ""


def test_discrete_gaussian_mechanism_for_the_protocol():
    sens = 1_152_921_504_606_846_977  # ~2**60, a Python int
    m = DiscreteGaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=sens)
    assert m.delta_bound <= 1e-5 and m.achieved_delta == 1e-5
    assert discrete_gaussian_delta(1.0, m.sigma_squared, sens) <= 1e-5
    upper = m.sample_symmetric_upper(6, rng=np.random.default_rng(1))
    assert len(upper) == 21 and all(isinstance(v, int) for v in upper)
    r = m.privacy("proxy")
    assert (r.mechanism, r.calibration, r.sensitivity, r.noise_added_by) == ("discrete-gaussian", "zcdp",
                                                                            float(sens), "proxy")
    assert r.sigma == pytest.approx(math.sqrt(m.sigma_squared), rel=1e-12)
    assert m.randomise([10, -10], rng=np.random.default_rng(0)) != [10, -10]
    # "analytic" (the GaussianMechanism keyword) is accepted and reported as the rigorous zcdp
    assert DiscreteGaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=3, calibration="analytic").calibration == "zcdp"


def test_discrete_gaussian_classic_reports_a_larger_delta_when_needed():
    m = DiscreteGaussianMechanism(epsilon=6.0, delta=0.2, sensitivity=1, calibration="classic")
    assert m.achieved_delta > 0.2 and "exceeds requested" in m.privacy("proxy").notes


def test_laplace_mechanism_distribution_and_report():
    m = LaplaceMechanism(epsilon=0.5, sensitivity=2.0)
    assert m.scale == 4.0 and m.variance == 32.0
    x = m.sample(200_000, rng=np.random.default_rng(3))
    assert stats.kstest(x / 4.0, "laplace").pvalue > P_MIN
    r = m.privacy("site")
    assert (r.delta, r.scale, r.sigma, r.mechanism) == (0.0, 4.0, None, "laplace")
    assert m.randomise([0.0, 1.0], rng=np.random.default_rng(0)).shape == (2,)


def test_geometric_mechanism_matches_two_sided_geometric_pmf():
    m = GeometricMechanism(epsilon=0.7, sensitivity=2)
    x = m.sample(60_000, rng=np.random.default_rng(8))
    r = math.exp(-0.7 / 2)
    pmf = lambda k: (1 - r) / (1 + r) * r ** abs(k)  # noqa: E731
    assert chi_square_p(x, pmf, range(-40, 41)) > P_MIN
    assert np.var(x) == pytest.approx(m.variance, rel=0.03)
    assert m.privacy("sketcher").scale == pytest.approx(2 / 0.7)
    assert len(m.randomise([1, 2, 3])) == 3


def test_composition_of_reports():
    a = GaussianMechanism(epsilon=0.5, delta=1e-6, sensitivity=1.0).privacy("site:1")
    b = DiscreteGaussianMechanism(epsilon=0.25, delta=1e-6, sensitivity=1).privacy("proxy")
    c = compose_basic([a, b])
    assert c.epsilon == 0.75 and c.delta == 2e-6 and c.parts == (a, b)


BAD_COMMON = [
    (dict(epsilon=0.0), r"^epsilon must be > 0, got 0.0$"),
    (dict(epsilon=-2), r"^epsilon must be > 0, got -2$"),
    (dict(delta=0.0), r"^delta must be in \(0, 1\), got 0.0$"),
    (dict(delta=1.5), r"^delta must be in \(0, 1\), got 1.5$"),
    (dict(neighbouring="swap"), r"^neighbouring must be one of 'replace-one', 'add/remove-one', got 'swap'$"),
    (dict(sensitivity_mode="loose"), r"^sensitivity_mode must be 'rigorous' or 'paper', got 'loose'$"),
]


@pytest.mark.parametrize("kw,match", BAD_COMMON + [
    (dict(sensitivity=-1.0), r"^sensitivity must be >= 0, got -1.0$"),
    (dict(sensitivity=float("nan")), r"^sensitivity must be finite, got nan$"),
    (dict(calibration="tight"), r"^calibration must be one of 'analytic', 'classic', got 'tight'$"),
])
def test_gaussian_mechanism_validation(kw, match):
    with pytest.raises(error_for(match), match=match):
        GaussianMechanism(**(dict(epsilon=1.0, delta=1e-5, sensitivity=1.0) | kw))


@pytest.mark.parametrize("kw,match", BAD_COMMON + [
    (dict(sensitivity=1.0), r"^sensitivity must be an integer, got 1.0$"),
    (dict(sensitivity=-1), r"^sensitivity must be >= 0, got -1$"),
    (dict(sensitivity=0), r"^sensitivity must be > 0 for the discrete Gaussian \(add no noise instead\), got 0$"),
    (dict(calibration="tight"), r"^calibration must be one of 'analytic', 'zcdp', 'classic', got 'tight'$"),
])
def test_discrete_gaussian_mechanism_validation(kw, match):
    with pytest.raises(error_for(match), match=match):
        DiscreteGaussianMechanism(**(dict(epsilon=1.0, delta=1e-5, sensitivity=1) | kw))


@pytest.mark.parametrize("cls,kw,match", [
    (LaplaceMechanism, dict(epsilon=0), r"^epsilon must be > 0, got 0$"),
    (LaplaceMechanism, dict(sensitivity=-1.0), r"^sensitivity must be >= 0, got -1.0$"),
    (LaplaceMechanism, dict(sensitivity=float("inf")), r"^sensitivity must be finite, got inf$"),
    (LaplaceMechanism, dict(neighbouring="x"), r"^neighbouring must be one of "),
    (GeometricMechanism, dict(epsilon=float("inf")), r"^epsilon must be finite, got inf$"),
    (GeometricMechanism, dict(sensitivity=1.5), r"^sensitivity must be an integer, got 1.5$"),
    (GeometricMechanism, dict(sensitivity=0), r"^sensitivity must be > 0 for the geometric mechanism"),
    (GeometricMechanism, dict(sensitivity_mode="x"), r"^sensitivity_mode must be 'rigorous' or 'paper', got 'x'$"),
])
def test_pure_mechanisms_validation(cls, kw, match):
    with pytest.raises(error_for(match), match=match):
        cls(**(dict(epsilon=1.0, sensitivity=1) | kw))


def test_integer_randomise_rejects_floats():
    with pytest.raises(ParameterTypeError, match=r"^values\[i\] must be an integer, got 1.5$"):
        DiscreteGaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1).randomise([1.5])
    with pytest.raises(ParameterTypeError, match=r"^values\[i\] must be an integer, got 0.5$"):
        GeometricMechanism(epsilon=1.0, sensitivity=1).randomise([0.5])


def test_default_relation_is_replace_one():
    assert GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0).neighbouring == REPLACE_ONE
    counts = Counter(DiscreteGaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1).sample(1000))
    assert len(counts) > 3


def test_report_helpers_from_the_foundation():
    with pytest.raises(ValueError, match=r"^reports must be non-empty, got 0 reports$"):
        compose_basic([])
    a = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0).privacy("a")
    b = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0, neighbouring=ADD_REMOVE_ONE).privacy("b")
    with pytest.raises(ValueError, match=r"^reports must share one neighbouring relation"):
        compose_basic([a, b])
    assert PrivacyReport.non_private().epsilon == math.inf


def test_variances_and_reprs():
    g = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    assert g.variance == g.sigma ** 2 and "GaussianMechanism(epsilon=1.0" in repr(g)
    dg = DiscreteGaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=2)
    assert dg.variance == dg.sigma_squared and "sigma=" in repr(dg)
