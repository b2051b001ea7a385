"""capePCA against the aggregator's joint view of all S releases: rigorous by default, the paper's on request."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpdpca.baselines import CapePCA
from dpdpca.baselines.release import AddRemoveNoise
from dpdpca.data import clip_rows, partition
from dpdpca.dp import JOINT_SLACK, gaussian_delta
from dpdpca.dp.calibration import analytic_gaussian_sigma
from dpdpca.errors import ParameterError

S, EPS, DELTA, K = 4, 1.0, 1e-5, 2


@pytest.fixture(scope="module")
def parts():
    X = clip_rows(np.random.default_rng(0).normal(size=(400, 5)) / 3)[0]
    return partition(X, S)


def _fit(parts, **kw):
    return CapePCA(K, EPS, DELTA, rng=np.random.default_rng(1), **kw).fit(parts)


@pytest.mark.parametrize("neighbouring", ["add-remove", "replace-one"])
def test_default_claims_the_budget_against_the_joint_view(parts, neighbouring):
    est = _fit(parts, neighbouring=neighbouring)
    paper = _fit(parts, neighbouring=neighbouring, cape_variances="paper")
    rep = est.privacy_
    assert (rep.epsilon, rep.delta, rep.mechanism) == (EPS, DELTA, "cape")
    assert "DP against the aggregator's joint view" in rep.notes and "sites that do not collude" in rep.notes
    assert not rep.notes.startswith("parallel composition")
    assert est.result_.params["cape_variances"] == "rigorous"
    # utility: the aggregate's noise variance is (1 + eta) times the paper's
    assert est.result_.extra["aggregator_noise_variance"] == pytest.approx(
        (1 + JOINT_SLACK) * paper.result_.extra["aggregator_noise_variance"], rel=1e-12)


def test_paper_option_reports_the_delta_really_achieved(parts):
    c = analytic_gaussian_sigma(EPS, DELTA)
    joint = gaussian_delta(EPS, 1.0, math.sqrt(2 * S / (S + 1)) / c)  # 2.5e-4 at S = 4
    rep = _fit(parts, neighbouring="replace-one", cape_variances="paper").privacy_
    assert rep.epsilon == EPS and rep.delta == pytest.approx(joint, rel=1e-6) and rep.delta > 20 * DELTA
    assert "per-release claim" in rep.notes and "the paper's CAPE variances" in rep.notes
    # add/remove: the same factor on the protocol's whitened sensitivity
    noise = AddRemoveNoise.calibrate(epsilon=EPS, delta=DELTA, d=parts[0].shape[1])
    rep = _fit(parts, cape_variances="paper").privacy_
    expected = gaussian_delta(EPS, 1.0, noise.whitened_sensitivity * math.sqrt(2 * S / (S + 1)))
    assert rep.delta == pytest.approx(expected, rel=1e-6) and rep.delta > 20 * DELTA


def test_rigorous_noise_still_cancels_and_dropout_is_noted(parts):
    est = _fit(parts, neighbouring="replace-one", centering="none", keep_noise=True)
    E, G = est.noise_["E"], est.noise_["G"]
    assert np.array_equal(sum(E), np.zeros_like(E[0]))  # the inflated E_s still sum to exactly 0
    A = [X.T @ X / X.shape[0] for X in parts]
    np.testing.assert_allclose(est.aggregate_ - sum(A) / S, sum(G) / S, rtol=0, atol=1e-14)
    drop = _fit(parts, dropped_sites=[1])
    assert drop.privacy_.delta == DELTA and "joint view of fewer releases keeps the guarantee" in drop.privacy_.notes
    with pytest.raises(ParameterError, match=r"^cape_variances must be 'rigorous' or 'paper', got 'joint'$"):
        _fit(parts, cape_variances="joint")


def test_replace_one_unequal_sites_report_the_sigma_the_plan_draws():
    """Replace-one, unequal sites: the plan sizes every site's noise by the largest site's sensitivity numerator,
    so a small site's noise is larger than its own mechanism's; each part of the report states the plan's tau_s
    (it stated the smaller sigma of the site's own mechanism)."""
    X = clip_rows(np.random.default_rng(0).normal(size=(700, 5)) / 3)[0]
    parts = [X[:100], X[100:300], X[300:700]]
    est = CapePCA(2, 1.0, 1e-5, neighbouring="replace-one", rng=np.random.default_rng(1)).fit(parts)
    plan = est._plan([100, 200, 400], [1.0] * 3, [1e-5] * 3, [1 / 7, 2 / 7, 4 / 7])
    for i, part in enumerate(est.privacy_.parts):
        own = est._mechanism(parts[i].shape[0], 1.0, 1e-5).sigma
        assert part.sigma == pytest.approx(math.sqrt(plan.tau_s2[i]), rel=1e-12) and part.sigma >= own
    assert est.privacy_.parts[0].sigma > est._mechanism(100, 1.0, 1e-5).sigma * (1 + 1e-3)
