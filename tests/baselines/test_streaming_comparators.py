"""FPCA's comparators: symmetric and non-symmetric MOD-SuLQ, Frequent Directions."""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.baselines.frequent_directions import FrequentDirections, FrequentDirectionsPCA
from dpdpca.baselines.modsulq import ModSulqPCA
from dpdpca.dp import modsulq_omega, streaming_modsulq_omega
from dpdpca.errors import ParameterError


#: MOD-SuLQ's own masks (eq. (6), (8)): replace-one, uncentred
PAPER = dict(calibration="modsulq", neighbouring="replace-one", centering="none")


def data(n=3000, d=12, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, d)) * np.geomspace(1, 0.05, d)
    return X / np.linalg.norm(X, axis=1).max()


@pytest.mark.parametrize("variant,omega", [("symmetric", modsulq_omega), ("non-symmetric", streaming_modsulq_omega)])
def test_mod_sulq_reports_its_omega_and_recovers_with_little_noise(variant, omega):
    X = data()
    parts = np.array_split(X, 3)
    est = ModSulqPCA(2, 1.0, 0.05, variant=variant, **PAPER, rng=np.random.default_rng(1)).fit(parts)
    assert est.privacy_.sigma == pytest.approx(omega(1.0, 0.05, 12, 3000))
    assert est.privacy_.mechanism == ("mod-sulq-symmetric" if variant == "symmetric" else "mod-sulq-streaming")
    assert est.bytes_sent_ == {**{f"site:{i}": 8 * p.size for i, p in enumerate(parts, start=1)}, "curator": 8 * 12 * 2}
    assert est.result_.extra["omega"] == est.privacy_.sigma
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(2), atol=1e-10)
    # with a large budget the mask is small and the top component is found
    big = ModSulqPCA(1, 1e4, 0.05, variant=variant, **PAPER, rng=np.random.default_rng(2)).fit(parts)
    top = np.linalg.svd(X, full_matrices=False)[2][0]
    assert abs(float(big.components_[0] @ top)) > 0.99


def test_mod_sulq_rigorous_curator_reports_the_mask_per_entry_of_its_moment():
    """Under replace-one the report's sigma is already per entry of A (= YᵀY/n): omega is that sigma, not /n."""
    X = data()
    est = ModSulqPCA(2, 1.0, 0.05, neighbouring="replace-one", centering="none",
                     rng=np.random.default_rng(3)).fit(np.array_split(X, 3))
    assert est.result_.extra["omega"] == pytest.approx(est.privacy_.sigma)


def test_mod_sulq_variant_error():
    with pytest.raises(ParameterError, match=r"^variant must be 'symmetric' or 'non-symmetric', got 'x'$"):
        ModSulqPCA(2, 1.0, 0.05, variant="x").fit([data(100)])


def test_frequent_directions_guarantee_and_merge():
    X = data(2000, 20, seed=3)
    ell, k = 10, 4
    fd = FrequentDirections(20, ell).update(X)
    B = fd.sketch
    gap = X.T @ X - B.T @ B
    assert np.linalg.eigvalsh(gap).min() > -1e-9  # B^T B <= X^T X
    s = np.linalg.svd(X, compute_uv=False)
    assert np.linalg.norm(gap, 2) <= np.sum(s[k:] ** 2) / (ell - k) + 1e-9
    merged = FrequentDirections(20, ell).update(X[:1000]).merge(FrequentDirections(20, ell).update(X[1000:]))
    gap_m = X.T @ X - merged.sketch.T @ merged.sketch
    assert np.linalg.norm(gap_m, 2) <= np.sum(s[k:] ** 2) / (ell - k) + 1e-9
    est = FrequentDirectionsPCA(3, ell=12).fit(np.array_split(X, 4))
    assert est.privacy_.epsilon == float("inf") and est.bytes_sent_["site:1"] == 8 * 12 * 20
