"""Range proofs for packed DJN-Paillier slots: known answers, completeness, and cheating provers refused."""

from __future__ import annotations

import os
import secrets

import pytest

from dpdpca.crypto import SlotLayout, decrypt, generate_keypair
from dpdpca.crypto import _gmp as bk
from dpdpca.crypto import rangeproof as rp
from dpdpca.crypto.packing import pack_slots
from dpdpca.errors import KeyMismatchError, MessageError, OverflowRiskError, ParameterError, ProofError

LAYOUT = SlotLayout(slot_bits=60, slots=8)
BOUND = 2**20
CHUNKS = (8, 8, 8, 3)


@pytest.fixture(scope="module")
def key():
    return generate_keypair(512, insecure_test_key=True)


def _share(pk, values=None, *, bound=BOUND, chunks=CHUNKS, layout=LAYOUT, base=None):
    base = base or rp.ProverBase.draw(pk)
    m = sum(chunks)
    vals = values if values is not None else [secrets.randbelow(2 * bound + 1) - bound for _ in range(m)]
    arr, exps = rp.encrypt_for_proof(base, vals, layout=layout, bound=max(bound, max(map(abs, vals))),
                                     chunks=chunks)
    sec = rp.ProofSection("R", arr.ciphertexts, arr.chunks, layout.slot_bits, bound)
    return base, arr, sec, rp.SectionWitness(vals, exps)


def _cheat(base, sections, witnesses, *, context, alpha_of=None):
    """A prover that skips the bound check and the rejection step (same geometry as the honest one)."""
    key = base.public_key
    n, n2 = key.n, key.nsquare
    geom = rp.ProofGeometry.of(sections)
    spans = rp._section_slices(sections)
    r = bk.random_unit(n)
    rc = bk.powmod(r, n, n2)
    gamma = secrets.randbits(rp._gamma_bits(key, geom))
    gc = bk.powmod(key.hs, gamma, n2)
    alphas, betas, cts = [], [], []
    for _t in range(geom.repetitions):
        at, plains = [], []
        for s, sp, ell, w in zip(sections, spans, geom.mask_bits, witnesses):
            a = ([secrets.randbelow(1 << (ell + 1)) - (1 << ell) for _ in w.values] if alpha_of is None
                 else alpha_of(w.values, geom.response_bounds[0]))
            at.append(a)
            plains.extend(pack_slots(a[lo:hi], s.slot_bits) % n for lo, hi in sp)
        bt = [secrets.randbits(key.alpha_bits) for _ in plains]
        cts.extend(key.raw_encrypt_with(plains, [bk.powmod(key.hs, b, n2) for b in bt]))
        alphas.append(at)
        betas.append(bt)
    masks = bk.ints_to_bytes(cts, key.ciphertext_bytes)
    d1 = rp._h1(context, key, geom, sections, [key.hs, rc, gc], masks)
    es, e0 = rp._challenges(d1, geom.repetitions)
    parts = []
    for t in range(geom.repetitions):
        for si, zw in enumerate(geom.z_widths):
            zs = alphas[t][si] if not es[t] else [a + int(x) for a, x in zip(alphas[t][si], witnesses[si].values)]
            parts.append(b"".join(z.to_bytes(zw + 4, "big", signed=True)[4:] for z in zs))
    responses = b"".join(parts)
    coeffs = rp._coefficients(d1, responses, geom.repetitions * geom.ciphertexts)
    exps = [e for w in witnesses for e in w.exponents]
    z = gamma
    i = 0
    for t in range(geom.repetitions):
        for k in range(geom.ciphertexts):
            z += coeffs[i] * (betas[t][k] + (exps[k] if es[t] else 0))
            i += 1
    s = int(r * bk.powmod(base.root, e0, n) % n)
    return rp.RangeProof(geom.repetitions, geom.headroom_bits, int(key.hs), int(rc), s, int(gc), z, masks,
                         responses)


# -- known answers ----------------------------------------------------------------------------------
def test_geometry_known_answer():
    sec = rp.ProofSection("R", [1] * 4, CHUNKS, 60, BOUND)
    g = rp.ProofGeometry.of([sec])
    # T m = 41 * 27 = 1107 -> ceil(log2) = 11, +2 headroom; mask bits 21 + 13
    assert (g.repetitions, g.headroom_bits, g.mask_bits, g.slots, g.ciphertexts) == (41, 13, (34,), 27, 4)
    assert g.response_bounds == (2**34 - 1 - BOUND,)
    assert g.proven_bounds == {"R": 2 * (2**34 - 1 - BOUND)}
    assert g.z_widths == (5,)


def test_multi_pow_matches_naive():
    mod = (1 << 127) - 1
    bases = [secrets.randbelow(mod - 2) + 2 for _ in range(300)]
    exps = [secrets.randbits(48) for _ in bases]
    want = 1
    for b, e in zip(bases, exps):
        want = want * pow(b, e, mod) % mod
    assert rp.multi_pow(bases, exps, mod, 48) == want
    assert rp.multi_pow([], [], mod, 48) == 1


def test_base_root_is_an_nth_root(key):
    pk, _ = key
    base = rp.ProverBase.draw(pk)
    assert pow(base.root, int(pk.n), int(pk.nsquare)) == base.public_key.hs
    assert "root" not in repr(base) and str(base.root) not in repr(base)


def test_encrypt_for_proof_decrypts_and_round_trips(key):
    pk, sk = key
    _, arr, _sec, w = _share(pk)
    assert decrypt(sk, arr) == list(w.values)
    base = rp.ProverBase.draw(pk)
    with pytest.raises(OverflowRiskError, match="bound"):
        rp.encrypt_for_proof(base, [BOUND + 1], layout=LAYOUT, bound=BOUND, chunks=[1])
    with pytest.raises(ParameterError, match="values"):  # a float is refused, never truncated to an integer
        rp.encrypt_for_proof(base, [1.9, 2], layout=LAYOUT, bound=BOUND, chunks=[2])


def test_honest_proof_verifies_and_survives_the_wire(key):
    pk, _ = key
    base, _arr, sec, w = _share(pk)
    proof = rp.prove_ranges(base, [sec], [w], context=b"session|key|alice|digest")
    data = proof.to_bytes(pk)
    assert rp.RangeProof.from_bytes(data, pk) == proof
    bounds = rp.verify_ranges(pk, data, [sec], context=b"session|key|alice|digest")
    assert bounds == rp.ProofGeometry.of([sec]).proven_bounds
    assert bounds["R"] > BOUND


def test_several_sections_and_extreme_values(key):
    pk, _ = key
    base = rp.ProverBase.draw(pk)
    secs, ws = [], []
    for name, bound, chunks in (("R", 2**30, (8, 8, 1)), ("v", 5, (1, 1, 1)), ("N", 0, (1,))):
        m = sum(chunks)
        vals = [bound, -bound] + [secrets.randbelow(2 * bound + 1) - bound for _ in range(m - 2)] if m >= 2 \
            else [bound]
        arr, exps = rp.encrypt_for_proof(base, vals, layout=LAYOUT, bound=bound, chunks=chunks)
        secs.append(rp.ProofSection.of(name, arr))
        ws.append(rp.SectionWitness(vals, exps))
    proof = rp.prove_ranges(base, secs, ws, context=b"c")
    assert set(rp.verify_ranges(pk, proof, secs, context=b"c")) == {"R", "v", "N"}


def test_honest_prover_refuses_out_of_range_values(key):
    pk, _ = key
    base, _arr, sec, w = _share(pk, [BOUND + 1] + [0] * 26, bound=BOUND)
    with pytest.raises(OverflowRiskError, match=r"section R values\[0\] must satisfy \|value\| <= bound"):
        rp.prove_ranges(base, [sec], [w], context=b"c")


def test_completeness_quick(key):
    pk, _ = key
    for _ in range(30):
        base, _arr, sec, w = _share(pk)
        rp.verify_ranges(pk, rp.prove_ranges(base, [sec], [w], context=b"c"), [sec], context=b"c")


@pytest.mark.slow
def test_completeness_ten_thousand_small_shares():
    pk, _ = generate_keypair(128, insecure_test_key=True)
    layout = SlotLayout(slot_bits=40, slots=3)
    for i in range(10_000):
        bound = 1 + secrets.randbelow(2**12)
        chunks = (1 + secrets.randbelow(3),) if i % 2 else (3, 1 + secrets.randbelow(3))
        base, _arr, sec, w = _share(pk, bound=bound, chunks=chunks, layout=layout)
        ctx = i.to_bytes(4, "big")
        rp.verify_ranges(pk, rp.prove_ranges(base, [sec], [w], context=ctx), [sec], context=ctx)


# -- cheating provers ---------------------------------------------------------------------------------
def _proven(sec):
    return rp.ProofGeometry.of([sec]).proven_bounds["R"]


@pytest.mark.parametrize("where", ["top", "bottom", "middle"])
@pytest.mark.parametrize("sign", [1, -1])
def test_a_slot_one_past_the_proven_bound_is_refused(key, where, sign):
    pk, _ = key
    layout = SlotLayout(slot_bits=60, slots=8)
    sec0 = rp.ProofSection("R", [1] * 4, CHUNKS, 60, BOUND)
    bad = sign * (_proven(sec0) + 1)
    idx = {"top": 7, "bottom": 0, "middle": 12}[where]
    for _ in range(8):
        vals = [secrets.randbelow(2 * BOUND + 1) - BOUND for _ in range(27)]
        vals[idx] = bad
        base, _arr, sec, w = _share(pk, vals, layout=layout)
        # the best single-rep strategy: masks centred on -x/2 answer e=0 and e=1 alike when |x| <= S
        proof = _cheat(base, [sec], [w], context=b"c",
                       alpha_of=lambda xs, ap: [-(int(x) // 2) if abs(int(x)) > BOUND else 0 for x in xs])
        with pytest.raises(ProofError, match="response for section R slot"):
            rp.verify_ranges(pk, proof, [sec], context=b"c")
        proof = _cheat(base, [sec], [w], context=b"c")
        with pytest.raises(ProofError):
            rp.verify_ranges(pk, proof, [sec], context=b"c")


def test_the_cheater_passes_within_the_slack_which_is_the_stated_limit(key):
    pk, _ = key
    sec0 = rp.ProofSection("R", [1] * 4, CHUNKS, 60, BOUND)
    s = _proven(sec0)
    vals = [0] * 27
    vals[3] = s  # exactly the proven bound: the slack of the sigma protocol (docs/threat-model.md)
    base, _arr, sec, w = _share(pk, vals)
    proof = _cheat(base, [sec], [w], context=b"c",
                   alpha_of=lambda xs, ap: [-(int(x) // 2) if abs(int(x)) > BOUND else 0 for x in xs])
    assert rp.verify_ranges(pk, proof, [sec], context=b"c") == {"R": s}


def test_a_proof_replayed_into_another_share_or_context_is_refused(key):
    pk, _ = key
    base, _arr, sec, w = _share(pk)
    proof = rp.prove_ranges(base, [sec], [w], context=b"session|alice|digest1")
    _base2, _arr2, sec2, _w2 = _share(pk, base=base)
    for s, ctx in ((sec, b"session|bob|digest1"), (sec, b"other-session|alice|digest1"),
                   (sec2, b"session|alice|digest1")):
        with pytest.raises(ProofError):
            rp.verify_ranges(pk, proof, [s], context=ctx)


def test_a_proof_for_other_ciphertexts_of_the_same_values_is_refused(key):
    pk, _ = key
    base, _arr, sec, w = _share(pk)
    arr2, exps2 = rp.encrypt_for_proof(base, w.values, layout=LAYOUT, bound=BOUND, chunks=CHUNKS)
    sec2 = rp.ProofSection.of("R", arr2)
    proof = rp.prove_ranges(base, [sec], [w], context=b"c")
    with pytest.raises(ProofError):
        rp.verify_ranges(pk, proof, [sec2], context=b"c")
    # and a witness that does not open the ciphertexts gives a proof that fails
    bad = rp.prove_ranges(base, [sec], [rp.SectionWitness(w.values, exps2)], context=b"c")
    with pytest.raises(ProofError, match="do not open"):
        rp.verify_ranges(pk, bad, [sec], context=b"c")


def test_a_base_that_is_no_nth_residue_is_refused(key):
    pk, _ = key
    base, _arr, _sec, w = _share(pk)
    n, n2 = int(pk.n), int(pk.nsquare)
    fake_key = type(pk)(n, base.public_key.hs * (1 + n) % n2, insecure_test_key=True)
    fake = rp.ProverBase(fake_key, base.root)
    arr2, exps = rp.encrypt_for_proof(fake, w.values, layout=LAYOUT, bound=BOUND, chunks=CHUNKS)
    sec2 = rp.ProofSection.of("R", arr2)
    with pytest.raises(ProofError, match="n-th residue"):
        rp.verify_ranges(pk, rp.prove_ranges(fake, [sec2], [rp.SectionWitness(w.values, exps)], context=b"c"),
                         [sec2], context=b"c")


def test_tampered_proofs_are_refused(key):
    pk, _ = key
    base, _arr, sec, w = _share(pk)
    data = bytearray(rp.prove_ranges(base, [sec], [w], context=b"c").to_bytes(pk))
    for pos in (20, len(data) // 3, len(data) // 2, len(data) - 1):
        bad = bytearray(data)
        bad[pos] ^= 1
        with pytest.raises((ProofError, MessageError)):
            rp.verify_ranges(pk, bytes(bad), [sec], context=b"c")
    with pytest.raises(MessageError, match="must fit"):
        rp.verify_ranges(pk, bytes(data[:-5]), [sec], context=b"c")
    with pytest.raises(MessageError, match="magic"):
        rp.RangeProof.from_bytes(b"XXXX" + bytes(data[4:]), pk)
    other, _ = generate_keypair(640, insecure_test_key=True)
    with pytest.raises(KeyMismatchError):
        rp.RangeProof.from_bytes(bytes(data), other)
    with pytest.raises(ProofError, match="repetitions"):
        rp.verify_ranges(pk, bytes(data), [sec], context=b"c", repetitions=40)


def test_responses_are_uniform_whatever_the_values(key):
    """Rejection sampling: the revealed responses of an all-max share and an all-zero share look alike."""
    pk, _ = key
    geom = rp.ProofGeometry.of([rp.ProofSection("R", [1] * 4, CHUNKS, 60, BOUND)])
    ap = geom.response_bounds[0]
    tops = []
    for vals in ([BOUND] * 27, [0] * 27):
        base, _arr, sec, w = _share(pk, vals)
        pf = rp.prove_ranges(base, [sec], [w], context=os.urandom(8))
        zw = geom.z_widths[0]
        zs = [int.from_bytes(pf.responses[i:i + zw], "big", signed=True) for i in range(0, len(pf.responses), zw)]
        assert max(abs(z) for z in zs) <= ap
        tops.append(sum(z > 0 for z in zs) / len(zs))
    # 1107 responses each: a shift by B = 2**-13 of the range would move this by ~1e-4; both near 1/2
    assert all(abs(f - 0.5) < 0.06 for f in tops)


def test_a_negative_row_count_past_the_proven_bound_is_refused(key):
    """The add/remove release's encrypted count N as its own one-slot section: -(S + 1) is refused every time."""
    pk, _ = key
    base = rp.ProverBase.draw(pk)
    n_bound = 1000 << 32
    probe = rp.ProofSection("N", [1], (1,), 60, n_bound)
    s = rp.ProofGeometry.of([probe]).proven_bounds["N"]
    for _ in range(10):
        arr, exps = rp.encrypt_for_proof(base, [-(s + 1)], layout=LAYOUT, bound=s + 1, chunks=(1,))
        sec = rp.ProofSection("N", arr.ciphertexts, arr.chunks, 60, n_bound)
        proof = _cheat(base, [sec], [rp.SectionWitness([-(s + 1)], exps)], context=b"c",
                       alpha_of=lambda xs, ap: [-(int(x) // 2) for x in xs])
        with pytest.raises(ProofError):
            rp.verify_ranges(pk, proof, [sec], context=b"c")
