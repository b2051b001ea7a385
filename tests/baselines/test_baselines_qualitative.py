"""The papers' qualitative claims, on synthetic data (D = 40, K = 8, S = 10) with fixed seeds.

Margins were checked over five data seeds and several noise seeds; each
assertion compares means over several runs whose differences are many
standard errors wide (see the comments).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca import driver
from dpdpca.linalg import top_eigenpairs
from dpdpca.metrics import captured_energy_ratio, optimal_energy

K = 8
DP_METHODS = ["dpdispca", "dpdispca-full", "capepca", "conv", "local", "pooled", "private-local-pca"]


def mean_ratio(method, X, parts, epsilon, runs, seed=0, delta=1e-5):
    q_o = optimal_energy(X, K)
    return float(np.mean([
        captured_energy_ratio(driver.run(method, parts, n_components=K, epsilon=epsilon, delta=delta,
                                         rng=np.random.default_rng(seed + i)), X, q_optimal=q_o)
        for i in range(runs)]))


@pytest.mark.parametrize("method", DP_METHODS)
def test_ratio_rises_with_epsilon(sites500, method):
    X, parts = sites500
    means = [mean_ratio(method, X, parts, eps, runs=6) for eps in (0.3, 1.0, 3.0, 30.0)]
    # smallest step seen: local 0.3 -> 1, about +0.06 with a standard error near 0.008
    assert all(b > a for a, b in zip(means, means[1:])), means


@pytest.mark.parametrize("method", DP_METHODS)
def test_ratio_rises_with_site_size(make_sites, method):
    means = []
    for n_s in (100, 500, 2500):
        X, parts = make_sites(n_s, seed=1)
        means.append(mean_ratio(method, X, parts, 1.0, runs=6))
    assert all(b > a for a, b in zip(means, means[1:])), means


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_cape_beats_conv_beats_local(sites500, epsilon):
    X, parts = sites500
    cape, conv, local = (mean_ratio(m, X, parts, epsilon, runs=8) for m in ("capepca", "conv", "local"))
    # at epsilon = 1: about 0.92 > 0.62 > 0.41 with standard errors near 0.007
    assert cape > conv > local, (cape, conv, local)


def test_full_beats_partial_root(sites500):
    X, parts = sites500
    q_o = optimal_energy(X, K)
    diffs = []
    for i in range(24):
        # same seed: both variants draw the same E_s, so the difference is paired
        full, part = (captured_energy_ratio(driver.run(m, parts, n_components=K, epsilon=2.0, delta=1e-5,
                                                       rng=np.random.default_rng(50 + i)), X, q_optimal=q_o)
                      for m in ("dpdispca-full", "dpdispca"))
        diffs.append(full - part)
    # over 4 data x 3 noise seeds (12 runs) the paired mean was 0.008-0.019, 2.3-6 standard errors above 0
    assert np.mean(diffs) > 0, diffs


def test_everything_tends_to_q_o(sites500):
    X, parts = sites500
    for method in ("dpdispca", "dpdispca-full", "capepca", "conv", "pooled", "private-local-pca"):
        assert mean_ratio(method, X, parts, 1e5, runs=2) > 0.999, method
    # local tends to non-private PCA of its own site, not of the pooled data
    w, V_site = top_eigenpairs(parts[0].T @ parts[0] / parts[0].shape[0], K)
    q_site = captured_energy_ratio(V_site, X)
    assert mean_ratio("local", X, parts, 1e5, runs=2) == pytest.approx(q_site, abs=1e-3)
    assert q_site < 0.999
