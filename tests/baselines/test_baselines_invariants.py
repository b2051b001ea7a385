"""Exact invariants of the pipelines: CAPE cancellation, Alg. 1 and the sequential recursion, reports."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats

from dpdpca.baselines import CapePCA as _CapePCA
from dpdpca.baselines import DPDisPCA as _DPDisPCA
from dpdpca.baselines import NonPrivatePCA
from dpdpca.baselines import PrivateLocalPCA as _PrivateLocalPCA
from dpdpca.baselines._common import partial_square_root, site_eigh_dtype
from dpdpca.linalg import top_eigenpairs
from dpdpca.data import make_covariance_data
from dpdpca.dp import GeneratorNoiseSource, calibrate_gaussian, gaussian_delta, symmetric_gaussian_matrix
from dpdpca.errors import DataError, InfeasibleError, NotFittedError, ParameterError
from dpdpca.metrics import subspace_distance

K = 8
#: These invariants are the papers' replace-one mechanics (eq. (2), Alg. 1, the recursion), so they run under the
#: papers' setting; the library's defaults (add/remove, rigorous, analytic, centred) are tested in test_relations.py.
PAPER = dict(neighbouring="replace-one", centering="none", calibration="classic", sensitivity_mode="paper")
#: ... with the paper's CAPE variances (eq. (2) as printed); the rigorous ones are tested in test_cape_joint.py.
CapePCA = functools.partial(_CapePCA, **PAPER, cape_variances="paper")
DPDisPCA = functools.partial(_DPDisPCA, **PAPER)
PrivateLocalPCA = functools.partial(_PrivateLocalPCA, **PAPER)


def moments(parts):
    return [X.T @ X / X.shape[0] for X in parts]


def classic_sigma(n, eps, delta, numerator=1.0):
    return numerator / n * math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_cape_noise_cancels_exactly(sites500):
    X, parts = sites500
    est = CapePCA(K, 0.5, 1e-5, keep_noise=True, rng=np.random.default_rng(3)).fit(parts)
    E, F, G = est.noise_["E"], est.noise_["F"], est.noise_["G"]
    S, d = len(parts), X.shape[1]
    assert len(E) == len(F) == len(G) == S
    total_E = np.zeros((d, d))
    for e in E:
        total_E += e
    assert np.array_equal(total_E, np.zeros((d, d)))  # exactly zero, not approximately
    assert all(np.array_equal(m, m.T) for m in E + F + G)
    mean_A = sum(moments(parts)) / S
    noise = est.aggregate_ - mean_A
    np.testing.assert_allclose(noise, sum(G) / S, rtol=0, atol=1e-15)
    # the F_s were really there: a site's release differs from A_s + E_s + G_s by F_s, which is big
    # (expected std ratio sqrt(1 - 1/S) * S = 9.5; each std estimate from 820 entries is within ~10%)
    iu = np.triu_indices(d)
    assert F[0][iu].std() > 6 * noise[iu].std()


def test_cape_term_variances_follow_eq2(sites500):
    X, parts = sites500
    S, N_s = len(parts), parts[0].shape[0]
    eps, delta = 0.5, 1e-5
    est = CapePCA(K, eps, delta, keep_noise=True, rng=np.random.default_rng(4)).fit(parts)
    tau2 = classic_sigma(N_s, eps, delta) ** 2
    iu = np.triu_indices(X.shape[1])
    for name, var in (("E", (1 - 1 / S) * tau2), ("F", (1 - 1 / S) * tau2), ("G", tau2 / S)):
        # E_1..E_{S-1} are independent; E_S closes the sum, so test the first S-1
        z = np.concatenate([m[iu] for m in est.noise_[name][:S - 1]]) / math.sqrt(var)
        assert stats.kstest(z, "norm").pvalue > 1e-4, name
    assert est.result_.extra["aggregator_noise_variance"] == pytest.approx(tau2 / S ** 2, rel=1e-12)
    assert est.result_.extra["cape_gain"] == pytest.approx(S, rel=1e-12)


def test_cape_reaches_the_pooled_noise_level(sites500):
    _, parts = sites500
    for mode in ("paper", "rigorous"):
        cape = CapePCA(K, 1.0, 1e-5, sensitivity_mode=mode, rng=np.random.default_rng(0)).fit(parts)
        pooled = DPDisPCA(K, 1.0, 1e-5, variant="pooled", sensitivity_mode=mode,
                          rng=np.random.default_rng(0)).fit(parts)
        assert cape.result_.extra["aggregator_noise_variance"] == pytest.approx(pooled.privacy_.sigma ** 2, rel=1e-12)


def test_cape_unequal_sites_use_weights(make_sites):
    X, _ = make_sites(300, seed=2)
    from dpdpca.data import partition

    parts = partition(X, 5, sizes=[200, 400, 600, 800, 1000])
    est = CapePCA(K, 1.0, 1e-5, keep_noise=True, rng=np.random.default_rng(5)).fit(parts)
    mus = np.array([200, 400, 600, 800, 1000]) / 3000
    assert est.result_.params["weights"] == pytest.approx(list(mus))
    assert est.result_.params["scheme"] == "projection"
    E, G = est.noise_["E"], est.noise_["G"]
    weighted_E = sum(m * e for m, e in zip(mus, E))
    assert np.abs(weighted_E).max() < 1e-15 * max(np.abs(e).max() for e in E) * 10
    noise = est.aggregate_ - sum(m * A for m, A in zip(mus, moments(parts)))
    np.testing.assert_allclose(noise, sum(m * g for m, g in zip(mus, G)), atol=1e-15)
    # the aggregate carries the pooled-data variance tau_c^2 = (classic sigma at N)^2
    assert est.result_.extra["aggregator_noise_variance"] == pytest.approx(classic_sigma(3000, 1.0, 1e-5) ** 2)
    # the report: worst (smallest) site, sigmas differ per site
    assert est.privacy_.sensitivity == pytest.approx(1 / 200)
    assert est.privacy_.sigma is None and len(est.privacy_.parts) == 5
    assert [p.sigma for p in est.privacy_.parts] == pytest.approx([classic_sigma(n, 1.0, 1e-5)
                                                                   for n in (200, 400, 600, 800, 1000)])
    # the paper's closed form is feasible at S = 3, not at S = 5
    three = CapePCA(K, 1.0, 1e-5, scheme="paper", rng=np.random.default_rng(5)).fit(parts[:3])
    assert three.result_.params["scheme"] == "paper"
    with pytest.raises(InfeasibleError):
        CapePCA(K, 1.0, 1e-5, scheme="paper").fit(parts)


def test_cape_per_site_budgets(make_sites):
    _, parts = make_sites(300, seed=3, n_sites=4)
    est = CapePCA(K, 1.0, 1e-5, site_epsilons=[0.5, 1.0, 1.0, 2.0], rng=np.random.default_rng(1)).fit(parts)
    assert est.privacy_.epsilon == 2.0
    assert [p.epsilon for p in est.privacy_.parts] == [0.5, 1.0, 1.0, 2.0]
    with pytest.raises(ParameterError, match="site_epsilons must be a sequence of n_sites=4 values, got 2"):
        CapePCA(K, 1.0, 1e-5, site_epsilons=[1.0, 2.0]).fit(parts)
    with pytest.raises(ParameterError, match=r"site_deltas\[1\] must be in \(0, 1\)"):
        CapePCA(K, 1.0, 1e-5, site_deltas=[1e-5, 2.0, 1e-5, 1e-5]).fit(parts)


def test_cape_dropout_falls_back_to_conventional(sites500):
    _, parts = sites500
    S = len(parts)
    full = CapePCA(K, 0.5, 1e-5, keep_noise=True, rng=np.random.default_rng(6)).fit(parts)
    drop = CapePCA(K, 0.5, 1e-5, keep_noise=True, dropped_sites=[2], rng=np.random.default_rng(6)).fit(parts)
    active = [i for i in range(S) if i != 2]
    A = moments(parts)
    E, G = drop.noise_["E"], drop.noise_["G"]
    expected = sum(E[i] for i in active) / len(active) + sum(G) / len(active)
    np.testing.assert_allclose(drop.aggregate_ - sum(A[i] for i in active) / len(active), expected, atol=1e-15)
    noise_full = np.linalg.norm(full.aggregate_ - sum(A) / S)
    noise_drop = np.linalg.norm(drop.aggregate_ - sum(A[i] for i in active) / len(active))
    # E_s no longer cancel: per entry, var = (1-1/S) tau^2/9^2 + tau^2/(S*9) = 2.22 x the full tau^2/S^2
    assert 1.6 < (noise_drop / noise_full) ** 2 < 3.2
    assert drop.privacy_.epsilon == full.privacy_.epsilon and "dropped out" in drop.privacy_.notes
    assert "site:3" not in drop.bytes_sent_ and drop.result_.params["dropped_sites"] == [2]
    with pytest.raises(ParameterError, match="dropped_sites must be fewer than all"):
        CapePCA(K, 0.5, 1e-5, dropped_sites=range(S)).fit(parts)


def test_conv_adds_full_noise_at_each_site(sites500):
    X, parts = sites500
    est = CapePCA(K, 1.0, 1e-5, correlated=False, keep_noise=True, rng=np.random.default_rng(8)).fit(parts)
    G = est.noise_["G"]
    np.testing.assert_allclose(est.aggregate_ - sum(moments(parts)) / len(parts), sum(G) / len(G), atol=1e-15)
    z = np.concatenate([g[np.triu_indices(X.shape[1])] for g in G]) / classic_sigma(500, 1.0, 1e-5)
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert est.privacy_.mechanism == "gaussian" and est.result_.method == "conv"


@pytest.mark.parametrize("precision", ["float64", "auto"])
def test_dpdispca_follows_algorithm_1(sites500, precision):
    X, parts = sites500
    d, R = X.shape[1], 12
    eps, delta = 1.0, 1e-5
    est = DPDisPCA(K, eps, delta, n_intermediate=R, site_precision=precision,
                   rng=np.random.default_rng(9)).fit(parts)
    src = GeneratorNoiseSource(np.random.default_rng(9))
    A_c = np.zeros((d, d))
    dtypes = []
    for A_s in moments(parts):
        sigma = classic_sigma(500, eps, delta)
        A_hat = A_s + symmetric_gaussian_matrix(d, sigma, src)
        dtype = site_eigh_dtype(precision, A_hat, sigma)
        dtypes.append(np.dtype(dtype).name)
        P = partial_square_root(A_hat, R, dtype=dtype)
        assert P.shape == (d, R)
        A_c += P @ P.T / len(parts)
    w, V = top_eigenpairs(A_c, K)
    assert subspace_distance(est.components_.T, V) < 1e-9
    np.testing.assert_allclose(est.result_.eigenvalues, w, rtol=1e-10)
    np.testing.assert_allclose(est.explained_variance_, w * 5000 / 4999, rtol=1e-10)
    assert est.bytes_sent_["site:1"] == 8 * d * R
    assert est.timings_.critical_path_s() < est.timings_.total_s()  # sites run in parallel
    assert est.result_.params["site_eigh_dtypes"] == dtypes
    assert set(dtypes) == ({"float64"} if precision == "float64" else {"float32"})  # noise >> float32 rounding


@pytest.mark.parametrize("precision", ["float64", "auto"])
def test_private_local_pca_recursion(sites500, precision):
    X, parts = sites500
    d, R = X.shape[1], 10
    est = PrivateLocalPCA(K, 1.0, 1e-5, n_intermediate=R, site_precision=precision,
                          rng=np.random.default_rng(10)).fit(parts)
    src = GeneratorNoiseSource(np.random.default_rng(10))
    P = np.zeros((d, 0))
    sigma = classic_sigma(500, 1.0, 1e-5)
    for s, A_s in enumerate(moments(parts)):
        M = A_s + symmetric_gaussian_matrix(d, sigma, src) + P @ P.T
        if s < len(parts) - 1:
            P = partial_square_root(M, R, dtype=site_eigh_dtype(precision, M, sigma))
    w, V = top_eigenpairs(M, K)
    assert subspace_distance(est.components_.T, V) < 1e-9
    np.testing.assert_allclose(est.result_.eigenvalues, w, rtol=1e-10)
    np.testing.assert_allclose(est.explained_variance_, w * 5000 / 4999, rtol=1e-10)
    t = est.timings_
    assert t.critical_path_s() == pytest.approx(t.total_s())  # sequential: every site on the critical path
    assert set(t.to_dict()["parties"]) == {f"site:{s}" for s in range(1, 11)}
    assert est.bytes_sent_["site:1"] == 8 * d * R and est.bytes_sent_["site:10"] == 8 * d * K


@pytest.mark.parametrize("mode, numerator", [("paper", 1.0), ("rigorous", math.sqrt(2))])
def test_privacy_reports(sites500, mode, numerator):
    _, parts = sites500
    for cls, kw, mech in ((DPDisPCA, {}, "gaussian"), (CapePCA, {}, "cape"), (PrivateLocalPCA, {}, "gaussian"),
                          (DPDisPCA, {"variant": "pooled"}, "gaussian"), (DPDisPCA, {"variant": "local"}, "gaussian")):
        est = cls(K, 0.5, 1e-6, sensitivity_mode=mode, rng=np.random.default_rng(0), **kw).fit(parts)
        rep = est.privacy_
        n = 5000 if kw.get("variant") == "pooled" else 500
        assert (rep.epsilon, rep.mechanism) == (0.5, mech)
        # the delta the noise really gives at the proven sensitivity sqrt(2)/n, whichever it was calibrated to
        sigma, proven = classic_sigma(n, 0.5, 1e-6, numerator), math.sqrt(2) / n
        if mech == "cape":  # the paper's variances: the delta really achieved against the joint view of S = 10
            joint = gaussian_delta(0.5, sigma, proven * math.sqrt(20 / 11))
            assert rep.delta == pytest.approx(joint, rel=1e-6) and rep.delta > 1e-6
        else:
            assert rep.delta == pytest.approx(max(1e-6, gaussian_delta(0.5, sigma, proven)), rel=1e-6)
        if mode == "paper":  # more than claimed, and the note names the claim
            assert rep.delta > 1e-6 and "proven L2 sensitivity" in rep.notes and "1.000e-06" in rep.notes
        assert rep.sensitivity == pytest.approx(numerator / n)
        assert rep.sigma == pytest.approx(classic_sigma(n, 0.5, 1e-6, numerator))
        assert rep.neighbouring == "replace-one" and rep.sensitivity_mode == mode
        assert rep.calibration == "classic"
    analytic = DPDisPCA(K, 0.5, 1e-6, calibration="analytic", rng=np.random.default_rng(0)).fit(parts)
    assert analytic.privacy_.sigma == pytest.approx(calibrate_gaussian(epsilon=0.5, delta=1e-6,
                                                                       sensitivity=1 / 500))
    assert analytic.privacy_.sigma < classic_sigma(500, 0.5, 1e-6)
    # classic at epsilon >= 1 is not proven: at epsilon = 20 its true delta exceeds the request,
    # and the report carries the delta it really achieves
    loose = DPDisPCA(K, 20.0, 1e-6, rng=np.random.default_rng(0)).fit(parts)
    assert loose.privacy_.delta > 1e-4 and "epsilon < 1" in loose.privacy_.notes


def test_nonprivate_is_exact(sites500):
    X, parts = sites500
    est = NonPrivatePCA(K, 1.0, 1e-5, centering="none").fit(parts)
    w, V = top_eigenpairs(X.T @ X / X.shape[0], K)
    assert subspace_distance(est.components_.T, V) < 1e-9
    assert est.privacy_.epsilon == math.inf and est.privacy_.mechanism == "none"


def test_estimator_shape(sites500):
    X, parts = sites500
    copies = [p.copy() for p in parts]
    est = CapePCA(K, 1.0, 1e-5, rng=np.random.default_rng(0))
    assert est.fit(parts) is est
    assert all(np.array_equal(a, b) for a, b in zip(parts, copies))  # inputs not mutated
    assert est.transform(X[:7]).shape == (7, K)
    assert est.components_.shape == (K, X.shape[1]) and est.mean_.shape == (X.shape[1],)
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(K), atol=1e-10)
    assert est.get_params()["epsilon"] == 1.0 and "keep_noise" in est.get_params()
    assert not hasattr(est, "noise_")  # secrets are not kept unless asked
    with pytest.raises(NotFittedError, match="DPDisPCA must be fitted before use"):
        DPDisPCA(K, 1.0, 1e-5).transform(X)
    with pytest.raises(DataError, match="must have 40 features"):
        est.transform(X[:, :5])


@pytest.mark.parametrize("make, match", [
    (lambda: CapePCA(K, 1.0, 1e-5), "n_sites must be >= 2 for capePCA"),
    (lambda: DPDisPCA(K, 1.0, 1e-5, n_intermediate=K - 1), "n_intermediate must be >= 8"),
    (lambda: PrivateLocalPCA(K, 1.0, 1e-5, n_intermediate=41), "n_intermediate must be <= 40"),
    (lambda: DPDisPCA(K, 1.0, 1e-5, variant="star"), "variant must be one of"),
    (lambda: DPDisPCA(K, 1.0, 1e-5, variant="local", site=3), "site must be <= 0"),
    (lambda: CapePCA(K, 1.0, 1e-5, correlated=False, weights=[0.5, 0.6]), "weights must be a sequence of n_sites=1"),
    (lambda: DPDisPCA(K, 1.0, 1e-5, calibration="tight"), "calibration"),
    (lambda: DPDisPCA(K, 1.0, 1e-5, sensitivity_mode="loose"), "sensitivity_mode must be 'rigorous' or 'paper'"),
    (lambda: CapePCA(0, 1.0, 1e-5), "n_components must be >= 1, got 0"),
])
def test_parameter_errors(sites500, make, match):
    _, parts = sites500
    with pytest.raises(ParameterError, match=match):
        make().fit(parts[:1])


def test_weights_validation(sites500):
    _, parts = sites500
    with pytest.raises(ParameterError, match="weights must be finite, >= 0 and summing to 1"):
        CapePCA(K, 1.0, 1e-5, weights=[0.2] * 10).fit(parts)
    with pytest.raises(ParameterError, match="scheme must be one of projection, paper"):
        CapePCA(K, 1.0, 1e-5, scheme="magic").fit(parts)


def test_site_precision_follows_the_noise_level(sites500):
    """float32 only where its rounding is < 1% of the noise: typical budgets yes, epsilon = 1e4 no."""
    rng = np.random.default_rng(11)
    d = 200
    A = make_covariance_data(4000, d, decay=8.0, rng=rng)
    A = A.T @ A / A.shape[0] / np.trace(A.T @ A / A.shape[0])  # trace 1, like unit-norm rows
    for eps, expected in ((1.0, np.float32), (10.0, np.float32), (1e4, np.float64)):
        sigma = classic_sigma(4000, eps, 1e-5)
        noisy = A + symmetric_gaussian_matrix(d, sigma, rng)
        assert site_eigh_dtype("auto", noisy, sigma) is expected, eps
        assert site_eigh_dtype("float64", noisy, sigma) is np.float64
    with pytest.raises(ParameterError, match="site_precision must be one of auto, float64, got 'half'"):
        DPDisPCA(K, 1.0, 1e-5, site_precision="half").fit(sites500[1])


def test_float32_site_eigh_changes_the_output_far_less_than_the_noise_does(sites500):
    """Same noise, float32 vs float64 site decompositions: a rounding-level change, << a fresh draw's."""
    _, parts = sites500
    run = lambda precision, seed: DPDisPCA(K, 1.0, 1e-5, site_precision=precision,  # noqa: E731
                                           rng=np.random.default_rng(seed)).fit(parts).components_.T
    rounding = subspace_distance(run("auto", 12), run("float64", 12))
    fresh_noise = subspace_distance(run("float64", 12), run("float64", 13))
    assert rounding < 1e-4 < fresh_noise / 100
