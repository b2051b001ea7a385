"""CAPE against the aggregator's joint view: the covariance of the S releases, the paper's factor, rigorous plans."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dpdpca.dp import JOINT_SLACK, CapeNoisePlan, gaussian_delta
from dpdpca.dp.calibration import analytic_gaussian_sigma
from dpdpca.errors import InfeasibleError, ParameterError

DRAWS = 100_000  # per coordinate; an entry of a 4 x 4 empirical covariance has s.e. about 0.5% of the diagonal


def _joint_draws(plan: CapeNoisePlan, seed: int) -> np.ndarray:
    """The aggregator's view of zero data, E_s + G_s per site (F_s subtracted), each party with its own source."""
    e = np.stack(plan.noise_generator_terms(DRAWS, rng=np.random.default_rng(seed)))
    g = np.stack([plan.site_term(s, DRAWS, rng=np.random.default_rng(seed + 1 + s)) for s in range(plan.n_sites)])
    return e + g


def _empirical_factor(plan: CapeNoisePlan, seed: int) -> float:
    inv = np.linalg.inv(np.cov(_joint_draws(plan, seed)))
    return max(t * inv[i, i] for i, t in enumerate(plan.tau_s2))


def _unequal(variances: str, method: str = "projection") -> CapeNoisePlan:
    return CapeNoisePlan.from_budgets(epsilons=[1.0] * 3, deltas=[1e-5] * 3, sizes=[100, 200, 700],
                                      sensitivity_numerator=math.sqrt(2), method=method, variances=variances)


def _budgets(variances: str) -> CapeNoisePlan:
    return CapeNoisePlan.from_budgets(epsilons=[0.5, 1.0, 2.0, 1.0], deltas=[1e-5, 1e-6, 1e-5, 1e-4],
                                      sizes=[300, 300, 400, 1000], variances=variances)


@pytest.mark.parametrize("n_sites", [2, 4, 7])
def test_paper_equal_plan_joint_factor_is_2S_over_S_plus_1(n_sites):
    plan = CapeNoisePlan.equal(n_sites=n_sites, tau_s=1.5)
    expected = 2 * n_sites / (n_sites + 1)
    assert plan.joint_factor() == pytest.approx(expected, rel=1e-12)
    assert plan.joint_factors() == pytest.approx((expected,) * n_sites, rel=1e-12)
    assert _empirical_factor(plan, 10 + n_sites) == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("make", [
    lambda: CapeNoisePlan.equal(n_sites=4, tau_s=1.0),
    lambda: _unequal("paper"),
    lambda: _unequal("paper", method="paper"),
    lambda: _budgets("paper"),
    lambda: CapeNoisePlan.from_budgets(epsilons=[1.0] * 4, deltas=[1e-5] * 4, sizes=[50] * 4, variances="rigorous"),
    lambda: _unequal("rigorous"),
    lambda: _unequal("rigorous", method="paper"),
    lambda: _budgets("rigorous"),
], ids=["equal", "projection", "paper-closed-form", "budgets", "equal-rigorous", "projection-rigorous",
        "paper-closed-form-rigorous", "budgets-rigorous"])
def test_generator_and_joint_covariance_match_the_plans_draws(make):
    plan = make()
    e = np.stack(plan.noise_generator_terms(DRAWS, rng=np.random.default_rng(3)))
    cov = plan.generator_covariance()
    scale = max(np.diag(cov))
    assert np.abs(np.cov(e) - cov).max() < 0.02 * scale
    assert np.diag(cov) == pytest.approx(plan.tau_e2, rel=1e-9)
    assert np.abs(np.asarray(plan.weights) @ cov).max() < 1e-12 * scale  # sum_s mu_s e_s = 0
    joint = plan.joint_covariance()
    assert np.abs(np.cov(_joint_draws(plan, 20)) - joint).max() < 0.02 * max(np.diag(joint))


@pytest.mark.parametrize("make", [
    lambda v: CapeNoisePlan.from_budgets(epsilons=[1.0] * 2, deltas=[1e-5] * 2, sizes=[80] * 2, variances=v),
    lambda v: CapeNoisePlan.from_budgets(epsilons=[1.0] * 4, deltas=[1e-5] * 4, sizes=[80] * 4, variances=v),
    lambda v: CapeNoisePlan.from_budgets(epsilons=[1.0] * 10, deltas=[1e-5] * 10, sizes=[80] * 10, variances=v),
    lambda v: _unequal(v),
    lambda v: _unequal(v, method="paper"),
    _budgets,
], ids=["equal-2", "equal-4", "equal-10", "unequal-sizes", "paper-closed-form", "unequal-budgets"])
def test_rigorous_plans_are_dp_against_the_joint_view_at_the_papers_utility(make):
    paper, plan = make("paper"), make("rigorous")
    assert paper.joint_factor() > 1  # the flaw: each release alone is fine, the joint view is not
    assert plan.variances == "rigorous" and plan.joint_factor() <= 1
    assert plan.aggregator_noise_variance == pytest.approx((1 + JOINT_SLACK) * paper.aggregator_noise_variance,
                                                           rel=1e-12)
    assert plan.tau_f2 == paper.tau_f2 and plan.tau_s2 == paper.tau_s2 and plan.e_scale >= 1
    assert plan.paper_variances().tau_e2 == pytest.approx(paper.tau_e2, rel=1e-12)
    # the smallest inflation: 0.1% less correlated noise breaks the joint view
    less = plan.paper_variances().joint_safe()
    worse = dataclasses.replace(less, tau_e2=tuple(v * 0.999 for v in less.tau_e2),
                                e_proposal=tuple(v * 0.999 for v in less.e_proposal), variances="paper")
    assert worse.joint_factor() > 1


def test_rigorous_equal_plan_closed_form_and_draws():
    s, eta = 4, JOINT_SLACK
    plan = CapeNoisePlan.from_budgets(epsilons=[1.0] * s, deltas=[1e-5] * s, sizes=[100] * s)
    # Sigma = a (I - 11^T/S) + b I, b = (1+eta) tau^2/S: (Sigma^-1)_ss tau^2 <= 1 iff a + b >= tau^2 (1-1/S)(1+eta)/eta
    assert plan.e_scale == pytest.approx((1 - 1 / s) * (1 + eta) / eta - (1 + eta) / s, rel=1e-8)
    assert plan.joint_factor() == pytest.approx(1.0, rel=1e-8)
    assert _empirical_factor(plan, 40) == pytest.approx(1.0, rel=0.02)
    assert np.mean(_joint_draws(plan, 50), axis=0).var() == pytest.approx(plan.aggregator_noise_variance, rel=0.02)


def test_joint_factor_falls_as_the_correlated_noise_grows():
    plan = _budgets("paper")
    factors = [dataclasses.replace(plan, tau_e2=tuple(k * v for v in plan.tau_e2),
                                   e_proposal=tuple(k * v for v in plan.e_proposal)).joint_factor()
               for k in (1, 2, 5, 20, 100, 1e4)]
    assert all(a > b for a, b in zip(factors, factors[1:]))


def test_reports_against_the_joint_view():
    s, eps, delta = 4, 1.0, 1e-5
    kw = dict(epsilons=[eps] * s, deltas=[delta] * s, sizes=[100] * s, sensitivity_numerator=math.sqrt(2))
    paper = CapeNoisePlan.from_budgets(**kw, variances="paper").privacy(0)
    expected = gaussian_delta(eps, 1.0, math.sqrt(2 * s / (s + 1)) / analytic_gaussian_sigma(eps, delta))
    assert paper.epsilon == eps and paper.delta == pytest.approx(expected, rel=1e-6) and paper.delta > 2e-4
    assert "per-release claim" in paper.notes and "joint view" in paper.notes
    rigorous = CapeNoisePlan.from_budgets(**kw).privacy(0)
    assert (rigorous.epsilon, rigorous.delta) == (eps, delta)
    assert "DP against the aggregator's joint view" in rigorous.notes


def test_joint_view_errors():
    plan = CapeNoisePlan.equal(n_sites=3, tau_s=1.0)
    with pytest.raises(InfeasibleError, match=r"^joint_factor max_s tau_s2\[s\] \(Sigma\^-1\)_ss must be <= 1 .*"
                                              r"got 1\.500"):
        dataclasses.replace(plan, variances="rigorous")
    with pytest.raises(ParameterError, match=r"^variances must be 'rigorous' or 'paper', got 'joint'$"):
        CapeNoisePlan.from_budgets(epsilons=[1.0] * 2, deltas=[1e-5] * 2, sizes=[5, 5], variances="joint")
    with pytest.raises(ParameterError, match=r"^slack must be > 0, got 0.0$"):
        plan.joint_safe(0.0)
    # the aggregate alone gives site 0 less noise than its own level: no correlated noise can help
    lopsided = CapeNoisePlan.unequal(site_taus=[1.0, 1.0, 1.0], weights=[0.6, 0.2, 0.2], tau_c=0.3)
    with pytest.raises(InfeasibleError, match=r"^weights\[0\]\^2 tau_s2\[0\] must be < \(1 \+ slack\) sum_j "):
        lopsided.joint_safe()
