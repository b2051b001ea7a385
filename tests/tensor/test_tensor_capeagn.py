"""capeAGN: CAPE tensor noise, privacy accounting, the method ordering, validation and the CLI."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from dpdpca.baselines.tensor import CapeAGN, make_mog, make_stm, sample_partitions, site_moments
from dpdpca.baselines.tensor.experiment import run_experiment
from dpdpca.baselines.tensor.moments import SiteMoments
from dpdpca.cli import main
from dpdpca.dp import (JOINT_SLACK, CapeNoisePlan, calibrate_gaussian, gaussian_delta, entries_from_symmetric_tensor,
                       tensor_moment_sensitivity)
from dpdpca.dp.noise import symmetric_tensor_size
from dpdpca.errors import ParameterError

P_MIN = 1e-4  # fixed significance of the statistical tests


def _all_transposes_equal(t: np.ndarray) -> bool:
    return all(np.array_equal(t, np.transpose(t, p)) for p in itertools.permutations(range(3)))


def test_cape_tensor_terms_are_exactly_symmetric_and_e_terms_cancel_exactly():
    plan = CapeNoisePlan.equal(n_sites=5, tau_s=0.7)
    rng = np.random.default_rng(0)
    e = plan.noise_generator_terms((6, 6, 6), symmetric=True, rng=rng)
    f = plan.aggregator_terms((6, 6, 6), symmetric=True, rng=rng)
    g = [plan.site_term(i, (6, 6, 6), symmetric=True, rng=rng) for i in range(5)]
    for t in e + f + g:
        assert t.shape == (6, 6, 6) and _all_transposes_equal(t)
    total = np.zeros((6, 6, 6))
    for t in e:
        total += t
    assert np.array_equal(total, np.zeros((6, 6, 6)))               # exactly 0, forwards
    assert np.array_equal(sum(reversed(e)), np.zeros((6, 6, 6)))     # and in another order
    assert not np.array_equal(e[0], np.zeros((6, 6, 6)))
    # the aggregate sum_s mu_s (release_s - F_s) is the data plus sum_s mu_s G_s (up to float rounding)
    stats_ = [rng.normal(size=(6, 6, 6)) for _ in range(5)]
    releases = [x + e[i] + f[i] + g[i] for i, x in enumerate(stats_)]
    expected = sum(0.2 * (x + gi) for x, gi in zip(stats_, g))
    assert np.allclose(plan.aggregate(releases, f), expected, rtol=0, atol=1e-12)


def test_cape_tensor_noise_has_the_pooled_variance():
    """KS and variance tests on the distinct entries of sum_s mu_s (E_s + G_s): N(0, tau_s^2 / S^2)."""
    s, tau_s, d = 5, 2.0, 12
    plan = CapeNoisePlan.equal(n_sites=s, tau_s=tau_s)
    rng = np.random.default_rng(1)
    draws = []
    for _ in range(100):
        e = plan.noise_generator_terms((d, d, d), symmetric=True, rng=rng)
        g = [plan.site_term(i, (d, d, d), symmetric=True, rng=rng) for i in range(s)]
        draws.append(entries_from_symmetric_tensor(sum((ei + gi) / s for ei, gi in zip(e, g))))
    z = np.concatenate(draws) / (tau_s / s)
    assert z.size == 100 * symmetric_tensor_size(d) == 36_400
    assert stats.kstest(z, "norm").pvalue > P_MIN
    chi2 = float(np.sum(z ** 2))  # a 5% sigma error moves this by ~13 standard deviations
    assert stats.chi2.sf(chi2, z.size) > P_MIN / 2 and stats.chi2.cdf(chi2, z.size) > P_MIN / 2
    # each site's protecting noise E_s + G_s alone has the local variance tau_s^2
    one = np.concatenate([entries_from_symmetric_tensor(
        plan.noise_generator_terms((d, d, d), symmetric=True, rng=rng)[0]
        + plan.site_term(0, (d, d, d), symmetric=True, rng=rng)) for _ in range(100)]) / tau_s
    assert stats.kstest(one, "norm").pvalue > P_MIN


def _zero_moments(d: int, n: int, sites: int) -> list[SiteMoments]:
    return [SiteMoments(np.eye(d), np.zeros((d, d, d)), n) for _ in range(sites)]


def test_privacy_report_splits_the_budget_and_states_the_sensitivities():
    d, n = 6, 1000
    est = CapeAGN(3, epsilon=1.2, delta=1e-3, noise_variance=0.05, budget_split=0.25,
                  rng=np.random.default_rng(2), random_state=np.random.default_rng(3))
    est.fit_moments(_zero_moments(d, n, 4), scale=2.0, scaled_noise_variance=0.0125)
    rep = est.privacy_
    assert rep.epsilon == pytest.approx(1.2) and rep.delta == pytest.approx(1e-3)
    m2, m3 = rep.parts
    assert (m2.epsilon, m2.delta) == pytest.approx((0.3, 2.5e-4))
    assert (m3.epsilon, m3.delta) == pytest.approx((0.9, 7.5e-4))
    assert m2.mechanism == m3.mechanism == "cape" and m2.neighbouring == "replace-one"
    assert m2.sensitivity == pytest.approx(math.sqrt(2) / n)
    assert m3.sensitivity == pytest.approx(
        tensor_moment_sensitivity(n, model="mog", order=3, dimension=d, noise_variance=0.0125))
    assert m3.sensitivity == pytest.approx((2 + 2 * math.sqrt(d + 8) * 0.0125) / n)
    tau = calibrate_gaussian(epsilon=0.3, delta=2.5e-4, sensitivity=math.sqrt(2) / n)
    assert m2.sigma == pytest.approx(tau)
    # the pooled level tau^2/S^2, times 1 + eta for the rigorous (joint-view) variances
    assert est.noise_variances_["m2"]["aggregate_variance"] == pytest.approx(tau ** 2 / 16 * (1 + JOINT_SLACK))
    paper = CapeAGN(3, epsilon=1.2, delta=1e-3, noise_variance=0.05, sensitivity_mode="paper",
                    calibration="classic", rng=np.random.default_rng(2))
    paper.fit_moments(_zero_moments(d, n, 4), scale=2.0, scaled_noise_variance=0.0125)
    assert paper.privacy_.parts[0].sensitivity == pytest.approx(1 / n)
    assert paper.privacy_.parts[1].sensitivity == pytest.approx((2 + 6 * d * 0.0125) / n)
    assert paper.privacy_.parts[0].sensitivity_mode == "paper"


def test_conv_noise_is_the_local_level_and_the_aggregate_is_s_times_noisier():
    d, n, s = 5, 500, 5
    cape = CapeAGN(2, epsilon=1.0, delta=0.01, noise_variance=0.05, rng=np.random.default_rng(4))
    conv = CapeAGN(2, epsilon=1.0, delta=0.01, noise_variance=0.05, variant="conv",
                   rng=np.random.default_rng(4))
    for est in (cape, conv):
        est.fit_moments(_zero_moments(d, n, s), scale=1.0, scaled_noise_variance=0.01)
    for stage in ("m2", "m3"):
        assert conv.noise_variances_[stage]["aggregate_variance"] == pytest.approx(
            s * cape.noise_variances_[stage]["aggregate_variance"] / (1 + JOINT_SLACK))
    assert conv.privacy_.parts[0].mechanism == "gaussian" and conv.privacy_.parts[0].noise_added_by == "site"


def test_stm_fit_returns_probability_vectors():
    rng = np.random.default_rng(5)
    stm = make_stm(8, 3, rng=rng)
    parts = sample_partitions(stm, 3, 3000, rng)
    est = CapeAGN(3, epsilon=2.0, delta=0.01, model="stm", n_features=8, rng=rng, random_state=rng).fit(parts)
    assert est.means_.shape == (3, 8) and np.allclose(est.means_.sum(axis=1), 1.0) and np.all(est.means_ >= 0)
    assert est.weights_.shape == (3,) and est.whitening_.shape == (8, 3)
    assert est.projected_tensor_.shape == (3, 3, 3)


def test_inputs_are_not_mutated():
    rng = np.random.default_rng(6)
    mog = make_mog(5, 2, rng=rng)
    parts = sample_partitions(mog, 2, 200, rng)
    copies = [p.copy() for p in parts]
    CapeAGN(2, epsilon=1.0, delta=0.01, noise_variance=0.05, rng=rng).fit(parts)
    assert all(np.array_equal(a, b) for a, b in zip(parts, copies))


def test_capeagn_beats_conv_beats_local_on_average():
    """Fixed experiment seed, 6 runs: the paper's ordering at a moderate epsilon."""
    out = run_experiment(model="mog", n_features=8, n_components=3, n_sites=5, samples_per_site=3000,
                         epsilons=[1.0], delta=0.01, runs=6, seed=12)
    q = {m: v["q_comp"][0] for m, v in out["methods"].items()}
    assert q["nonprivate"] < q["capeagn"] < q["conv"] < q["local"]
    assert q["local"] < q["random"] * 1.5
    assert out["privacy"]["capeagn"]["mechanism"] == "composition"


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mog", "stm"])
def test_errors_fall_as_epsilon_and_samples_grow(model):
    kw = dict(model=model, n_features=8, n_components=3, n_sites=5, delta=0.01, runs=8, seed=3)
    by_eps = run_experiment(samples_per_site=2000, epsilons=[0.2, 1.0, 5.0], **kw)["methods"]
    for name in ("capeagn", "conv"):
        q = by_eps[name]["q_comp"]
        assert q[0] > q[1] > q[2], (name, q)
    small = run_experiment(samples_per_site=1000, epsilons=[1.0], **kw)["methods"]
    large = run_experiment(samples_per_site=20000, epsilons=[1.0], **kw)["methods"]
    for name in ("capeagn", "conv", "local"):
        assert large[name]["q_comp"][0] < small[name]["q_comp"][0], name
    assert by_eps["capeagn"]["q_comp"][1] < by_eps["conv"]["q_comp"][1] < by_eps["local"]["q_comp"][1]


@pytest.mark.parametrize("kwargs,message", [
    (dict(epsilon=0.0), r"^epsilon must be > 0, got 0.0$"),
    (dict(epsilon=float("nan")), r"^epsilon must be finite"),
    (dict(delta=1.0), r"^delta must be in \(0, 1\), got 1.0$"),
    (dict(delta=0), r"^delta must be in \(0, 1\), got 0$"),
    (dict(budget_split=1.0), r"^budget_split must be in \(0, 1\), got 1.0$"),
    (dict(n_components=6), r"^n_components must be <= n_features = 5"),
    (dict(sensitivity_mode="loose"), r"^sensitivity_mode must be"),
    (dict(calibration="renyi"), r"^calibration must be 'analytic' or 'classic', got 'renyi'$"),
    (dict(rng=7), r"^rng must be None \(OS entropy\) or an explicit numpy.random.Generator"),
    (dict(random_state=7), r"^random_state must be None or a numpy.random.Generator"),
    (dict(variant="pooled"), r"^variant must be 'capeagn', 'conv' or 'local', got 'pooled'$"),
])
def test_estimator_validation(kwargs, message):
    params = dict(n_components=2, epsilon=1.0, delta=0.01, noise_variance=0.05)
    params.update(kwargs)
    parts = [np.zeros((10, 5)), np.zeros((10, 5))]
    with pytest.raises(ParameterError, match=message):
        CapeAGN(**params).fit(parts)


def test_cape_needs_two_sites_and_local_uses_one():
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(50, 4)) * 0.1]
    with pytest.raises(ParameterError, match=r"^partitions must be >= 2 sites for CAPE"):
        CapeAGN(2, epsilon=1.0, delta=0.01, noise_variance=0.05).fit(parts)
    two = parts + [rng.normal(size=(80, 4)) * 0.1]
    local = CapeAGN(2, epsilon=1.0, delta=0.01, noise_variance=0.05, variant="local", site=1).fit(two)
    assert local.means_.shape == (2, 4) and local.privacy_.epsilon == pytest.approx(1.0)
    assert local.result_.extra["n_samples"] == [80] and local.result_.method == "capeagn-local"
    with pytest.raises(ParameterError, match=r"^site must be <= 1, got 2$"):
        CapeAGN(2, epsilon=1.0, delta=0.01, noise_variance=0.05, variant="local", site=2).fit(two)


def test_registered_pipelines_run_through_the_driver():
    from dpdpca import driver, pipelines
    from dpdpca.result import TENSOR_FACTORS

    assert pipelines.pipeline_names(kind=TENSOR_FACTORS) == ["capeagn", "capeagn-conv", "capeagn-local",
                                                             "capeagn-nonprivate"]
    rng = np.random.default_rng(9)
    mog = make_mog(6, 2, rng=rng)
    parts = sample_partitions(mog, 3, 4000, rng)
    res = driver.run("capeagn", parts, n_components=2, epsilon=2.0, delta=0.01, rng=rng, noise_variance=0.05,
                     random_state=rng)
    assert res.kind == TENSOR_FACTORS and res.method == "capeagn" and res.means.shape == (2, 6)
    name, value = driver.score(res, truth=mog.means)
    assert name == "q_comp" and 0 <= value < 0.5
    est = pipelines.get_spec("capeagn-conv").make(n_components=2, epsilon=1.0, delta=0.01, noise_variance=0.05)
    assert est.variant == "conv" and est.get_params()["budget_split"] == 0.5
    with pytest.raises(Exception, match="must be fitted"):
        from dpdpca.estimator import check_is_fitted

        check_is_fitted(est)


def test_cli_json_shape(capsys):
    code = main(["tensor", "--model", "stm", "--dim", "6", "--components", "2", "--sites", "3",
                 "--samples-per-site", "500", "--epsilon", "1", "--delta", "0.01", "--runs", "2", "--seed", "0",
                 "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["methods"]) == {"capeagn", "conv", "local", "nonprivate", "random"}
    for v in out["methods"].values():
        assert isinstance(v["q_comp"], float) and len(v["q_comp_runs"]) == 2
    assert out["privacy"]["capeagn"]["epsilon"] == pytest.approx(1.0)
    assert out["settings"]["stage_budgets"] == {"m2": [0.5, 0.005], "m3": [0.5, 0.005]}


def test_cli_cape_variances_selects_the_papers_for_reproduction(capsys):
    """--cape-variances paper reproduces the paper's capeAGN: its report carries the delta the paper's variances
    really give against the aggregator's joint view (more than asked); the default is the rigorous variances."""
    base = ["tensor", "--model", "mog", "--dim", "6", "--components", "2", "--sites", "4", "--samples-per-site",
            "300", "--epsilon", "1", "--delta", "0.01", "--runs", "1", "--seed", "0", "--json"]
    reports = {}
    for variances in ("rigorous", "paper"):
        assert main([*base, "--cape-variances", variances]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["settings"]["cape_variances"] == variances
        reports[variances] = out["privacy"]["capeagn"]
    assert reports["rigorous"]["delta"] == pytest.approx(0.01)
    assert reports["paper"]["delta"] > 0.01 and reports["paper"]["epsilon"] == pytest.approx(1.0)
    assert main([*base[:-1], "--cape-variances", "other"]) == 2


@pytest.mark.parametrize("args,message", [  # each names the option typed, never the library's parameter
    (["--model", "mog", "--dim", "4", "--components", "5"], "--components must be <= n_features = 4"),
    (["--model", "stm", "--dim", "6", "--components", "2", "--words-per-document", "2"],
     "--words-per-document must be >= 3, got 2"),
    (["--model", "mog", "--dim", "6", "--components", "2", "--epsilon", "-1"], "--epsilon must be > 0, got -1.0"),
    (["--model", "mog", "--dim", "6", "--components", "2", "--delta", "1.5"], r"--delta must be in (0, 1), got 1.5"),
    (["--model", "mog", "--dim", "6", "--components", "2", "--sites", "1"], "--sites must be >= 2, got 1"),
    (["--model", "mog", "--dim", "0", "--components", "2"], "--dim must be >= 1, got 0"),
    (["--model", "mog", "--dim", "6", "--components", "2", "--epsilon", "1e308"],
     "--epsilon must be in [1e-06, 1e+09], got 1e+308"),
    (["--model", "mog", "--dim", "6", "--components", "2", "--runs", "10001"], "--runs must be <= 10000, got 10001"),
    # refused before allocating, naming the setting (were numpy's _ArrayMemoryError, or a run that grew until
    # killed)
    (["--model", "mog", "--dim", "4", "--components", "2", "--sites", "2", "--samples-per-site", "10000000000"],
     "--samples-per-site must be small enough that one run fits in memory"),
    (["--model", "stm", "--dim", "4", "--components", "2", "--sites", "2", "--words-per-document", "100000000000"],
     "--words-per-document must be small enough that one run fits in memory"),
    (["--model", "mog", "--dim", "100000", "--components", "2"], "--dim must be small enough that one run"),
    (["--model", "mog", "--dim", "4", "--components", "2", "--sites", "1000000000"],
     "--sites must be small enough that one run fits in memory"),
])
def test_cli_errors_are_one_line(args, message, capsys):
    base = ["tensor", "--samples-per-site", "100", "--runs", "1"]
    if "--epsilon" not in args:
        base += ["--epsilon", "1"]
    assert main(base + args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"dpdpca: error: {message}") and captured.err.count("\n") == 1


def test_cli_refuses_a_negative_seed(capsys):
    """--seed -1 was numpy's ValueError traceback: click's range check now (exit 2, the option named)."""
    assert main(["tensor", "--model", "mog", "--dim", "4", "--components", "2", "--samples-per-site", "10",
                 "--epsilon", "1", "--runs", "1", "--seed", "-1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("dpdpca: error: Invalid value for '--seed': -1 is not in the "
                                                    "range x>=0. (see 'dpdpca "), err


@pytest.mark.parametrize("name", ["dpdpca.baselines.tensor.capeagn", "dpdpca.baselines.tensor.models",
                                  "dpdpca.metrics"])
def test_docstring_examples(name):
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS).failed == 0


def test_site_moments_reports_the_public_scale():
    rng = np.random.default_rng(8)
    mog = make_mog(6, 2, rng=rng)
    moments, scale, s2 = site_moments(sample_partitions(mog, 2, 100, rng), model="mog", n_components=2,
                                      noise_variance=0.05)
    assert scale == pytest.approx(math.sqrt(1 + 6 * 0.05) + 3 * math.sqrt(0.05))
    assert s2 == pytest.approx(0.05 / scale ** 2) and [m.n_samples for m in moments] == [100, 100]


def test_unequal_sites_use_size_weights_and_per_site_reports():
    rng = np.random.default_rng(10)
    mog = make_mog(5, 2, rng=rng)
    parts = [sample_partitions(mog, 1, n, rng)[0] for n in (500, 1000, 2000)]
    est = CapeAGN(2, epsilon=1.0, delta=0.01, noise_variance=0.05, rng=rng, random_state=rng).fit(parts)
    m2_report = est.privacy_.parts[0]
    assert [p.sensitivity for p in m2_report.parts] == pytest.approx([math.sqrt(2) / n for n in (500, 1000, 2000)])
    # the pooled level: tau_c = calibrate(Delta / N), i.e. site 3's tau_s^2 times (N_3 / N)^2
    variances = est.noise_variances_["m2"]
    assert variances["aggregate_variance"] == pytest.approx(
        variances["site_tau2"][2] * (2000 / 3500) ** 2 * (1 + JOINT_SLACK))
    assert est.means_.shape == (2, 5)


def test_stages_are_private_against_the_aggregators_joint_view():
    d, n, s, eps, delta = 5, 800, 4, 1.0, 1e-4
    est = CapeAGN(2, epsilon=eps, delta=delta, noise_variance=0.05, rng=np.random.default_rng(4))
    est.fit_moments(_zero_moments(d, n, s), scale=1.0, scaled_noise_variance=0.01)
    assert (est.privacy_.epsilon, est.privacy_.delta) == pytest.approx((eps, delta))
    for stage in est.privacy_.parts:
        assert "DP against the aggregator's joint view" in stage.notes and "sites that do not collude" in stage.notes
    paper = CapeAGN(2, epsilon=eps, delta=delta, noise_variance=0.05, cape_variances="paper",
                    rng=np.random.default_rng(4))
    paper.fit_moments(_zero_moments(d, n, s), scale=1.0, scaled_noise_variance=0.01)
    m2 = paper.privacy_.parts[0]
    c = calibrate_gaussian(epsilon=eps / 2, delta=delta / 2, sensitivity=1.0)
    assert m2.delta == pytest.approx(gaussian_delta(eps / 2, c, math.sqrt(2 * s / (s + 1))), rel=1e-6)
    assert m2.delta > 5 * delta / 2 and "per-release claim" in m2.notes
    assert paper.privacy_.delta == pytest.approx(sum(p.delta for p in paper.privacy_.parts))
    assert est.noise_variances_["m2"]["aggregate_variance"] == pytest.approx(
        (1 + JOINT_SLACK) * paper.noise_variances_["m2"]["aggregate_variance"])
    with pytest.raises(ParameterError, match=r"^cape_variances must be 'rigorous' or 'paper', got 'x'$"):
        CapeAGN(2, epsilon=eps, delta=delta, noise_variance=0.05, cape_variances="x").fit_moments(
            _zero_moments(d, n, s), scale=1.0, scaled_noise_variance=0.01)
