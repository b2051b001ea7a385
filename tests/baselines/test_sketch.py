"""DP compressive PCA (quadratic sketches, Chatalic et al.): recovery, additivity, noise scale, m."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpdpca.baselines.sketch import QuadraticSketchOperator, SketchPCA, decode_subspace, site_sketch
from dpdpca.dp import GaussianMechanism, GeneratorNoiseSource, LaplaceMechanism
from dpdpca.dp.quadratic_sketch import quadratic_sketch_bounds
from dpdpca.errors import ParameterError

P_MIN = 1e-4


def captured_ratio(V, X, k):
    C = X.T @ X
    top = np.linalg.eigh(C)[0][::-1][:k].sum()
    return float(np.trace(V.T @ C @ V) / top)


def low_rank(n, d, k, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, k)) @ (rng.normal(size=(k, d)) * np.linspace(2, 1, k)[:, None])
    return X / np.linalg.norm(X, axis=1).max()


@pytest.mark.parametrize("kind", ["gaussian", "orthonormal"])
def test_noiseless_sketch_with_m_of_order_k_d_recovers_the_subspace(kind):
    d, k = 24, 3
    X = low_rank(2000, d, k, seed=0)
    est = SketchPCA(k, private=False, kind=kind, sketch_size=3 * k * d).fit(np.array_split(X, 4))
    assert est.result_.params["sketch_size"] >= 3 * k * d
    assert captured_ratio(est.components_.T, X, k) >= 0.99
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(k), atol=1e-10)
    assert est.privacy_.epsilon == float("inf")


def test_site_sketches_add_up_and_the_fast_transform_matches_dense_omega():
    X = low_rank(300, 10, 3, seed=1)
    op = QuadraticSketchOperator(10, 40, kind="orthonormal", seed=3)
    assert op.m == 48 and op.omega.shape == (10, 48)  # rounded up to 3 bases of R^16
    np.testing.assert_allclose(op.omega @ op.omega.T, 3 * np.eye(10), atol=1e-12)  # union of 3 bases
    np.testing.assert_allclose(op.features(X), (X @ op.omega) ** 2, atol=1e-12)
    # the fast Walsh-Hadamard path (used above d' = 256) gives the same features, per basis too
    np.testing.assert_allclose(op._fast_linear(X, None), X @ op.omega, atol=1e-12)
    np.testing.assert_allclose(op._fast_linear(X, 2), X @ op.omega[:, 32:48], atol=1e-12)
    whole = site_sketch(X, op)
    np.testing.assert_allclose(site_sketch(X[:100], op) + site_sketch(X[100:], op), whole, rtol=1e-12)
    np.testing.assert_allclose(whole / 300, np.einsum("dj,de,ej->j", op.omega, X.T @ X / 300, op.omega),
                               rtol=1e-10)  # E phi_j = omega_j^T C omega_j


@pytest.mark.parametrize("mask,r", [("uniform", 8), ("block", 16)])
def test_feature_subsampling_is_unbiased(mask, r):
    X = low_rank(20000, 10, 3, seed=2)
    op = QuadraticSketchOperator(10, 64, kind="orthonormal", seed=4)
    full = site_sketch(X, op)
    sub = site_sketch(X, op, features_per_sample=r, mask=mask, rng=np.random.default_rng(5))
    assert np.linalg.norm(sub - full) / np.linalg.norm(full) < 0.1


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_noise_scale_equals_the_calibrated_one(noise):
    d = 16
    X = low_rank(400, d, 2, seed=6)
    est = SketchPCA(2, 1.0, 1e-5, noise=noise, sketch_size=2048, kind="gaussian", seed=1,
                    neighbouring="replace-one", rng=np.random.default_rng(7))
    est.fit([X])
    op = QuadraticSketchOperator(d, 2048, kind="gaussian", seed=1)
    sens = quadratic_sketch_bounds(op.omega, neighbouring="replace-one")
    if noise == "gaussian":
        mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=sens.l2)
        assert est.privacy_.sigma == pytest.approx(mech.sigma) and est.privacy_.sensitivity == pytest.approx(sens.l2)
    else:
        mech = LaplaceMechanism(epsilon=1.0, sensitivity=sens.l1)
        assert est.privacy_.scale == pytest.approx(mech.scale) and est.privacy_.sensitivity == pytest.approx(sens.l1)
    # the noise actually added by the site: noisy sum minus the exact sum, over several releases
    source = GeneratorNoiseSource(np.random.default_rng(8))
    clean = site_sketch(X, op)
    draws = np.concatenate([est._privatise(clean, 400.0, sens, source)[0] - clean for _ in range(20)])
    if noise == "gaussian":
        z = draws / mech.sigma
        stat = float(np.sum(z ** 2))
        assert 2 * min(stats.chi2.cdf(stat, z.size), stats.chi2.sf(stat, z.size)) > P_MIN
        assert stats.kstest(z, "norm").pvalue > P_MIN
    else:
        z = draws / mech.scale
        assert stats.kstest(z, "laplace").pvalue > P_MIN
        # a 5% larger scale moves the mean |z| by 5%; its standard error here is 1/sqrt(n) ~ 0.5%
        assert abs(np.mean(np.abs(z)) - 1.0) < 4.5 / np.sqrt(z.size)


def test_add_remove_one_puts_noise_on_the_count_too():
    X = low_rank(500, 8, 2, seed=9)
    est = SketchPCA(2, 2.0, 1e-5, neighbouring="add/remove-one", noise="laplace", count_fraction=0.25,
                    rng=np.random.default_rng(10)).fit([X[:250], X[250:]])
    site = est.privacy_.parts[0]
    assert est.privacy_.epsilon == pytest.approx(2.0) and est.privacy_.neighbouring == "add/remove-one"
    sum_part, count_part = site.parts
    assert sum_part.epsilon == pytest.approx(1.5) and count_part.epsilon == pytest.approx(0.5)
    assert count_part.sensitivity == 1.0 and count_part.scale == pytest.approx(2.0)


def test_larger_m_lowers_the_error_without_noise():
    d, k = 16, 2
    rng = np.random.default_rng(11)
    errs = {}
    for m in (2 * k * d, 16 * k * d):
        e = []
        for seed in range(3):
            # full rank with a decaying spectrum: the rank-k fit is exact only in the limit
            X = rng.normal(size=(3000, d)) * np.geomspace(1, 0.2, d)
            X /= np.linalg.norm(X, axis=1).max()
            est = SketchPCA(k, private=False, kind="gaussian", sketch_size=m, seed=seed).fit([X])
            e.append(1.0 - captured_ratio(est.components_.T, X, k))
        errs[m] = float(np.mean(e))
    assert errs[16 * k * d] < errs[2 * k * d]


def test_decoder_reports_convergence_and_needs_no_d_by_d_matrix_in_the_loop():
    X = low_rank(1000, 12, 2, seed=12)
    op = QuadraticSketchOperator(12, 96, kind="gaussian", seed=0)
    z = site_sketch(X, op) / 1000
    V, w, info = decode_subspace(z, op.omega, 2, fit_rank=2)
    assert info["converged"] and info["relative_residual"] < 1e-6 and info["fit_rank"] == 2
    np.testing.assert_allclose(w, np.linalg.eigh(X.T @ X / 1000)[0][::-1][:2], rtol=1e-6)
    V2, w2, info2 = decode_subspace(z, op.omega, 2)  # default: fit rank k + 5, keep the top k
    assert info2["fit_rank"] == 7 and V2.shape == (12, 2)
    np.testing.assert_allclose(V2 @ V2.T, V @ V.T, atol=1e-4)


@pytest.mark.parametrize("kwargs,match", [
    ({"kind": "fourier"}, r"^kind must be 'gaussian' or 'orthonormal', got 'fourier'$"),
    ({"noise": "cauchy"}, r"^noise must be 'gaussian' or 'laplace', got 'cauchy'$"),
    ({"count_fraction": 1.0}, r"^count_fraction must be in \(0, 1\), got 1.0$"),
    ({"sketch_size": 1}, r"^sketch_size must be >= 2, got 1$"),
])
def test_sketch_parameter_errors(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        SketchPCA(2, 1.0, 1e-5, **kwargs).fit([low_rank(50, 4, 2, seed=0)])
