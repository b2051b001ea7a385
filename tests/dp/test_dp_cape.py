"""CAPE: exact zero-sum generator noise, Lemma 1, Proposition 1, feasibility, separate parties."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.dp import CapeNoisePlan, cape_gain, cape_gain_max, exact_zero_sum, second_moment_sensitivity
from dpdpca.errors import InfeasibleError, ParameterError

TRIALS = 200_000  # each entry of a noise vector is one independent trial; var. s.e. = 0.32%


def _aggregator_noise(plan: CapeNoisePlan, seed: int) -> np.ndarray:
    """Run Algorithm 1 with separate parties (own generators) on zero data; return the aggregator's noise."""
    gen_rng, agg_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    e = plan.noise_generator_terms(TRIALS, rng=gen_rng)            # held by the noise generator
    f = plan.aggregator_terms(TRIALS, rng=agg_rng)                 # held by the aggregator
    releases = [e[s] + f[s] + plan.site_term(s, TRIALS, rng=np.random.default_rng(seed + 10 + s))
                for s in range(plan.n_sites)]                      # each site adds its own g_s
    return plan.aggregate(releases, f)


def test_equal_sites_variances_match_eq_2():
    plan = CapeNoisePlan.equal(n_sites=4, tau_s=3.0)
    assert plan.tau_e2 == plan.tau_f2 == (0.75 * 9,) * 4
    assert plan.tau_g2 == (9 / 4,) * 4 and plan.tau_c2 == 9 / 16
    assert plan.gain == pytest.approx(4.0)


@pytest.mark.parametrize("symmetric", [False, True])
def test_generator_terms_sum_to_exactly_zero(symmetric):
    plan = CapeNoisePlan.equal(n_sites=7, tau_s=1e-3)
    shape = (30, 30) if symmetric else (50, 40)
    e = plan.noise_generator_terms(shape, symmetric=symmetric)
    assert all(t.shape == shape for t in e)
    if symmetric:
        assert all(np.array_equal(t, t.T) for t in e)
    order = list(range(7))
    for _ in range(5):  # any summation order
        random.shuffle(order)
        acc = np.zeros(shape)
        for i in order:
            acc = acc + e[i]
        assert np.all(acc == 0.0)
    assert np.all(np.sum(np.stack(e), axis=0) == 0.0)


def test_exact_zero_sum_changes_values_only_at_rounding_level():
    raw = np.random.default_rng(0).normal(size=(5, 1000)) * 1e5
    raw -= raw.mean(axis=0)
    adj = exact_zero_sum(raw)
    assert np.all(adj.sum(axis=0) == 0.0)
    assert np.max(np.abs(adj - raw)) < 1e-9 * np.max(np.abs(raw))
    assert np.all(exact_zero_sum(np.zeros((3, 2))) == 0)


@pytest.mark.parametrize("n_sites", [3, 6])
def test_lemma_1_equal_sites(n_sites):
    plan = CapeNoisePlan.equal(n_sites=n_sites, tau_s=2.0)
    noise = _aggregator_noise(plan, 100 + n_sites)
    assert noise.var() == pytest.approx(plan.tau_c2, rel=0.02)
    assert plan.tau_c2 == pytest.approx(4.0 / n_sites ** 2)


@pytest.mark.parametrize("method", ["projection", "paper"])
def test_lemma_1_unequal_sites(method):
    sizes = [100, 200, 700]
    plan = CapeNoisePlan.from_budgets(epsilons=[1.0, 1.0, 1.0], deltas=[1e-5] * 3, sizes=sizes,
                                      sensitivity_numerator=math.sqrt(2), method=method, variances="paper")
    assert plan.scheme == method
    pooled = (math.sqrt(2) / sum(sizes)) * (plan.tau_s2[0] ** 0.5 * sizes[0] / math.sqrt(2))
    assert plan.tau_c2 == pytest.approx(pooled ** 2, rel=1e-12)
    noise = _aggregator_noise(plan, 7)
    assert noise.var() == pytest.approx(plan.tau_c2, rel=0.02)
    assert plan.aggregator_noise_variance == pytest.approx(plan.tau_c2, rel=1e-12)


def test_unequal_privacy_budgets_projection_is_feasible_and_protects_each_site():
    plan = CapeNoisePlan.from_budgets(epsilons=[0.5, 1.0, 2.0, 1.0], deltas=[1e-5, 1e-6, 1e-5, 1e-4],
                                      sizes=[300, 300, 400, 1000], weights=[0.1, 0.2, 0.3, 0.4])
    e = np.stack(plan.noise_generator_terms(TRIALS, rng=np.random.default_rng(1)))
    f = np.stack(plan.aggregator_terms(TRIALS, rng=np.random.default_rng(2)))
    g = np.stack([plan.site_term(s, TRIALS, rng=np.random.default_rng(3 + s)) for s in range(4)])
    assert np.max(np.abs(np.asarray(plan.weights) @ e)) < 1e-12 * np.max(np.abs(e))
    for s in range(4):
        assert e[s].var() == pytest.approx(plan.tau_e2[s], rel=0.02)
        # protection against the aggregator (knows f_s) and against outsiders
        assert (e[s] + g[s]).var() >= plan.tau_s2[s] * 0.98
        assert (f[s] + g[s]).var() == pytest.approx(plan.tau_s2[s], rel=0.02)
    assert (np.asarray(plan.weights) @ (e + g)).var() == pytest.approx(plan.tau_c2, rel=0.02)


def test_projection_reduces_to_eq_2_for_equal_sites():
    taus = [1.5] * 5
    plan = CapeNoisePlan.unequal(site_taus=taus, weights=[0.2] * 5, tau_c=1.5 / 5)
    ref = CapeNoisePlan.equal(n_sites=5, tau_s=1.5)
    for name in ("tau_e2", "tau_f2", "tau_g2"):
        assert getattr(plan, name) == pytest.approx(getattr(ref, name), rel=1e-12)
    e = plan.noise_generator_terms(10)
    assert np.all(np.sum(np.stack(e), axis=0) == 0.0)


def test_proposition_1_gain():
    n_total, s = 1000, 5
    plan = CapeNoisePlan.from_budgets(epsilons=[1.0] * s, deltas=[1e-5] * s, sizes=[200] * s, variances="paper")
    assert plan.gain_over_unweighted_average == pytest.approx(s) == pytest.approx(cape_gain([200] * s))
    extreme = [1] * (s - 1) + [n_total - s + 1]
    assert cape_gain(extreme) == pytest.approx(cape_gain_max(n_total, s), rel=1e-12)
    plan = CapeNoisePlan.from_budgets(epsilons=[1.0] * s, deltas=[1e-5] * s, sizes=extreme, variances="paper")
    assert plan.gain_over_unweighted_average == pytest.approx(cape_gain_max(n_total, s), rel=1e-9)
    rng = np.random.default_rng(4)
    for _ in range(300):  # minimum S at the equal split, maximum at the extreme split
        cuts = np.sort(rng.choice(np.arange(1, n_total), size=s - 1, replace=False))
        sizes = np.diff(np.concatenate([[0], cuts, [n_total]])).tolist()
        assert s * (1 - 1e-12) <= cape_gain(sizes) <= cape_gain_max(n_total, s) * (1 + 1e-12)


def test_paper_closed_form_is_infeasible_where_eq_2_works():
    sizes = [250] * 3 + [260]
    with pytest.raises(InfeasibleError, match=r"^tau_g2\[3\] must be >= 0, got -"):
        CapeNoisePlan.from_budgets(epsilons=[1.0] * 4, deltas=[1e-5] * 4, sizes=sizes, method="paper")
    plan = CapeNoisePlan.from_budgets(epsilons=[1.0] * 4, deltas=[1e-5] * 4, sizes=sizes, variances="paper")
    assert plan.scheme == "projection" and plan.gain == pytest.approx(4.0)


def test_constraint_checks():
    with pytest.raises(InfeasibleError, match=r"^tau_f2\[0\] \+ tau_g2\[0\] must be >= tau_s2\[0\] = 4.0, got 3.0$"):
        CapeNoisePlan(tau_s2=(4.0, 4.0), weights=(0.5, 0.5), tau_e2=(2.0, 2.0), tau_f2=(1.0, 2.0),
                      tau_g2=(2.0, 2.0), tau_c2=1.0, scheme="equal")
    with pytest.raises(InfeasibleError, match=r"^tau_e2\[1\] \+ tau_g2\[1\] must be >= tau_s2\[1\] = 4.0, got 3.5$"):
        CapeNoisePlan(tau_s2=(4.0, 4.0), weights=(0.5, 0.5), tau_e2=(2.0, 1.5), tau_f2=(2.0, 2.0),
                      tau_g2=(2.0, 2.0), tau_c2=1.0, scheme="equal")
    with pytest.raises(InfeasibleError, match=r"^tau_c\^2 must be <= sum mu_s\^2 tau_s\^2"):
        CapeNoisePlan.unequal(site_taus=[1.0, 1.0], weights=[0.5, 0.5], tau_c=1.0)
    with pytest.raises(InfeasibleError, match=r"^weights must give at least two sites a share"):
        CapeNoisePlan.unequal(site_taus=[1.0, 1.0], weights=[0.0, 1.0], tau_c=0.5)


@pytest.mark.parametrize("call,match", [
    (lambda: CapeNoisePlan.equal(n_sites=1, tau_s=1.0), r"^n_sites must be >= 2, got 1$"),
    (lambda: CapeNoisePlan.equal(n_sites=3, tau_s=0.0), r"^tau_s must be > 0, got 0.0$"),
    (lambda: CapeNoisePlan.unequal(site_taus=[1.0], weights=[1.0], tau_c=0.1), r"^site_taus must be of length >= 2, got 1$"),
    (lambda: CapeNoisePlan.unequal(site_taus=[1.0, 1.0], weights=[1.0], tau_c=0.1), r"^weights must be of length 2"),
    (lambda: CapeNoisePlan.unequal(site_taus=[1.0, 1.0], weights=[0.7, 0.7], tau_c=0.1), r"^weights must be summing to 1"),
    (lambda: CapeNoisePlan.unequal(site_taus=[1.0, 1.0], weights=[0.5, 0.5], tau_c=0.1, method="x"),
     r"^method must be 'projection' or 'paper', got 'x'$"),
    (lambda: CapeNoisePlan.unequal(site_taus=[1.0, 1.0], weights=[1.0, 0.0], tau_c=0.1, method="paper"),
     r"^weights\[-1\] must be > 0"),
    (lambda: CapeNoisePlan.from_budgets(epsilons=[1.0, -1.0], deltas=[1e-5] * 2, sizes=[5, 5]),
     r"^epsilons\[i\] must be > 0, got -1.0$"),
    (lambda: CapeNoisePlan.from_budgets(epsilons=[1.0] * 2, deltas=[1e-5, 1.0], sizes=[5, 5]),
     r"^deltas\[i\] must be in \(0, 1\), got 1.0$"),
    (lambda: CapeNoisePlan.from_budgets(epsilons=[1.0] * 2, deltas=[1e-5] * 2, sizes=[5]),
     r"^epsilons, deltas, sizes must be of equal lengths"),
    (lambda: CapeNoisePlan.equal(n_sites=2, tau_s=1.0).site_term(2), r"^site must be <= 1, got 2$"),
    (lambda: CapeNoisePlan.equal(n_sites=2, tau_s=1.0).noise_generator_terms((2, 3), symmetric=True),
     r"^shape must be \(d, d\) or \(d, d, d\) when symmetric=True, got \(2, 3\)$"),
    (lambda: CapeNoisePlan.equal(n_sites=2, tau_s=1.0).aggregator_terms((2, 2, 3), symmetric=True),
     r"^shape must be \(d, d\) or \(d, d, d\) when symmetric=True, got \(2, 2, 3\)$"),
    (lambda: CapeNoisePlan.equal(n_sites=2, tau_s=1.0).privacy(0), r"^plan must be built with from_budgets"),
    (lambda: cape_gain([]), r"^sizes must be non-empty"),
    (lambda: cape_gain_max(3, 4), r"^n_total must be >= 4, got 3$"),
])
def test_cape_validation(call, match):
    with pytest.raises(ParameterError, match=match):
        call()


def test_site_privacy_report():
    n = 500
    plan = CapeNoisePlan.from_budgets(epsilons=[1.0] * 3, deltas=[1e-5] * 3, sizes=[n] * 3,
                                      sensitivity_numerator=math.sqrt(2))
    r = plan.privacy(1)
    assert (r.epsilon, r.delta, r.mechanism, r.neighbouring) == (1.0, 1e-5, "cape", "replace-one")
    assert r.sensitivity == pytest.approx(second_moment_sensitivity(n))
    assert r.sigma == pytest.approx(math.sqrt(plan.tau_s2[1]))


def test_direct_construction_and_aggregate_validation():
    with pytest.raises(ParameterError, match=r"^n_sites must be >= 2, got 1$"):
        CapeNoisePlan(tau_s2=(1.0,), weights=(1.0,), tau_e2=(0.0,), tau_f2=(0.0,), tau_g2=(1.0,), tau_c2=1.0,
                      scheme="equal")
    with pytest.raises(ParameterError, match=r"^tau_g2 must be of length 2, got 1$"):
        CapeNoisePlan(tau_s2=(1.0, 1.0), weights=(0.5, 0.5), tau_e2=(0.5, 0.5), tau_f2=(0.5, 0.5), tau_g2=(0.5,),
                      tau_c2=0.125, scheme="equal")
    with pytest.raises(ParameterError, match=r"^weights\[0\] must be > 0, got 0.0$"):
        CapeNoisePlan.unequal(site_taus=[1.0, 1.0, 1.0], weights=[0.0, 0.5, 0.5], tau_c=0.3, method="paper")
    plan = CapeNoisePlan.equal(n_sites=3, tau_s=1.0)
    with pytest.raises(ParameterError, match=r"^releases must be 3 releases and terms, got \(2, 3\)$"):
        plan.aggregate([np.zeros(2)] * 2, [np.zeros(2)] * 3)
    assert np.all(exact_zero_sum(np.ones((1, 4))) == 0)


@settings(max_examples=200, deadline=None)
@given(n_sites=st.integers(2, 40), width=st.integers(1, 30), exponent=st.integers(-300, 300),
       seed=st.integers(0, 2**32 - 1))
def test_exact_zero_sum_property(n_sites, width, exponent, seed):
    rows = np.random.default_rng(seed).standard_normal((n_sites, width)) * 2.0 ** exponent
    rows -= rows.mean(axis=0)
    adj = exact_zero_sum(rows)
    for order in (range(n_sites), reversed(range(n_sites))):
        acc = np.zeros(width)
        for i in order:
            acc = acc + adj[i]
        assert np.all(acc == 0.0)
    # Rows 0..S-2 move by at most half the grid step q <= 2 S max|rows| 2^-50.  The last
    # row absorbs their rounding and also the input's own float residual: centring with
    # ``rows.mean`` does not make the float rows sum to exactly zero (two nearly equal
    # rows leave a residual relative to their size before centring, not after).
    half_step = 2.0 ** -50 * n_sites * np.max(np.abs(rows))
    assert np.all(np.abs(adj[:-1] - rows[:-1]) <= half_step)
    residual = np.abs([math.fsum(column) for column in rows.T])
    slack = 1.0 + 2.0 ** -40  # the float subtraction adj - rows rounds once more
    assert np.all(np.abs(adj[-1] - rows[-1]) <= ((n_sites - 1) * half_step + residual) * slack)
