"""Generators, moments, whitening and the tensor power method (no privacy)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpdpca.baselines.tensor import (NonPrivateTensorDecomposition, make_mog, make_stm, mog_moments, project,
                                     random_components, sample_partitions, sample_records, site_moments,
                                     stm_moments, tensor_power_method, whiten)
from dpdpca.baselines.tensor.moments import default_mog_scale, prepare_mog_records, third_moment
from dpdpca.baselines.tensor.power import project_to_simplex_rows, recover_components
from dpdpca.errors import DataError, ParameterError
from dpdpca.metrics import q_comp


def _all_transposes_equal(t: np.ndarray) -> bool:
    return all(np.array_equal(t, np.transpose(t, p)) for p in itertools.permutations(range(3)))


def test_generators_respect_the_model_constraints():
    rng = np.random.default_rng(0)
    mog = make_mog(10, 5, rng=rng)
    assert np.all(np.linalg.norm(mog.means, axis=1) <= 1.0)
    assert mog.weights.sum() == pytest.approx(1.0) and np.all(mog.weights > 0)
    stm = make_stm(12, 4, words_per_document=5, rng=rng)
    assert np.allclose(stm.means.sum(axis=1), 1.0) and np.all(stm.means >= 0)
    docs = sample_records(stm, 400, rng)
    assert docs.shape == (400, 5) and docs.dtype == np.int64 and docs.min() >= 0 and docs.max() < 12
    parts = sample_partitions(mog, 3, 50, rng)
    assert [p.shape for p in parts] == [(50, 10)] * 3
    assert random_components(stm, rng).shape == (4, 12)


def test_mog_moments_match_the_model_at_large_n():
    rng = np.random.default_rng(1)
    mog = make_mog(6, 3, rng=rng)
    X = sample_records(mog, 200_000, rng)
    mom = mog_moments(X, mog.noise_variance)
    m2 = np.einsum("k,ki,kj->ij", mog.weights, mog.means, mog.means)
    m3 = np.einsum("k,ki,kj,kl->ijl", mog.weights, mog.means, mog.means, mog.means)
    assert np.abs(mom.m2 - m2).max() < 0.01
    assert np.abs(mom.m3 - m3).max() < 0.01
    assert np.array_equal(mom.m2, mom.m2.T) and _all_transposes_equal(mom.m3)


@pytest.mark.parametrize("length,mode", [(3, "all"), (5, "all"), (9, "all"), (5, "first")])
def test_stm_moments_equal_the_brute_force_average_over_word_tuples(length, mode):
    rng = np.random.default_rng(2)
    d = 6 if length < 9 else 5  # L >= D takes the counts path
    stm = make_stm(d, 2, words_per_document=length, rng=rng)
    docs = sample_records(stm, 30, rng)
    mom = stm_moments(docs, d, words=mode)
    used = range(length) if mode == "all" else range(3)
    pairs = list(itertools.permutations(used if mode == "all" else range(2), 2))
    triples = list(itertools.permutations(used, 3))
    m2, m3 = np.zeros((d, d)), np.zeros((d, d, d))
    for doc in docs:
        for a, b in pairs:
            m2[doc[a], doc[b]] += 1 / len(pairs) / len(docs)
        for a, b, c in triples:
            m3[doc[a], doc[b], doc[c]] += 1 / len(triples) / len(docs)
    assert np.allclose(mom.m2, m2, atol=1e-14) and np.allclose(mom.m3, m3, atol=1e-14)
    assert np.array_equal(mom.m2, mom.m2.T) and _all_transposes_equal(mom.m3)


def test_third_moment_and_projection_against_einsum():
    rng = np.random.default_rng(3)
    T = rng.normal(size=(5000, 7))
    assert np.allclose(third_moment(T), np.einsum("ni,nj,nk->ijk", T, T, T), rtol=1e-12, atol=1e-9)
    X, W = rng.normal(size=(7, 7, 7)), rng.normal(size=(7, 3))
    assert np.allclose(project(X, W), np.einsum("ijk,ia,jb,kc->abc", X, W, W, W))


def test_mog_records_are_scaled_by_a_public_constant_and_clipped():
    zeta = default_mog_scale(10, 0.05)
    assert zeta == pytest.approx(np.sqrt(1.5) + 3 * np.sqrt(0.05))
    X = np.array([[3.0, 4.0], [0.3, 0.4]])
    T = prepare_mog_records(X, 2.0)
    assert np.allclose(T, [[0.6, 0.8], [0.15, 0.2]])  # the long row is clipped to norm 1
    assert np.array_equal(X, [[3.0, 4.0], [0.3, 0.4]])  # input not mutated


def test_power_method_recovers_an_orthogonal_decomposition():
    rng = np.random.default_rng(4)
    V, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    lambdas = np.array([3.0, 2.5, 2.0, 1.5, 1.2])
    T = np.einsum("k,ik,jk,lk->ijl", lambdas, V, V, V)
    lam, vecs = tensor_power_method(T, 5, rng=rng)
    order = np.argsort(-lam)
    assert np.allclose(lam[order], lambdas, atol=1e-8)
    assert np.allclose(np.abs(vecs[order] @ V), np.eye(5), atol=1e-6)


def test_whitening_and_recovery_invert_the_moments_exactly():
    rng = np.random.default_rng(5)
    mog = make_mog(8, 4, rng=rng)
    m2 = np.einsum("k,ki,kj->ij", mog.weights, mog.means, mog.means)
    m3 = np.einsum("k,ki,kj,kl->ijl", mog.weights, mog.means, mog.means, mog.means)
    W, U, evals = whiten(m2, 4)
    assert np.allclose(W.T @ m2 @ W, np.eye(4), atol=1e-10)
    lam, vecs = tensor_power_method(project(m3, W), 4, rng=rng)
    weights, means = recover_components(lam, vecs, U, evals)
    assert q_comp(means, mog.means) < 1e-6
    assert np.allclose(np.sort(weights), np.sort(mog.weights), atol=1e-8)


def test_nonprivate_power_method_recovers_mog_means_at_d10_k5():
    rng = np.random.default_rng(6)
    mog = make_mog(10, 5, rng=rng)
    parts = sample_partitions(mog, 5, 40_000, rng)
    est = NonPrivateTensorDecomposition(5, noise_variance=mog.noise_variance, random_state=rng).fit(parts)
    assert q_comp(est.means_, mog.means) < 0.05
    assert np.allclose(np.sort(est.weights_), np.sort(mog.weights), atol=0.03)
    assert est.privacy_.mechanism == "none" and est.privacy_.epsilon == float("inf")


def test_simplex_post_processing():
    out = project_to_simplex_rows(np.array([[0.5, -0.2, 1.5], [-1.0, -2.0, -3.0]]))
    assert np.allclose(out, [[0.25, 0.0, 0.75], [1 / 3, 1 / 3, 1 / 3]])


@pytest.mark.parametrize("call,message", [
    (lambda: make_mog(4, 5, rng=np.random.default_rng(0)),
     r"^n_components must be <= n_features = 4 \(K linearly independent components in R\^D\), got 5$"),
    (lambda: make_stm(4, 5, rng=np.random.default_rng(0)), r"^n_components must be <= n_features = 4"),
    (lambda: make_stm(10, 2, words_per_document=2, rng=np.random.default_rng(0)),
     r"^words_per_document must be >= 3, got 2$"),
    (lambda: stm_moments(np.zeros((4, 2), dtype=int), 5), r"^words_per_document must be >= 3"),
    (lambda: make_mog(4, 2, rng=0), r"^rng must be a numpy.random.Generator"),
    (lambda: make_mog(4, 2, noise_variance=0.0, rng=np.random.default_rng(0)), r"^noise_variance must be > 0"),
    (lambda: make_mog(4, 2, norm_range=(0.5, 2.0), rng=np.random.default_rng(0)), r"^norm_range must be"),
    (lambda: site_moments([np.zeros((3, 4))], model="mog", n_components=5, noise_variance=0.1),
     r"^n_components must be <= n_features = 4"),
    (lambda: site_moments([np.zeros((3, 4))], model="mog", n_components=2), r"^noise_variance must be given"),
    (lambda: site_moments([np.zeros((3, 3), dtype=int)], model="stm", n_components=2),
     r"^n_features must be given"),
    (lambda: site_moments([np.zeros((3, 3))], model="lda", n_components=2), r"^model must be 'mog' or 'stm'"),
    (lambda: tensor_power_method(np.zeros((2, 2, 3)), 1, rng=np.random.default_rng(0)), r"^tensor must be"),
])
def test_parameter_errors(call, message):
    with pytest.raises(ParameterError, match=message):
        call()


def test_data_errors():
    with pytest.raises(DataError, match=r"word ids in \[0, 4\)"):
        stm_moments(np.array([[0, 1, 4]]), 4)
    with pytest.raises(DataError, match="2-D integer array"):
        stm_moments(np.zeros((2, 3)), 4)
    with pytest.raises(DataError, match="finite"):
        site_moments([np.full((3, 4), np.nan)], model="mog", n_components=2, noise_variance=0.1)
    with pytest.raises(DataError, match="non-empty list"):
        site_moments([], model="mog", n_components=2, noise_variance=0.1)


@pytest.mark.parametrize("model", ["mog", "stm"])
def test_nested_moments_equal_the_moments_of_the_prefix(model):
    from dpdpca.baselines.tensor.experiment import _nested_moments

    rng = np.random.default_rng(7)
    truth = make_mog(5, 2, rng=rng) if model == "mog" else make_stm(5, 2, words_per_document=4, rng=rng)
    parts = sample_partitions(truth, 2, 900, rng)
    kw = dict(model=model, n_components=2, n_features=5, noise_variance=0.05)
    nested, _, _ = _nested_moments(parts, [100, 400, 900], **kw)
    for size in (100, 400, 900):
        direct, _, _ = site_moments([p[:size] for p in parts], **kw)
        for a, b in zip(nested[size], direct):
            assert a.n_samples == b.n_samples == size
            assert np.allclose(a.m2, b.m2, rtol=0, atol=1e-14) and np.allclose(a.m3, b.m3, rtol=0, atol=1e-14)
