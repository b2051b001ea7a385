"""The pipeline contract: registry, estimator base, result kinds, shared linear algebra."""

from __future__ import annotations

import inspect
import sys
import types

import numpy as np
import pytest

from dpdpca import driver, linalg, pipelines
from dpdpca.data import clip_rows, make_covariance_data, partition
from dpdpca.dp import PrivacyReport
from dpdpca.errors import DataError, NotFittedError, ParameterError, ParameterTypeError
from dpdpca.estimator import PCAEstimator, TensorEstimator
from dpdpca.result import SUBSPACE, TENSOR_FACTORS, PCAResult, TensorResult

COMMON = {"n_components", "epsilon", "delta", "rng"}
SMALL_KEY = {"key_bits": 768, "insecure_test_key": True}


@pytest.fixture(scope="module")
def X():
    X = make_covariance_data(400, 6, decay=1.5, rng=np.random.default_rng(3))
    X = X - X.mean(axis=0)
    return clip_rows(X / np.linalg.norm(X, axis=1).max())[0]


# --- the ten-line example pipeline of docs/architecture.md ----------------------------------------

class ColumnVariancePCA(PCAEstimator):
    """Example: the k features of largest sample variance (exact, not DP)."""

    def __init__(self, n_components=None, epsilon=1.0, delta=1e-5):
        self.n_components, self.epsilon, self.delta = n_components, epsilon, delta

    def _fit_result(self, partitions):
        X = np.vstack(partitions)
        var = X.var(axis=0, ddof=1)
        top = np.argsort(var)[::-1][: self.n_components]
        return PCAResult(method="column-variance", components=np.eye(X.shape[1])[:, top],
                         eigenvalues=var[top], explained_variance=var[top], privacy=PrivacyReport.non_private())


def test_adding_a_pipeline_is_one_module_and_one_registry_entry(X, monkeypatch):
    module = types.ModuleType("example_pipeline")
    module.ColumnVariancePCA = ColumnVariancePCA
    monkeypatch.setitem(sys.modules, "example_pipeline", module)  # "one module"
    monkeypatch.setattr(pipelines, "PIPELINES", dict(pipelines.PIPELINES))
    monkeypatch.setattr(driver, "METHODS", pipelines.PIPELINES)
    pipelines.register(pipelines.PipelineSpec(  # "one registry entry"
        "column-variance", "example_pipeline:ColumnVariancePCA", "largest-variance features", private=False))
    assert "column-variance" in driver.available_methods()
    res = driver.run("column-variance", partition(X, 3), n_components=2, epsilon=1.0, delta=1e-5)
    assert res.kind == SUBSPACE and res.components.shape == (6, 2)
    summary = driver.compare(["column-variance", "nonprivate"], partition(X, 3), n_components=2, epsilon=1.0,
                             delta=1e-5)
    row = summary["methods"]["column-variance"]
    assert 0 < row["captured_energy_ratio"] <= summary["methods"]["nonprivate"]["captured_energy_ratio"] + 1e-12
    with pytest.raises(ParameterError, match="options of method 'column-variance' must be among \\(none\\)"):
        driver.run("column-variance", [X], n_components=2, epsilon=1.0, delta=1e-5, site=1)
    with pytest.raises(ParameterError, match="name must be not registered yet, got 'column-variance'"):
        pipelines.register(pipelines.PipelineSpec("column-variance", "example_pipeline:ColumnVariancePCA", ""))


# --- the registry describes its estimators truthfully ------------------------------------------------

@pytest.mark.parametrize("name", list(pipelines.PIPELINES))
def test_spec_options_are_exactly_the_estimators_own(name):
    spec = pipelines.get_spec(name)
    cls = spec.load()
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(spec.options) | set(spec.fixed) <= params - COMMON  # every option is a real argument
    # and every argument is reachable through some entry of the same class
    same = [s for s in pipelines.PIPELINES.values() if s.estimator == spec.estimator]
    assert set().union(*(set(s.options) | set(s.fixed) for s in same)) | (COMMON & params) == params
    assert issubclass(cls, TensorEstimator if spec.kind == TENSOR_FACTORS else PCAEstimator)


def test_noise_options_follow_the_spec():
    assert pipelines.get_spec("dpdpca").noisy and not pipelines.get_spec("nonprivate").noisy
    assert pipelines.pipeline_names(crypto=True) == ["dpdpca", "dpdpca-centred", "dpdpca-paper", "dpdpca-distributed"]
    assert pipelines.pipeline_names(private=False) == ["nonprivate", "frequent-directions", "capeagn-nonprivate"]
    assert pipelines.pipeline_names(kind=SUBSPACE, private=False) == ["nonprivate", "frequent-directions"]


# --- one estimator contract, scikit-learn's conventions ----------------------------------------------

#: MOD-SuLQ's omega (Grammenos et al. eqs. (6), (8)) and the sketch's analytic-Gaussian noise shrink only as
#: 1/sqrt(epsilon) for huge epsilon (still ~1e-6 of the signal at 1e9): they are switched off by their option.
NEGLIGIBLE_NOISE = {name: {"private": False} for name in ("fpca", "mod-sulq", "sketch")}


def _estimator(name, k, epsilon):
    extra = SMALL_KEY if pipelines.get_spec(name).crypto else dict(NEGLIGIBLE_NOISE.get(name, {}))
    if "neighbouring" in pipelines.get_spec(name).options:
        # replace-one: its noise at epsilon = 1e9 is below 1e-9 of the signal (under add/remove the noisy count
        # and sum add a little more; the defaults are tested in tests/baselines/test_relations.py)
        extra["neighbouring"] = "replace-one"
    if pipelines.get_spec(name).noisy and not pipelines.get_spec(name).crypto:
        extra["calibration"] = "classic"  # its sigma falls as 1/epsilon (the analytic one as 1/sqrt(epsilon))
    if "centering" in pipelines.get_spec(name).options and pipelines.get_spec(name).private:
        extra["centering"] = "none"  # X is centred; sites centring on their own means is tested below
    rng = np.random.default_rng(0)
    return pipelines.get_spec(name).make(n_components=k, epsilon=epsilon, delta=1e-5, rng=rng, **extra)


@pytest.mark.parametrize("name", pipelines.pipeline_names(kind=SUBSPACE))
def test_transform_agrees_with_sklearn_pca_when_noise_is_negligible(X, name):
    """``components_`` is (k, d) and ``transform`` matches ``sklearn.decomposition.PCA`` up to sign.

    DP is switched off in effect by a huge epsilon (noise below 1e-9 of the
    signal); the protocol's fixed-point rows (2^-16) bound its agreement.
    The data are centred, since no pipeline releases a mean (``mean_`` is 0).
    """
    from sklearn.decomposition import PCA

    k = 3
    est = _estimator(name, k, epsilon=1e9)
    parts = partition(X, 2) if name in ("capepca", "conv") else X  # capePCA needs two sites
    assert est.fit(parts) is est
    assert est.components_.shape == (k, X.shape[1]) and est.mean_.shape == (X.shape[1],)
    ref = PCA(k).fit(X)
    ours, theirs = est.transform(X), ref.transform(X)
    signs = np.sign(np.sum(ours * theirs, axis=0))
    tol = 1e-3 if pipelines.get_spec(name).crypto else 1e-6
    np.testing.assert_allclose(ours * signs, theirs, atol=tol)
    np.testing.assert_allclose(est.explained_variance_, ref.explained_variance_, rtol=10 * tol)
    # the sign rule: the largest-magnitude entry of every component is positive
    assert np.all(est.components_[np.arange(k), np.abs(est.components_).argmax(axis=1)] > 0)


@pytest.mark.parametrize("name", [n for n in pipelines.pipeline_names(kind=SUBSPACE)
                                  if "centering" in pipelines.get_spec(n).options])
def test_centring_inside_the_pipeline_matches_sklearn_on_uncentred_data(X, name):
    """Uncentred rows: a pipeline that centres itself finds scikit-learn's components (and, when it
    releases the mean, its transform).  Distributed sites centre with their own means, so the two sites
    here share one mean (the second is the first reflected through it)."""
    from sklearn.decomposition import PCA

    Y = 0.4 * X + 0.2 / np.sqrt(X.shape[1])  # shifted; norms stay <= 1, reflected rows too
    spec = pipelines.get_spec(name)
    two_sites = name in ("capepca", "conv", "nonprivate")
    parts = [Y[:200], 2 * Y[:200].mean(axis=0) - Y[:200]] if two_sites else [Y]
    Y = np.vstack(parts)
    assert np.linalg.norm(Y, axis=1).max() <= 1
    centering = "pooled" if not spec.private else "site"
    kw = {"sensitivity_mode": "rigorous"} if spec.noisy else {}
    if "neighbouring" in spec.options:
        kw["neighbouring"] = "replace-one"  # the sensitivity checked below is replace-one's
    if "calibration" in spec.options:
        kw["calibration"] = "classic"  # negligible noise at epsilon = 1e9 (the analytic sigma falls as 1/sqrt)
    if name == "fpca":
        kw["block_size"] = len(parts[0])  # one block per node: centred on the node's mean
    est = spec.make(n_components=3, epsilon=1e9, delta=1e-5, rng=np.random.default_rng(0), centering=centering, **kw)
    est.fit(parts)
    ref = PCA(3).fit(Y)
    signs = np.sign(np.sum(est.components_ * ref.components_, axis=1))
    np.testing.assert_allclose(est.components_ * signs[:, None], ref.components_, atol=1e-6)
    if not spec.private:  # the non-private reference releases the exact pooled mean
        np.testing.assert_allclose(est.mean_, ref.mean_, atol=1e-12)
        np.testing.assert_allclose(est.transform(Y) * signs, ref.transform(Y), atol=1e-8)
    else:  # no mean is released, the centring was paid inside the release at its own sensitivity
        np.testing.assert_array_equal(est.mean_, 0.0)
        n = len(parts[0])  # rows per site
        assert est.privacy_.sensitivity == pytest.approx(4 * (n - 1) / n**2)


@pytest.mark.parametrize("name", pipelines.pipeline_names(kind=SUBSPACE))
def test_one_not_fitted_error_and_sklearn_params(name):
    est = _estimator(name, 2, epsilon=1.0)
    with pytest.raises(NotFittedError, match=f"{type(est).__name__} must be fitted before use"):
        est.transform(np.zeros((2, 6)))
    assert isinstance(NotFittedError("x"), (ValueError, AttributeError))
    params = est.get_params()
    assert params["n_components"] == 2 and est.set_params(n_components=3) is est
    assert est.get_params()["n_components"] == 3
    with pytest.raises(ParameterError, match="parameter must be one of .* got 'n_component'"):
        est.set_params(n_component=1)
    assert repr(est).startswith(type(est).__name__ + "(n_components=3")


def test_fit_accepts_one_matrix_as_one_site(X):
    from dpdpca.baselines import NonPrivatePCA

    a = NonPrivatePCA(n_components=2).fit(X)
    b = NonPrivatePCA(n_components=2).fit([X])
    np.testing.assert_array_equal(a.components_, b.components_)
    assert NonPrivatePCA().fit(X).components_.shape == (6, 6)  # n_components=None keeps every feature
    Z = a.fit_transform(partition(X, 3))
    np.testing.assert_allclose(a.inverse_transform(Z) @ a.components_.T, Z, atol=1e-12)


# --- a result kind that is not a subspace ------------------------------------------------------------

class SiteMeans(TensorEstimator):
    """Toy tensor-kind pipeline: each site's mean is one factor, weights by site size (not DP)."""

    def __init__(self, n_components=None, epsilon=1.0, delta=1e-5):
        self.n_components, self.epsilon, self.delta = n_components, epsilon, delta

    def _fit_result(self, partitions):
        means = np.array([np.mean(p, axis=0) for p in partitions])
        sizes = np.array([len(p) for p in partitions], dtype=float)
        return TensorResult(method="site-means", weights=sizes / sizes.sum(), means=means,
                            privacy=PrivacyReport.non_private())


def test_tensor_factors_fit_the_driver_without_special_cases(monkeypatch):
    module = types.ModuleType("toy_tensor")
    module.SiteMeans = SiteMeans
    monkeypatch.setitem(sys.modules, "toy_tensor", module)
    monkeypatch.setattr(pipelines, "PIPELINES", dict(pipelines.PIPELINES))
    monkeypatch.setattr(driver, "METHODS", pipelines.PIPELINES)
    pipelines.register(pipelines.PipelineSpec("site-means", "toy_tensor:SiteMeans", "", kind=TENSOR_FACTORS,
                                              private=False))
    rng = np.random.default_rng(1)
    truth = np.array([[0.5, 0.0, 0.0], [0.0, 0.5, 0.0]])
    parts = [truth[i] + 0.01 * rng.normal(size=(200, 3)) for i in range(2)]
    est = pipelines.get_spec("site-means").make(n_components=2, epsilon=1.0, delta=1e-5).fit(parts)
    assert est.means_.shape == (2, 3) and est.weights_.sum() == pytest.approx(1.0)
    summary = driver.compare(["site-means"], parts, n_components=2, epsilon=1.0, delta=1e-5, truth=truth)
    row = summary["methods"]["site-means"]
    assert row["kind"] == TENSOR_FACTORS and 0 < row["q_comp"] < 0.01
    assert summary["q_optimal"] is None  # no subspace method ran
    with pytest.raises(ParameterError, match="truth must be the true factors"):
        driver.compare(["site-means"], parts, n_components=2, epsilon=1.0, delta=1e-5)
    assert est.result_.to_dict()["means_shape"] == [2, 3]


# --- shared linear algebra ---------------------------------------------------------------------------

def test_sign_rule_makes_eigenvectors_deterministic():
    rng = np.random.default_rng(4)
    B = rng.normal(size=(7, 7))
    M = B + B.T
    w, V = linalg.top_eigenpairs(M, 3)
    w_all, V_all = np.linalg.eigh(M)
    np.testing.assert_allclose(w, w_all[::-1][:3])
    for j in range(3):
        assert abs(abs(V[:, j] @ V_all[:, ::-1][:, j]) - 1) < 1e-10
        assert V[np.abs(V[:, j]).argmax(), j] > 0
    np.testing.assert_allclose(linalg.flip_signs(-V), V)
    _, V_full = linalg.top_eigenpairs(M, 7)  # the full-eigh path follows the same rule
    np.testing.assert_allclose(V_full[:, :3], V, atol=1e-10)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_triangle_pack_round_trip(d):
    rng = np.random.default_rng(d)
    B = rng.integers(-9, 9, size=(d, d))
    M = B + B.T
    packed = linalg.pack_upper(M)
    assert packed.shape == (linalg.upper_triangle_size(d),)
    np.testing.assert_array_equal(packed, M[np.triu_indices(d)])
    np.testing.assert_array_equal(linalg.unpack_upper(packed, d), M)
    big = np.array([[2**80, 3], [3, -(2**70)]], dtype=object)  # object arrays of Python ints stay exact
    assert linalg.unpack_upper(linalg.pack_upper(big), 2)[0, 0] == 2**80
    with pytest.raises(DataError, match="must be square"):
        linalg.pack_upper(np.zeros((2, 3)))


def test_second_moment_is_one_function(X):
    from dpdpca import metrics

    np.testing.assert_allclose(linalg.second_moment(X), X.T @ X / len(X))
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(metrics.second_moment(X, center=True), Xc.T @ Xc)
    np.testing.assert_allclose(metrics.second_moment(X), linalg.second_moment(X))


@pytest.mark.parametrize("name", pipelines.pipeline_names(kind=SUBSPACE, private=True))
def test_a_wrong_type_is_a_type_error_and_a_wrong_value_a_value_error(X, name):
    with pytest.raises(ParameterTypeError, match="epsilon must be a real number, got '1'"):
        _estimator(name, 2, epsilon="1").fit(X)
    with pytest.raises(ParameterError, match="epsilon must be > 0, got -1.0"):
        _estimator(name, 2, epsilon=-1.0).fit(X)
    assert issubclass(ParameterTypeError, TypeError) and not issubclass(ParameterTypeError, ValueError)
