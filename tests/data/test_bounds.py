"""Public per-feature bounds: scaling into the unit ball without clipping every row."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpdpca.data import FeatureBounds, load_bounds_file, load_dataset, scale_by_bounds
from dpdpca.errors import DataError, ParameterError


def test_digits_ship_their_public_bounds_and_no_row_is_clipped():
    ds = load_dataset("digits")
    assert ds.bounds == (0.0, 16.0)
    Y, n_clipped = scale_by_bounds(ds.X, FeatureBounds(*ds.bounds))
    assert n_clipped == 0
    norms = np.linalg.norm(Y, axis=1)
    assert norms.max() <= 1.0 and norms.mean() > 0.5  # data, not directions: norms spread below 1


def test_scaling_keeps_the_centred_pca_exactly():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 255, size=(300, 12)) @ np.diag(np.linspace(0.2, 1.0, 12))
    Y, n = scale_by_bounds(X, FeatureBounds(0.0, 255.0))
    assert n == 0
    wx, vx = np.linalg.eigh(np.cov(X.T))
    wy, vy = np.linalg.eigh(np.cov(Y.T))
    assert np.allclose(wy / wy[-1], wx / wx[-1])
    assert np.allclose(np.abs(vx[:, -3:].T @ vy[:, -3:]), np.eye(3), atol=1e-8)


def test_out_of_bounds_values_are_clipped_and_counted_and_input_untouched():
    X = np.array([[0.0, 1.0], [2.0, -5.0], [0.5, 0.5]])
    Y, n = scale_by_bounds(X, FeatureBounds([0.0, 0.0], [1.0, 1.0]))
    assert n == 1 and X[1, 1] == -5.0
    assert np.all(np.linalg.norm(Y, axis=1) <= 1.0)


def test_bounds_files(tmp_path):
    j = tmp_path / "b.json"
    j.write_text(json.dumps({"lo": [0, 0, 0], "hi": [1, 2, 3]}))
    _, hi = load_bounds_file(j).arrays(3)
    assert hi.tolist() == [1, 2, 3]
    c = tmp_path / "b.csv"
    c.write_text("# lo then hi\n0\n16\n")
    assert load_bounds_file(c).arrays(2)[1].tolist() == [16.0, 16.0]
    c.write_text("0,1\n")
    with pytest.raises(DataError, match=r"^feature bounds file .* must be JSON"):
        load_bounds_file(c)
    with pytest.raises(DataError, match=r"must exist, got no such file$"):
        load_bounds_file(tmp_path / "none.csv")


def test_bad_bounds_name_the_parameter():
    with pytest.raises(ParameterError, match=r"^feature_bounds must be finite with lo < hi for every feature, "
                                          r"got lo=5.0, hi=5.0 at feature 0$"):
        scale_by_bounds([[1.0, 2.0]], FeatureBounds(5.0, 5.0))
    with pytest.raises(ParameterError, match=r"^feature_bounds must be scalars or 2 values each"):
        scale_by_bounds([[1.0, 2.0]], FeatureBounds([0.0, 0.0, 0.0], 1.0))
