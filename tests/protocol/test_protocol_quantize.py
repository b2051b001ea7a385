"""Quantization toward zero and the owner's exact integer scatter share."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpdpca.errors import DataError
from dpdpca.protocol.layout import row_chunk_spans
from dpdpca.protocol.quantize import exact_scatter_share, exact_scatter_upper, quantize_rows

rows_strategy = st.integers(1, 6).flatmap(
    lambda d: arrays(np.float64, st.tuples(st.integers(1, 12), st.just(d)),
                     elements=st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)))


def _unit(X: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norms, 1.0)


@settings(max_examples=60, deadline=None)
@given(rows_strategy, st.integers(0, 26))
def test_truncation_toward_zero_keeps_the_integer_norm_bound(X, f):
    X = _unit(X)
    Xq = quantize_rows(X, f)
    assert np.all(np.abs(Xq) <= np.abs(X) * 2.0 ** f)
    assert np.all(np.sign(Xq) * np.sign(X) >= 0)
    limit = 1 << (2 * f)
    assert all(sum(int(x) ** 2 for x in row) <= limit for row in Xq)


@pytest.fixture(params=["int64", "float-blocks"])
def scatter_path(request, monkeypatch):
    """Both exact paths: the int64 product of small shares, and float64 BLAS blocks (forced by a zero threshold)."""
    if request.param == "float-blocks":
        monkeypatch.setattr("dpdpca.protocol.quantize._SMALL_INT_WORK", 0)
    return request.param


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(X=rows_strategy, f=st.sampled_from([0, 8, 16, 26]))
def test_scatter_share_is_exact_in_python_integers(scatter_path, X, f):
    Xq = quantize_rows(_unit(X), f)
    R, v, n = exact_scatter_share(Xq, f)
    rows = [[int(x) for x in r] for r in Xq]
    d = Xq.shape[1]
    for i in range(d):
        assert v[i] == sum(r[i] for r in rows)
        for j in range(d):
            assert R[i, j] == sum(r[i] * r[j] for r in rows)
    assert n == len(rows)


def test_blocks_cover_many_rows_exactly_at_high_precision(scatter_path):
    # f = 26: every product is up to 2**52, so blocks are single rows and sums exceed 2**53.
    X = np.full((40, 2), 0.7071)
    Xq = quantize_rows(X, 26)
    R, v, n = exact_scatter_share(Xq, 26)
    x = int(Xq[0, 0])
    assert R[0, 1] == 40 * x * x and R[0, 1] > 2 ** 53
    assert v[1] == 40 * x and n == 40


def test_entries_beyond_int64_are_summed_as_python_integers(scatter_path):
    # f = 26 and 5000 rows: R[0, 1] = 5000 x**2 > 2**63, so neither R nor its upper triangle may be int64
    Xq = quantize_rows(np.full((5000, 2), 0.7071), 26)
    x = int(Xq[0, 0])
    R, v, n = exact_scatter_share(Xq, 26)
    upper, v_up, _ = exact_scatter_upper(Xq, 26)
    assert R[0, 1] == 5000 * x * x and R[0, 1] > 2 ** 63 and n == 5000
    assert upper.dtype == object and list(upper) == [R[0, 0], R[0, 1], R[1, 1]]
    assert list(v_up) == list(v) == [5000 * x] * 2


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(X=rows_strategy, f=st.sampled_from([0, 8, 16, 26]))
def test_the_upper_triangle_an_owner_sends_is_the_shares_in_int64(scatter_path, X, f):
    Xq = quantize_rows(_unit(X), f)
    R, v, n = exact_scatter_share(Xq, f)
    upper, v_up, n_up = exact_scatter_upper(Xq, f)
    assert upper.dtype == np.int64 and v_up.dtype == np.int64  # these sizes always fit
    assert upper.tolist() == [R[i, j] for i in range(R.shape[0]) for j in range(i, R.shape[0])]
    assert v_up.tolist() == list(v) and n_up == n


def test_rounding_just_above_norm_one_is_pulled_inside():
    x = np.array([[0.6, 0.8 + 2e-16]])
    Xq = quantize_rows(x, 26)
    assert sum(int(a) ** 2 for a in Xq[0]) <= 1 << 52


def test_a_row_clearly_outside_the_ball_raises():
    with pytest.raises(DataError, match="norm <= 1"):
        quantize_rows(np.array([[1.0, 1.0]]), 16)


@pytest.mark.parametrize("d,slots", [(1, 1), (4, 3), (7, 2), (10, 16), (64, 15)])
def test_row_chunk_spans_tile_the_upper_triangle_row_by_row(d, slots):
    spans = row_chunk_spans(d, slots)
    cells = [(i, j) for i, a, length in spans for j in range(a, a + length)]
    assert cells == [(i, j) for i in range(d) for j in range(i, d)]  # row-major, each once
    assert all(1 <= length <= slots and a + length <= d for _, a, length in spans)
