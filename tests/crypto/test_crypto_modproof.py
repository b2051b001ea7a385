"""Key validity: the structural checks of a modulus and the Paillier–Blum modulus proof (Pi^mod)."""

from __future__ import annotations

import dataclasses
import json

import gmpy2
import pytest

from dpdpca.crypto import PublicKey, generate_keypair
from dpdpca.crypto.keys import derive_hs
from dpdpca.crypto.modproof import (
    ROUNDS,
    ModulusProof,
    check_modulus_structure,
    check_public_modulus,
    prove_modulus,
    verify_modulus_proof,
)
from dpdpca.errors import InsecureKeyError, MessageError, ParameterError


def test_an_honest_key_carries_a_proof_of_80_rounds_that_verifies_and_survives_json(keys512):
    pk, _ = keys512
    assert pk.modulus_proof is not None and pk.modulus_proof.rounds == ROUNDS >= 80
    verify_modulus_proof(pk.n, pk.modulus_proof)
    back = PublicKey.from_json(json.loads(json.dumps(pk.to_json())), insecure_test_key=True)
    assert back.modulus_proof == pk.modulus_proof
    back.check_modulus()
    check_public_modulus(int(pk.n), back.modulus_proof)  # the cached path


@pytest.mark.parametrize("make", ["3P", "9P", "prime"])
def test_a_modulus_anyone_can_factor_is_refused_by_its_structure(make, prime_3mod4):
    big = prime_3mod4(2046, 1)
    n = {"3P": 3 * big, "9P": 9 * big, "prime": prime_3mod4(2048, 2)}[make]
    match = "product of two primes" if make == "prime" else r"no prime factor below 2\^16"
    with pytest.raises(InsecureKeyError, match=match):
        check_modulus_structure(n)
    with pytest.raises(InsecureKeyError, match=match):
        PublicKey(n, derive_hs(n)).check_modulus()


def test_a_perfect_power_is_refused(prime_3mod4):
    p = prime_3mod4(256, 3)
    with pytest.raises(InsecureKeyError, match="perfect power"):
        check_modulus_structure(p ** 3)


def test_three_blum_primes_pass_the_structure_but_not_the_proof(prime_3mod4):
    """n = P Q R (no small factor, not a power): a prover who knows the factors gets the n-th roots right but
    half the challenges have no fourth root among y, -y, wy, -wy; its best proof is refused."""
    P, Q, R = (prime_3mod4(256, s) for s in (4, 5, 6))
    n = P * Q * R
    check_modulus_structure(n)  # passes: only the proof catches it
    phi = (P - 1) * (Q - 1) * (R - 1)
    n_inv = int(gmpy2.invert(n, phi))
    # the cheater's best w: Jacobi -1 but not a non-residue modulo every prime (that would be -1's class)
    w = next(v for v in range(2, 1000) if gmpy2.jacobi(v, n) == -1 and gmpy2.jacobi(v, P) == 1)
    from dpdpca.crypto.modproof import _challenges
    xs, zs, a_s, b_s = [], [], [], []
    rooted = 0
    for y in _challenges(n, w, ROUNDS):
        zs.append(int(gmpy2.powmod(y, n_inv, n)))
        for a, b in ((0, 0), (1, 0), (0, 1), (1, 1)):
            yy = (-1) ** a * (w if b else 1) * y % n
            if all(gmpy2.jacobi(yy, f) == 1 for f in (P, Q, R)):
                roots = [int(gmpy2.powmod(yy, ((f + 1) // 4) ** 2, f)) for f in (P, Q, R)]
                x = int(gmpy2.f_mod(sum(r * (n // f) * gmpy2.invert(n // f, f) for r, f in zip(roots, (P, Q, R))), n))
                assert gmpy2.powmod(x, 4, n) == yy
                rooted += 1
                break
        else:
            a, b, x = 0, 0, 1
        xs.append(x)
        a_s.append(a)
        b_s.append(b)
    assert 20 < rooted < 60  # about half
    forged = ModulusProof(w, tuple(xs), tuple(zs), tuple(a_s), tuple(b_s))
    with pytest.raises(InsecureKeyError, match="fourth root does not verify"):
        verify_modulus_proof(n, forged)


def test_a_square_factor_fails_the_nth_root_rounds(keys512, prime_3mod4):
    """n = P^2 Q: gcd(n, phi(n)) = P, so no n-th roots; a proof copied from an honest key does not transfer."""
    P, Q = prime_3mod4(200, 7), prime_3mod4(300, 8)
    n = P * P * Q
    check_modulus_structure(n)
    with pytest.raises(ParameterError, match="p, q must"):
        prove_modulus(P * P, Q)  # the honest algorithm refuses (P^2 is not 3 mod 4 prime or gcd fails)
    pk, _ = keys512
    w = next(v for v in range(2, 1000) if gmpy2.jacobi(v, n) == -1)
    proof = dataclasses.replace(pk.modulus_proof, w=w)
    with pytest.raises(InsecureKeyError):
        verify_modulus_proof(n, proof)


def test_tampered_short_foreign_or_missing_proofs_are_refused(keys512, other_keys512):
    pk, _ = keys512
    proof = pk.modulus_proof
    flipped = dataclasses.replace(proof, a=(1 - proof.a[0],) + proof.a[1:])
    with pytest.raises(InsecureKeyError, match="round 0"):
        verify_modulus_proof(pk.n, flipped)
    # 80 x but one z, a, b: every round must be checked, not the shortest list's worth
    ragged = dataclasses.replace(proof, z=proof.z[:1], a=proof.a[:1], b=proof.b[:1])
    with pytest.raises(InsecureKeyError, match="got 80 rounds of x but 1, 1, 1 of z, a, b"):
        verify_modulus_proof(pk.n, ragged)
    short = prove_modulus(*_primes(keys512), rounds=40)
    with pytest.raises(InsecureKeyError, match=">= 80 rounds, got 40"):
        verify_modulus_proof(pk.n, short)
    with pytest.raises(InsecureKeyError):
        verify_modulus_proof(pk.n, other_keys512[0].modulus_proof)
    bare = PublicKey(pk.n, pk.hs, insecure_test_key=True)
    with pytest.raises(InsecureKeyError, match="run dpdpca keygen again"):
        bare.check_modulus()
    bare.check_modulus(require_proof=False)  # the owner's explicit insecure_test_key: structure only


def _primes(keys):
    return int(keys[1].p), int(keys[1].q)


@pytest.mark.parametrize("field, value, match", [
    ("rounds", 10 ** 9, "rounds must be an integer"), ("rounds", True, "rounds must be an integer"),
    ("a", "012", "string of 80 characters"), ("x", "@@@", "base64url"), ("w", "AAAA", "must hold"),
    ("scheme", "other", "scheme must be"), ("extra", 1, "fields"),
])
def test_a_malformed_proof_is_a_one_line_message_error(keys512, field, value, match):
    pk, _ = keys512
    obj = pk.to_json()
    obj["modulus_proof"] = {**obj["modulus_proof"], field: value}
    with pytest.raises(MessageError, match=match) as info:
        PublicKey.from_json(obj, insecure_test_key=True)
    assert "\n" not in str(info.value)


def test_generate_keypair_proves_its_toy_and_real_keys(toy_keys):
    pk, _ = toy_keys
    assert pk.modulus_proof is not None
    verify_modulus_proof(pk.n, pk.modulus_proof)  # challenges that are 0 mod p still have roots
    pk2, _ = generate_keypair(256, insecure_test_key=True)
    pk2.check_modulus()
