"""Encrypted arrays: encrypt/decrypt, homomorphic operations, bounds, key checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.crypto import (
    EncryptedArray,
    EncryptedSymmetricMatrix,
    SlotLayout,
    decrypt,
    encrypt,
    scalar_times_packed,
    scalars_times_packed,
    sum_arrays,
    upper_triangle_chunks,
    upper_triangle_flatten,
    upper_triangle_unflatten,
)
from dpdpca.crypto import _gmp as bk
from dpdpca.errors import KeyMismatchError, MessageError, OverflowRiskError, ParameterError

LAYOUT = SlotLayout(slot_bits=40, slots=12)  # 480 <= 510 for a 512-bit key
M = LAYOUT.max_abs
HYP = settings(max_examples=25, deadline=None)


def signed(bound):
    return st.sampled_from([bound, -bound, 0]) | st.integers(min_value=-bound, max_value=bound)


@HYP
@given(st.lists(signed(M), min_size=1, max_size=30), st.sampled_from(["djn", "standard"]))
def test_encrypt_decrypt_round_trip(keys512, values, method):
    pk, sk = keys512
    enc = encrypt(pk, values, layout=LAYOUT, bound=M, method=method)
    assert enc.length == len(values) and len(enc.ciphertexts) == -(-len(values) // 12)
    assert decrypt(sk, enc) == values


def test_encrypt_accepts_arrays_and_custom_chunks(keys512):
    pk, sk = keys512
    vals = np.array([3, -4, 5, 6, -7], dtype=np.int64)
    enc = encrypt(pk, vals, layout=LAYOUT, bound=10, chunks=[2, 1, 2])
    assert enc.chunks == (2, 1, 2) and decrypt(sk, enc) == vals.tolist()
    obj = np.array([2**70, -(2**70)], dtype=object)
    wide = SlotLayout(slot_bits=80, slots=6)
    assert decrypt(sk, encrypt(pk, obj, layout=wide, bound=2**70)) == [2**70, -(2**70)]
    with pytest.raises(ParameterError, match=r"values\[1\] must be an integer .*got 1.5"):
        encrypt(pk, [1, 1.5], layout=LAYOUT, bound=2)
    with pytest.raises(ParameterError, match="chunks must be summing to len\\(values\\) = 5, got 4"):
        encrypt(pk, vals, layout=LAYOUT, bound=10, chunks=[2, 2])
    with pytest.raises(ParameterError, match=r"chunks\[0\] must be <= 12, got 13"):
        encrypt(pk, list(range(13)), layout=LAYOUT, bound=20, chunks=[13])
    with pytest.raises(ParameterError, match=r"chunks\[1\] must be >= 1, got 0"):
        encrypt(pk, vals, layout=LAYOUT, bound=10, chunks=[5, 0])
    with pytest.raises(TypeError, match=r"chunks\[1\] must be an integer"):
        encrypt(pk, vals, layout=LAYOUT, bound=10, chunks=[3, 2.0])


def test_encrypt_bound_checks(keys512):
    pk, _ = keys512
    with pytest.raises(OverflowRiskError, match=r"values\[1\] must satisfy \|value\| <= bound 7, got -8"):
        encrypt(pk, [7, -8], layout=LAYOUT, bound=7)
    # int64's -2**63 (which np.abs leaves negative) and a value past a bound above 2**62 are refused too
    with pytest.raises(OverflowRiskError, match=r"values\[0\] must satisfy \|value\| <= bound 10"):
        encrypt(pk, np.array([-(2 ** 63), 5], dtype=np.int64), layout=LAYOUT, bound=10)
    with pytest.raises(OverflowRiskError, match=f"encrypt: slot bound must be <= {M} .*got {M + 1}"):
        encrypt(pk, [1], layout=LAYOUT, bound=M + 1)


def test_two_encryptions_differ(keys512):
    pk, sk = keys512
    a = encrypt(pk, [5, 5], layout=LAYOUT, bound=5, chunks=[1, 1])
    b = encrypt(pk, [5], layout=LAYOUT, bound=5)
    assert len({int(a.ciphertexts[0]), int(a.ciphertexts[1]), int(b.ciphertexts[0])}) == 3
    assert decrypt(sk, a.rerandomize()) == [5, 5]
    assert a.rerandomize().ciphertexts != a.ciphertexts


@HYP
@given(st.data())
def test_add_and_sum(keys512, data):
    pk, sk = keys512
    n = data.draw(st.integers(min_value=1, max_value=25))
    k = data.draw(st.integers(min_value=2, max_value=4))
    bound = M // k
    vecs = [data.draw(st.lists(signed(bound), min_size=n, max_size=n)) for _ in range(k)]
    encs = [encrypt(pk, v, layout=LAYOUT, bound=bound) for v in vecs]
    total = sum_arrays(encs)
    assert total.bound == k * bound
    assert decrypt(sk, total) == [sum(col) for col in zip(*vecs)]
    assert decrypt(sk, encs[0] + encs[1]) == [a + b for a, b in zip(vecs[0], vecs[1])]


@HYP
@given(st.lists(signed(2**20), min_size=1, max_size=25), st.integers(min_value=-(2**18), max_value=2**18))
def test_mul_scalar(keys512, values, k):
    pk, sk = keys512
    enc = encrypt(pk, values, layout=LAYOUT, bound=2**20)
    out = enc.mul_scalar(k)
    assert out.bound == 2**20 * abs(k)
    assert decrypt(sk, out) == [k * v for v in values]


def test_mul_scalars_per_ciphertext(keys512):
    pk, sk = keys512
    enc = encrypt(pk, list(range(-6, 7)), layout=LAYOUT, bound=6, chunks=[5, 8])
    out = enc.mul_scalars([3, -2])
    assert decrypt(sk, out) == [3 * v for v in range(-6, -1)] + [-2 * v for v in range(-1, 7)]
    assert out.bound == 18
    with pytest.raises(ParameterError, match="ks must be one multiplier per ciphertext \\(2\\), got 3"):
        enc.mul_scalars([1, 2, 3])


@HYP
@given(st.lists(st.tuples(signed(2**30), signed(2**30)), min_size=1, max_size=25))
def test_add_plain(keys512, pairs):
    pk, sk = keys512
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    enc = encrypt(pk, a, layout=LAYOUT, bound=2**30)
    out = enc.add_plain(b, plain_bound=2**30)
    assert out.bound == 2**31 and decrypt(sk, out) == [x + y for x, y in zip(a, b)]


def test_overflow_raises_at_boundary_plus_one(keys512):
    pk, sk = keys512
    half = M // 2
    a = encrypt(pk, [half, -half], layout=LAYOUT, bound=half)
    b = encrypt(pk, [half + 1, -(half + 1)], layout=LAYOUT, bound=half + 1)
    assert decrypt(sk, a + b) == [M, -M]  # exactly at the boundary: allowed
    c = encrypt(pk, [1, 1], layout=LAYOUT, bound=half + 2)
    with pytest.raises(OverflowRiskError, match=f"sum_arrays of 2 arrays: slot bound must be <= {M}.*got {M + 1}"):
        a + c
    # plaintext addition
    assert decrypt(sk, a.add_plain([half + 1, -(half + 1)], plain_bound=half + 1)) == [M, -M]
    with pytest.raises(OverflowRiskError, match=f"add_plain: slot bound must be <= {M}"):
        a.add_plain([0, 0], plain_bound=half + 2)
    with pytest.raises(OverflowRiskError, match=r"values\[0\] must satisfy \|value\| <= bound 3, got 4"):
        a.add_plain([4, 0], plain_bound=3)
    # scalar multiplication: bound * |k| against max_abs
    e = encrypt(pk, [1], layout=LAYOUT, bound=1)
    assert decrypt(sk, e.mul_scalar(-M)) == [-M]
    with pytest.raises(OverflowRiskError, match=f"mul_scalar: slot bound must be <= {M}.*got {M + 1}"):
        e.mul_scalar(M + 1)


def test_key_and_shape_mismatch(keys512, other_keys512):
    pk, sk = keys512
    pk2, sk2 = other_keys512
    a = encrypt(pk, [1, 2], layout=LAYOUT, bound=2)
    b = encrypt(pk2, [1, 2], layout=LAYOUT, bound=2)
    with pytest.raises(KeyMismatchError, match="operands must share the key"):
        a + b
    with pytest.raises(KeyMismatchError, match="decrypt: ciphertexts must be under key"):
        decrypt(sk2, a)
    with pytest.raises(ParameterError, match="chunks must be equal on both operands"):
        a + encrypt(pk, [1, 2], layout=LAYOUT, bound=2, chunks=[1, 1])
    with pytest.raises(ParameterError, match="layout must be equal"):
        a + encrypt(pk, [1, 2], layout=SlotLayout(slot_bits=41, slots=12), bound=2)


def test_ciphertext_range_checked(keys512):
    pk, _ = keys512
    for bad in (0, pk.nsquare):
        with pytest.raises(MessageError, match=r"ciphertexts\[0\] must be in \[1, n\*\*2\)"):
            EncryptedArray(pk, LAYOUT, (1,), 1, [bad])


def test_false_bound_or_tampering_detected_on_decrypt(keys512):
    pk, sk = keys512
    enc = encrypt(pk, [1000], layout=LAYOUT, bound=1000).with_bound(10)
    with pytest.raises(MessageError, match=r"^every ciphertext must decrypt to its declared slots with \|slot\| <= 10, "
                                           r"got a plaintext that does not fit") as info:
        decrypt(sk, enc)
    assert "1000" not in str(info.value) and "[0]" not in str(info.value)  # neither the value nor where it is


def test_select_and_concat(keys512):
    pk, sk = keys512
    a = encrypt(pk, list(range(30)), layout=LAYOUT, bound=30)
    b = encrypt(pk, [-1, -2], layout=LAYOUT, bound=5)
    sel = a.select([2, 0])
    assert sel.chunks == (6, 12) and decrypt(sk, sel) == list(range(24, 30)) + list(range(12))
    cat = EncryptedArray.concat([b, a])
    assert cat.bound == 30 and decrypt(sk, cat) == [-1, -2] + list(range(30))


def _naive_packed_power(c, w, slot_bits, n2):
    exponent = sum(v << (slot_bits * t) for t, v in enumerate(w))
    return bk.powmod(c, exponent, n2)


@HYP
@given(signed(2**20), st.lists(st.lists(signed(2**15), min_size=1, max_size=12), min_size=1, max_size=6))
def test_scalar_times_packed(keys512, x, vectors):
    pk, sk = keys512
    enc_x = encrypt(pk, [x], layout=LAYOUT, bound=2**20)
    out = scalar_times_packed(enc_x, vectors, vector_bound=2**15)
    assert out.chunks == tuple(len(v) for v in vectors) and out.bound == 2**35
    assert decrypt(sk, out) == [x * w for v in vectors for w in v]
    # Same group element as the naive exponentiation by pack(w) (negative exponents via inverse).
    n2 = pk.nsquare
    assert out.ciphertexts == [_naive_packed_power(enc_x.ciphertexts[0], v, 40, n2) for v in vectors]


def test_scalar_times_packed_bounds(keys512):
    pk, sk = keys512
    enc_x = encrypt(pk, [-(2**20)], layout=LAYOUT, bound=2**20)
    edge = M // 2**20  # bound(x) * vector_bound <= M
    out = scalar_times_packed(enc_x, [[edge, -edge]], vector_bound=edge)
    assert decrypt(sk, out) == [-(2**20) * edge, 2**20 * edge]
    with pytest.raises(OverflowRiskError, match="scalar_times_packed: slot bound must be <="):
        scalar_times_packed(enc_x, [[1]], vector_bound=edge + 1)
    with pytest.raises(OverflowRiskError, match=r"vectors\[0\]\[1\] must satisfy \|value\| <= bound 5, got -6"):
        scalar_times_packed(enc_x, [[5, -6]], vector_bound=5)
    with pytest.raises(ParameterError, match="enc_scalar must be exactly one ciphertext holding one slot"):
        scalar_times_packed(encrypt(pk, [1, 2], layout=LAYOUT, bound=2), [[1]], vector_bound=1)
    with pytest.raises(ParameterError, match=r"len\(vectors\[0\]\) must be in \[1, 12\], got 13"):
        scalar_times_packed(enc_x, [[1] * 13], vector_bound=1)


def test_scalars_times_packed_many_bases(keys512):
    pk, sk = keys512
    xs = encrypt(pk, [3, -5, 7], layout=LAYOUT, bound=7, chunks=[1, 1, 1])
    vecs = [[[1, 2], [3]], [[-4, 5, 6]], [[0]]]
    out = scalars_times_packed(xs, vecs, vector_bound=6)
    assert out.chunks == (2, 1, 3, 1)
    assert decrypt(sk, out) == [3, 6, 9, 20, -25, -30, 0]


def test_upper_triangle_helpers():
    assert upper_triangle_chunks(5, 2) == (2, 2, 1, 2, 2, 2, 1, 2, 1)
    assert sum(upper_triangle_chunks(784, 12)) == 784 * 785 // 2
    assert all(c <= 12 for c in upper_triangle_chunks(784, 12))
    m = np.array([[1, 2, 3], [2, 4, 5], [3, 5, 6]], dtype=np.int64)
    flat = upper_triangle_flatten(m)
    assert flat.dtype == object and flat.tolist() == [1, 2, 3, 4, 5, 6]
    big = upper_triangle_unflatten([2**100, -1, 3], 2)
    assert big.tolist() == [[2**100, -1], [-1, 3]]
    with pytest.raises(ParameterError, match="values must be of length d \\(d \\+ 1\\) / 2 = 3, got 2"):
        upper_triangle_unflatten([1, 2], 2)


def test_encrypted_symmetric_matrix(keys512):
    pk, sk = keys512
    rng = np.random.default_rng(0)
    d = 7
    a = rng.integers(-1000, 1000, size=(d, d))
    sym = a + a.T
    small = SlotLayout(slot_bits=40, slots=3)
    enc = EncryptedSymmetricMatrix.encrypt_upper_triangle(pk, sym, layout=small, bound=2000)
    assert enc.array.chunks == upper_triangle_chunks(d, 3)
    out = enc.decrypt(sk)
    assert out.dtype == object and (out == sym).all()
    assert ((enc + enc).decrypt(sk) == 2 * sym).all()
    with pytest.raises(ParameterError, match="array.length must be d \\(d \\+ 1\\) / 2 = 6"):
        EncryptedSymmetricMatrix(3, enc.array)


def test_scalar_times_packed_rejects_non_unit_base(keys512):
    pk, sk = keys512
    with pytest.raises(MessageError, match=r"ciphertexts\[0\] must be a unit modulo n, got a non-unit"):
        EncryptedArray(pk, LAYOUT, (1,), 1, [sk.p])  # in [1, n**2) but shares a factor with n
    # Defence in depth inside the kernel (the constructor already refuses such input).
    bogus = EncryptedArray._trusted(pk, LAYOUT, (1,), 1, [sk.p])
    with pytest.raises(MessageError, match="must be a unit modulo n\\*\\*2"):
        scalar_times_packed(bogus, [[1, -1]], vector_bound=1)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 30), st.data())
def test_repack_packs_one_slot_ciphertexts_into_any_layout(keys512, slot_bits, data):
    """E[a_j] one per ciphertext -> E[sum_j a_j 2**(w j)]: decrypts to the same values, at the layout's bound."""
    pk, sk = keys512
    target = SlotLayout(slot_bits=slot_bits, slots=max(1, (pk.bits - 2) // slot_bits))
    bound = target.max_abs
    values = data.draw(st.lists(st.integers(-bound, bound), min_size=1, max_size=40))
    singles = encrypt(pk, values, layout=SlotLayout(slot_bits=40, slots=1), bound=bound, chunks=[1] * len(values))
    packed = singles.repack(target)
    assert packed.layout == target and packed.bound == bound and sum(packed.chunks) == len(values)
    assert len(packed.ciphertexts) == -(-len(values) // target.slots)
    assert decrypt(sk, packed) == values


def test_repack_refuses_multi_slot_input_and_a_bound_past_the_layout(keys512):
    from concurrent.futures import ThreadPoolExecutor

    pk, sk = keys512
    values = [(-1) ** i * (i % 100) for i in range(201)]
    singles = encrypt(pk, values, layout=SlotLayout(slot_bits=40, slots=4), bound=99, chunks=[1] * 201)
    with ThreadPoolExecutor(2) as pool:  # 101 outputs in several tasks: the slices line up
        assert singles.repack(SlotLayout(slot_bits=9, slots=2), executor=pool).ciphertexts == \
            singles.repack(SlotLayout(slot_bits=9, slots=2)).ciphertexts
    singles = encrypt(pk, [1, -2, 3], layout=SlotLayout(slot_bits=40, slots=4), bound=200, chunks=[1, 1, 1])
    with pytest.raises(OverflowRiskError, match=r"repack: slot bound must be <= 127 .*got 200"):
        singles.repack(SlotLayout(slot_bits=8, slots=4))
    with pytest.raises(ParameterError, match="chunks must be summing to the array's length 3"):
        singles.repack(SlotLayout(slot_bits=16, slots=4), chunks=[2])
    packed = encrypt(pk, [1, -2, 3], layout=SlotLayout(slot_bits=40, slots=4), bound=3)
    with pytest.raises(ParameterError, match="repack: chunks must be 1 slot per ciphertext"):
        packed.repack(SlotLayout(slot_bits=16, slots=4))
