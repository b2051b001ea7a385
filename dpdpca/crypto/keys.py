"""Paillier keys with Damgård–Jurik–Nielsen short-exponent encryption.

Raw integer layer: key generation, JSON (python-paillier JWK compatible),
``raw_encrypt`` of integers already reduced into ``[0, n)`` and batched CRT
``raw_decrypt``.  Slots, bounds and signed values live in the layers above.

References
----------
P. Paillier, "Public-key cryptosystems based on composite degree residuosity
classes", EUROCRYPT 1999 (g = n + 1, CRT decryption).
I. Damgård, M. Jurik, J. B. Nielsen, "A generalization of Paillier's public-key
system with applications to electronic voting", IJIS 2010, §4 (short
exponents: c = (1 + m n) * hs**alpha with hs = -x**(2n) mod n**2).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from dpdpca._io import atomic_write_json
from dpdpca._validation import check_int, param_error
from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.modproof import ModulusProof, check_public_modulus, prove_modulus
from dpdpca.errors import (
    InsecureKeyError,
    MessageError,
    OverflowRiskError,
    ParameterError,
)

__all__ = [
    "MIN_SECURE_BITS",
    "MAX_KEY_BITS",
    "PublicKey",
    "PrivateKey",
    "generate_keypair",
    "keypair_from_primes",
    "save_public_key",
    "save_private_key",
    "load_public_key",
    "load_private_key",
]

#: Smallest modulus accepted without ``insecure_test_key=True``.
MIN_SECURE_BITS = 2048
#: Smallest modulus accepted at all (toy keys for known-answer tests).
MIN_TEST_BITS = 16
#: Largest modulus :func:`generate_keypair` makes (every ``--key-bits``): 15360 bits already reach NIST SP 800-57's
#: highest level (256-bit security), and the prime search grows about as bits^4 (about 100 s at 16384 bits on
#: one core, so a million bits would run for days; 10^20 bits overflows gmpy2 outright).
MAX_KEY_BITS = 16384
#: Encryption methods: DJN short exponent (default) or Paillier's r**n.
METHODS = ("djn", "standard")


def _b64url(value: int) -> str:
    return base64.urlsafe_b64encode(bk.int_to_bytes(value)).rstrip(b"=").decode("ascii")


def _unb64url(name: str, text: Any) -> int:
    # Never echo the value: for p or q even a few characters are bits of a secret prime.
    if not isinstance(text, str) or not text:
        raise MessageError(f"key field {name} must be a non-empty base64url string, got "
                           f"{'an empty string' if text == '' else type(text).__name__}")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise MessageError(f"key field {name} must be base64url, got a malformed value of "
                           f"{len(text)} characters") from None
    return int.from_bytes(raw, "big")


def _fingerprint(n: int) -> str:
    return hashlib.sha256(bk.int_to_bytes(n)).hexdigest()


def _check_size(bits: int, insecure_test_key: bool, what: str = "key bits") -> None:
    if bits < MIN_SECURE_BITS and not insecure_test_key:
        raise InsecureKeyError(
            f"{what} must be >= {MIN_SECURE_BITS} (or pass insecure_test_key=True, CLI --insecure-test-key), got {bits}")
    if bits < MIN_TEST_BITS:
        raise param_error(what, f">= {MIN_TEST_BITS}", bits)


class PublicKey:
    """A Paillier public key ``n`` (g = n + 1) with the DJN base ``hs``.

    Parameters
    ----------
    n : int
        The modulus, odd, ``n.bit_length() >= 2048`` unless ``insecure_test_key``.
    hs : int
        ``-x**(2n) mod n**2`` for a random unit ``x``; a unit of Z*_{n^2}.
    insecure_test_key : bool
        Explicit consent to a modulus below 2048 bits (tests only).
    modulus_proof : ModulusProof or None
        The key holder's proof that ``n`` is a Paillier–Blum modulus
        (:mod:`dpdpca.crypto.modproof`); owners verify it with
        :meth:`check_modulus` before they encrypt.

    Attributes
    ----------
    n, nsquare : int
        Modulus and its square (ciphertexts live in ``[1, nsquare)``).
    bits : int
        ``n.bit_length()``.
    alpha_bits : int
        Bit length of the DJN exponent alpha, ``ceil(bits / 2)``.
    fingerprint : str
        Hex SHA-256 of the big-endian bytes of ``n``; names the key in messages.

    Raises
    ------
    InsecureKeyError
        ``n`` below 2048 bits without ``insecure_test_key=True``.
    ParameterError
        ``n`` even or ``hs`` not a unit modulo ``n**2``.
    """

    def __init__(self, n: int, hs: int, *, insecure_test_key: bool = False,
                 modulus_proof: ModulusProof | None = None) -> None:
        n = bk.mpz(check_int("n", n, minimum=3))
        if n % 2 == 0:
            raise param_error("n", "odd", int(n))
        _check_size(n.bit_length(), insecure_test_key, "public key bits")
        self.n = n
        self.nsquare = n * n
        # hs is public, but a thousand-digit number is no one-line error: its size is named instead.
        hs = bk.mpz(check_int("hs", hs))
        if not 1 <= hs < self.nsquare:
            raise param_error("hs", "in [1, n**2)", "a non-positive value" if hs < 1 else f"{hs.bit_length()} bits")
        if bk.gcd(hs, n) != 1:
            raise param_error("hs", "a unit modulo n**2", "a value sharing a factor with n")
        self.hs = hs
        self.bits = int(n.bit_length())
        self.alpha_bits = (self.bits + 1) // 2
        self.fingerprint = _fingerprint(n)
        self.ciphertext_bytes = (int(self.nsquare).bit_length() + 7) // 8
        self.insecure_test_key = bool(insecure_test_key)
        self.modulus_proof = modulus_proof
        self._table: bk.FixedBaseTable | None = None

    def check_modulus(self, *, require_proof: bool = True) -> None:
        """Refuse a modulus anyone could factor (:func:`dpdpca.crypto.modproof.check_public_modulus`).

        Not prime, not a perfect power, no prime factor below 2**16, and the
        Paillier–Blum proof verifies (verified once per process and key).
        ``require_proof=False``: a key without a proof passes on the structural
        checks alone (an owner's explicit ``insecure_test_key``).

        Raises
        ------
        InsecureKeyError
        """
        check_public_modulus(int(self.n), self.modulus_proof, require_proof=require_proof)

    # -- identity -------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, PublicKey) and self.n == other.n

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"PublicKey(bits={self.bits}, fingerprint={self.fingerprint[:16]}...)"

    # -- encryption -------------------------------------------------------------
    @property
    def hs_table(self) -> bk.FixedBaseTable:
        """The cached fixed-base table of ``hs``, or a new byte-window one (w = 8) if none is cached."""
        return self.djn_table(None)

    def djn_table(self, expected: int | None) -> bk.FixedBaseTable:
        """A fixed-base table of ``hs`` sized for ``expected`` more encryptions (cached).

        The cached table is kept unless building the best one for
        ``expected`` (:meth:`FixedBaseTable.best_window`) costs less than it
        saves on those encryptions.  ``None``: the cached table whatever its
        window, or a new byte-window one (w = 8).
        """
        bits = self.alpha_bits
        cached = self._table
        if expected is None:
            if cached is None:
                cached = self._table = bk.FixedBaseTable(self.hs, self.nsquare, bits)
            return cached
        w = bk.FixedBaseTable.best_window(bits, expected)
        if cached is None or (cached.window != w and bk.FixedBaseTable.cost(bits, expected, w)
                              < expected * cached.n_rows):
            cached = self._table = bk.FixedBaseTable(self.hs, self.nsquare, bits, window=w)
        return cached

    def with_own_base(self) -> PublicKey:
        """This key with a DJN base ``hs = -x**(2n) mod n**2`` drawn here (``x`` from :mod:`secrets`).

        A party that encrypts or rerandomizes under someone else's key uses
        it instead of the published ``hs``, which the key holder chose: a
        holder who published ``hs = 1`` would make every DJN factor 1, so the
        ciphertexts of anyone using it would be readable by whoever saw them
        (``c = 1 + m n``).  The key's size was already accepted by the caller.
        """
        return PublicKey(int(self.n), derive_hs(int(self.n)), insecure_test_key=True, modulus_proof=self.modulus_proof)

    def drop_table(self) -> None:
        """Free the cached fixed-base table (up to 64 MiB); the next encryption rebuilds one."""
        self._table = None

    def random_factors(self, count: int, *, method: str = "djn", expected: int | None = None,
                       _test_randomness: Callable[[int], int] | None = None) -> list[bk.mpz]:
        """``count`` fresh randomizers: ``hs**alpha`` (DJN) or ``r**n`` (standard).

        ``expected`` (DJN): how many encryptions this batch belongs to (default
        ``count``), which sizes the fixed-base table (:meth:`djn_table`).
        ``_test_randomness(i)`` (tests only) returns alpha (DJN) or r
        (standard) for the i-th factor instead of drawing it from the OS
        CSPRNG (alpha: ``os.urandom`` bytes, :meth:`FixedBaseTable.pow_random`;
        r: :mod:`secrets`).
        """
        if method not in METHODS:
            raise param_error("method", f"one of {METHODS}", method)
        if method == "djn":
            table = self.djn_table(count if expected is None else max(count, int(expected)))
            if _test_randomness is None:  # alpha uniform below 2**alpha_bits, from os.urandom bytes
                return table.pow_random(count)
            alphas = [int(_test_randomness(i)) for i in range(count)]
            for a in alphas:
                check_int("alpha", a, minimum=0, maximum=(1 << self.alpha_bits) - 1)
            return table.pow_many(alphas)
        if _test_randomness is None:
            rs = [bk.random_unit(self.n) for _ in range(count)]
        else:
            rs = [bk.mpz(check_int("r", _test_randomness(i), minimum=1, maximum=int(self.n) - 1))
                  for i in range(count)]
        return bk.powmod_base_list(rs, self.n, self.nsquare)

    def raw_encrypt(self, plaintexts: Sequence[int], *, method: str = "djn",
                    _test_randomness: Callable[[int], int] | None = None) -> list[bk.mpz]:
        """Encrypt integers ``m`` in ``[0, n)``: ``c = (1 + m n) * factor mod n**2``.

        Raises
        ------
        OverflowRiskError
            A plaintext outside ``[0, n)`` (nothing is reduced silently).
        """
        n = self.n
        for i, m in enumerate(plaintexts):
            if not 0 <= m < n:
                raise OverflowRiskError(f"plaintext[{i}] must be in [0, n), got {int(m)}")
        out: list[bk.mpz] = []
        block = 256  # bounded memory for the randomizers of a large batch
        for start in range(0, len(plaintexts), block):
            part = plaintexts[start:start + block]
            rand = None if _test_randomness is None else (lambda i, s=start: _test_randomness(s + i))
            out.extend(self.raw_encrypt_with(part, self.random_factors(len(part), method=method,
                                                                       expected=len(plaintexts) - start,
                                                                       _test_randomness=rand)))
        return out

    def raw_encrypt_with(self, plaintexts: Sequence[int], factors: Sequence[bk.mpz]) -> list[bk.mpz]:
        """``(1 + m n) * f mod n**2`` computed as ``f + n * (m f mod n)`` (checked ``m`` only)."""
        n, n2 = self.n, self.nsquare
        return [(f + n * (m * f % n)) % n2 for m, f in zip(plaintexts, factors)]

    # -- JSON -----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """python-paillier JWK fields plus ``hs``, ``bits``, ``fingerprint`` and ``modulus_proof`` (if any)."""
        out = {
            "kty": "DAJ",
            "alg": "PAI-GN1",
            "key_ops": ["encrypt"],
            "n": _b64url(self.n),
            "kid": f"dpdpca Paillier public key {self.fingerprint[:16]}",
            "hs": _b64url(self.hs),
            "bits": self.bits,
            "fingerprint": self.fingerprint,
        }
        if self.modulus_proof is not None:
            out["modulus_proof"] = self.modulus_proof.to_json(int(self.n))
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any], *, insecure_test_key: bool = False) -> PublicKey:
        """Read :meth:`to_json` output, or a bare python-paillier JWK public key.

        A JWK without ``hs`` (written by python-paillier) gets a fresh ``hs``
        drawn here: ``hs`` is public and anyone may derive one.

        Raises
        ------
        MessageError
            Not a ``DAJ``/``PAI-GN1`` key, malformed fields, or a ``fingerprint``
            or ``bits`` that does not match ``n``.
        InsecureKeyError
            Below 2048 bits without ``insecure_test_key=True``.
        """
        if not isinstance(obj, dict):
            raise MessageError(f"public key must be a JSON object, got {type(obj).__name__}")
        if obj.get("kty") != "DAJ" or obj.get("alg", "PAI-GN1") != "PAI-GN1":
            raise MessageError(
                f"public key kty/alg must be DAJ/PAI-GN1, got {obj.get('kty')!r}/{obj.get('alg')!r}")
        n = _unb64url("n", obj.get("n"))
        if "fingerprint" in obj and not hmac.compare_digest(str(obj["fingerprint"]), _fingerprint(n)):
            raise MessageError(
                f"public key fingerprint must be sha256(n) = {_fingerprint(n)}, got {obj['fingerprint']!r}")
        if "bits" in obj and obj["bits"] != n.bit_length():
            raise MessageError(f"public key bits must equal bit length of n {n.bit_length()}, got {obj['bits']!r}")
        if "hs" in obj:
            hs = _unb64url("hs", obj["hs"])
        else:
            _check_size(n.bit_length(), insecure_test_key, "public key bits")
            hs = derive_hs(n)
        proof = None if obj.get("modulus_proof") is None else ModulusProof.from_json(obj["modulus_proof"], n)
        return cls(n, hs, insecure_test_key=insecure_test_key, modulus_proof=proof)


def derive_hs(n: int, x: int | None = None) -> bk.mpz:
    """DJN base ``hs = -x**(2n) mod n**2`` for a random unit ``x`` (or the given one)."""
    n = bk.mpz(n)
    if x is None:
        x = bk.random_unit(n)
    elif bk.gcd(x, n) != 1:
        raise ParameterError("x must be a unit modulo n, got a non-unit")
    n2 = n * n
    return (n2 - bk.powmod(x, 2 * n, n2)) % n2


class PrivateKey:
    """Paillier private key ``(p, q)`` with CRT decryption modulo ``p**2`` and ``q**2``.

    Parameters
    ----------
    public_key : PublicKey
        The matching public key (``p * q == public_key.n``).
    p, q : int
        Distinct odd primes.

    Raises
    ------
    ParameterError
        ``p * q != n`` or ``p == q``.
    """

    def __init__(self, public_key: PublicKey, p: int, q: int) -> None:
        p, q = bk.mpz(p), bk.mpz(q)
        if p * q != public_key.n or p == q:
            raise param_error("p, q", "distinct factors with p * q == n", "a mismatching pair")
        if p > q:
            p, q = q, p
        self.public_key = public_key
        self.p, self.q = p, q
        self.psquare, self.qsquare = p * p, q * q
        # hp = L_p(g**(p-1) mod p**2)**-1 mod p with g = n + 1 (Paillier 1999, §7).  By the binomial theorem
        # (1 + n)**k = 1 + k n (mod n**2), so g**(p-1) - 1 = (p - 1) p q (mod p**2) and L_p = (p - 1) q = -q (mod p):
        # the same hp without an exponentiation modulo p**2 (2.5 ms a key at 2048 bits, paid by every pool
        # worker on its first decryption of a session).  Likewise hq = (-p)**-1 mod q.
        self.hp = bk.invert((-q) % p, p)
        self.hq = bk.invert((-p) % q, q)
        self.q_inv_p = bk.invert(q, p)

    def __repr__(self) -> str:
        return f"PrivateKey(bits={self.public_key.bits}, fingerprint={self.public_key.fingerprint[:16]}...)"

    def raw_decrypt(self, ciphertexts: Sequence[int]) -> list[bk.mpz]:
        """Plaintexts in ``[0, n)`` of ciphertexts in ``[1, n**2)`` (CRT, batched)."""
        cs = list(ciphertexts)
        return self.crt_join(self.raw_decrypt_half(cs, "p"), self.raw_decrypt_half(cs, "q"))

    def raw_decrypt_half(self, ciphertexts: Sequence[int], prime: str) -> list[bk.mpz]:
        """One CRT half of :meth:`raw_decrypt`: each plaintext modulo ``p`` (``prime="p"``) or ``q``.

        ``m_p = L_p(c**(p-1) mod p**2) h_p mod p`` (Paillier 1999, §7): one
        exponentiation modulo ``p**2`` per ciphertext, half of a decryption's
        work, so a pool can spread the halves of a batch over its workers
        evenly; :meth:`crt_join` makes the plaintexts.
        """
        if prime == "p":
            r, r2, h = self.p, self.psquare, self.hp
        elif prime == "q":
            r, r2, h = self.q, self.qsquare, self.hq
        else:
            raise param_error("prime", "'p' or 'q'", prime)
        return [(x - 1) // r * h % r for x in bk.powmod_base_list([c % r2 for c in ciphertexts], r - 1, r2)]

    def crt_join(self, mp: Sequence[int], mq: Sequence[int]) -> list[bk.mpz]:
        """The plaintexts in ``[0, n)`` of their halves modulo ``p`` and ``q`` (:meth:`raw_decrypt_half`)."""
        if len(mp) != len(mq):
            raise param_error("mq", f"one per plaintext modulo p ({len(mp)})", len(mq))
        p, q, qi = self.p, self.q, self.q_inv_p
        return [b + (a - b) * qi % p * q for a, b in zip(mp, mq)]

    def to_json(self) -> dict[str, Any]:
        """python-paillier JWK private key (``p``, ``q``, ``pub``)."""
        return {
            "kty": "DAJ",
            "key_ops": ["decrypt"],
            "p": _b64url(self.p),
            "q": _b64url(self.q),
            "pub": self.public_key.to_json(),
            "kid": f"dpdpca Paillier private key {self.public_key.fingerprint[:16]}",
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any], *, insecure_test_key: bool = False) -> PrivateKey:
        """Read :meth:`to_json` output (or a python-paillier JWK private key).

        Raises
        ------
        MessageError
            Malformed fields or ``p * q`` not equal to the public ``n``.
        """
        if (not isinstance(obj, dict) or obj.get("kty") != "DAJ" or not isinstance(obj.get("key_ops"), list)
                or "decrypt" not in obj["key_ops"]):
            raise MessageError("private key must be a DAJ JSON object with key_ops ['decrypt'], got another object")
        pub = PublicKey.from_json(obj.get("pub", {}), insecure_test_key=insecure_test_key)
        p, q = _unb64url("p", obj.get("p")), _unb64url("q", obj.get("q"))
        if p * q != pub.n:
            raise MessageError("private key p * q must equal the public n, got a mismatching pair")
        if p == q or not (bk.is_probable_prime(p) and bk.is_probable_prime(q)):
            raise MessageError("private key p and q must be distinct primes, got a composite or repeated factor")
        return cls(pub, p, q)


def keypair_from_primes(p: int, q: int, *, insecure_test_key: bool = False,
                        _test_randomness: Callable[[], int] | None = None
                        ) -> tuple[PublicKey, PrivateKey]:
    """Key pair from given primes ``p = q = 3 (mod 4)`` (known-answer tests, imports).

    ``_test_randomness()`` (tests only) returns the unit ``x`` of
    ``hs = -x**(2n)``; otherwise ``x`` is drawn from :mod:`secrets`.

    Raises
    ------
    ParameterError
        ``p`` or ``q`` not a prime congruent to 3 mod 4, or ``p == q``.
    InsecureKeyError
        ``p * q`` below 2048 bits without ``insecure_test_key=True``.
    """
    for name, v in (("p", p), ("q", q)):
        check_int(name, v, minimum=3)
        if v % 4 != 3 or not bk.is_probable_prime(v):
            # Never echo a (possibly secret) prime candidate into an error message.
            raise ParameterError(f"{name} must be a prime congruent to 3 mod 4, "
                                 f"got a {int(v).bit_length()}-bit integer that is not")
    if p == q:
        raise ParameterError("q must be different from p, got p == q")
    n = bk.mpz(p) * q
    _check_size(n.bit_length(), insecure_test_key)
    x = None if _test_randomness is None else _test_randomness()
    pub = PublicKey(n, derive_hs(n, x), insecure_test_key=insecure_test_key, modulus_proof=_proof_or_none(p, q))
    return pub, PrivateKey(pub, p, q)


def _proof_or_none(p: int, q: int) -> ModulusProof | None:
    # gcd(n, phi(n)) != 1 only if one prime divides the other minus one (primes of very different sizes):
    # such a pair still makes a Paillier key, but one that owners refuse (it cannot be proved square-free).
    try:
        return prove_modulus(p, q)
    except ParameterError:
        return None


def generate_keypair(bits: int = 2048, *, insecure_test_key: bool = False) -> tuple[PublicKey, PrivateKey]:
    """Generate a Paillier/DJN key pair with an ``n`` of exactly ``bits`` bits.

    Parameters
    ----------
    bits : int
        Modulus size; 2048 (default) or 3072 for long-term use.  Even, >= 2048
        unless ``insecure_test_key=True`` (then >= 16, tests only), and at
        most :data:`MAX_KEY_BITS` (16384).
    insecure_test_key : bool
        Explicit consent to a small, insecure key.

    Returns
    -------
    (PublicKey, PrivateKey)

    Raises
    ------
    InsecureKeyError
        ``bits < 2048`` without ``insecure_test_key=True``.
    ParameterError
        ``bits`` odd, above :data:`MAX_KEY_BITS` or not an integer.

    Examples
    --------
    >>> pk, sk = generate_keypair(512, insecure_test_key=True)
    >>> pk.bits
    512
    """
    bits = check_int("key bits", bits, maximum=MAX_KEY_BITS)
    _check_size(bits, insecure_test_key)
    if bits % 2:
        raise param_error("key bits", "even", bits)
    while True:
        p = bk.random_prime_3mod4(bits // 2)
        q = bk.random_prime_3mod4(bits // 2)
        if p != q:
            break
    n = p * q
    pub = PublicKey(n, derive_hs(n), insecure_test_key=insecure_test_key, modulus_proof=prove_modulus(p, q))
    return pub, PrivateKey(pub, p, q)


def save_public_key(path: str | os.PathLike[str], key: PublicKey) -> None:
    """Write the public key as JSON (mode 0644, atomically)."""
    atomic_write_json(path, key.to_json(), mode=0o644)


def save_private_key(path: str | os.PathLike[str], key: PrivateKey) -> None:
    """Write the private key as JSON with mode 0600, atomically (never partially)."""
    atomic_write_json(path, key.to_json(), mode=0o600)


def _read_json(path: str | os.PathLike[str], what: str) -> Any:
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        return json.loads(data)
    except ValueError as exc:
        raise MessageError(f"{what} file {os.fspath(path)} must hold JSON, got invalid JSON ({exc})") from exc
    except RecursionError:
        raise MessageError(f"{what} file {os.fspath(path)} must hold JSON nested less deeply, got "
                           f"RecursionError") from None


def load_public_key(path: str | os.PathLike[str], *, insecure_test_key: bool = False) -> PublicKey:
    """Read a public key JSON file (ours or python-paillier's JWK)."""
    return PublicKey.from_json(_read_json(path, "public key"), insecure_test_key=insecure_test_key)


def load_private_key(path: str | os.PathLike[str], *, insecure_test_key: bool = False) -> PrivateKey:
    """Read a private key JSON file written by :func:`save_private_key`."""
    return PrivateKey.from_json(_read_json(path, "private key"), insecure_test_key=insecure_test_key)
