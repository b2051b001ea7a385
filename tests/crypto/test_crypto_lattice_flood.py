"""Noise flooding of BFV ciphertexts: exact decryption, a noise term the key holder cannot tie to the shares."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

pytest.importorskip("tenseal", reason="the [lattice] extra (TenSEAL) is not installed")

from dpdpca.crypto import scheme_named  # noqa: E402
from dpdpca.crypto.lattice import (BFVArray, decrypt_bfv, encrypt_bfv, generate_bfv_keypair,  # noqa: E402
                                   smallest_parameters, sum_bfv)
from dpdpca.crypto.lattice_flood import (RESERVE_BITS, STATISTICAL_BITS, flood_bfv, flood_exponent,  # noqa: E402
                                         sample_flood)
from dpdpca.crypto.seal_wire import ciphertext_blob, parse_bfv_vector, parse_seal_ciphertext  # noqa: E402
from dpdpca.errors import MessageError, OverflowRiskError, ParameterError  # noqa: E402

OWNERS = 10


@pytest.fixture(scope="module")
def flood_keys():
    """The keys the protocol makes (BFVScheme.generate: room for flooding) for 10 owners and 2**54 values."""
    pk, sk = scheme_named("bfv").generate(key_bits=0, insecure_test_key=False, max_abs=2**54, additions=OWNERS + 2)
    assert pk.params == smallest_parameters(2**54, additions=OWNERS + 2, reserve_bits=RESERVE_BITS)
    # the data modulus holds the flood with one plaintext prime (sized to it: three data primes, a small special one)
    assert pk.params.ring_degree == 8192 and sum(pk.params.coeff_bits) <= 218
    assert len(pk.params.plain_moduli) == 1 and pk.params.plain_product > 2 * 2**54
    return pk, sk


def _level(ctx):
    import tenseal.sealapi  # noqa: F401  (registers SEAL's Modulus type)

    seal = ctx.seal_context().data
    return [int(m.value()) for m in seal.first_context_data().parms().coeff_modulus()], list(seal.first_parms_id())


def _budgets(sk, array):
    """SEAL's invariant noise budget of every ciphertext: the secret-key holder's measure of its noise, in bits."""
    out = []
    for ctx, row in zip(sk._contexts, array.per_prime_vectors()):
        dec = ctx.decryptor().data
        out.extend(dec.invariant_noise_budget(v.ciphertext()[0]) for v in row)
    return out


def _aggregate(pk, values, parts=OWNERS):
    """The proxy's release path: parts owners' encryptions summed, a plaintext added, rerandomized."""
    bound = max(abs(v) for v in values) or 1
    shares = [encrypt_bfv(pk, values, bound=bound) for _ in range(parts)]
    return sum_bfv(shares).add_plain([1] * len(values), plain_bound=1).rerandomize()


def test_flooding_keeps_decryption_exact_at_the_protocol_parameters(flood_keys):
    pk, sk = flood_keys
    top = pk.params.max_abs // (OWNERS + 1)
    values = [top, -top, 0, 1, -1, top - 7, -(top // 3)] * 1500  # 10 500 values: two chunks
    agg = _aggregate(pk, values)
    flooded = flood_bfv(agg)
    assert flooded.ciphertext_count == 2 and flooded.bound == agg.bound
    assert decrypt_bfv(sk, flooded) == [OWNERS * v + 1 for v in values]  # 0 integer error
    f = flood_exponent(agg.noise, 2 * 8192)
    assert f == STATISTICAL_BITS + math.ceil(math.log2(2 * 8192 * -(-agg.noise // 2)))
    assert flooded.noise == agg.noise + (2 << f) < pk.params.noise_capacity  # B + F below q/(2t), tracked


def test_flooded_noise_has_the_flood_size_not_the_shares_noise(flood_keys):
    """Measured with the secret key (SEAL's invariant noise budget): the noise grows from ~2**19 to ~2**f."""
    pk, sk = flood_keys
    agg = _aggregate(pk, list(range(-3000, 3000)))
    flooded = flood_bfv(agg)
    f = flood_exponent(agg.noise, pk.params.ring_degree * agg.ciphertext_count)
    before, after = _budgets(sk, agg), _budgets(sk, flooded)
    for ctx, t, b0, b1 in zip(sk._contexts, pk.params.plain_moduli, before, after):
        q = math.prod(_level(ctx)[0])
        # budget = log2(q / (2 t |v|)) up to a bit: |v| ~ 2**f after flooding (max of 8192 uniform draws on [-F, F))
        assert abs(b1 - (math.log2(q / t) - f - 1)) <= 2, (b1, f)
        assert b0 - b1 >= STATISTICAL_BITS + 15  # the shares' noise (~2**19) is now a 2**-40 fraction of it
        assert b1 >= 1  # still decrypts
    again = flood_bfv(agg)  # fresh randomness every time
    assert again.ciphertext_blobs() != flooded.ciphertext_blobs()


def test_attack_noise_reveals_how_the_sum_was_made_unless_flooded(flood_keys):
    """The key holder tells one encryption of m from a sum of 16 encryptions of m/16 by the noise, not after flooding.

    Both arrays declare the same noise bound (public), so they are flooded alike.  The values are constant, so
    the plaintext polynomial is a constant and SEAL's budget (which also sees ``(q mod t) m``) measures ``v``.
    """
    pk, sk = flood_keys
    values = [16 * 1234] * 8192
    one = encrypt_bfv(pk, values, bound=16 * 1234)
    many = sum_bfv([encrypt_bfv(pk, [1234] * 8192, bound=1234) for _ in range(16)])
    one = BFVArray(pk, one.chunks, many.bound, many.noise, one.per_prime_vectors())  # same public metadata
    assert decrypt_bfv(sk, one) == decrypt_bfv(sk, many) == values
    plain_one, plain_many = _budgets(sk, one), _budgets(sk, many)
    assert all(a - b >= 1 for a, b in zip(plain_one, plain_many))  # ~4x the noise: 2 bits of budget
    flood_one, flood_many = _budgets(sk, flood_bfv(one)), _budgets(sk, flood_bfv(many))
    assert flood_one == flood_many  # the shares' noise is drowned: the same measured noise
    # what stays visible is the public bound: 16 shares declare 16x the noise of one, so F is 2**4 larger
    m = pk.params.ring_degree * many.ciphertext_count
    assert flood_exponent(many.noise, m) == flood_exponent(encrypt_bfv(pk, [0], bound=0).noise, m) + 4


@pytest.mark.parametrize("exponent", [20, 63, 70, 75, 100])
def test_flood_sampler_is_uniform_on_the_interval_and_consistent_across_primes(flood_keys, exponent):
    """Every coefficient's residues recombine to one integer in [-2**f, 2**f), uniform (chi-square, 16 bins)."""
    pk, _ = flood_keys
    moduli, _ = _level(pk.contexts[0])
    q = math.prod(moduli)
    res = sample_flood(8192, exponent, tuple(moduli))
    assert res.shape == (3, 8192) and res.dtype == np.uint64
    basis = [(q // m) * pow(q // m, -1, m) for m in moduli]
    vals = [sum(int(r) * b for r, b in zip(col, basis)) % q for col in res.T]
    vals = [v - q if v > q // 2 else v for v in vals]
    assert -(2**exponent) <= min(vals) and max(vals) < 2**exponent
    assert min(vals) < -(2 ** (exponent - 4)) and max(vals) > 2 ** (exponent - 4)  # the interval is used
    counts = np.bincount([(v + 2**exponent) >> (exponent - 3) for v in vals], minlength=16)
    expected = 8192 / 16
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 45.0  # 15 degrees of freedom: p ~ 1e-4


def _trivial(c0, parms_id, size):
    """The wire bytes of the trivial ciphertext ``(c0, 0)`` (a flood, as residues) holding ``size`` values."""
    return ciphertext_blob(np.stack([c0, np.zeros_like(c0)]), parms_id, size)


def test_trivial_ciphertext_round_trips_through_the_codec(flood_keys):
    pk, _ = flood_keys
    moduli, parms_id = _level(pk.contexts[0])
    c0 = sample_flood(8192, 50, tuple(moduli))
    blob = _trivial(c0, parms_id, 300)
    size, ct = parse_bfv_vector(blob)
    assert size == 300 and list(ct.parms_id) == parms_id and not ct.is_ntt_form and ct.size == 2
    assert (ct.ring_degree, ct.coeff_modulus_size, ct.scale, ct.correction_factor) == (8192, 3, 1.0, 1)
    assert np.array_equal(ct.data[0], c0) and not ct.data[1].any()
    # zlib (SEAL's compr_mode 1) is read too: the same ciphertext recompressed
    seal = blob[blob.index(b"\x5e\xa1"):]
    body = zlib.compress(seal[16:])
    head = seal[:5] + bytes([1]) + seal[6:8] + (16 + len(body)).to_bytes(8, "little")
    assert np.array_equal(parse_seal_ciphertext(head + body).data, ct.data)
    cut = body[:-20]
    with pytest.raises(MessageError, match="got more or a cut stream|corrupt stream"):
        parse_seal_ciphertext(head[:8] + (16 + len(cut)).to_bytes(8, "little") + cut)


def test_malformed_or_foreign_ciphertexts_are_refused_in_one_line(flood_keys):
    pk, _ = flood_keys
    moduli, parms_id = _level(pk.contexts[0])
    blob = _trivial(sample_flood(8192, 30, tuple(moduli)), parms_id, 5)
    seal = blob[blob.index(b"\x5e\xa1"):]
    cases = [
        (b"not a ciphertext", "must have length-delimited fields 1 and 2"),
        (blob[:-9], "must fit the message"),
        (b"\x0a\x01\x05\x12\x04abcd", "must start with a 16-byte SEAL header"),
    ]
    for data, message in cases:
        with pytest.raises(MessageError, match=message) as err:
            parse_bfv_vector(data)
        assert "\n" not in str(err.value)
    with pytest.raises(MessageError, match="must start with SEAL magic 0xA15E"):
        parse_seal_ciphertext(b"\x00" * 16 + seal[16:])
    with pytest.raises(MessageError, match="must be 1 bytes as its header says|as its header says"):
        parse_seal_ciphertext(seal + b"\x00")
    # TenSEAL's own output is zstd-compressed: read whole, and a cut or padded frame is refused
    enc = encrypt_bfv(pk, [1, 2, 3], bound=3)
    tenseal_blob = enc.per_prime_vectors()[0][0].serialize()
    size, ct = parse_bfv_vector(tenseal_blob)
    assert size == 3 and ct.size == 2 and ct.data.shape == (2, 3, 8192) and ct.data[1].any()
    assert (ct.data < np.array(moduli, dtype=np.uint64)[None, :, None]).all()
    zseal = tenseal_blob[tenseal_blob.index(b"\x5e\xa1"):]
    for body, message in [(zseal[16:-20], "cut stream|corrupt stream"), (zseal[16:] + b"\0", "trailing bytes"),
                          (b"\x28\xb5\x2f\xfd" + b"\0" * 40, "stating a size|corrupt stream")]:
        with pytest.raises(MessageError, match=message) as err:
            parse_seal_ciphertext(zseal[:8] + (16 + len(body)).to_bytes(8, "little") + body)
        assert "\n" not in str(err.value)
    # a ciphertext of other parameters (N = 4096) inside an array that claims this key
    small_pk, _ = generate_bfv_keypair(smallest_parameters(2**40, additions=3))
    foreign = encrypt_bfv(small_pk, [1, 2, 3], bound=3)
    lie = BFVArray(pk, foreign.chunks, 3, 2 * pk.params.fresh_noise, foreign.per_prime_vectors() * 2)
    with pytest.raises(MessageError, match="got a foreign ciphertext"):
        flood_bfv(lie)
    # SEAL itself validates what the proxy writes: a residue above its prime is refused by the binding
    import tenseal as ts

    bad = np.zeros((3, 8192), dtype=np.uint64)
    bad[0, 0] = moduli[0]
    with pytest.raises(Exception):  # noqa: B017 -- the binding's own error type
        ts.bfv_vector_from(pk.contexts[0], _trivial(bad, parms_id, 5))


def test_a_key_without_room_for_flooding_is_refused_not_skipped(flood_keys):
    pk, _ = generate_bfv_keypair(smallest_parameters(2**40, additions=3))  # N = 4096: no reserve
    scheme = scheme_named("bfv")
    with pytest.raises(OverflowRiskError, match="must leave room in q/\\(2t\\) for the proxy's noise flooding"):
        scheme.check_encryptor_policy(pk, False)  # an owner refuses before encrypting
    scheme.check_encryptor_policy(flood_keys[0], False)
    enc = encrypt_bfv(pk, [5, -5], bound=5)
    with pytest.raises(OverflowRiskError, match=r"BFV flooding needs B \+ F below q/\(2t\).*reserve_bits=66"):
        flood_bfv(enc)
    with pytest.raises(ParameterError, match="noise must be"):
        flood_exponent(0, 8192)


def test_release_zeros_made_ahead_give_the_fresh_paths_release_and_are_used_once(flood_keys):
    """The proxy's offline zeros: exact values, the flood of their public bound, refused a second time."""
    from dpdpca.crypto.lattice_flood import ReleaseZeros, rerandomize_release

    pk, sk = flood_keys
    values = list(range(-2000, 2000))
    agg = sum_bfv([encrypt_bfv(pk, values, bound=2000) for _ in range(3)]).add_plain([1] * 4000, plain_bound=1)
    scheme = scheme_named("bfv")
    ahead = scheme.release_zeros(pk, len(values), additions=OWNERS + 1)  # sized for OWNERS shares, not 3
    assert "ready" in repr(ahead) and "vector" not in repr(ahead).lower()
    assert ahead.fits(agg) and ahead.max_noise == (OWNERS + 1) * pk.params.fresh_noise >= agg.noise
    out = ahead.apply(agg)
    assert decrypt_bfv(sk, out) == [3 * v + 1 for v in values]  # 0 integer error
    m = pk.params.ring_degree * agg.ciphertext_count
    f = flood_exponent(ahead.max_noise + pk.params.fresh_noise, m)
    assert out.noise == agg.noise + pk.params.fresh_noise + (2 << f) < pk.params.noise_capacity
    # measured with the secret key: the noise of the bound's flood, as the fresh path's for that bound
    fresh = ReleaseZeros(pk, agg.chunks, max_noise=ahead.max_noise).apply(agg)
    assert all(abs(a - b) <= 1 for a, b in zip(_budgets(sk, out), _budgets(sk, fresh)))
    assert set(out.ciphertext_blobs()).isdisjoint(fresh.ciphertext_blobs())  # independent randomness
    assert "used" in repr(ahead) and not ahead.fits(agg)
    with pytest.raises(ParameterError, match="array must be an unused fit"):
        ahead.apply(agg)  # used once
    small = ReleaseZeros(pk, agg.chunks, max_noise=agg.noise - 1)
    with pytest.raises(ParameterError, match="noise <= max_noise"):
        small.apply(agg)  # a bound below the aggregate's would under-flood it
    other = encrypt_bfv(pk, [1] * 9000, bound=1)  # another chunk layout
    assert not ReleaseZeros(pk, agg.chunks, max_noise=agg.noise).fits(other)
    # the scheme falls back to zeros made now, for the aggregate's own bound, when those made ahead do not fit
    from dpdpca.crypto.lattice import views_of

    now = scheme.rerandomize_sections(views_of(agg, ["R"]), pk, ready=small)["R"].packed
    assert now.noise == rerandomize_release(agg).noise < out.noise
    assert decrypt_bfv(sk, now) == [3 * v + 1 for v in values]


def test_without_zstandard_the_bfv_scheme_says_which_extra_to_install(flood_keys, monkeypatch):
    """TenSEAL writes zstd; reading it needs the [lattice] extra's zstandard: missing, one line names the extra
    (and bfv_available() says no) rather than an ImportError from deep inside a share's check."""
    import sys

    from dpdpca.crypto.lattice import bfv_available
    from dpdpca.errors import MissingDependencyError

    pk, _ = flood_keys
    blob = encrypt_bfv(pk, [1, 2, 3], bound=3).per_prime_vectors()[0][0].serialize()
    monkeypatch.setitem(sys.modules, "zstandard", None)
    assert not bfv_available()
    with pytest.raises(MissingDependencyError, match=r"^scheme 'bfv' needs the optional extra: pip install "
                                                     r"'dpdpca\[lattice\]' \(zstandard, to read TenSEAL's "
                                                     r"ciphertexts\), got it missing$"):
        parse_bfv_vector(blob)
