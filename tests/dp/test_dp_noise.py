"""Structured noise: symmetric matrices, blocks, symmetric 3-way tensors."""

from __future__ import annotations

from fractions import Fraction
from itertools import permutations

import numpy as np
import pytest
from scipy import stats

from dp_stats import P_MIN
from dpdpca.dp import (
    discrete_gaussian_block,
    gaussian_block,
    symmetric_discrete_gaussian_matrix,
    symmetric_discrete_gaussian_tensor,
    symmetric_from_upper,
    symmetric_gaussian_matrix,
    symmetric_gaussian_tensor,
    symmetric_tensor_from_entries,
    upper_from_symmetric,
)
from dpdpca.dp.noise import symmetric_tensor_size, upper_triangle_size
from dpdpca.errors import ParameterError


def test_symmetric_gaussian_matrix_is_mirrored_iid_upper_triangle():
    g = symmetric_gaussian_matrix(60, 2.5, rng=np.random.default_rng(0))
    assert g.shape == (60, 60) and np.array_equal(g, g.T)
    upper = upper_from_symmetric(g)
    assert upper.size == 60 * 61 // 2 and np.unique(upper).size == upper.size
    assert stats.kstest(upper / 2.5, "norm").pvalue > P_MIN
    # diagonal has the same variance as off-diagonal entries (Analyze Gauss), not doubled
    assert stats.kstest(np.diag(g) / 2.5, "norm").pvalue > P_MIN


def test_symmetric_discrete_gaussian_matrix_holds_python_ints():
    g = symmetric_discrete_gaussian_matrix(8, 10**40, rng=np.random.default_rng(1))  # sigma = 1e20
    assert g.dtype == object and all(isinstance(v, int) for v in g.ravel())
    assert all(g[i, j] == g[j, i] for i in range(8) for j in range(8))
    assert max(abs(v) for v in g.ravel()) > 2**63  # beyond int64: exact Python ints
    g2 = symmetric_discrete_gaussian_matrix(3, Fraction(9, 4))
    assert g2.shape == (3, 3)


def test_blocks():
    b = gaussian_block(5, 3, 1.5, rng=np.random.default_rng(2))
    assert b.shape == (5, 3) and np.unique(b).size == 15
    db = discrete_gaussian_block(4, 2, 100, rng=np.random.default_rng(2))
    assert db.shape == (4, 2) and db.dtype == object


def test_symmetric_tensor_has_c_d_plus_2_3_free_entries():
    d = 5
    t = symmetric_gaussian_tensor(d, 1.0, rng=np.random.default_rng(3))
    assert t.shape == (d, d, d)
    for i, j, k in [(0, 1, 2), (1, 1, 3), (4, 0, 4)]:
        assert len({t[p] for p in permutations((i, j, k))}) == 1
    assert np.unique(t).size == symmetric_tensor_size(d) == 35
    ti = symmetric_discrete_gaussian_tensor(3, 50, rng=np.random.default_rng(4))
    assert ti.dtype == object and ti[0, 1, 2] == ti[2, 0, 1]


def test_round_trips_and_shape_errors():
    v = np.arange(upper_triangle_size(4), dtype=float)
    assert np.array_equal(upper_from_symmetric(symmetric_from_upper(v, 4)), v)
    with pytest.raises(ValueError, match=r"values must have shape \(10,\) for d=4, got \(9,\)"):
        symmetric_from_upper(np.zeros(9), 4)
    with pytest.raises(ValueError, match=r"values must have shape \(10,\) for d=3, got \(9,\)"):
        symmetric_tensor_from_entries(np.zeros(9), 3)
    with pytest.raises(ParameterError, match=r"^sigma must be >= 0, got -1.0$"):
        symmetric_gaussian_matrix(3, -1.0)
    with pytest.raises(ParameterError, match=r"^d must be >= 1, got 0$"):
        symmetric_gaussian_matrix(0, 1.0)
    with pytest.raises(ParameterError, match=r"^c must be >= 1, got 0$"):
        gaussian_block(2, 0, 1.0)
