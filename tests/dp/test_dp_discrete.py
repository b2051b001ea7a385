"""Exact integer samplers: discrete Gaussian, discrete Laplace, Bernoulli(exp(-gamma))."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dp_stats import P_MIN, chi_square_p, discrete_gaussian_pmf
from dpdpca.dp import bernoulli_exp_neg, sample_discrete_gaussian, sample_discrete_laplace
from dpdpca.errors import ParameterError


@pytest.mark.slow
@pytest.mark.parametrize("sigma2", [Fraction(1, 4), 2, Fraction(49, 3), 400])
def test_discrete_gaussian_matches_exact_pmf(sigma2):
    n = 30_000 if sigma2 < 1 else 60_000  # sigma < 1 has a low acceptance rate; 3 bins carry the mass
    x = sample_discrete_gaussian(sigma2, n, rng=np.random.default_rng(int(Fraction(sigma2) * 12)))
    s2 = float(sigma2)
    bound = int(6 * math.sqrt(s2)) + 2
    assert chi_square_p(x, discrete_gaussian_pmf(s2), range(-bound, bound + 1)) > P_MIN


def test_discrete_gaussian_from_os_entropy_matches_pmf():
    x = sample_discrete_gaussian(9, 40_000)
    assert all(isinstance(v, int) for v in x[:100])
    assert chi_square_p(x, discrete_gaussian_pmf(9.0), range(-20, 21)) > P_MIN


def test_wrong_sigma_is_rejected_by_the_chi_square_test():
    """The test has power: samples at sigma^2 = 400 fail against the pmf of sigma = 1.05 * 20."""
    x = sample_discrete_gaussian(400, 60_000, rng=np.random.default_rng(2))
    assert chi_square_p(x, discrete_gaussian_pmf(441.0), range(-130, 131)) < P_MIN


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [10**6, 10**12, 10**18])
def test_discrete_gaussian_large_sigma_moments(sigma):
    x = np.array(sample_discrete_gaussian(sigma * sigma, 100_000, rng=np.random.default_rng(sigma % 97)),
                 dtype=np.float64) / sigma
    assert abs(x.mean()) < 5 / math.sqrt(len(x))
    assert abs(x.std() - 1.0) < 0.01  # se of the std is 1/sqrt(2n) = 0.22%
    assert stats.kstest(x, "norm").pvalue > P_MIN


@pytest.mark.slow
@pytest.mark.parametrize("sigma,n", [(2**61, 60_000), (3 * 2**62, 60_000), (10**30, 60_000), (2**130, 10_000)])
def test_discrete_gaussian_wide_and_python_int_paths(sigma, n):
    """One int64 word (t < 2**62), (high, low) word pairs (t < 2**125), pure Python above.

    At these sigmas the discrete Gaussian's CDF equals the normal CDF to ~1/sigma, so
    a chi-square test on 40 normal-quantile bins is exact to float precision.
    """
    x = sample_discrete_gaussian(sigma * sigma, n, rng=np.random.default_rng(sigma % 1009))
    assert all(isinstance(v, int) for v in x)
    z = np.array([v / sigma for v in x])
    edges = stats.norm.ppf(np.linspace(0, 1, 41))
    observed = np.histogram(z, bins=edges)[0]
    assert stats.chisquare(observed).pvalue > P_MIN
    assert abs(z.std() - 1.0) < 5 / math.sqrt(n)


def test_discrete_gaussian_is_reproducible_with_a_generator_only():
    a = sample_discrete_gaussian(10**10, 50, rng=np.random.default_rng(9))
    b = sample_discrete_gaussian(10**10, 50, rng=np.random.default_rng(9))
    c = sample_discrete_gaussian(10**10, 50)
    assert a == b and a != c


@pytest.mark.parametrize("scale", [Fraction(1, 2), 3, Fraction(7, 2)])
def test_discrete_laplace_matches_exact_pmf(scale):
    b = float(scale)
    x = sample_discrete_laplace(scale, 50_000, rng=np.random.default_rng(int(b * 10)))
    r = math.exp(-1 / b)

    def pmf(k: int) -> float:
        return (1 - r) / (1 + r) * r ** abs(k)

    assert chi_square_p(x, pmf, range(-int(12 * b) - 3, int(12 * b) + 4)) > P_MIN


@pytest.mark.parametrize("num,den", [(0, 1), (1, 3), (1, 1), (5, 2), (7, 3)])
def test_bernoulli_exp_neg_frequency(num, den):
    rng = np.random.default_rng(num * 10 + den)
    n = 20_000
    hits = sum(bernoulli_exp_neg(num, den, rng) for _ in range(n))
    assert stats.binomtest(hits, n, math.exp(-num / den)).pvalue > P_MIN


@pytest.mark.parametrize("bad", [0, -1, Fraction(-1, 2), float("nan"), float("inf"), "1", True, None])
def test_sigma_squared_validation(bad):
    with pytest.raises(ParameterError, match=r"^sigma_squared must be "):
        sample_discrete_gaussian(bad, 1)


def test_size_and_scale_validation():
    with pytest.raises(ParameterError, match=r"^size must be >= 0, got -2$"):
        sample_discrete_gaussian(1, -2)
    with pytest.raises(ParameterError, match=r"^scale must be > 0, got 0$"):
        sample_discrete_laplace(0, 1)
    with pytest.raises(ParameterError, match=r"^num must be >= 0, got -1$"):
        bernoulli_exp_neg(-1, 2)
    with pytest.raises(ParameterError, match=r"^den must be >= 1, got 0$"):
        bernoulli_exp_neg(1, 0)
    assert sample_discrete_gaussian(5, 0) == []


def test_float_sigma_squared_is_converted_exactly():
    x = sample_discrete_gaussian(2.25, 30_000, rng=np.random.default_rng(12))
    assert chi_square_p(x, discrete_gaussian_pmf(2.25), range(-12, 13)) > P_MIN
