"""Key validity: a Paillier modulus checked for structure and proved to be a Paillier–Blum modulus.

An owner encrypts under the data user's modulus ``n``; if ``n`` is prime, a
perfect power or has a small factor, anyone can factor it and read every
share.  The owner therefore runs two checks once per key
(:func:`check_public_modulus`):

1. **Structure** (cheap, no proof needed): ``n`` is not prime, not a perfect
   power and has no prime factor below ``2**16`` (:data:`SMALL_FACTOR_BOUND`).
   These catch ``n = 3 P``, ``n = 9 P`` and a prime ``n`` at once.
2. **Zero-knowledge proof** :math:`\\Pi^{mod}` that ``n`` is a Paillier–Blum
   modulus: ``n = p q`` with ``p = q = 3 (mod 4)`` primes and
   ``gcd(n, phi(n)) = 1``.  Square-freeness (the ``z`` part) and the Blum
   structure (the ``x`` part: exactly one of ``y, -y, w y, -w y`` is a fourth
   power) together exclude three or more prime factors and repeated factors,
   which the structural checks cannot see for large factors.

The proof (Canetti, Gennaro, Goldfeder, Makriyannis, Peled 2020, Fig. 16)::

    prover (knows p, q):   w with Jacobi(w / n) = -1
                           y_i = H(n, w, i) in Z_n, i = 1..m           (Fiat–Shamir)
                           x_i = ((-1)^a_i w^b_i y_i)^(1/4) mod n      (the unique a_i, b_i in {0, 1}
                                                                        that make it a quadratic residue)
                           z_i = y_i^(n^-1 mod phi(n)) mod n
    verifier:              n odd and composite, Jacobi(w / n) = -1,
                           z_i^n = y_i and x_i^4 = (-1)^a_i w^b_i y_i (mod n) for every i.

Each round fails for a modulus that is not Paillier–Blum with probability at
least 1/2, so ``m`` rounds give soundness error ``<= 2**-m``; this module
produces and requires ``m >= 80`` (:data:`ROUNDS`): error ``<= 2**-80``.  The
challenges are a SHAKE-256 hash of the domain, ``n``, ``w``, ``m`` and ``i``
(Fiat–Shamir, random-oracle model), 128 bits wider than ``n`` before the
reduction so their bias is below ``2**-128``.  ``w`` is hashed, so the
prover fixes it before it sees the challenges.

The keys of :func:`dpdpca.crypto.generate_keypair` use primes ``= 3 mod 4``
(:func:`~dpdpca.crypto._gmp.random_prime_3mod4`) and carry this proof in
``public.json`` (``modulus_proof``).  Verifying costs ``m`` exponentiations
by ``n`` (about 0.2 s for 2048 bits): :func:`check_public_modulus` remembers
each (modulus, proof) pair it verified, by digest, for the life of the
process.

References
----------
R. Canetti, R. Gennaro, S. Goldfeder, N. Makriyannis, U. Peled, "UC
non-interactive, proactive, threshold ECDSA with identifiable aborts", ACM CCS
2020 (IACR ePrint 2021/060), §6.3 and Fig. 16 (Paillier–Blum modulus proof).
"""

from __future__ import annotations

import base64
import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from dpdpca.crypto import _gmp as bk
from dpdpca.errors import InsecureKeyError, MessageError, ParameterError

__all__ = ["ROUNDS", "SCHEME", "SMALL_FACTOR_BOUND", "ModulusProof", "prove_modulus", "verify_modulus_proof",
           "check_modulus_structure", "check_public_modulus"]

#: Rounds m of the proof made here and required by the verifier (soundness error <= 2**-m).
ROUNDS = 80
#: The ``scheme`` field of the proof's JSON.
SCHEME = "paillier-blum-mod/1"
#: A modulus with a prime factor below this bound is refused.
SMALL_FACTOR_BOUND = 1 << 16
_DOMAIN = b"dpdpca paillier-blum modulus proof/1"
_FIELDS = {"scheme", "rounds", "w", "x", "z", "a", "b"}
#: Largest number of rounds a proof may declare (bounds the work of a verifier given a hostile file).
MAX_ROUNDS = 256


def _width(n: int) -> int:
    return (int(n).bit_length() + 7) // 8


def _challenges(n: int, w: int, rounds: int) -> list[int]:
    """``y_1..y_m``: SHAKE-256 of the domain, ``n``, ``w``, ``m`` and ``i``, 128 bits wider than ``n``, mod ``n``."""
    k = _width(n)
    prefix = (_DOMAIN + k.to_bytes(4, "big") + int(n).to_bytes(k, "big") + int(w).to_bytes(k, "big")
              + rounds.to_bytes(4, "big"))
    return [int.from_bytes(hashlib.shake_256(prefix + i.to_bytes(4, "big")).digest(k + 16), "big") % int(n)
            for i in range(rounds)]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(name: str, text: Any, size: int) -> bytes:
    if not isinstance(text, str):
        raise MessageError(f"modulus_proof.{name} must be a base64url string, got {type(text).__name__}")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (ValueError, TypeError):
        raise MessageError(f"modulus_proof.{name} must be base64url, got a malformed value of "
                           f"{len(text)} characters") from None
    if len(raw) != size:
        raise MessageError(f"modulus_proof.{name} must hold {size} bytes, got {len(raw)}")
    return raw


def _bits(name: str, text: Any, rounds: int) -> tuple[int, ...]:
    if not isinstance(text, str) or len(text) != rounds or set(text) - {"0", "1"}:
        raise MessageError(f"modulus_proof.{name} must be a string of {rounds} characters 0 or 1, got "
                           f"{type(text).__name__ if not isinstance(text, str) else f'{len(text)} characters'}")
    return tuple(int(c) for c in text)


@dataclass(frozen=True)
class ModulusProof:
    """A non-interactive :math:`\\Pi^{mod}` proof (see the module docstring).

    Attributes
    ----------
    w : int
        The prover's non-residue, ``Jacobi(w / n) = -1``.
    x, z : tuple of int
        Fourth roots and ``n``-th roots, one per round.
    a, b : tuple of int in {0, 1}
        Which of ``y, -y, w y, -w y`` has the fourth root ``x_i``.
    """

    w: int
    x: tuple[int, ...]
    z: tuple[int, ...]
    a: tuple[int, ...]
    b: tuple[int, ...]

    @property
    def rounds(self) -> int:
        return len(self.x)

    def to_json(self, n: int) -> dict[str, Any]:
        """``{"scheme", "rounds", "w", "x", "z", "a", "b"}``: ``x`` and ``z`` as one base64url string of
        fixed-width big-endian integers each (the width of ``n``), ``a`` and ``b`` as strings of 0/1."""
        k = _width(n)
        return {"scheme": SCHEME, "rounds": self.rounds, "w": _b64(int(self.w).to_bytes(k, "big")),
                "x": _b64(bk.ints_to_bytes([int(v) for v in self.x], k)),
                "z": _b64(bk.ints_to_bytes([int(v) for v in self.z], k)),
                "a": "".join(map(str, self.a)), "b": "".join(map(str, self.b))}

    @classmethod
    def from_json(cls, obj: Any, n: int) -> ModulusProof:
        """Parse :meth:`to_json` output for the modulus ``n`` (strict: fields, types, sizes; not verified).

        Raises
        ------
        MessageError
            Any field missing, extra, of the wrong type or size.
        """
        if not isinstance(obj, dict) or set(obj) != _FIELDS:
            raise MessageError(f"modulus_proof must be an object with the fields {sorted(_FIELDS)}, got "
                               f"{sorted(map(str, obj))[:10] if isinstance(obj, dict) else type(obj).__name__}")
        if obj["scheme"] != SCHEME:
            raise MessageError(f"modulus_proof.scheme must be {SCHEME!r}, got {str(obj['scheme'])[:40]!r}")
        rounds = obj["rounds"]
        if not isinstance(rounds, int) or isinstance(rounds, bool) or not 1 <= rounds <= MAX_ROUNDS:
            raise MessageError(f"modulus_proof.rounds must be an integer in [1, {MAX_ROUNDS}], got {str(rounds)[:20]}")
        k = _width(n)
        w = int.from_bytes(_unb64("w", obj["w"], k), "big")
        x = tuple(int(v) for v in bk.bytes_to_ints(_unb64("x", obj["x"], k * rounds), k))
        z = tuple(int(v) for v in bk.bytes_to_ints(_unb64("z", obj["z"], k * rounds), k))
        return cls(w, x, z, _bits("a", obj["a"], rounds), _bits("b", obj["b"], rounds))


def _fourth_root_exponent(p: int) -> int:
    # p = 3 (mod 4): y^((p+1)/4) is the square root of a residue y that is itself a residue, so applying it twice
    # gives a fourth root.  Not reduced mod p - 1, so that 0 maps to 0 (a challenge that is 0 mod p).
    return ((p + 1) // 4) ** 2


def prove_modulus(p: int, q: int, *, rounds: int = ROUNDS) -> ModulusProof:
    """A :math:`\\Pi^{mod}` proof for ``n = p q`` (key generation; the primes stay here).

    Parameters
    ----------
    p, q : int
        Distinct primes ``= 3 (mod 4)`` with ``gcd(p q, (p - 1)(q - 1)) = 1``.
    rounds : int
        m, at least :data:`ROUNDS` unless for a test of the verifier.

    Raises
    ------
    ParameterError
        ``p`` or ``q`` not ``3 mod 4``, equal, or ``gcd(n, phi(n)) != 1`` (no prime is echoed).
    """
    p, q = int(p), int(q)
    if p % 4 != 3 or q % 4 != 3 or p == q:
        raise ParameterError("p, q must be distinct primes congruent to 3 mod 4 for a modulus proof, "
                             "got a pair that is not")
    n, phi = p * q, (p - 1) * (q - 1)
    if bk.gcd(n, phi) != 1:
        raise ParameterError("p, q must have gcd(p q, (p - 1)(q - 1)) = 1 for a modulus proof, got a pair that has not")
    n_inv = int(bk.invert(n, phi))
    q_inv_p = int(bk.invert(q, p))
    ep, eq = _fourth_root_exponent(p), _fourth_root_exponent(q)
    zp_exp, zq_exp = n_inv % (p - 1), n_inv % (q - 1)

    def crt(vp: int, vq: int) -> int:
        return vq + q * ((vp - vq) * q_inv_p % p)

    while True:
        w = int(bk.random_below(n))
        if bk.jacobi(w, n) == -1:
            break
    xs, zs, as_, bs = [], [], [], []
    for y in _challenges(n, w, rounds):
        zs.append(crt(int(bk.powmod(y % p, zp_exp, p)), int(bk.powmod(y % q, zq_exp, q))))
        for a, b in ((0, 0), (1, 0), (0, 1), (1, 1)):
            yy = (-1) ** a * (w if b else 1) * y % n
            if bk.jacobi(yy % p, p) != -1 and bk.jacobi(yy % q, q) != -1:
                break
        else:  # pragma: no cover - impossible for primes = 3 mod 4 and Jacobi(w / n) = -1
            raise ParameterError("p, q must give a Blum modulus, got a pair without a fourth root")
        xs.append(crt(int(bk.powmod(yy % p, ep, p)), int(bk.powmod(yy % q, eq, q))))
        as_.append(a)
        bs.append(b)
    return ModulusProof(w, tuple(xs), tuple(zs), tuple(as_), tuple(bs))


def verify_modulus_proof(n: int, proof: ModulusProof, *, min_rounds: int = ROUNDS) -> None:
    """Check a :math:`\\Pi^{mod}` proof for ``n``.

    Raises
    ------
    InsecureKeyError
        Fewer than ``min_rounds`` rounds, or a round that does not verify (the
        modulus is not shown to be a Paillier–Blum modulus).
    """
    n = int(n)
    what = "public key modulus n must carry a valid Paillier-Blum modulus proof"
    if proof.rounds < min_rounds:
        raise InsecureKeyError(f"{what} of >= {min_rounds} rounds, got {proof.rounds}")
    if not len(proof.z) == len(proof.a) == len(proof.b) == proof.rounds:  # zip below would stop at the shortest
        raise InsecureKeyError(f"{what}, got {proof.rounds} rounds of x but {len(proof.z)}, {len(proof.a)}, "
                               f"{len(proof.b)} of z, a, b")
    if not 1 <= proof.w < n or bk.jacobi(proof.w, n) != -1:
        raise InsecureKeyError(f"{what}, got a w that is not a non-residue of Jacobi symbol -1 modulo n")
    for i, (y, x, z, a, b) in enumerate(zip(_challenges(n, proof.w, proof.rounds), proof.x, proof.z, proof.a,
                                            proof.b)):
        if not (1 <= x < n and 1 <= z < n):
            raise InsecureKeyError(f"{what}, got round {i} with a value outside [1, n)")
        if bk.powmod(z, n, n) != y:
            raise InsecureKeyError(f"{what}, got round {i} whose n-th root does not verify (n not square-free)")
        if bk.powmod(x, 4, n) != (-1) ** a * (proof.w if b else 1) * y % n:
            raise InsecureKeyError(f"{what}, got round {i} whose fourth root does not verify (n not a Blum integer)")


def check_modulus_structure(n: int) -> None:
    """Refuse a modulus anyone can factor: prime, a perfect power, or with a prime factor below ``2**16``.

    Raises
    ------
    InsecureKeyError
        With a one-line reason (a factor found is never echoed).
    """
    n = int(n)
    if bk.is_probable_prime(n):
        raise InsecureKeyError(f"public key modulus n must be a product of two primes, got a prime of "
                               f"{n.bit_length()} bits")
    if bk.smallest_factor_below(n, SMALL_FACTOR_BOUND) is not None:
        raise InsecureKeyError(f"public key modulus n must have no prime factor below 2^16, got a "
                               f"{n.bit_length()}-bit n that has one")
    if bk.is_perfect_power(n):
        raise InsecureKeyError(f"public key modulus n must not be a perfect power, got a {n.bit_length()}-bit n "
                               f"that is one")


_VERIFIED: set[str] = set()
_LOCK = threading.Lock()


def check_public_modulus(n: int, proof: ModulusProof | None, *, require_proof: bool = True) -> None:
    """Everything an owner checks of the data user's modulus, once per process and (modulus, proof).

    Parameters
    ----------
    n : int
    proof : ModulusProof or None
        The ``modulus_proof`` of ``public.json``.
    require_proof : bool
        False (an owner's explicit ``insecure_test_key``): a key without a
        proof passes on the structural checks alone; a proof that is present
        is verified all the same.

    Raises
    ------
    InsecureKeyError
        Structure, a missing proof (with the advice to run keygen again) or a
        proof that does not verify.
    """
    check_modulus_structure(n)
    if proof is None:
        if require_proof:
            raise InsecureKeyError("public key modulus_proof must be present (a Paillier-Blum modulus proof; keys "
                                   "made before it existed have none): run dpdpca keygen again, got a key without one")
        return
    k = _width(n)
    digest = hashlib.sha256(int(n).to_bytes(k, "big") + repr(proof.to_json(n)).encode()).hexdigest()
    with _LOCK:
        if digest in _VERIFIED:
            return
    verify_modulus_proof(n, proof)
    with _LOCK:
        _VERIFIED.add(digest)
