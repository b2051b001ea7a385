"""The noise source: OS entropy by default, explicit Generators only, exact uniform integers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dp_stats import P_MIN, chi_square_p
from dpdpca.dp import GeneratorNoiseSource, OsNoiseSource, resolve_source
from dpdpca.errors import ParameterError


def test_none_is_os_entropy_and_secure():
    src = resolve_source(None)
    assert isinstance(src, OsNoiseSource) and src.is_secure


def test_generator_is_explicit_and_not_secure():
    src = resolve_source(np.random.default_rng(1))
    assert isinstance(src, GeneratorNoiseSource) and not src.is_secure


def test_noise_source_passes_through():
    src = OsNoiseSource()
    assert resolve_source(src) is src


@pytest.mark.parametrize("bad", [0, 42, 1.5, "seed", np.random.RandomState(0)])
def test_anything_else_is_refused_never_seeded_silently(bad):
    with pytest.raises(ParameterError, match=r"^rng must be None \(OS entropy\) or an explicit numpy.random.Generator, got "):
        resolve_source(bad)


def test_seeded_generator_is_reproducible():
    a = resolve_source(np.random.default_rng(7)).uniform_ints(0, 10**30, 5)
    b = resolve_source(np.random.default_rng(7)).uniform_ints(0, 10**30, 5)
    assert a == b


@pytest.mark.parametrize("rng", [None, np.random.default_rng(3)])
def test_randbelow_is_uniform(rng):
    src = resolve_source(rng)
    draws = [src.randbelow(7) for _ in range(14000)]
    assert min(draws) == 0 and max(draws) == 6
    assert chi_square_p(draws, lambda k: 1 / 7, range(7)) > P_MIN


def test_randbelow_huge_bound():
    src = resolve_source(None)
    n = 3 * 2**300 + 1
    draws = [src.randbelow(n) for _ in range(2000)]
    assert all(0 <= v < n for v in draws)
    # the top bit region is reached: about 1/3 of draws are >= 2**301
    share = sum(v >= 2**301 for v in draws) / len(draws)
    assert abs(share - (n - 2**301) / n) < 0.05


def test_uniform_ints_inclusive_and_validated():
    src = resolve_source(np.random.default_rng(0))
    vals = src.uniform_ints(-3, 3, 7000)
    assert set(vals) == set(range(-3, 4))
    assert chi_square_p([v + 3 for v in vals], lambda k: 1 / 7, range(7)) > P_MIN
    big = src.uniform_ints(2**200, 2**200 + 2**100, 50)
    assert all(2**200 <= v <= 2**200 + 2**100 for v in big) and all(isinstance(v, int) for v in big)
    with pytest.raises(ParameterError, match=r"^high must be >= low \(5\), got 4$"):
        src.uniform_ints(5, 4, 1)
    with pytest.raises(ParameterError, match=r"^size must be >= 0, got -1$"):
        src.uniform_ints(0, 1, -1)


def test_uniform_below_each_is_uniform_per_bound():
    src = resolve_source(np.random.default_rng(5))
    bounds = np.array([3, 5] * 6000)
    out = src.uniform_below_each(bounds)
    assert np.all(out < bounds) and np.all(out >= 0)
    assert chi_square_p(out[bounds == 5].tolist(), lambda k: 1 / 5, range(5)) > P_MIN


@pytest.mark.parametrize("rng", [None, np.random.default_rng(11)])
def test_standard_normal_and_laplace_distributions(rng):
    src = resolve_source(rng)
    z = src.standard_normal((200, 500))
    assert z.shape == (200, 500)
    assert stats.kstest(z.ravel(), "norm").pvalue > P_MIN
    lap = src.laplace(100_001)
    assert lap.shape == (100_001,)
    assert stats.kstest(lap, "laplace").pvalue > P_MIN


@pytest.mark.parametrize("rng", [None, np.random.default_rng(12)])
def test_box_muller_pairs_are_independent_normals(rng):
    """Each pair (r cos t, r sin t) shares its radius and angle: check the pair, not only the margins.

    For independent N(0, 1) x and y, x^2 + y^2 ~ Exp(mean 2) and atan2(y, x) is
    uniform, independently; ``scale`` multiplies both.
    """
    n = 100_000
    z = resolve_source(rng).standard_normal(2 * n, scale=3.0) / 3.0
    x, y = z[:n], z[n:]  # the cos and sin halves of the same n pairs
    for margin in (x, y):
        assert stats.kstest(margin, "norm").pvalue > P_MIN
    r2, angle = x * x + y * y, np.arctan2(y, x)
    assert stats.kstest(r2, "expon", args=(0, 2)).pvalue > P_MIN
    assert stats.kstest(angle, "uniform", args=(-np.pi, 2 * np.pi)).pvalue > P_MIN
    # radius and angle independent: the radius distribution is the same in every quarter of the circle
    quarter = np.floor((angle + np.pi) / (np.pi / 2)).clip(0, 3)
    assert stats.kruskal(*(r2[quarter == q] for q in range(4))).pvalue > P_MIN
    assert abs(stats.pearsonr(x, y)[0]) < 5 / np.sqrt(n)


def test_os_source_never_repeats_bytes_across_fork():
    import os
    import warnings

    src = OsNoiseSource()
    src.random_bits(8)  # fill the buffer in the parent
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # Python >= 3.12 warns about fork in threaded processes
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: report its next draw, then leave without running pytest teardown
        os.close(read_fd)
        os.write(write_fd, src.random_bits(256).to_bytes(32, "little"))
        os._exit(0)
    os.close(write_fd)
    child = int.from_bytes(os.read(read_fd, 32), "little")
    os.close(read_fd)
    os.waitpid(pid, 0)
    assert src.random_bits(256) != child
