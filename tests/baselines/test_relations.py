"""Every plaintext pipeline under add/remove-one and replace-one; the library's rigorous defaults; sklearn's attributes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.decomposition import PCA

from dpdpca import pipelines
from dpdpca.baselines import CapePCA, DPDisPCA, FederatedPCA, ModSulqPCA, NonPrivatePCA, PrivateLocalPCA, SketchPCA
from dpdpca.baselines.release import AddRemoveNoise, moment_from_pieces, scatter_pieces
from dpdpca.data import load_dataset, make_synth_power_law, partition, preprocess
from dpdpca.dp import GeneratorNoiseSource, calibrate_add_remove, gaussian_delta
from dpdpca.errors import ParameterError, UnsupportedSettingError
from dpdpca.metrics import captured_energy_ratio
from dpdpca.result import SUBSPACE
from dpdpca.settings import method_options, refusal, settings_for

P_MIN = 1e-4
#: Plaintext DP pipelines (the protocol runs its own releases, tested in tests/protocol).
PLAINTEXT = [n for n in pipelines.pipeline_names(kind=SUBSPACE, crypto=False, private=True)]
#: Methods with no sound add/remove form, and the words their refusal must contain.
NO_ADD_REMOVE = {"fpca": "consecutive rows"}


@pytest.fixture(scope="module")
def digits():
    X = preprocess(load_dataset("digits").X, centre=False, scaling="clip")
    return X, partition(X, 4)


@pytest.mark.parametrize("relation, reported", [("add-remove", "add/remove-one"), ("replace-one", "replace-one")])
@pytest.mark.parametrize("name", PLAINTEXT)
def test_every_plaintext_pipeline_runs_under_the_relation_asked_or_refuses_it(digits, name, relation, reported):
    _, parts = digits
    spec = pipelines.get_spec(name)
    assert {"neighbouring", "calibration", "sensitivity_mode"} <= set(spec.options)
    est = spec.make(n_components=3, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(0), neighbouring=relation,
                    calibration="analytic", sensitivity_mode="rigorous")
    if relation == "add-remove" and name in NO_ADD_REMOVE:
        with pytest.raises(UnsupportedSettingError, match=f"^neighbouring 'add/remove-one' has no sound form in "
                                                          f"{name}: .*{NO_ADD_REMOVE[name]}.*got 'add-remove'$"):
            est.fit(parts)
        return
    est.fit(parts)
    report = est.privacy_
    assert report.neighbouring == reported
    assert (report.calibration, report.sensitivity_mode) == ("analytic", "rigorous")
    assert report.epsilon == 1.0 and report.delta <= 1e-5
    for part in report.parts:
        assert part.neighbouring == reported


@pytest.mark.parametrize("name", PLAINTEXT)
def test_every_pipeline_receives_the_calibration_the_table_claims(digits, name):
    _, parts = digits
    spec = pipelines.get_spec(name)
    relation = "replace-one" if name in NO_ADD_REMOVE else "add-remove"
    for calibration in ("analytic", "classic"):
        opts, _ = method_options(spec, settings_for(paper=False, calibration=calibration, relation=relation))
        assert opts["calibration"] == calibration and opts["sensitivity_mode"] == "rigorous"
        est = spec.make(n_components=2, epsilon=0.5, delta=1e-5, rng=np.random.default_rng(1), **opts).fit(parts)
        assert est.privacy_.calibration == calibration


def test_the_curator_under_add_remove_is_the_protocols_release(digits):
    X, parts = digits
    d = X.shape[1]
    est = DPDisPCA(5, 1.0, 1e-5, variant="pooled", rng=np.random.default_rng(2)).fit(parts)
    cal = calibrate_add_remove(epsilon=1.0, delta=1e-5, d=d, frac_bits=16)
    assert [p.sigma for p in est.privacy_.parts] == pytest.approx([cal.sigma(b) for b in ("R", "v", "N")], rel=1e-12)
    assert est.privacy_.sensitivity == 1.0 and est.privacy_.neighbouring == "add/remove-one"
    # the whitened Gaussian is (1, delta)-DP with delta <= the request (the calibration never goes below analytic)
    assert gaussian_delta(1.0, 1.0, math.sqrt(2 * cal.rho)) <= 1e-5
    # the sizes are private under add/remove: the result does not carry them
    assert "site_sizes" not in est.result_.params


def _numbers(obj):
    """Every number in a nested dict/list (JSON-like)."""
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _numbers(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _numbers(v)]
    return [obj] if isinstance(obj, (int, float)) and not isinstance(obj, bool) else []


@pytest.mark.parametrize("name", [n for n in PLAINTEXT if n not in NO_ADD_REMOVE])
def test_add_remove_public_outputs_do_not_carry_the_exact_count(name):
    """D and D' = D plus one row are neighbours: nothing public may give N (or a site's N_s) exactly."""
    X = np.random.default_rng(0).normal(size=(401, 6))
    X /= np.linalg.norm(X, axis=1, keepdims=True) * 1.5
    spec = pipelines.get_spec(name)
    sent = []
    for data in (X[:400], X):
        est = spec.make(n_components=2, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(1),
                        neighbouring="add-remove").fit(partition(data, 4))
        res, n = est.result_, len(data)
        assert "n_samples" not in res.extra and "site_sizes" not in res.params
        assert abs(res.extra["n_released"] - n) > 1e-6  # the noisy count (the same seed: only the noise hides N)
        n_attr = float(est.singular_values_[0] ** 2 / est.explained_variance_[0] + 1)
        assert abs(n_attr - n) > 1e-6  # the public attributes are scaled by the noisy count
        assert n not in _numbers({"params": dict(res.params), "extra": dict(res.extra)})
        sent.append(dict(res.bytes_sent))
    assert sent[0] == sent[1]  # traffic reveals no site's size
    if name in ("pooled", "mod-sulq"):
        assert not any(k.startswith("site:") for k in sent[0]) and "trust boundary" in res.extra["upload"]


def test_raw_upload_is_listed_where_the_sizes_are_public():
    X = np.random.default_rng(0).normal(size=(120, 5)) / 3
    parts = partition(X / np.linalg.norm(X, axis=1, keepdims=True).max(), 3)
    for est in (DPDisPCA(2, 1.0, 1e-5, variant="pooled", neighbouring="replace-one"),
                ModSulqPCA(2, 1.0, 1e-5, neighbouring="replace-one")):
        est.set_params(rng=np.random.default_rng(1)).fit(parts)
        assert {k: v for k, v in est.bytes_sent_.items() if k.startswith("site:")} == \
            {f"site:{i}": 8 * p.size for i, p in enumerate(parts, start=1)}
        assert est.result_.extra["n_released"] == 120 and "upload" not in est.result_.extra


def test_add_remove_noise_has_the_calibrated_sigma_per_block():
    d = 6
    noise = AddRemoveNoise.calibrate(epsilon=1.0, delta=1e-5, d=d)
    src = GeneratorNoiseSource(np.random.default_rng(3))
    draws = np.array([noise.draw(src) for _ in range(4000)])
    m = d * (d + 1) // 2
    for block, cols in (("R", slice(0, m)), ("v", slice(m, m + d)), ("N", slice(m + d, m + d + 1))):
        z = draws[:, cols].ravel() / noise.sigma(block)
        stat = float(np.sum(z ** 2))
        assert 2 * min(stats.chi2.cdf(stat, z.size), stats.chi2.sf(stat, z.size)) > P_MIN, block
    # post-processing: the centred moment of exact pieces is the centred second moment
    X = np.random.default_rng(4).normal(size=(50, d)) / 4
    A, n, mean = moment_from_pieces(scatter_pieces(X), d, centred=True)
    np.testing.assert_allclose(A, np.cov(X.T, bias=True), atol=1e-12)
    assert n == 50 and np.allclose(mean, X.mean(axis=0))


def test_cape_under_add_remove_cancels_and_reaches_the_curators_noise(digits):
    _, parts = digits
    est = CapePCA(3, 1.0, 1e-5, keep_noise=True, rng=np.random.default_rng(5)).fit(parts)
    E, G = est.noise_["E"], est.noise_["G"]
    assert np.abs(np.sum(E, axis=0)).max() < 1e-12 * max(np.abs(e).max() for e in E)
    noise = AddRemoveNoise.calibrate(epsilon=1.0, delta=1e-5, d=parts[0].shape[1])
    ratio = np.sum(G, axis=0) / noise.scales()  # the aggregate noise in units of the curator's sigma
    stat = float(np.sum(ratio ** 2))
    assert 2 * min(stats.chi2.cdf(stat, ratio.size), stats.chi2.sf(stat, ratio.size)) > P_MIN
    assert est.privacy_.mechanism == "cape" and est.privacy_.neighbouring == "add/remove-one"
    with pytest.raises(UnsupportedSettingError, match="^weights has no add/remove-one form in capepca"):
        CapePCA(3, 1.0, 1e-5, weights=[0.25] * 4).fit(parts)


def test_paper_sensitivity_and_modsulqs_own_mask_refuse_add_remove(digits):
    _, parts = digits
    with pytest.raises(UnsupportedSettingError, match="^sensitivity_mode 'paper' has no add/remove-one form in pooled"):
        DPDisPCA(3, 1.0, 1e-5, variant="pooled", sensitivity_mode="paper").fit(parts)
    with pytest.raises(UnsupportedSettingError, match="^calibration 'modsulq' of mod-sulq has no add/remove-one form"):
        ModSulqPCA(3, 1.0, 1e-5, calibration="modsulq").fit(parts)
    with pytest.raises(UnsupportedSettingError, match="^sensitivity_mode 'paper' of sketch"):
        SketchPCA(3, 1.0, 1e-5, sensitivity_mode="paper").fit(parts)


@pytest.mark.parametrize("centering", ["none", "site"])
def test_paper_sensitivity_reports_the_delta_its_noise_really_has(digits, centering):
    """Delta = 1/N_s is the papers'; the proven replace-one sensitivity is sqrt(2)/N_s, or 4(N_s-1)/N_s^2 centred."""
    _, parts = digits
    sizes = [p.shape[0] for p in parts]
    paper = dict(neighbouring="replace-one", calibration="classic", sensitivity_mode="paper", centering=centering)
    for est, ns in ((DPDisPCA(3, 1.0, 1e-5, variant="pooled", **paper), [sum(sizes)]),
                    (ModSulqPCA(3, 1.0, 1e-5, **paper), [sum(sizes)]),
                    (CapePCA(3, 1.0, 1e-5, correlated=False, **paper), sizes)):
        est.set_params(rng=np.random.default_rng(0)).fit(parts)
        reports = est.privacy_.parts or (est.privacy_,)
        for rep, n in zip(reports, ns):
            proven = math.sqrt(2) / n if centering == "none" else 4 * (n - 1) / n ** 2
            assert rep.sensitivity == pytest.approx(1 / n) and rep.sensitivity_mode == "paper"
            assert rep.delta == pytest.approx(gaussian_delta(1.0, rep.sigma, proven), rel=1e-6) and rep.delta > 1e-5
            assert f"proven L2 sensitivity {proven:.4g}" in rep.notes
            assert "(the delta at the paper's sensitivity" in rep.notes and "1.000e-05)" in rep.notes
        assert est.privacy_.delta == max(r.delta for r in reports)
    # CAPE: the larger of the release alone and the aggregator's joint view, both at the proven sensitivity
    cape = CapePCA(3, 1.0, 1e-5, cape_variances="paper", rng=np.random.default_rng(0), **paper).fit(parts)
    part = cape.privacy_.parts[0]
    proven = math.sqrt(2) / sizes[0] if centering == "none" else 4 * (sizes[0] - 1) / sizes[0] ** 2
    assert part.delta == pytest.approx(gaussian_delta(1.0, part.sigma, proven * math.sqrt(8 / 5)), rel=1e-6)
    assert "joint view at epsilon=1 and the statistic's proven L2 sensitivity" in part.notes


def test_compare_shows_a_fixed_release_of_another_relation_as_skipped():
    rigorous = settings_for(paper=False)
    assert refusal(pipelines.get_spec("dpdpca"), rigorous) is None
    assert "fixes the centred release" in refusal(pipelines.get_spec("dpdpca-centred"), rigorous)
    replace = settings_for(paper=False, relation="replace-one")
    assert method_options(pipelines.get_spec("dpdpca"), replace)[0]["release"] == "centred"
    assert "fixes the add-remove release" in refusal(pipelines.get_spec("dpdpca-distributed"), replace)
    classic = settings_for(paper=False, calibration="classic")
    assert "no classic form" in refusal(pipelines.get_spec("dpdpca-distributed"), classic)
    assert refusal(pipelines.get_spec("dpdpca-distributed"), rigorous) is None
    with pytest.raises(ParameterError, match="^neighbouring must be one of 'add-remove', 'replace-one'"):
        settings_for(paper=False, relation="swap-one")


# --- the library's defaults are the CLI's ----------------------------------------------------------

@pytest.mark.parametrize("cls", [DPDisPCA, CapePCA, PrivateLocalPCA, ModSulqPCA, SketchPCA, FederatedPCA])
def test_library_defaults_are_rigorous(cls):
    params = cls().get_params()
    assert params["calibration"] == "analytic" and params["sensitivity_mode"] == "rigorous"
    assert params["neighbouring"] == ("replace-one" if cls is FederatedPCA else "add-remove")
    assert params.get("centering", "site") == "site"
    assert NonPrivatePCA().get_params()["centering"] == "pooled"


def test_dpdispca_default_reports_analytic_and_rigorous(digits):
    _, parts = digits
    report = DPDisPCA(n_components=3, epsilon=1, delta=1e-5).fit(parts).privacy_
    assert (report.calibration, report.sensitivity_mode, report.neighbouring) == \
        ("analytic", "rigorous", "add/remove-one")


def test_capepca_defaults_match_sklearn_components_on_digits(digits):
    X, parts = digits
    est = CapePCA(n_components=5, epsilon=1e6, delta=1e-5).fit(parts)
    ref = PCA(5).fit(X)
    cosines = np.abs(np.sum(est.components_ * ref.components_, axis=1))
    assert cosines.min() >= 0.99, cosines


@pytest.mark.parametrize("cls, kw", [(DPDisPCA, {}), (CapePCA, {}), (PrivateLocalPCA, {}), (ModSulqPCA, {}),
                                     (FederatedPCA, {}), (SketchPCA, {}), (NonPrivatePCA, {})])
def test_sklearn_attributes_and_one_array_or_partitions(digits, cls, kw):
    X, parts = digits
    k = 4
    needs_sites = "n_sites" in cls._get_param_names()
    one = cls(k, 1e6, 1e-5, rng=None, **({"n_sites": 4} if needs_sites else {}), **kw).fit(X)
    many = cls(k, 1e6, 1e-5, **kw).fit(parts)
    for est in (one, many):
        assert est.n_components_ == k and est.components_.shape == (k, X.shape[1])
        assert est.singular_values_.shape == est.explained_variance_ratio_.shape == (k,)
        assert np.all(np.isfinite(est.singular_values_))
        if cls is not SketchPCA:  # the sketch releases no total variance: NaN, said in the docs
            assert np.all(np.isfinite(est.explained_variance_ratio_))
    if needs_sites:
        assert one.result_.params["n_sites"] == 4
        with pytest.raises(ParameterError, match=r"^n_sites must be None or the number of partitions given \(4\)"):
            cls(k, 1.0, 1e-5, n_sites=3).fit(parts)


def test_nonprivate_attributes_equal_sklearns(digits):
    X, _ = digits
    ours, ref = NonPrivatePCA(5).fit(X), PCA(5).fit(X)
    np.testing.assert_allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-9)
    np.testing.assert_allclose(ours.singular_values_, ref.singular_values_, rtol=1e-9)
    np.testing.assert_allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-9)


# --- FPCA: Lemma 2's batch size and oversampling ---------------------------------------------------

def test_fpca_auto_block_is_lemma_2s_batch_bounded_by_the_node(digits):
    from dpdpca.baselines.fpca import MIN_AUTO_BLOCK
    from dpdpca.dp.modsulq import min_batch

    X, parts = digits
    d = X.shape[1]
    est = FederatedPCA(3, 2.0, 0.05, rng=np.random.default_rng(6)).fit(parts)
    t = max(MIN_AUTO_BLOCK, min_batch(2.0, 0.05, d, 0.05 / (2 * math.sqrt(d)), calibration="analytic", centred=True))
    assert est.result_.params["block_sizes"] == [min(t, len(p)) for p in parts]
    small = FederatedPCA(3, 50.0, 0.05, rng=np.random.default_rng(6)).fit(parts)
    t_small = min_batch(50.0, 0.05, d, 0.05 / (2 * math.sqrt(d)), calibration="analytic", centred=True)
    assert small.result_.params["block_sizes"] == [max(MIN_AUTO_BLOCK, t_small)] * 4 and t_small < len(parts[0])
    fixed = FederatedPCA(3, 2.0, 0.05, block_size=64, rng=np.random.default_rng(6)).fit(parts)
    assert fixed.result_.params["block_sizes"] == [64] * 4


def test_fpca_without_noise_is_offline_pca_on_digits():
    X = preprocess(load_dataset("digits").X, centre=False, scaling="clip")
    parts = partition(X, 8)
    est = FederatedPCA(5, 1e6, 1e-5, rng=np.random.default_rng(7)).fit(parts)
    assert captured_energy_ratio(est.result_, X, center=True) >= 0.98
    assert est.result_.params["rank"] == 5 + est.oversampling


@pytest.mark.slow
def test_fpca_defaults_find_the_top_direction_of_synth_alpha_1():
    """Grammenos et al. Fig. 3 setting: Synth(alpha = 1), d = 20, N = 5000, delta = 0.05, epsilon = 2, 10 nodes.

    Measured: q_A 0.984 (5 seeds, each >= 0.98); with the former fixed block of 100 rows 0.18.
    """
    Y = make_synth_power_law(5000, 20, 1.0, rng=np.random.default_rng(0))
    Y = Y / float(np.sqrt((Y ** 2).sum(axis=1)).max())
    v1 = np.linalg.eigh(Y.T @ Y)[1][:, -1]
    q = [abs(float(FederatedPCA(1, 2.0, 0.05, rng=np.random.default_rng(s)).fit(partition(Y, 10)).components_[0]
                   @ v1)) for s in range(3)]
    assert np.mean(q) >= 0.8, q
