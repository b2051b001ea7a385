"""A few full-size (2048-bit) checks with the protocol's slot parameters (160-bit slots, 12 per plaintext)."""

from __future__ import annotations

import pytest

from dpdpca.crypto import (
    EncryptedArray,
    SlotLayout,
    decrypt,
    encrypt,
    from_phe,
    scalar_times_packed,
    sum_arrays,
    to_phe,
)
from dpdpca.crypto import _gmp as bk

pytestmark = pytest.mark.slow

PROTOCOL_BOUND = 2**159 - 1  # what slot_value_bound gives for d=784, L=100, 10**5 rows (159 bits)


@pytest.fixture(scope="module")
def layout(keys2048):
    lay = SlotLayout.for_bound(keys2048[0], PROTOCOL_BOUND)
    assert (lay.slot_bits, lay.slots) == (160, 12)
    return lay


def test_protocol_layout_round_trip_and_sum(keys2048, layout):
    pk, sk = keys2048
    m = layout.max_abs
    a_vals = [m // 2, -(m // 2), 0, 1, -1] * 5
    b_vals = [m // 2 + 1, -(m // 2 + 1), 7, -7, 3] * 5
    a = encrypt(pk, a_vals, layout=layout, bound=m // 2)
    b = encrypt(pk, b_vals, layout=layout, bound=m // 2 + 1)
    assert decrypt(sk, a) == a_vals
    total = sum_arrays([a, b])
    assert total.bound == m
    assert decrypt(sk, EncryptedArray.from_bytes(total.to_bytes(), pk)) == [x + y for x, y in zip(a_vals, b_vals)]


def test_scalar_times_packed_full_size(keys2048, layout):
    pk, sk = keys2048
    v_bound = 10**7 << 16  # |v_i| for 10**7 rows at scale 2**16
    b_bound = v_bound << 40  # mask bound 2**kappa * V
    x = encrypt(pk, [-v_bound], layout=layout, bound=v_bound)
    vectors = [[b_bound, -b_bound] + list(range(-5, 5)), [b_bound - 1]]
    out = scalar_times_packed(x, vectors, vector_bound=b_bound)
    assert decrypt(sk, out) == [-v_bound * w for v in vectors for w in v]
    exponent = sum(w << (160 * t) for t, w in enumerate(vectors[0]))
    assert out.ciphertexts[0] == bk.powmod(x.ciphertexts[0], exponent, pk.nsquare)


def test_phe_interop_full_size(keys2048, layout):
    import phe

    pk, sk = keys2048
    ppk = phe.PaillierPublicKey(int(pk.n))
    psk = phe.PaillierPrivateKey(ppk, int(sk.p), int(sk.q))
    value = -(2**150)
    assert psk.decrypt(to_phe(encrypt(pk, [value], layout=layout, bound=2**150), ppk)) == value
    assert decrypt(sk, from_phe(ppk.encrypt(value), pk, bound=2**150, layout=layout)) == [value]
