"""FPCA (Grammenos et al. 2020): Merge_r, block update, AdjustRank, FPCA-Edge, tree merge, streaming DP."""

from __future__ import annotations

import functools
import tracemalloc

import numpy as np
import pytest
from scipy import stats
from sklearn.decomposition import IncrementalPCA

from dpdpca.baselines.fpca import FederatedPCA as _FederatedPCA
from dpdpca.baselines.fpca import FPCAEdge, tree_merge
from dpdpca.baselines.subspace import adjust_rank, block_update, merge_r, svd_r
from dpdpca.data import iter_row_blocks
from dpdpca.dp import GeneratorNoiseSource, streaming_modsulq_omega
from dpdpca.dp.modsulq import ModSulqMechanism
from dpdpca.errors import DataError, ParameterError

P_MIN = 1e-4
#: These tests check the paper's mechanics (eq. (8), fixed blocks, uncentred rows); the defaults (analytic,
#: centred blocks, block_size="auto") are tested in test_relations.py.
FederatedPCA = functools.partial(_FederatedPCA, calibration="modsulq", centering="none")


def projector(U):
    return U @ U.T


def low_rank(n, d, rank, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, rank)) @ (rng.normal(size=(rank, d)) * np.linspace(2, 1, rank)[:, None])
    return scale * X / np.linalg.norm(X, axis=1).max()


def test_lemma_1_merging_exact_local_svds_gives_the_global_svd():
    rng = np.random.default_rng(0)
    d = 12
    Y = rng.normal(size=(400, d)) * np.linspace(3, 0.5, d)
    clients = np.array_split(Y, 4)
    local = [svd_r(C.T, d) for C in clients]  # exact local SVDs, full rank
    (U, s), depth = tree_merge(local, d, branching=2)
    Ug, sg, _ = np.linalg.svd(Y.T, full_matrices=False)
    assert depth == 2
    np.testing.assert_allclose(s, sg, rtol=1e-10, atol=0)
    # same subspace up to rotation; singular values are distinct, so the rotation is diagonal (signs)
    np.testing.assert_allclose(np.abs(np.diag(U.T @ Ug)), 1.0, atol=1e-10)
    np.testing.assert_allclose(U.T @ U, np.eye(d), atol=1e-12)


@pytest.mark.parametrize("r1,r2,r", [(5, 3, 6), (3, 7, 10), (8, 8, 4), (1, 9, 9)])
def test_merge_r_is_orthonormal_and_matches_the_svd_of_the_concatenation(r1, r2, r):
    rng = np.random.default_rng(r1 * 10 + r2)
    d = 30
    U1 = np.linalg.qr(rng.normal(size=(d, r1)))[0]
    # U2 shares directions with U1 (nearly inside its span): the hard case for one Gram-Schmidt pass
    U2 = np.linalg.qr(np.column_stack([U1[:, :min(r1, r2)] + 1e-9 * rng.normal(size=(d, min(r1, r2))),
                                       rng.normal(size=(d, r2 - min(r1, r2)))]))[0]
    s1, s2 = np.sort(rng.uniform(1, 5, r1))[::-1], np.sort(rng.uniform(1, 5, r2))[::-1]
    lam = 0.7
    U, s = merge_r(U1, s1, U2, s2, r, forgetting=lam)
    assert U.shape == (d, min(r, r1 + r2))
    np.testing.assert_allclose(U.T @ U, np.eye(U.shape[1]), atol=1e-12)
    M = np.column_stack([lam * U1 * s1, U2 * s2])  # eq. (2) with the forgetting factor
    Um, sm, _ = np.linalg.svd(M, full_matrices=False)
    k = U.shape[1]
    np.testing.assert_allclose(s, sm[:k], rtol=1e-9, atol=1e-12)
    # the merged subspace reproduces M's top-k part
    top = np.sum(sm[:k] > 1e-8)
    np.testing.assert_allclose(projector(U[:, :top]), projector(Um[:, :top]), atol=1e-7)


def test_block_update_is_eq_3_and_recovers_low_rank_data_exactly():
    X = low_rank(300, 20, 4, seed=1)
    U, s = np.zeros((20, 0)), np.zeros(0)
    for B in np.array_split(X, 7):  # uneven blocks
        U, s = block_update(B.T, U, s, 4)
    Ug, sg, _ = np.linalg.svd(X.T, full_matrices=False)
    np.testing.assert_allclose(s, sg[:4], rtol=1e-10)
    np.testing.assert_allclose(projector(U), projector(Ug[:, :4]), atol=1e-10)


def test_adjust_rank_follows_eq_4_and_stays_orthonormal():
    rng = np.random.default_rng(2)
    U = np.linalg.qr(rng.normal(size=(10, 3)))[0]
    U[:, 0] = np.eye(10)[:, 0]  # e_1 inside span(U): the paper's e_{r+1} could be too
    U = np.linalg.qr(U)[0]
    up, s_up = adjust_rank(U, np.array([3.0, 2.0, 2.0]), alpha=0.01, beta=0.10, r_max=10)  # E_r = 2/7 > beta
    assert up.shape == (10, 4) and s_up[-1] == 0.0
    np.testing.assert_allclose(up.T @ up, np.eye(4), atol=1e-12)
    down, s_down = adjust_rank(U, np.array([10.0, 5.0, 0.01]), alpha=0.01, beta=0.10, r_max=10)  # E_r < alpha
    assert down.shape == (10, 2) and np.array_equal(s_down, [10.0, 5.0])
    same, _ = adjust_rank(U, np.array([10.0, 5.0, 1.0]), alpha=0.01, beta=0.10, r_max=10)
    assert same is U
    capped, _ = adjust_rank(U, np.array([3.0, 2.0, 2.0]), alpha=0.01, beta=0.10, r_max=3)
    assert capped.shape == (10, 3)


def test_adaptive_rank_grows_to_the_data_rank():
    X = low_rank(2000, 15, 6, seed=3)
    edge = FPCAEdge(15, 2, 50, adaptive_rank=True, alpha=0.01, beta=0.10).update(X).flush()
    assert edge.U_.shape[1] >= 6
    np.testing.assert_allclose(edge.U_.T @ edge.U_, np.eye(edge.U_.shape[1]), atol=1e-12)


def test_permuting_rows_clients_and_merge_order_leaves_the_subspace_unchanged():
    X = low_rank(900, 16, 5, seed=4)
    parts = np.array_split(X, 6)
    ref = FederatedPCA(5, private=False, block_size=40).fit(parts)
    rng = np.random.default_rng(5)
    shuffled = X[rng.permutation(len(X))]
    other = FederatedPCA(5, private=False, block_size=33, branching=3).fit(np.array_split(shuffled, 4))
    np.testing.assert_allclose(projector(other.components_.T), projector(ref.components_.T), atol=1e-9)
    leaves = [FPCAEdge(16, 5, 40).update(p).flush().subspace for p in parts]
    for order in ([5, 4, 3, 2, 1, 0], [2, 0, 5, 1, 4, 3]):
        (U, s), _ = tree_merge(leaves, 5, order=order)
        np.testing.assert_allclose(projector(U), projector(ref.components_.T), atol=1e-9)
        np.testing.assert_allclose(s, ref.singular_values_, rtol=1e-10)


def test_stragglers_are_merged_later_or_left_out():
    X = low_rank(800, 12, 4, seed=6)
    parts = np.array_split(X, 4)
    full = FederatedPCA(4, private=False, block_size=50).fit(parts)
    late = FederatedPCA(4, private=False, block_size=50).fit(parts[:3])
    straggler = FPCAEdge(12, 4, 50).update(parts[3]).flush()
    late.merge_update(straggler.U_, straggler.s_, n_samples=len(parts[3]))
    np.testing.assert_allclose(projector(late.components_.T), projector(full.components_.T), atol=1e-9)
    np.testing.assert_allclose(late.singular_values_, full.singular_values_, rtol=1e-10)
    assert late.n_samples_seen_ == 800
    # a failed client is simply absent: the result is the PCA of the others' rows
    without = FederatedPCA(4, private=False, block_size=50).fit(parts[:3])
    Ug = np.linalg.svd(np.vstack(parts[:3]), full_matrices=False)[2][:4].T
    np.testing.assert_allclose(projector(without.components_.T), projector(Ug), atol=1e-9)


def test_a_late_client_needs_its_privacy_evidence_and_is_composed_in_parallel():
    import dataclasses

    from dpdpca.dp import ADD_REMOVE_ONE, PrivacyReport

    X = low_rank(600, 6, 3, seed=8)
    est = FederatedPCA(2, 1.0, 1e-5, block_size=100, rng=np.random.default_rng(0)).fit([X[:200], X[200:400]])
    before = est.components_.copy()
    late = FederatedPCA(2, 2.0, 1e-5, block_size=100, rng=np.random.default_rng(1)).fit([X[400:]])
    U, s = late.subspace_
    with pytest.raises(ParameterError, match=r"^privacy must be the late client's PrivacyReport "
                                             r"\(its privacy_, or FPCAEdge.privacy\(\)\) when DP is on, got None$"):
        est.merge_update(U, s, n_samples=200)  # a raw subspace: no evidence
    with pytest.raises(ParameterError, match=r"^privacy must be a differentially private report .*got "
                                             r"epsilon=inf, mechanism 'none'$"):
        est.merge_update(U, s, n_samples=200, privacy=PrivacyReport.non_private())
    with pytest.raises(ParameterError, match=r"^privacy.neighbouring must be 'replace-one', this federation's "
                                             r"relation, got 'add/remove-one'$"):
        est.merge_update(U, s, n_samples=200, privacy=dataclasses.replace(late.privacy_, neighbouring=ADD_REMOVE_ONE))
    np.testing.assert_array_equal(est.components_, before)  # refused: nothing merged
    est.merge_update(U, s, n_samples=200, privacy=late.privacy_)
    rep = est.privacy_
    assert (rep.epsilon, rep.delta, len(rep.parts)) == (2.0, 1e-5, 3)  # parallel: the largest client's
    assert rep.parts[2] == late.privacy_ and "late client 1 merged after the tree (merge_update, 200 rows" in rep.notes
    assert est.result_.extra["late_merges"] == 1 and est.n_samples_seen_ == 600
    # an FPCA-Edge client carries its own evidence
    edge = FPCAEdge(6, 2, 100, source=GeneratorNoiseSource(np.random.default_rng(2)),
                    mechanism_factory=lambda n: ModSulqMechanism(epsilon=1.0, delta=1e-5, d=6, n=n, mask="streaming"))
    assert edge.update(X[:150]).flush().privacy().epsilon == 1.0 and "1 block(s) of 50 rows" in edge.privacy().notes


def test_partial_fit_matches_sklearn_incremental_pca():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(600, 10)) * np.linspace(3, 0.3, 10)
    X -= X.mean(axis=0)  # our pipelines take centred rows; IncrementalPCA centres itself
    ours = FederatedPCA(3, private=False, rank=10)
    ipca = IncrementalPCA(n_components=10)
    for batch in np.array_split(X, 6):
        ours.partial_fit(batch)
        ipca.partial_fit(batch)
    assert ours.n_samples_seen_ == 600 and ours.components_.shape == (3, 10)
    np.testing.assert_allclose(projector(ours.components_.T), projector(ipca.components_[:3].T), atol=1e-8)
    np.testing.assert_allclose(ours.explained_variance_, ipca.explained_variance_[:3], rtol=1e-8)


def test_a_client_streams_a_file_block_by_block(tmp_path):
    X = low_rank(500, 8, 3, seed=8)
    np.save(tmp_path / "x.npy", X)
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header=",".join(f"f{i}" for i in range(8)), comments="")
    ref = FPCAEdge(8, 3, 64).update(X).flush()
    for name in ("x.npy", "x.csv"):
        edge = FPCAEdge(8, 3, 64).update_blocks(iter_row_blocks(tmp_path / name, 37)).flush()
        assert edge.n_samples_seen_ == 500
        np.testing.assert_allclose(projector(edge.U_), projector(ref.U_), atol=1e-9)


@pytest.mark.parametrize("private", [False, True])
def test_fpca_edge_memory_is_o_d_r_no_d_squared_allocation(private):
    d, r, b = 2000, 10, 20
    rng = np.random.default_rng(9)
    basis = np.linalg.qr(rng.normal(size=(d, r)))[0].T  # r x d: O(d r)
    factory = (lambda n: ModSulqMechanism(epsilon=1.0, delta=1e-5, d=d, n=n, calibration="analytic")) \
        if private else None
    edge = FPCAEdge(d, r, b, mechanism_factory=factory, mask_columns=25,
                    source=GeneratorNoiseSource(np.random.default_rng(10)))
    blocks = 2 if private else 10
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        for _ in range(blocks):
            rows = rng.normal(size=(b, r)) @ basis
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            edge.update(rows)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    one_d_by_d = 8 * d * d  # 32 MB
    assert edge.n_blocks_ == blocks
    assert peak < 0.1 * one_d_by_d, peak  # so no d x d (or d x d/10) array ever existed
    assert peak < 16 * 8 * d * (r + b + 25), peak  # a small multiple of the O(d (r + b + c)) working set


def test_streaming_mask_has_std_omega_of_eq_8_at_the_block_size():
    d, b, eps, delta = 40, 100, 0.5, 0.05

    class Recording(GeneratorNoiseSource):
        def __init__(self, gen):
            super().__init__(gen)
            self.draws = []

        def standard_normal(self, size, *, scale=1.0):
            out = super().standard_normal(size, scale=scale)
            self.draws.append(out.copy())
            return out

    source = Recording(np.random.default_rng(11))
    est = FederatedPCA(3, eps, delta, block_size=b, mask_columns=16)
    edge = est._edge(d, 3, source)
    X = low_rank(b * 5, d, 3, seed=12)
    edge.update(X).flush()
    omega = streaming_modsulq_omega(eps, delta, d, b)  # n = b, not the client's 500 rows
    assert [m.n for m in edge.mechanisms_] == [b] * 5 and edge.mechanisms_[0].sigma == omega
    noise = np.concatenate([z.ravel() for z in source.draws])
    assert noise.size == 5 * d * d  # one full d x d non-symmetric mask per block, drawn 16 columns at a time
    # variance test (chi-square on the sum of squares) and shape (KS): catches a 5% error in sigma
    stat = float(np.sum(noise ** 2) / omega ** 2)
    p_var = 2 * min(stats.chi2.cdf(stat, noise.size), stats.chi2.sf(stat, noise.size))
    assert p_var > P_MIN
    assert stats.kstest(noise / omega, "norm").pvalue > P_MIN
    assert 1.05 ** 2 * noise.size > stats.chi2.ppf(1 - P_MIN, noise.size)  # power: 5% off would be rejected
    report = est.fit([X[:250], X[250:]]).privacy_  # blocks of 100, 100, 50 rows: the last drawn at its own omega
    client = report.parts[0]
    assert [p.sigma for p in client.parts] == pytest.approx([omega, streaming_modsulq_omega(eps, delta, d, 50)])
    assert client.parts[0].sensitivity == pytest.approx(np.sqrt(2) / b)
    assert report.sigma is None and report.sensitivity == pytest.approx(np.sqrt(2) / 50)
    assert report.epsilon == eps and report.delta == delta and report.neighbouring == "replace-one"


def test_private_fpca_analytic_calibration_is_useful_and_omega0_sets_the_block():
    X = low_rank(6000, 10, 2, seed=13)
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # unit rows: the most signal the norm bound allows
    Ug = np.linalg.svd(X, full_matrices=False)[2][:2].T
    est = FederatedPCA(2, 1.0, 1e-5, calibration="analytic", block_size=500,
                       rng=np.random.default_rng(14)).fit(np.array_split(X, 3))
    assert np.linalg.svd(est.components_ @ Ug)[1].min() > 0.9
    big = FederatedPCA(2, 1.0, 0.01, block_size=10, omega0=0.5).fit([X[:2000]])
    t = big.result_.params["block_sizes"][0]
    assert t > 10 and streaming_modsulq_omega(1.0, 0.01, 10, t) <= 0.5 < streaming_modsulq_omega(1.0, 0.01, 10, t - 1)


@pytest.mark.parametrize("kwargs,match", [
    ({"forgetting": 0.0}, r"^forgetting must be in \(0, 1\], got 0.0$"),
    ({"block_size": 0}, r"^block_size must be >= 1, got 0$"),
    ({"beta": 0.001}, r"^beta must be in \(alpha=0.01, 1\], got 0.001$"),
    ({"calibration": "tight"}, r"^calibration must be one of 'modsulq', 'analytic', 'classic', got 'tight'$"),
    ({"block_size": "big"}, r"^block_size must be 'auto' or an int >= 1, got 'big'$"),
    ({"branching": 1}, r"^branching must be >= 2, got 1$"),
])
def test_fpca_parameter_errors(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        FederatedPCA(2, 1.0, 1e-5, **kwargs).fit([low_rank(100, 5, 2, seed=0)])


def test_dp_needs_unit_rows():
    X = low_rank(100, 5, 2, seed=0) * 3
    with pytest.raises(DataError, match=r"^rows must have L2 norm <= 1 with DP on"):
        FederatedPCA(2, 1.0, 1e-5, block_size=50).fit([X])
    FederatedPCA(2, private=False, block_size=50).fit([X])  # no norm bound needed without DP


def test_the_report_gives_each_block_size_its_own_sigma():
    """A client's last, smaller block is drawn at a larger sigma: one report part per block size, none hidden."""
    X = low_rank(400, 6, 3, seed=9, scale=0.5)
    est = _FederatedPCA(2, 1.0, 1e-5, block_size=100, rng=np.random.default_rng(0)).fit([X[:250], X[250:]])
    rep = est.privacy_
    assert rep.sigma is None
    for client, sizes in zip(rep.parts, ([100, 50], [100, 50])):
        drawn = [ModSulqMechanism(epsilon=1.0, delta=1e-5, d=6, n=b, mask="streaming", calibration="analytic",
                                  centred=True) for b in sizes]
        assert client.sigma is None and len(client.parts) == 2
        assert [p.sigma for p in client.parts] == [m.sigma for m in drawn]
        assert [p.sensitivity for p in client.parts] == pytest.approx([4 * (b - 1) / b ** 2 for b in sizes])
        assert client.sensitivity == max(p.sensitivity for p in client.parts)
    one = _FederatedPCA(2, 1.0, 1e-5, block_size=100, rng=np.random.default_rng(0)).fit([X[:200], X[200:]])
    assert one.privacy_.sigma == ModSulqMechanism(epsilon=1.0, delta=1e-5, d=6, n=100, mask="streaming",
                                                  calibration="analytic", centred=True).sigma
