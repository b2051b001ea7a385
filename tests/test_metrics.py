"""Metrics: captured energy, ratios, subspace distance, SVM F1."""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.data import make_covariance_data, random_orthonormal
from dpdpca.dp.report import PrivacyReport
from dpdpca.errors import DataError, ParameterError
from dpdpca.metrics import (captured_energy, captured_energy_ratio, captured_variance_ratio, optimal_energy,
                            second_moment, subspace_distance, svm_f1)
from dpdpca.result import PCAResult


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    return make_covariance_data(500, 12, decay=3.0, rng=rng) + 0.5  # a non-zero mean on purpose


def top_k(A, k):
    w, U = np.linalg.eigh(A)
    return U[:, ::-1][:, :k]


@pytest.mark.parametrize("center", [False, True])
def test_captured_energy_matches_trace_formula(data, center):
    V = random_orthonormal(12, 4, np.random.default_rng(0))
    if center:
        Xc = data - data.mean(axis=0)
        A = Xc.T @ Xc
    else:
        A = data.T @ data / data.shape[0]
    np.testing.assert_allclose(second_moment(data, center=center), A, rtol=1e-12)
    assert captured_energy(V, data, center=center) == pytest.approx(np.trace(V.T @ A @ V), rel=1e-12)


@pytest.mark.parametrize("center", [False, True])
def test_ratio_is_one_at_the_top_eigenvectors_and_below_elsewhere(data, center):
    A = second_moment(data, center=center)
    V = top_k(A, 3)
    assert captured_energy_ratio(V, data, center=center) == pytest.approx(1.0, abs=1e-12)
    assert optimal_energy(data, 3, center=center) == pytest.approx(np.sort(np.linalg.eigvalsh(A))[-3:].sum())
    rng = np.random.default_rng(1)
    for _ in range(20):
        r = captured_energy_ratio(random_orthonormal(12, 3, rng), data, center=center)
        assert 0.0 <= r < 1.0
    q_o = optimal_energy(data, 3, center=center)
    W = random_orthonormal(12, 3, rng)
    assert captured_energy_ratio(W, data, center=center, q_optimal=q_o) == \
        pytest.approx(captured_energy_ratio(W, data, center=center))


def test_center_flag_matters_for_uncentred_data(data):
    # the top eigenvector of the uncentred second moment points at the mean
    V_raw = top_k(second_moment(data), 1)
    assert captured_energy_ratio(V_raw, data, center=True) < 0.999
    assert captured_energy_ratio(V_raw, data, center=False) == pytest.approx(1.0)


def test_metrics_accept_pcaresult(data):
    V = top_k(second_moment(data), 2)
    res = PCAResult(method="x", components=V, eigenvalues=np.ones(2), privacy=PrivacyReport.non_private())
    assert captured_energy_ratio(res, data) == pytest.approx(1.0)
    assert subspace_distance(res, V) == pytest.approx(0.0, abs=1e-7)


def test_captured_variance_ratio(data):
    d = data.shape[1]
    assert captured_variance_ratio(np.eye(d), data, center=True) == pytest.approx(1.0)
    Xc = data - data.mean(axis=0)
    V = random_orthonormal(d, 5, np.random.default_rng(2))
    expected = np.trace(V.T @ Xc.T @ Xc @ V) / np.trace(Xc.T @ Xc)
    assert captured_variance_ratio(V, data, center=True) == pytest.approx(expected, rel=1e-12)
    # the top-k directions explain the top-k eigenvalues' share
    lam = np.sort(np.linalg.eigvalsh(Xc.T @ Xc))[::-1]
    assert captured_variance_ratio(top_k(Xc.T @ Xc, 5), data, center=True) == pytest.approx(lam[:5].sum() / lam.sum())


def test_subspace_distance_known_angles():
    e = np.eye(4)
    theta = 0.3
    U = e[:, [0, 1]]
    V = np.column_stack([e[:, 0], np.cos(theta) * e[:, 1] + np.sin(theta) * e[:, 2]])
    assert subspace_distance(U, V) == pytest.approx(np.sin(theta))
    assert subspace_distance(U, V, norm="frobenius") == pytest.approx(np.sqrt(2) * np.sin(theta))
    assert subspace_distance(U, U @ np.array([[0.0, 1.0], [1.0, 0.0]])) == pytest.approx(0.0, abs=1e-8)
    assert subspace_distance(U, e[:, [2, 3]]) == pytest.approx(1.0)
    assert subspace_distance(U, e[:, [0]]) == 1.0
    P = U @ U.T - e[:, [0]] @ e[:, [0]].T
    assert subspace_distance(U, e[:, [0]], norm="frobenius") == pytest.approx(np.linalg.norm(P))
    with pytest.raises(ParameterError, match="norm must be 'spectral' or 'frobenius'"):
        subspace_distance(U, V, norm="nuclear")


@pytest.mark.parametrize("V, match", [
    (np.ones((12, 2)), "orthonormal columns"),
    (np.eye(5)[:, :2], "must have 12 rows"),
    (np.full((12, 2), np.nan), "finite"),
    (np.ones(12), "finite"),
])
def test_bad_components_raise(data, V, match):
    with pytest.raises(DataError, match=match):
        captured_energy(V, data)


def test_zero_data_ratio_raises():
    with pytest.raises(DataError, match="q_o"):
        captured_energy_ratio(np.eye(3)[:, :1], np.zeros((4, 3)))


def test_svm_f1_on_digits_prefers_informative_directions():
    pytest.importorskip("sklearn")
    from dpdpca.data import load_dataset, preprocess

    ds = load_dataset("digits")
    X = preprocess(ds.X)
    Xtr, Xte, ytr, yte = X[:1200], X[1200:], ds.y[:1200], ds.y[1200:]
    good = top_k(second_moment(Xtr), 10)
    # the 10 directions of least energy carry almost no class information
    bad = np.linalg.eigh(second_moment(Xtr))[1][:, :10]
    f_good = svm_f1(good, Xtr, ytr, Xte, yte)
    f_bad = svm_f1(bad, Xtr, ytr, Xte, yte)
    assert 0.85 < f_good <= 1.0
    assert f_bad < f_good - 0.3
    with pytest.raises(DataError, match="one label per row"):
        svm_f1(good, Xtr, ytr[:-1], Xte, yte)


def test_subspace_distance_resolves_tiny_angles():
    e = np.eye(5)
    theta = 1e-10
    U = e[:, [0, 1]]
    V = np.column_stack([e[:, 0], np.cos(theta) * e[:, 1] + np.sin(theta) * e[:, 3]])
    assert subspace_distance(U, V) == pytest.approx(theta, rel=1e-6)
    assert subspace_distance(U, V, norm="frobenius") == pytest.approx(np.sqrt(2) * theta, rel=1e-6)


def test_captured_energy_ratio_says_why_it_is_undefined_for_constant_data():
    from dpdpca.errors import DataError
    from dpdpca.metrics import captured_energy_ratio

    V = np.eye(2)[:, :1]
    with pytest.raises(DataError, match="centred data is all zeros .every row equal"):
        captured_energy_ratio(V, np.tile([[0.3, 0.4]], (5, 1)), center=True)
    with pytest.raises(DataError, match="the data is all zeros, so the captured-energy ratio is undefined"):
        captured_energy_ratio(V, np.zeros((3, 2)))
