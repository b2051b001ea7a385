"""BFV (TenSEAL) behind the scheme interface: exact CRT integers, bounds and noise checked first, HE-standard keys."""

from __future__ import annotations

import json
import re

import numpy as np

import pytest

pytest.importorskip("tenseal", reason="the [lattice] extra (TenSEAL) is not installed")

from dpdpca.crypto import generate_keypair, private_key_from_json, public_key_from_json, scheme_named  # noqa: E402
from dpdpca.crypto.lattice import (HE_STANDARD_128, BFVArray, BFVParameters, BFVPrivateKey,  # noqa: E402
                                   BFVPublicKey, decrypt_bfv, encrypt_bfv, generate_bfv_keypair,
                                   smallest_parameters, sum_bfv)
from dpdpca.errors import (InsecureKeyError, KeyMismatchError, MessageError, OverflowRiskError,  # noqa: E402
                           ParameterError)


@pytest.fixture(scope="module")
def crt_keys():
    """N = 4096, two 50-bit plaintext primes: values up to ~2**95 recombined with the CRT."""
    params = smallest_parameters(2**95, additions=12)
    assert params.ring_degree == 4096 and len(params.plain_moduli) == 2
    return generate_bfv_keypair(params)


@pytest.fixture(scope="module")
def other_keys():
    return generate_bfv_keypair(smallest_parameters(2**95, additions=12))


def test_crt_round_trip_is_exact_at_the_range_edges(crt_keys):
    pk, sk = crt_keys
    top = pk.params.max_abs
    values = [0, 1, -1, top, -top, top - 12345, -(top // 3), 2**63, -(2**63) - 1] * 500  # spans two ciphertexts
    enc = encrypt_bfv(pk, values, bound=top)
    assert enc.chunks == (4096, len(values) - 4096) and enc.ciphertext_count == 4
    assert decrypt_bfv(sk, enc) == values


def test_sum_plain_add_and_rerandomize_are_exact(crt_keys):
    pk, sk = crt_keys
    a = [(-1) ** i * (i * 7919) ** 4 for i in range(1000)]
    b = [3 - i * 10**12 for i in range(1000)]
    bound = max(abs(x) for x in a + b)
    total = sum_bfv([encrypt_bfv(pk, a, bound=bound), encrypt_bfv(pk, b, bound=bound),
                     encrypt_bfv(pk, a, bound=bound)])
    noise = [(-1) ** i * i for i in range(1000)]
    out = total.add_plain(noise, plain_bound=1000)
    fresh = out.rerandomize()
    assert fresh.ciphertext_blobs() != out.ciphertext_blobs()  # a new encryption of 0 in every ciphertext
    assert fresh.noise == out.noise + pk.params.fresh_noise and fresh.bound == 3 * bound + 1000
    assert decrypt_bfv(sk, fresh) == [2 * x + y + z for x, y, z in zip(a, b, noise)]


def test_out_of_range_raises_before_computing(crt_keys):
    pk, _ = crt_keys
    top = pk.params.max_abs
    with pytest.raises(OverflowRiskError, match="within the declared bound 10, got"):
        encrypt_bfv(pk, [11], bound=10)
    with pytest.raises(OverflowRiskError, match="within the declared bound 10, got"):
        encrypt_bfv(pk, [-(2 ** 63), 5], bound=10)  # np.abs would leave -2**63 negative and let it through
    with pytest.raises(ParameterError, match="values must be integers"):
        encrypt_bfv(pk, [1.5], bound=10)
    with pytest.raises(OverflowRiskError, match="CRT range"):
        encrypt_bfv(pk, [1], bound=top + 1)
    big = encrypt_bfv(pk, [top], bound=top)
    with pytest.raises(OverflowRiskError, match="add result bound must be <= "):
        big.add(big)
    with pytest.raises(OverflowRiskError, match="add_plain result bound"):
        big.add_plain([0], plain_bound=1)


def test_tracked_noise_refuses_a_sum_that_could_fail_to_decrypt(crt_keys):
    pk, _ = crt_keys
    enc = encrypt_bfv(pk, [1, 2], bound=2)
    near = BFVArray(pk, enc.chunks, enc.bound, pk.params.noise_capacity - 1, enc._vectors)
    with pytest.raises(OverflowRiskError, match="BFV noise must stay below q/\\(2t\\)"):
        near.add(enc)
    with pytest.raises(OverflowRiskError, match="rerandomize BFV noise"):
        near.rerandomize()
    # the capacity is the proven worst case: 21 (2N + 1) per fresh encryption (half-units x2, +1 rounding)
    assert pk.params.fresh_noise == 2 * 21 * (2 * 4096 + 1) + 1
    # more additions leave narrower plaintext primes (more of them), until none is wide enough
    many = BFVParameters.for_bound(2**40, additions=10_000_000, ring_degree=4096, coeff_bits=(36, 36, 37))
    assert max(many.plain_moduli).bit_length() < min(pk.params.plain_moduli).bit_length()
    assert many.fresh_noise * 10_000_000 < many.noise_capacity
    with pytest.raises(OverflowRiskError, match="plaintext primes must have >= 17 bits under the noise of"):
        BFVParameters.for_bound(2**40, additions=2**40, ring_degree=4096, coeff_bits=(36, 36, 37))


def test_wire_round_trip_and_tampering(crt_keys, other_keys):
    pk, sk = crt_keys
    enc = encrypt_bfv(pk, list(range(-50, 50)), bound=50)
    data = enc.to_bytes()
    assert decrypt_bfv(sk, BFVArray.from_bytes(data, pk)) == list(range(-50, 50))
    with pytest.raises(KeyMismatchError, match="must be under key"):
        BFVArray.from_bytes(data, other_keys[0])
    with pytest.raises(MessageError, match="truncated|past its end"):
        BFVArray.from_bytes(data[:-100], pk)
    with pytest.raises(MessageError, match="trailing bytes"):
        BFVArray.from_bytes(data + b"\0", pk)
    with pytest.raises(MessageError, match="must start with"):
        BFVArray.from_bytes(b"DPDPCA" + data[6:], pk)
    # a false declared bound is caught at decryption (values beyond it), never silently accepted
    head_len = int.from_bytes(data[6:10], "big")
    head = json.loads(data[10:10 + head_len])
    head["bound"] = "3"
    new_head = json.dumps(head, separators=(",", ":")).encode()
    forged = data[:6] + len(new_head).to_bytes(4, "big") + new_head + data[10 + head_len:]
    with pytest.raises(MessageError, match="within the declared bound 3"):
        decrypt_bfv(sk, BFVArray.from_bytes(forged, pk))
    with pytest.raises(KeyMismatchError):
        decrypt_bfv(other_keys[1], enc)


def test_keys_json_round_trip_and_checks(crt_keys, other_keys, tmp_path):
    pk, sk = crt_keys
    pub = pk.to_json()
    assert pub["kty"] == "DPDPCA-BFV" and "secret" not in json.dumps(pub)
    loaded = public_key_from_json(json.loads(json.dumps(pub)))
    assert isinstance(loaded, BFVPublicKey) and loaded == pk and loaded.fingerprint == pk.fingerprint
    sk2 = private_key_from_json(json.loads(json.dumps(sk.to_json())))
    assert isinstance(sk2, BFVPrivateKey) and "secret" not in repr(sk2)
    assert decrypt_bfv(sk2, encrypt_bfv(loaded, [7, -7], bound=7)) == [7, -7]
    # declared parameters must be the contexts' own
    with pytest.raises(MessageError, match="declared ring degree, modulus bits and plaintext prime"):
        public_key_from_json({**pub, "plain_moduli": [str(t) for t in reversed(pk.params.plain_moduli)]})
    # a public key must not carry a secret key; a private key must match its public key
    secret_ctx = sk.to_json()["secret_contexts"]
    with pytest.raises(MessageError, match="must not hold a secret key"):
        public_key_from_json({**pub, "contexts": secret_ctx})
    with pytest.raises(KeyMismatchError, match="must match the public key"):
        private_key_from_json({**sk.to_json(), "secret_contexts": other_keys[1].to_json()["secret_contexts"]})
    sk.save(tmp_path / "k.json")
    assert (tmp_path / "k.json").stat().st_mode & 0o777 == 0o600


def test_he_standard_table_is_checked_on_load(crt_keys):
    pk, _ = crt_keys
    assert sum(pk.params.coeff_bits) <= HE_STANDARD_128[pk.params.ring_degree]
    weak = BFVParameters(4096, (60, 60), pk.params.plain_moduli)  # 120 > 109 bits at N = 4096
    with pytest.raises(InsecureKeyError, match="must be <= 109 for ring degree 4096 .128-bit security"):
        weak.check_security()
    with pytest.raises(InsecureKeyError, match="128-bit security"):
        public_key_from_json({**pk.to_json(), "coeff_bits": [60, 60]})
    # the flag lets the table pass, but the contexts must still be what is declared (SEAL builds no weaker ones)
    with pytest.raises(MessageError, match="declared ring degree"):
        public_key_from_json({**pk.to_json(), "coeff_bits": [60, 60]}, insecure_test_key=True)


def test_smallest_parameters_are_tight_and_secure():
    # the protocol's default range (10 owners of 6000 rows, f = 16, noise allowance): one prime at N = 4096
    p = smallest_parameters(2**50, additions=12)
    assert (p.ring_degree, len(p.plain_moduli)) == (4096, 1) and p.plain_product > 2 * 2**50
    assert sum(p.coeff_bits) <= HE_STANDARD_128[4096]
    # tight: the data-level modulus is the noise's bits plus the prime's plus one bit per data prime, no more
    data = p.coeff_bits[:-1]
    noise_bits = (p.fresh_noise * 12).bit_length()
    assert sum(b - 1 for b in data) <= max(p.plain_moduli).bit_length() + noise_bits + 1
    assert p.fresh_noise * 12 < p.noise_capacity  # and still correct
    # a range beyond one 59-bit prime: two narrower primes, not two 59-bit ones
    wide = smallest_parameters(2**70, additions=12)
    assert len(wide.plain_moduli) == 2 and max(wide.plain_moduli).bit_length() <= 38
    # noise that no N = 4096 modulus within 109 bits absorbs moves to a larger ring, still within the table
    noisy = smallest_parameters(2**58, additions=2**40)
    assert noisy.ring_degree > 4096 and sum(noisy.coeff_bits) <= HE_STANDARD_128[noisy.ring_degree]
    assert noisy.fresh_noise * 2**40 < noisy.noise_capacity
    # a range whose one prime needs more than N = 4096's 109 bits under the noise of 1002 additions: per value a
    # larger ring with one prime is cheapest, but a share of 1 711 values (d = 57) fits one N = 4096 ciphertext
    # per prime, so two narrower primes at N = 4096 cost fewer bytes than half-empty 8192-slot ciphertexts
    full = smallest_parameters(2**55, additions=1002)
    small = smallest_parameters(2**55, additions=1002, values=1711)
    assert (full.ring_degree, len(full.plain_moduli)) == (8192, 1)
    assert (small.ring_degree, len(small.plain_moduli)) == (4096, 2) and small.plain_product > 2**56
    assert sum(small.coeff_bits) <= HE_STANDARD_128[4096] and small.fresh_noise * 1002 < small.noise_capacity


def test_schemes_do_not_mix(crt_keys):
    pk, _ = crt_keys
    ppk, _ = generate_keypair(512, insecure_test_key=True)
    bfv, paillier = scheme_named("bfv"), scheme_named("paillier")
    blob = encrypt_bfv(pk, [1], bound=1).to_bytes()
    with pytest.raises(MessageError, match="under a BFV key, got a Paillier key"):
        bfv.load(blob, ppk, layout=None)
    with pytest.raises(MessageError):
        paillier.load(blob, ppk, layout=None)
    with pytest.raises(MessageError, match="kty must be"):
        BFVPublicKey.from_json(ppk.to_json())
    assert not bfv.centred_release and paillier.centred_release


def test_segments_keep_their_own_bounds(crt_keys):
    from dpdpca.crypto.lattice import BFVSection, encrypt_segments, pack_of, split_segments, views_of

    pk, sk = crt_keys
    enc = encrypt_segments(pk, [(list(range(-3, 4)), 3), ([10**20], 10**20), ([-5, 5], 5)])
    assert enc.chunks == (10,) and enc.segments == ((7, 3), (1, 10**20), (2, 5)) and enc.bound == 10**20
    with pytest.raises(OverflowRiskError, match="segment 2 values must be within its declared bound 4"):
        encrypt_segments(pk, [([1], 1), ([2], 2), ([5], 4)])  # checked per segment, before encrypting
    total = enc.add(enc).add_plain([1] * 10, plain_bound=1).rerandomize()
    assert total.segments == ((7, 7), (1, 2 * 10**20 + 1), (2, 11))
    again = BFVArray.from_bytes(total.to_bytes(), pk)
    assert again.segments == total.segments and again.replay_keys() == total.replay_keys()
    out = split_segments(again, decrypt_bfv(sk, again))
    assert out == [[2 * x + 1 for x in range(-3, 4)], [2 * 10**20 + 1], [-9, 11]]
    views = views_of(again, ["R", "v", "N"])
    assert pack_of(views) is again and isinstance(views["v"], BFVSection) and views["v"].bound == 2 * 10**20 + 1
    with pytest.raises(MessageError, match="segments of one packed array in order"):
        pack_of({"v": views["v"], "R": views["R"], "N": views["N"]})
    # a segment that decrypts beyond its own declared bound is refused, though within the array's largest
    liar = BFVArray(pk, enc.chunks, 0, enc.noise, enc._vectors, None, [(7, 2), (1, 10**20), (2, 5)])
    with pytest.raises(MessageError, match="within the declared bound 2 in segment 0, got"):
        decrypt_bfv(sk, liar)


def test_one_prime_round_trip_is_exact_at_the_range_edges():
    pk, sk = generate_bfv_keypair(smallest_parameters(2**40, additions=3))
    assert len(pk.params.plain_moduli) == 1
    top = pk.params.max_abs
    values = [0, 1, -1, top, -top, top - 1, -(top // 3)] * 700  # two ciphertexts at N = 4096
    enc = encrypt_bfv(pk, values, bound=top)
    assert len(enc.chunks) == 2 and decrypt_bfv(sk, enc) == values
    liar = BFVArray(pk, enc.chunks, 0, enc.noise, enc._vectors, None, [(len(values), top - 1)])
    with pytest.raises(MessageError, match=f"within the declared bound {top - 1}, got a value beyond it") as info:
        decrypt_bfv(sk, liar)
    assert str(top) not in str(info.value).replace(str(top - 1), "")  # the bound, never the decrypted value


def _negated(enc):
    """An array whose ciphertexts are ``enc``'s negated (``a - (a + a)``): added to ``enc``, c1 cancels to 0."""
    return BFVArray(enc.public_key, enc.chunks, 0, enc.noise,
                    [[a - (a + a) for a in row] for row in enc.per_prime_vectors()], enc.layout, enc.segments)


def test_a_transparent_result_is_a_one_line_message_error_never_a_bare_runtime_error(crt_keys):
    """SEAL refuses a result whose c1 is 0 with a RuntimeError; every BFV addition says it in one MessageError."""
    from dpdpca.crypto.lattice import views_of

    pk, sk = crt_keys
    enc = encrypt_bfv(pk, [5, -7, 11], bound=11)
    neg = _negated(enc)
    assert decrypt_bfv(sk, neg) == [-5, 7, -11]  # a valid ciphertext of its own
    one_line = r"^BFV {} result must have a nonzero mask part c1, got c1 = 0 \(a transparent ciphertext[^\n]*$"
    with pytest.raises(MessageError, match=one_line.format("add")):
        enc.add(neg)
    with pytest.raises(MessageError, match=one_line.format("add")):
        sum_bfv([enc, neg])
    with pytest.raises(MessageError, match=one_line.format("add_zeros")):
        enc.add_zeros(neg.per_prime_vectors(), 0)
    bfv = scheme_named("bfv")
    with pytest.raises(MessageError, match=one_line.format("take_out")):
        bfv.take_out(views_of(enc, ["x"]), views_of(enc, ["x"]))
    # a sum that merely passes through a cancellation in another order is fine: (a + b) + (-a) = b
    b = encrypt_bfv(pk, [1, 2, 3], bound=11)
    assert decrypt_bfv(sk, sum_bfv([enc, b, neg])) == [1, 2, 3]


def test_plaintext_addition_through_the_wrapped_vector_is_the_python_layers_byte_for_byte(crt_keys):
    from dpdpca.crypto.lattice import _plus_plain

    pk, sk = crt_keys
    enc = encrypt_bfv(pk, [5, -7, 11] * 100, bound=11)
    t = pk.params.plain_moduli[0]
    plain = [(i * 104729) % t for i in range(300)]
    vector = enc.per_prime_vectors()[0][0]
    fast = _plus_plain(vector, plain)
    assert type(fast) is type(vector)
    assert fast.serialize() == (vector + plain).serialize()  # the same SEAL encoding and add_plain: same bytes
    assert fast.serialize() != vector.serialize()


def test_encryptions_of_zero_from_one_plaintext_tensor_each_draw_their_own_randomness(crt_keys):
    from dpdpca.crypto.lattice import EncryptionZeros

    pk, sk = crt_keys
    n = pk.params.ring_degree
    chunks = (n, n, 5)  # two chunks share one plaintext tensor of zeros
    zeros = EncryptionZeros(pk, chunks).take(pk, chunks)
    blobs = [v.serialize() for per_prime in zeros for v in per_prime]
    assert len(blobs) == 3 * len(pk.params.plain_moduli) and len(set(blobs)) == len(blobs)
    enc = BFVArray(pk, chunks, 0, pk.params.fresh_noise, zeros, None, [(2 * n + 5, 0)])
    assert decrypt_bfv(sk, enc) == [0] * (2 * n + 5)


@pytest.mark.parametrize("secret, contexts", [("0", None), ("1", None), ("1x^5", [1]), ("1x^4095", None)])
def test_a_public_key_made_from_a_publicly_known_secret_is_refused(crt_keys, transparent_bfv_key, secret, contexts):
    # the data user publishes pk = (-(a s + e), a) with s = 0, 1 or x^i: every owner ciphertext decrypts under s
    from dpdpca.crypto.lattice import check_not_transparent

    pk, _ = crt_keys
    evil = BFVPublicKey.from_json(transparent_bfv_key(pk.to_json(), secret, contexts))  # the loader's checks pass
    name = secret.replace("1x^", "x^")
    first = 0 if contexts is None else contexts[0]
    with pytest.raises(InsecureKeyError, match=rf"^BFV public key must not be transparent \(context {first}'s "
                                               rf"encryptions decrypt under the publicly known secret key "
                                               rf"{re.escape(name)}\), got one that does$"):
        check_not_transparent(evil)
    check_not_transparent(pk)  # an honest key passes (and every BFV owner test checks one)


def test_transparent_secret_names_every_publicly_known_key_and_no_honest_one():
    from dpdpca.crypto.lattice import transparent_secret

    rng = np.random.default_rng(7)
    n = 4096
    c1 = rng.random(n)

    def shifted(i):  # x^i c1 mod x^N + 1, as fractions of q
        return np.concatenate([-c1[n - i:], c1[:n - i]]) if i else c1

    noise = rng.normal(0, 2.0**-20, n)  # the phase of a decryptable encryption: well below q/(2t)
    assert transparent_secret(noise, c1) == "0"
    for i in (0, 1, 777, n - 1):
        name = "1" if i == 0 else f"x^{i}"
        assert transparent_secret(noise - shifted(i), c1) == name  # c0 + x^i c1 = noise
        assert transparent_secret(noise + shifted(i), c1) == f"-{name}"
    for _ in range(5):
        assert transparent_secret(rng.random(n), c1) is None  # uniform phases: an honest key


def test_sums_of_residues_are_the_bindings_sums_ciphertext_for_ciphertext(crt_keys):
    """The proxy sums shares as residues in numpy (never through SEAL): the same ring elements SEAL's additions
    give, for a pair, for a chain (one buffer per ciphertext), for a difference and for added zeros; and the
    residues read back into the binding decrypt to the same values."""
    from dpdpca.crypto.lattice import EncryptionZeros

    pk, sk = crt_keys
    rng = np.random.default_rng(4)
    made = [encrypt_bfv(pk, rng.integers(-1000, 1000, 300).tolist(), bound=1000) for _ in range(4)]
    # the binding's vectors alone (to_bytes below reads residues out and keeps them on the array it was asked of)
    arrays = [BFVArray(pk, a.chunks, 0, a.noise, a.per_prime_vectors(), None, a.segments) for a in made]
    held = [BFVArray.from_bytes(a.to_bytes(), pk) for a in made]  # residues, as a received share
    assert all(h.holds_residues for h in held) and not any(a.holds_residues for a in arrays)

    def same(x, y):
        return all(np.array_equal(a, b) for ra, rb in zip(x.residues(), y.residues()) for a, b in zip(ra, rb))

    pair = arrays[0].add(arrays[1])
    assert not pair.holds_residues and same(held[0].add(held[1]), pair)  # SEAL's sum, read out afterwards
    chained = sum_bfv(held)  # more than two: accumulated in place
    assert chained.holds_residues and same(chained, sum_bfv(arrays))
    assert same(chained.take_out(held[2]), sum_bfv([arrays[0], arrays[1], arrays[3]]))
    zeros = EncryptionZeros(pk, arrays[0].chunks).take(pk, arrays[0].chunks)
    zero_array = BFVArray(pk, arrays[0].chunks, 0, pk.params.fresh_noise, zeros)
    by_binding = arrays[0].add_zeros(zero_array.per_prime_vectors(), pk.params.fresh_noise)
    assert same(held[0].add_zeros(None, pk.params.fresh_noise, residues=zero_array.residues()), by_binding)
    data = made[0].to_bytes()  # the wire's ciphertexts take exactly the size the scheme states (no compression)
    head = 10 + int.from_bytes(data[6:10], "big")
    assert len(data) - head == made[0].ciphertext_count * scheme_named("bfv").min_ciphertext_bytes(pk) and head % 8 == 0
    expected = [sum(vals) for vals in zip(*(decrypt_bfv(sk, a) for a in arrays))]
    assert decrypt_bfv(sk, chained) == expected  # read back into the binding: SEAL validates and decrypts
    with pytest.raises(ParameterError, match="residues must be per plaintext prime"):
        BFVArray(pk, arrays[0].chunks, 0, 1, None, residues=[[np.zeros((2, 3, 5), dtype=np.uint64)]] * 2)
    with pytest.raises(ParameterError, match="exactly one of vectors and residues"):
        BFVArray(pk, arrays[0].chunks, 0, 1, None)
