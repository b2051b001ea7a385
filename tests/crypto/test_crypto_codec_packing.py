"""Fixed-point codec, the paper's discretizer, slot layouts and pack/unpack."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.crypto import FixedPointCodec, MinMaxDiscretizer, SlotLayout
from dpdpca.crypto.packing import centred, pack_slots, unpack_slots
from dpdpca.errors import DataError, OverflowRiskError, ParameterError

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=-2**80, max_value=2**80), min_size=1, max_size=20),
       st.integers(min_value=0, max_value=40))
def test_codec_exact_round_trip_on_grid(ints, f):
    """Values on the 2**-f grid encode and decode exactly (also beyond int64)."""
    codec = FixedPointCodec(frac_bits=f)
    x = np.array([math.ldexp(k, -f) for k in ints])
    enc = codec.encode(x)
    assert enc.dtype == object and all(type(v) is int for v in enc)
    assert list(enc) == [int(math.ldexp(v, f)) for v in x]
    np.testing.assert_array_equal(codec.decode(enc), x)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=20), st.integers(min_value=0, max_value=30))
def test_codec_rounding_modes(xs, f):
    x = np.array(xs)
    tz = FixedPointCodec(frac_bits=f).encode(x)
    near = FixedPointCodec(frac_bits=f, rounding="nearest").encode(x)
    for v, a, b in zip(xs, tz, near):
        exact = v * 2.0 ** f
        assert abs(a) <= abs(exact) and abs(exact - a) < 1  # toward zero
        assert abs(exact - b) <= 0.5


def test_codec_shape_scale_and_errors():
    codec = FixedPointCodec(frac_bits=3)
    assert codec.scale == 8
    out = codec.encode(np.array([[0.5, -0.25], [1.0, -1.99]]))
    assert out.shape == (2, 2) and out.tolist() == [[4, -2], [8, -15]]
    np.testing.assert_array_equal(codec.decode(np.array([64, -16], dtype=object), scale_power=2), [1.0, -0.25])
    with pytest.raises(DataError, match="finite"):
        codec.encode([np.nan])
    with pytest.raises(ParameterError, match="rounding must be one of"):
        FixedPointCodec(rounding="up")
    with pytest.raises(ParameterError, match="frac_bits must be >= 0, got -1"):
        FixedPointCodec(frac_bits=-1)


def test_minmax_discretizer_eq5():
    disc = MinMaxDiscretizer(4, min_value=[-1.0, 0.0], max_value=[1.0, 10.0])
    x = np.array([[-1.0, 0.0], [1.0, 10.0], [0.0, 5.0], [0.1, 2.0]])
    expected = np.floor(15 * (x - [-1.0, 0.0]) / [2.0, 10.0])
    np.testing.assert_array_equal(disc.discretize(x), expected)
    assert disc.discretize(x).min() >= 0 and disc.discretize(x).max() <= 15
    np.testing.assert_allclose(disc.undiscretize([[0, 0], [15, 15]]), [[-1.0, 0.0], [1.0, 10.0]])
    with pytest.raises(DataError, match="declared"):
        disc.discretize([[2.0, 0.0]])
    clip = MinMaxDiscretizer(4, -1.0, 1.0, clip=True)
    assert clip.discretize([5.0, -5.0]).tolist() == [15, 0]
    with pytest.raises(ParameterError, match="max_value must be > min_value"):
        MinMaxDiscretizer(4, 1.0, 1.0)


def test_layout_for_bound_and_limits(keys512):
    pk, _ = keys512
    lay = SlotLayout.for_bound(pk, 2**40)
    assert lay.slot_bits == 42 and lay.slots == 510 // 42 and lay.max_abs == 2**41 - 1
    lay = SlotLayout.for_bound(pk, 2**40 - 1)
    assert lay.slot_bits == 41
    with pytest.raises(OverflowRiskError, match="max_abs must fit one slot of at most bits\\(n\\) - 2 = 510"):
        SlotLayout.for_bound(pk, 2**510)
    assert SlotLayout.for_bound(pk, 2**509 - 1).slots == 1
    with pytest.raises(ParameterError, match="slots must be >= 1, got 0"):
        SlotLayout(slot_bits=8, slots=0)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=2, max_value=64).flatmap(
    lambda b: st.tuples(st.just(b), st.lists(st.sampled_from([-(2**(b - 1) - 1), 2**(b - 1) - 1, 0, 1, -1])
                                             | st.integers(min_value=-(2**(b - 1) - 1), max_value=2**(b - 1) - 1),
                                             min_size=1, max_size=12))))
def test_pack_unpack_round_trip(case):
    bits, values = case
    packed = pack_slots(values, bits)
    assert unpack_slots(packed, len(values), bits) == values
    # Storing mod an n > 2 * 2**(bits * len) and taking the centred residue is lossless.
    n = (1 << (bits * len(values) + 2)) + 1
    assert unpack_slots(centred(packed % n, n), len(values), bits) == values


def test_unpack_detects_leftover():
    assert unpack_slots(pack_slots([1, 2, 3], 8), 2, 8) is None


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_straus_multi_exponentiation_all_window_and_group_sizes(data):
    """The grouped Straus table agrees with plain pow for every (window, group) shape and ragged inputs."""
    from dpdpca.crypto import _gmp as bk

    m = 1000003 * 999983
    n_bases = data.draw(st.integers(min_value=1, max_value=7))
    bases = data.draw(st.lists(st.integers(min_value=2, max_value=m - 1), min_size=n_bases, max_size=n_bases))
    window = data.draw(st.integers(min_value=1, max_value=5))
    group = data.draw(st.integers(min_value=1, max_value=3))
    table = bk.StrausTable(bases, m, 40, window, group)
    exps = data.draw(st.lists(st.sampled_from([0, 1, 2**40 - 1]) | st.integers(min_value=0, max_value=2**40 - 1),
                              min_size=1, max_size=n_bases))
    expected = 1
    for b, e in zip(bases, exps):
        expected = expected * pow(b, e, m) % m
    assert table.multi_pow(exps) == expected
