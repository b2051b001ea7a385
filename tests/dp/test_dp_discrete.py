"""Exact integer samplers: discrete Gaussian, discrete Laplace, Bernoulli(exp(-gamma))."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dp_stats import P_MIN, chi_square_p, discrete_gaussian_pmf
from dpdpca.dp import bernoulli_exp_neg, discrete, sample_discrete_gaussian, sample_discrete_laplace
from dpdpca.dp.randomness import GeneratorNoiseSource
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


@pytest.mark.parametrize("bits", [12, 2])
@pytest.mark.parametrize("scale", [Fraction(1, 2), 3, Fraction(7, 2), Fraction(10**9 + 7, 10**8 + 3)])
def test_discrete_laplace_matches_exact_pmf(monkeypatch, scale, bits):
    """Also with 2-bit lazy words, so that a quarter of the comparisons V < U/t are ties."""
    monkeypatch.setattr(discrete, "_WORD_BITS", bits)
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


# --- the lazy, vectorized Gaussian acceptance and its exact fallback --------------------------

#: sigma^2 with a 133-bit numerator and a 132-bit denominator (as from float calibration, but wider), ~3.0
BIG_RATIONAL = Fraction(10**40 + 3, 10**40 // 3 + 1)


class CountingSource(GeneratorNoiseSource):
    """A seeded experiment source that counts the exact fallbacks (``randbelow`` calls)."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.default_rng(seed))
        self.fallbacks = 0

    def randbelow(self, n: int) -> int:
        self.fallbacks += 1
        return super().randbelow(n)


def _reference_accept(y: int, p: int, q: int, t: int, src) -> bool:
    """CKS Algorithm 3's acceptance of one proposal, scalar, with Fractions for every comparison.

    It draws from ``src`` exactly as the vectorized code does for a batch of one, so the two
    must agree draw for draw.  The comparison of V (a uniform real in [0, 1)) with the
    fractional part f is stated on the real numbers: V's top B bits place it in
    [w/2**B, (w+1)/2**B); when f falls inside that interval, the rest of V is
    X / (den 2**B) for a uniform X below den.
    """
    bits = discrete._WORD_BITS
    den = 2 * p * q * t * t
    gamma = Fraction((abs(y) * q * t - p) ** 2, den)
    whole = math.floor(gamma)
    for _ in range(whole):  # Bernoulli(exp(-1)): k = 1 always passes; k += 1 while Bernoulli(1/k)
        k = 2
        while discrete._uniform_below(k, 1, src)[0] == 0:
            k += 1
        if k % 2 == 0:
            return False
    f = gamma - whole
    k = 1
    while True:
        if k > 1 and discrete._uniform_below(k, 1, src)[0] != 0:  # Bernoulli(1/k) failed
            return k % 2 == 1
        w = int(discrete._words(1, bits, src)[0])
        low, high = Fraction(w, 2**bits), Fraction(w + 1, 2**bits)
        if high <= f:
            hit = True
        elif low > f:
            hit = False
        else:
            hit = low + Fraction(src.randbelow(den), den * 2**bits) < f
        if not hit:
            return k % 2 == 1
        k += 1


@pytest.mark.parametrize("bits", [12, 2, 32])
@pytest.mark.parametrize("sigma2", [BIG_RATIONAL, Fraction(49, 3), Fraction(10**22 + 1, 7)])
def test_vectorized_acceptance_equals_the_fraction_reference_draw_for_draw(monkeypatch, bits, sigma2):
    """Same seed, same draws, same decision, and the same number of bytes consumed.

    12 bits is the default (int64 bounds on gamma); 2 bits makes a quarter of the comparisons
    ties, so the exact fallback runs often; at 32 bits gamma comes from Python integers.
    """
    monkeypatch.setattr(discrete, "_WORD_BITS", bits)
    p, q = sigma2.numerator, sigma2.denominator
    t = math.isqrt(p // q) + 1
    ys = discrete._discrete_laplace_array(t, 1, 400, GeneratorNoiseSource(np.random.default_rng(5)))
    decisions, ties = set(), 0
    for i, y in enumerate(ys.tolist()):
        a, b = CountingSource(1000 + i), CountingSource(1000 + i)
        got = bool(discrete._discrete_gaussian_accept(np.array([y]), p, q, t, a)[0])
        assert got == _reference_accept(y, p, q, t, b), y
        assert a.words(1)[0] == b.words(1)[0]  # both consumed the stream to the same point
        decisions.add(got)
        ties += a.fallbacks
    assert decisions == {True, False}
    assert (ties > 50) if bits == 2 else (ties < 3)


@pytest.mark.parametrize("bits", [12, 2, 32, 63])
def test_acceptance_frequency_is_exp_minus_gamma(monkeypatch, bits):
    """One proposal repeated 100 000 times: accepted with probability exactly exp(-gamma).

    gamma = 3.375 here, so the whole part (three Bernoulli(exp(-1))) and the fraction both run;
    at 63 bits floor(gamma 2**63) does not fit 64 bits (the Python-integer split).
    """
    monkeypatch.setattr(discrete, "_WORD_BITS", bits)
    p, q = BIG_RATIONAL.numerator, BIG_RATIONAL.denominator
    t = math.isqrt(p // q) + 1
    y = 6
    gamma = Fraction((y * q * t - p) ** 2, 2 * p * q * t * t)
    assert 3.37 < gamma < 3.38
    src = CountingSource(3)
    n = 100_000
    hits = int(discrete._discrete_gaussian_accept(np.full(n, y), p, q, t, src).sum())
    assert stats.binomtest(hits, n, math.exp(-float(gamma))).pvalue > P_MIN
    assert src.fallbacks > 1000 if bits == 2 else src.fallbacks < 5


@pytest.mark.parametrize("bits", [12, 2, 63])
def test_discrete_gaussian_big_rational_sigma2_matches_exact_pmf(monkeypatch, bits):
    """Through the public sampler, with the fallback forced (2 bits) and the 64-bit overflow split (63)."""
    monkeypatch.setattr(discrete, "_WORD_BITS", bits)
    src = CountingSource(bits)
    x = sample_discrete_gaussian(BIG_RATIONAL, 40_000, rng=src)
    assert len(x) == 40_000 and all(isinstance(v, int) for v in x[:100])
    assert chi_square_p(x, discrete_gaussian_pmf(float(BIG_RATIONAL)), range(-15, 16)) > P_MIN
    assert chi_square_p(x, discrete_gaussian_pmf(1.1 * float(BIG_RATIONAL)), range(-15, 16)) < P_MIN  # power
    if bits == 2:
        assert src.fallbacks > 1000


@pytest.mark.parametrize("bits", [12, 2, 63])
def test_bernoulli_exp_neg_ratio_frequency(monkeypatch, bits):
    """Bernoulli(exp(-u/t)) of the discrete Laplace: lazy (12 and 2 bits, ties) or one word per step (63)."""
    monkeypatch.setattr(discrete, "_WORD_BITS", bits)
    t, u, n = 10**9 + 7, 7 * 10**8, 100_000
    got = discrete._bernoulli_exp_neg_ratio_vec((np.full(n, u, dtype=np.int64), None), t,
                                                GeneratorNoiseSource(np.random.default_rng(bits)))
    assert stats.binomtest(int(got.sum()), n, math.exp(-u / t)).pvalue > P_MIN


def test_huge_gamma_is_rejected_without_looping_gamma_times():
    """sigma^2 = 1, y = 2**40: gamma ~ 2**79, floor(gamma 2**B) overflows 64 bits; its 2**79
    Bernoulli(exp(-1)) factors never all pass, and the loop ends with the first failure."""
    y = np.array([2**40, 0, -(2**40), 1] * 50)
    got = discrete._discrete_gaussian_accept(y, 1, 1, 2, GeneratorNoiseSource(np.random.default_rng(0)))
    assert not got[::2].any() and got[1::2].any()


@pytest.mark.parametrize("sigma2,min_pinned", [
    (Fraction(2**120 + 1, 2**40 + 3), 0.98),  # a calibration-like sigma^2: nothing special about gamma
    (Fraction(10**22 + 1, 7), 0.98),
    (10**6, 0.98),
    (Fraction(49, 3), 0.98),
    (BIG_RATIONAL, 0.5),  # ~3: gamma 2**B lies within 1e-40 of an integer for a third of the proposals
    (Fraction(1, 4), 0.0),  # gamma 2**B is an integer for every proposal: bounds never pin it
])
@pytest.mark.parametrize("bits", [12, 2, 20])
def test_int64_bounds_contain_the_exact_floor(bits, sigma2, min_pinned):
    """lo <= floor(gamma 2**B) <= hi for every proposal, and lo == hi (the int64 answer) for almost all.

    Proposals from the sampler's own proposal distribution, plus the edge cases: 0, the
    integers around c = sigma^2 / t (gamma near 0) and one above the batch's largest.
    """
    sigma2 = Fraction(sigma2)
    p, q = sigma2.numerator, sigma2.denominator
    t = math.isqrt(p // q) + 1
    c = p // (q * t)
    a = np.abs(discrete._discrete_laplace_array(t, 1, 20_000, GeneratorNoiseSource(np.random.default_rng(bits))))
    a = np.concatenate([a, [0, 1, max(c - 1, 0), c, c + 1, c + 2, int(a.max()) + 1]]).astype(np.int64)
    bounds = discrete._exponent_top_bounds(a, p, q, t, bits)
    assert bounds is not None
    lo, hi = (b.astype(object) for b in bounds)
    exact = discrete._exponent_top_exact(a, p, q, t, bits)
    assert ((lo <= exact) & (exact <= hi)).all()
    pinned = lo == hi
    assert pinned.mean() >= min_pinned if bits > 2 else pinned.mean() > 0.99
    assert (lo[pinned] == exact[pinned]).all()


def test_int64_bounds_step_aside_out_of_range():
    """A proposal of 62 bits, or gamma too large for 64 bits: None, and Python integers decide."""
    sigma2 = Fraction(2**118 + 1, 3)
    p, q = sigma2.numerator, sigma2.denominator
    t = math.isqrt(p // q) + 1
    assert discrete._exponent_top_bounds(np.array([0, 3 * t], dtype=np.int64), p, q, t, 12) is not None
    assert discrete._exponent_top_bounds(np.array([0, 2**62 - 1], dtype=np.int64), p, q, t, 12) is None
    assert discrete._exponent_top_bounds(np.array([0, 2**40], dtype=np.int64), 1, 1, 2, 12) is None


def test_discrete_laplace_wide_scale_with_a_huge_denominator():
    """t of 73 bits ((high, low) words) and s = 2**70 (the division runs on Python ints)."""
    scale = Fraction(7 * 2**70 + 1, 2**70)
    x = sample_discrete_laplace(scale, 30_000, rng=np.random.default_rng(4))
    assert all(isinstance(v, int) for v in x[:100])
    r = math.exp(-1 / float(scale))
    assert chi_square_p(x, lambda k: (1 - r) / (1 + r) * r ** abs(k), range(-90, 91)) > P_MIN
