"""BFV (Brakerski/Fan–Vercauteren) ring-LWE encryption of exact signed integers, over TenSEAL.

A post-quantum second scheme beside packed Paillier, for what the protocol's
add/remove release does: sums of encrypted integer vectors, plaintext
additions and a rerandomization.  With :mod:`dpdpca.crypto.lattice_flood`
(the proxy's noise flooding) the only modules that import ``tenseal``
(optional extra ``dpdpca[lattice]``); nothing outside :mod:`dpdpca.crypto`
talks to the binding.

Exactness
---------
A batched BFV plaintext is a vector of ``N`` (the ring degree) integers
modulo a prime ``t = 1 (mod 2N)``.  One ``t`` below ``2**59`` (SEAL's limit)
may be too small for a release's range, so a key holds ``k`` independent
contexts with distinct primes ``t_1..t_k`` and every value ``x`` is encrypted
as its residues ``x mod t_i``; the data user recombines them with the CRT into
the centred residue modulo ``T = t_1 ... t_k``.  That residue is ``x`` exactly
whenever ``|x| <= (T - 1) / 2``, so every array carries a public declared
``bound`` on ``|x|`` (as :class:`~dpdpca.crypto.EncryptedArray` does) and every
operation checks its result's bound against ``(T - 1) / 2`` *before*
computing; nothing wraps silently.

Decryption noise
----------------
A SEAL public-key encryption of ``m`` is ``c`` with ``c_0 + c_1 s = round(q m /
t) - e u + e_1 + e_2 s (mod q)``: ``u, s`` ternary, ``e, e_1, e_2`` with
coefficients of absolute value at most ``21`` (SEAL's centred binomial, or its
6-sigma clipped normal, both ``<= 21``).  So the noise of a fresh ciphertext has
every coefficient of absolute value ``<= 21 (2N + 1) + 1/2`` (``||e u||_inf <=
||e||_inf ||u||_1``), a sum of ciphertexts has the sum of the bounds, and a
plaintext addition adds at most ``1/2`` (SEAL rounds ``q m / t``).  Decryption
is exact while the noise is below ``q / (2 t)`` (``q``: the product of the
data-level primes).  Every array tracks this worst-case bound (``noise``, in
units of 1/2) and every operation checks it before computing
(:meth:`BFVPublicKey.check_noise`), like the slot bound.

Security
--------
Parameters are checked when a key is made or loaded against the Homomorphic
Encryption Standard's table for 128-bit classical security with a ternary
secret (:data:`HE_STANDARD_128`: largest total coefficient-modulus bits per
ring degree).  SEAL itself refuses weaker parameters, so there is no
insecure BFV test key; the smallest key (N = 4096) is fast enough for tests.

References
----------
J. Fan, F. Vercauteren, "Somewhat practical fully homomorphic encryption",
IACR ePrint 2012/144.  M. Albrecht et al., "Homomorphic Encryption Security
Standard", HomomorphicEncryption.org, 2018, Table 1 (ternary secret,
128-bit classical).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import operator
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdpca._io import atomic_write_json
from dpdpca._validation import check_int, param_error
from dpdpca.errors import (InsecureKeyError, KeyMismatchError, MessageError, MissingDependencyError,
                           OverflowRiskError)

__all__ = ["HE_STANDARD_128", "BFVParameters", "smallest_parameters", "encrypt_bfv", "decrypt_bfv", "sum_bfv", "BFVPublicKey", "BFVPrivateKey", "BFVArray",
           "generate_bfv_keypair", "bfv_available", "KEY_TYPE"]

#: JWK-style ``kty`` of a BFV key in ``public.json``.
KEY_TYPE = "DPDPCA-BFV"
#: HE Standard (2018), Table 1, ternary secret, 128-bit classical: ring degree -> largest log2(q).
HE_STANDARD_128 = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}
#: Largest |coefficient| of SEAL's encryption errors (centred binomial or 6-sigma clipped normal, sigma 3.2).
ERROR_BOUND = 21
#: Largest plaintext prime SEAL accepts (bits).
MAX_PLAIN_BITS = 59
#: The default parameters: N = 8192, three 60-bit primes (180 <= 218 bits), 59-bit plaintext primes.
DEFAULT_RING_DEGREE = 8192
DEFAULT_COEFF_BITS = (60, 60, 60)
_MAGIC = b"DPBFV1"


def bfv_available() -> bool:
    """Whether the optional binding (``pip install dpdpca[lattice]``, TenSEAL) is installed."""
    try:
        import tenseal  # noqa: F401
    except ImportError:
        return False
    return True


def _ts() -> Any:
    try:
        import tenseal
    except ImportError:
        raise MissingDependencyError("scheme 'bfv' needs the optional extra: pip install 'dpdpca[lattice]' "
                                     "(TenSEAL), got it missing") from None
    return tenseal


def _is_prime(p: int) -> bool:
    from dpdpca.crypto import _gmp  # the package's one big-number backend

    return _gmp.is_probable_prime(p)


def batching_primes(ring_degree: int, bits: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes ``t < 2**bits`` with ``t = 1 (mod 2 ring_degree)`` (batching), descending."""
    step = 2 * ring_degree
    k = ((1 << bits) - 2) // step
    out: list[int] = []
    while len(out) < count and k > 0:
        p = k * step + 1
        if _is_prime(p):
            out.append(p)
        k -= 1
    return tuple(out)


@dataclass(frozen=True)
class BFVParameters:
    """Public BFV parameters: ring degree N, coefficient-modulus prime sizes, plaintext primes.

    Parameters
    ----------
    ring_degree : int
        N, a power of two in :data:`HE_STANDARD_128`.
    coeff_bits : tuple of int
        Bit sizes of the coefficient-modulus primes; SEAL keeps the last one
        for key switching, the others make the data level ``q``.
    plain_moduli : tuple of int
        The CRT plaintext primes ``t_i = 1 (mod 2N)``, distinct, each < 2**59.
    """

    ring_degree: int
    coeff_bits: tuple[int, ...]
    plain_moduli: tuple[int, ...]

    @classmethod
    def for_bound(cls, max_abs: int, *, additions: int, ring_degree: int = DEFAULT_RING_DEGREE,
                  coeff_bits: Sequence[int] = DEFAULT_COEFF_BITS, reserve_bits: int = 0) -> "BFVParameters":
        """The fewest 59-bit plaintext primes whose product holds ``|x| <= max_abs``, checked for noise.

        ``additions``: how many fresh encryptions and plaintext additions one
        decrypted ciphertext may accumulate (e.g. owners + 2).
        ``reserve_bits``: ``q/(2t)`` must also hold ``2**reserve_bits`` times
        that noise (room for noise flooding, :mod:`dpdpca.crypto.lattice_flood`).
        """
        check_int("max_abs", max_abs, minimum=1)
        check_int("additions", additions, minimum=1)
        reserve_bits = check_int("reserve_bits", reserve_bits, minimum=0)
        coeff = tuple(int(b) for b in coeff_bits)
        fresh = cls(int(ring_degree), coeff, (2 * ring_degree + 1,)).fresh_noise
        # t_max < q_min / (fresh * additions * 2**reserve): the widest plaintext primes the worst-case noise allows
        plain_bits = min(MAX_PLAIN_BITS,
                         sum(b - 1 for b in coeff[:-1]) - (fresh * additions).bit_length() - reserve_bits)
        if plain_bits < 17:
            raise OverflowRiskError(f"BFV plaintext primes must have >= 17 bits under the noise of {additions} "
                                    f"additions, got {plain_bits} (use a larger coefficient modulus)")
        primes: tuple[int, ...] = ()
        for count in range(1, 64):
            primes = batching_primes(ring_degree, plain_bits, count)
            if math.prod(primes) > 2 * max_abs:
                break
        params = cls(int(ring_degree), coeff, primes)
        params.check_security()
        if (params.fresh_noise * additions) << reserve_bits >= params.noise_capacity:
            raise OverflowRiskError(f"BFV noise of {additions} additions (times 2**{reserve_bits}) must stay below "
                                    f"q/(2t) (2**{params.noise_capacity.bit_length() - 1} half-units), got "
                                    f"2**{((params.fresh_noise * additions) << reserve_bits).bit_length() - 1}")
        return params

    def check_security(self, *, insecure_test_key: bool = False) -> None:
        """Refuse parameters below 128-bit security by the HE Standard's table (InsecureKeyError)."""
        if self.ring_degree not in HE_STANDARD_128:
            raise param_error("ring_degree", f"one of {sorted(HE_STANDARD_128)}", self.ring_degree)
        total = sum(self.coeff_bits)
        top = HE_STANDARD_128[self.ring_degree]
        if total > top and not insecure_test_key:
            raise InsecureKeyError(f"BFV total coefficient-modulus bits must be <= {top} for ring degree "
                                   f"{self.ring_degree} (128-bit security, HE Standard), got {total}")
        if len(self.coeff_bits) < 2 or any(not 20 <= b <= 60 for b in self.coeff_bits):
            raise param_error("coeff_bits", "at least 2 primes of 20..60 bits", list(self.coeff_bits))
        if not self.plain_moduli or len(set(self.plain_moduli)) != len(self.plain_moduli):
            raise param_error("plain_moduli", "distinct primes", [str(t) for t in self.plain_moduli])
        for t in self.plain_moduli:
            if t >= 1 << MAX_PLAIN_BITS or t % (2 * self.ring_degree) != 1 or not _is_prime(t):
                raise param_error("plain_moduli", f"primes < 2**{MAX_PLAIN_BITS}, = 1 mod {2 * self.ring_degree}",
                                  str(t))

    @property
    def plain_product(self) -> int:
        """``T``, the product of the plaintext primes."""
        return math.prod(self.plain_moduli)

    @property
    def max_abs(self) -> int:
        """Largest ``|x|`` the CRT recovers exactly: ``(T - 1) // 2``."""
        return (self.plain_product - 1) // 2

    @property
    def fresh_noise(self) -> int:
        """Worst-case noise of one fresh encryption, in half-units: ``2 (21 (2N + 1)) + 1``."""
        return 2 * ERROR_BOUND * (2 * self.ring_degree + 1) + 1

    @property
    def noise_capacity(self) -> int:
        """``q_min / t_max`` in half-units (``q/(2t)`` in units), with ``q_min = prod 2**(b_i - 1)`` over data primes."""
        q_min_bits = sum(b - 1 for b in self.coeff_bits[:-1])
        return (1 << q_min_bits) // max(self.plain_moduli)

    def to_json(self) -> dict[str, Any]:
        return {"ring_degree": self.ring_degree, "coeff_bits": list(self.coeff_bits),
                "plain_moduli": [str(t) for t in self.plain_moduli]}

    @classmethod
    def from_json(cls, obj: Any) -> "BFVParameters":
        try:
            return cls(int(obj["ring_degree"]), tuple(int(b) for b in obj["coeff_bits"]),
                       tuple(int(t) for t in obj["plain_moduli"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"BFV key must have ring_degree, coeff_bits and plain_moduli, got "
                               f"{type(exc).__name__}") from None


#: Candidate (ring degree, coefficient-modulus primes) at 128-bit security, smallest first.  (8192, 210 bits)
#: has a third, 30-bit data prime: room for noise flooding (lattice_flood.RESERVE_BITS) with one 58-bit
#: plaintext prime, in 41 bytes per value on the wire (SEAL's zstd packs the short residues) against 64 for
#: two plaintext primes under (60, 60, 60) and 48 for a third 60-bit data prime.
CANDIDATES = ((4096, (36, 36, 37)), (8192, (60, 60, 60)), (8192, (60, 60, 30, 60)), (16384, (60,) * 7))


def smallest_parameters(max_abs: int, *, additions: int, reserve_bits: int = 0) -> BFVParameters:
    """The candidate with the fewest bytes per value (then the smallest ring) holding ``|x| <= max_abs``.

    ``reserve_bits``: room for noise flooding (:meth:`BFVParameters.for_bound`).

    A ciphertext holds ``2 N`` coefficients per data-level prime (64-bit
    words on the wire), so bytes per value are ``16 (primes - 1)`` per
    plaintext prime whatever N: fewer plaintext primes win, and a larger
    ring buys wider ones.
    """
    best: tuple[int, int, BFVParameters] | None = None
    for ring, coeff in CANDIDATES:
        try:
            params = BFVParameters.for_bound(max_abs, additions=additions, ring_degree=ring, coeff_bits=coeff,
                                             reserve_bits=reserve_bits)
        except OverflowRiskError:
            continue
        cost = len(params.plain_moduli) * (len(coeff) - 1)
        if best is None or cost < best[0]:
            best = (cost, ring, params)
    if best is None:
        raise OverflowRiskError(f"BFV parameters must hold |value| <= {max_abs} after {additions} additions "
                                f"(noise reserve 2**{reserve_bits}), got no candidate ring that does")
    return best[2]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(name: str, text: Any) -> bytes:
    if not isinstance(text, str) or not text:
        raise MessageError(f"BFV key field {name} must be a non-empty base64 string, got {type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise MessageError(f"BFV key field {name} must be base64, got a malformed value of "
                           f"{len(text)} characters") from None


def _check_context(ctx: Any, params: BFVParameters, t: int, what: str) -> None:
    """The context the binding loaded must have exactly the declared N, q and t."""
    data = ctx.seal_context().data
    key = data.key_context_data()
    got = (key.parms().poly_modulus_degree(), key.total_coeff_modulus_bit_count(),
           2 * key.plain_upper_half_threshold() - 1)
    want = (params.ring_degree, sum(params.coeff_bits), t)
    # SEAL's primes have exactly the requested sizes, so the total bit count is within len(coeff_bits) of the sum
    if got[0] != want[0] or got[2] != want[2] or not want[1] - len(params.coeff_bits) <= got[1] <= want[1]:
        raise MessageError(f"{what} must have the declared ring degree, modulus bits and plaintext prime "
                           f"{want[0]}, {want[1]}, {want[2]}, got {got[0]}, {got[1]}, {got[2]}")


def _load_context(blob: bytes, params: BFVParameters, t: int, what: str) -> Any:
    ts = _ts()
    try:
        ctx = ts.context_from(blob)
    except Exception as exc:  # the binding raises its own types on malformed input
        raise MessageError(f"{what} must be a valid TenSEAL context, got {type(exc).__name__}") from None
    _check_context(ctx, params, t, what)
    return ctx


class BFVPublicKey:
    """A BFV public key: one public TenSEAL context per plaintext prime, and its parameters.

    Attributes
    ----------
    params : BFVParameters
    fingerprint : str
        Hex SHA-256 of the canonical JSON of the parameters and the public contexts.
    scheme : str
        ``"bfv"``.
    """

    scheme = "bfv"
    insecure_test_key = False

    def __init__(self, params: BFVParameters, contexts: Sequence[Any], blobs: Sequence[bytes]) -> None:
        self.params = params
        self._contexts = list(contexts)
        self._blobs = [bytes(b) for b in blobs]
        body = json.dumps({"params": params.to_json(), "contexts": [hashlib.sha256(b).hexdigest() for b in blobs]},
                          sort_keys=True, separators=(",", ":")).encode()
        self.fingerprint = hashlib.sha256(body).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFVPublicKey) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return (f"BFVPublicKey(N={self.params.ring_degree}, q_bits={sum(self.params.coeff_bits)}, "
                f"plain_moduli={len(self.params.plain_moduli)}, fingerprint={self.fingerprint[:16]})")

    @property
    def bits(self) -> int:
        """Bits of the CRT plaintext space ``T`` (what one slot can hold, sign included)."""
        return self.params.plain_product.bit_length()

    @property
    def slots(self) -> int:
        """Values per ciphertext: the ring degree N."""
        return self.params.ring_degree

    @property
    def contexts(self) -> list[Any]:
        return list(self._contexts)

    def check_bound(self, bound: int, operation: str) -> None:
        """Raise OverflowRiskError if ``bound`` exceeds ``(T - 1) / 2`` (checked before computing)."""
        if bound > self.params.max_abs:
            raise OverflowRiskError(f"{operation} result bound must be <= {self.params.max_abs} (the BFV plaintext "
                                    f"primes' CRT range), got {bound}")

    def check_noise(self, noise: int, operation: str) -> None:
        """Raise OverflowRiskError if the worst-case noise reaches ``q / (2t)`` (checked before computing)."""
        if noise >= self.params.noise_capacity:
            raise OverflowRiskError(f"{operation} BFV noise must stay below q/(2t) = "
                                    f"{self.params.noise_capacity} half-units, got {noise}")

    def to_json(self) -> dict[str, Any]:
        return {"kty": KEY_TYPE, **self.params.to_json(), "contexts": [_b64(b) for b in self._blobs]}

    @classmethod
    def from_json(cls, obj: dict[str, Any], *, insecure_test_key: bool = False) -> "BFVPublicKey":
        """Load and check: security table, declared parameters against each context, no secret key inside.

        Raises
        ------
        InsecureKeyError
            Parameters below 128-bit security (HE Standard).
        MessageError
            Malformed fields, or a context that is not what the parameters declare.
        """
        if not isinstance(obj, dict) or obj.get("kty") != KEY_TYPE:
            raise MessageError(f"BFV key kty must be {KEY_TYPE!r}, got "
                               f"{str(obj.get('kty'))[:40] if isinstance(obj, dict) else type(obj).__name__}")
        params = BFVParameters.from_json(obj)
        params.check_security(insecure_test_key=insecure_test_key)
        blobs = obj.get("contexts")
        if not isinstance(blobs, list) or len(blobs) != len(params.plain_moduli):
            raise MessageError(f"BFV key contexts must be one per plaintext prime ({len(params.plain_moduli)}), "
                               f"got {len(blobs) if isinstance(blobs, list) else type(blobs).__name__}")
        raw = [_unb64(f"contexts[{i}]", b) for i, b in enumerate(blobs)]
        contexts = [_load_context(b, params, t, f"BFV public context {i}")
                    for i, (b, t) in enumerate(zip(raw, params.plain_moduli))]
        if any(ctx.has_secret_key() for ctx in contexts):
            raise MessageError("BFV public key must not hold a secret key, got a context with one")
        return cls(params, contexts, raw)


class BFVPrivateKey:
    """The BFV secret key: one private TenSEAL context per plaintext prime.  Never logged or echoed."""

    def __init__(self, public_key: BFVPublicKey, contexts: Sequence[Any], blobs: Sequence[bytes]) -> None:
        self.public_key = public_key
        self._contexts = list(contexts)
        self._blobs = [bytes(b) for b in blobs]

    def __repr__(self) -> str:
        return f"BFVPrivateKey(public={self.public_key.fingerprint[:16]})"

    def to_json(self) -> dict[str, Any]:
        return {"kty": KEY_TYPE, "pub": self.public_key.to_json(),
                "secret_contexts": [_b64(b) for b in self._blobs]}

    @classmethod
    def from_json(cls, obj: dict[str, Any], *, insecure_test_key: bool = False) -> "BFVPrivateKey":
        if not isinstance(obj, dict) or obj.get("kty") != KEY_TYPE or not isinstance(obj.get("pub"), dict):
            raise MessageError(f"BFV private key must have kty {KEY_TYPE!r} and its public key, got another object")
        pk = BFVPublicKey.from_json(obj["pub"], insecure_test_key=insecure_test_key)
        blobs = obj.get("secret_contexts")
        if not isinstance(blobs, list) or len(blobs) != len(pk.params.plain_moduli):
            raise MessageError("BFV private key must have one secret context per plaintext prime, got another count")
        raw = [_unb64(f"secret_contexts[{i}]", b) for i, b in enumerate(blobs)]
        contexts = [_load_context(b, pk.params, t, f"BFV secret context {i}")
                    for i, (b, t) in enumerate(zip(raw, pk.params.plain_moduli))]
        # the secret contexts must decrypt what the public key encrypts
        for i, (pub, sec) in enumerate(zip(pk.contexts, contexts)):
            if not sec.has_secret_key():
                raise MessageError(f"BFV private key context {i} must hold the secret key, got a public context")
            probe = _ts().bfv_vector(pub, [1, 2, 3])
            probe.link_context(sec)
            if [int(x) for x in probe.decrypt()[:3]] != [1, 2, 3]:
                raise KeyMismatchError(f"BFV private key context {i} must match the public key "
                                       f"{pk.fingerprint[:16]}, got another key")
        return cls(pk, contexts, raw)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the private key (mode 0600, atomic)."""
        atomic_write_json(path, self.to_json(), mode=0o600)


def generate_bfv_keypair(params: BFVParameters) -> tuple[BFVPublicKey, BFVPrivateKey]:
    """Fresh keys (SEAL draws them from the OS CSPRNG), one context per plaintext prime.

    Raises
    ------
    InsecureKeyError
        ``params`` below 128-bit security.
    """
    params.check_security()
    ts = _ts()
    pub_ctx, pub_blobs, sec_ctx, sec_blobs = [], [], [], []
    for t in params.plain_moduli:
        ctx = ts.context(ts.SCHEME_TYPE.BFV, poly_modulus_degree=params.ring_degree, plain_modulus=t,
                         coeff_mod_bit_sizes=list(params.coeff_bits))
        secret = ctx.serialize(save_public_key=False, save_secret_key=True, save_galois_keys=False,
                               save_relin_keys=False)
        public = ctx.serialize(save_public_key=True, save_secret_key=False, save_galois_keys=False,
                               save_relin_keys=False)
        pub_blobs.append(public)
        sec_blobs.append(secret)
        pub_ctx.append(ts.context_from(public))
        sec_ctx.append(ts.context_from(secret))
    pk = BFVPublicKey(params, pub_ctx, pub_blobs)
    return pk, BFVPrivateKey(pk, sec_ctx, sec_blobs)


def _as_ints(name: str, values: Any) -> tuple[Any, int]:
    """``(values, max |value|)``: an int64 array when every value fits (no per-value Python), else Python ints."""
    try:
        arr = np.asarray(values)
        if arr.dtype.kind in "iu" or (arr.dtype == object and arr.size == 0):
            arr = arr.astype(np.int64, copy=False)
        elif arr.dtype == object:
            arr = arr.astype(np.int64)  # OverflowError / TypeError below for big or non-integers
        else:
            raise TypeError
        if arr.ndim != 1:
            raise param_error(name, "a 1-D sequence of integers", f"shape {arr.shape}")
        top = max(int(arr.max()), -int(arr.min())) if arr.size else 0  # not np.abs: it wraps -2**63
        if top < 1 << 62:  # larger magnitudes go the exact way
            return arr, top
    except (OverflowError, TypeError, ValueError):
        pass
    try:
        vals = [operator.index(v) for v in values]  # integers only: a float is refused, never truncated
    except TypeError:
        raise param_error(name, "integers", "a non-integer value") from None
    return vals, max((abs(v) for v in vals), default=0)


def _residues(values: Any, t: int) -> Any:
    if isinstance(values, np.ndarray):
        return np.mod(values, t)
    return [v % t for v in values]


def _split(values: Any, chunks: Sequence[int]) -> list[list[int]]:
    out, start = [], 0
    for c in chunks:
        part = values[start:start + c]
        out.append(part.tolist() if isinstance(part, np.ndarray) else list(part))
        start += c
    return out


class BFVArray:
    """An encrypted vector of signed integers: ciphertexts per plaintext prime per chunk, with public bounds.

    Parameters
    ----------
    public_key : BFVPublicKey
    chunks : tuple of int
        Values per ciphertext, each ``<= N``.
    bound : int
        Declared public bound on every ``|value|``.
    noise : int
        Worst-case decryption noise bound (half-units, :class:`BFVParameters`).
    vectors : list over plaintext primes of lists of TenSEAL BFV vectors
    layout : object
        The caller's layout tag, carried along (the protocol's slot layout).
    """

    def __init__(self, public_key: BFVPublicKey, chunks: Sequence[int], bound: int, noise: int,
                 vectors: list[list[Any]], layout: Any = None) -> None:
        self.public_key = public_key
        self.chunks = tuple(int(c) for c in chunks)
        self.bound = int(bound)
        self.noise = int(noise)
        self._vectors = vectors
        self.layout = layout

    @property
    def length(self) -> int:
        return sum(self.chunks)

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"BFVArray(length={self.length}, ciphertexts={self.ciphertext_count}, bound={self.bound})"

    @property
    def ciphertext_count(self) -> int:
        """BFV ciphertexts held: chunks times plaintext primes."""
        return len(self.chunks) * len(self._vectors)

    def _check_other(self, other: "BFVArray", operation: str) -> None:
        if not isinstance(other, BFVArray):
            raise TypeError(f"{operation} operand must be a BFVArray, got {type(other).__name__}")
        if other.public_key != self.public_key:
            raise KeyMismatchError(f"{operation} operands must be under one key, got {self.public_key.fingerprint[:16]}"
                                   f" and {other.public_key.fingerprint[:16]}")
        if other.chunks != self.chunks:
            raise MessageError(f"{operation} operands must have one chunk layout, got {len(self.chunks)} and "
                               f"{len(other.chunks)} chunks")

    def add(self, other: "BFVArray", *, executor: Any = None) -> "BFVArray":
        """Slot-wise sum; bounds and noise add (checked first)."""
        self._check_other(other, "add")
        bound, noise = self.bound + other.bound, self.noise + other.noise
        self.public_key.check_bound(bound, "add")
        self.public_key.check_noise(noise, "add")
        vectors = [[a + b for a, b in zip(mine, theirs)] for mine, theirs in zip(self._vectors, other._vectors)]
        return BFVArray(self.public_key, self.chunks, bound, noise, vectors, self.layout)

    __add__ = add

    def add_plain(self, values: Sequence[int], *, plain_bound: int | None = None,
                  executor: Any = None) -> "BFVArray":
        """Add a plaintext integer vector (its residues); bound ``+ plain_bound``, noise ``+ 1`` half-unit."""
        vals, top = _as_ints("values", values)
        if len(vals) != self.length:
            raise param_error("values", f"length {self.length}", len(vals))
        plain_bound = top if plain_bound is None else int(plain_bound)
        if top > plain_bound:
            raise OverflowRiskError(f"add_plain values must be within plain_bound={plain_bound}, got {top}")
        bound, noise = self.bound + plain_bound, self.noise + 1
        self.public_key.check_bound(bound, "add_plain")
        self.public_key.check_noise(noise, "add_plain")
        vectors = []
        for t, mine in zip(self.public_key.params.plain_moduli, self._vectors):
            parts = _split(_residues(vals, t), self.chunks)
            vectors.append([c + p for c, p in zip(mine, parts)])
        return BFVArray(self.public_key, self.chunks, bound, noise, vectors, self.layout)

    def rerandomize(self, *, executor: Any = None, **_: Any) -> "BFVArray":
        """Add a fresh public-key encryption of zero to every ciphertext (the proxy's step before release).

        The result is distributed as a fresh encryption of the same values
        plus the previous noise (RLWE: indistinguishable from uniform to
        anyone without the secret key); what the key holder learns from the
        noise term is discussed in docs/threat-model.md.
        """
        fresh = self.public_key.params.fresh_noise
        self.public_key.check_noise(self.noise + fresh, "rerandomize")
        return self.add_zeros(_encrypt_residues(self.public_key, np.zeros(self.length, dtype=np.int64), self.chunks),
                              fresh)

    def per_prime_vectors(self) -> list[list[Any]]:
        """The TenSEAL vectors, a list per plaintext prime (chunk order); the lists are copies."""
        return [list(row) for row in self._vectors]

    def add_zeros(self, zeros: list[list[Any]], noise: int) -> "BFVArray":
        """Add encryptions of 0 (TenSEAL vectors laid out as :meth:`per_prime_vectors`) of noise ``<= noise``.

        The values and bounds are unchanged; the noise bound grows by
        ``noise`` half-units (checked first).  The step of :meth:`rerandomize`
        and of noise flooding (:func:`dpdpca.crypto.lattice_flood.flood_bfv`).
        """
        total = self.noise + int(noise)
        self.public_key.check_noise(total, "add_zeros")
        if [len(r) for r in zeros] != [len(r) for r in self._vectors]:
            raise param_error("zeros", f"{len(self._vectors)} lists of {len(self.chunks)} ciphertexts",
                              [len(r) for r in zeros])
        vectors = [[a + z for a, z in zip(mine, zs)] for mine, zs in zip(self._vectors, zeros)]
        return BFVArray(self.public_key, self.chunks, self.bound, total, vectors, self.layout)

    def with_bound(self, bound: int) -> "BFVArray":
        """The same ciphertexts under a larger declared bound (never smaller)."""
        if bound < self.bound:
            raise param_error("bound", f">= the current bound {self.bound}", bound)
        self.public_key.check_bound(bound, "with_bound")
        return BFVArray(self.public_key, self.chunks, bound, self.noise, self._vectors, self.layout)

    def ciphertext_blobs(self) -> list[bytes]:
        """Every ciphertext's serialized bytes, prime by prime, chunk by chunk (replay keys, wire)."""
        return [v.serialize() for per_prime in self._vectors for v in per_prime]

    def to_bytes(self) -> bytes:
        """``DPBFV1`` + header length + JSON header (key fingerprint, chunks, bound, noise) + length-prefixed ciphertexts."""
        header = json.dumps({"key": self.public_key.fingerprint, "chunks": list(self.chunks), "bound": str(self.bound),
                             "noise": str(self.noise), "primes": len(self._vectors)},
                            separators=(",", ":")).encode()
        parts = [_MAGIC, struct.pack(">I", len(header)), header]
        for blob in self.ciphertext_blobs():
            parts.append(struct.pack(">I", len(blob)))
            parts.append(blob)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes, public_key: BFVPublicKey, *, layout: Any = None, **_: Any) -> "BFVArray":
        """Inverse of :meth:`to_bytes`; checks the key, every length, the bound and the noise.

        Raises
        ------
        MessageError
            Truncated, malformed, or a ciphertext the binding does not accept for this key's parameters.
        KeyMismatchError
            Another key's fingerprint.
        """
        data = bytes(data)
        if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 4:
            raise MessageError(f"BFV batch must start with {_MAGIC!r}, got {data[:6]!r}")
        pos = len(_MAGIC)
        (hlen,) = struct.unpack(">I", data[pos:pos + 4])
        pos += 4
        if hlen > 1 << 24 or pos + hlen > len(data):
            raise MessageError(f"BFV batch header must fit the message, got {hlen} bytes")
        try:
            head = json.loads(data[pos:pos + hlen].decode())
            chunks = tuple(int(c) for c in head["chunks"])
            bound, noise, primes = int(head["bound"]), int(head["noise"]), int(head["primes"])
            key = str(head["key"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise MessageError("BFV batch header must be JSON with key, chunks, bound, noise and primes, "
                               "got a malformed header") from None
        pos += hlen
        if key != public_key.fingerprint:
            raise KeyMismatchError(f"BFV batch must be under key {public_key.fingerprint[:16]}, got {key[:16]}")
        n = public_key.params.ring_degree
        if primes != len(public_key.params.plain_moduli) or any(not 1 <= c <= n for c in chunks):
            raise MessageError(f"BFV batch must have {len(public_key.params.plain_moduli)} primes and chunks of 1..{n},"
                               f" got {primes} primes")
        public_key.check_bound(bound, "BFV batch")
        public_key.check_noise(noise, "BFV batch")
        ts = _ts()
        vectors: list[list[Any]] = []
        for ctx in public_key.contexts:
            row = []
            for i, c in enumerate(chunks):
                if pos + 4 > len(data):
                    raise MessageError(f"BFV batch must hold {len(chunks) * primes} ciphertexts, got it truncated")
                (clen,) = struct.unpack(">I", data[pos:pos + 4])
                pos += 4
                if pos + clen > len(data):
                    raise MessageError(f"BFV batch ciphertext must fit the message, got {clen} bytes past its end")
                try:
                    vec = ts.bfv_vector_from(ctx, data[pos:pos + clen])
                except Exception as exc:  # the binding's own types on malformed input
                    raise MessageError(f"BFV batch ciphertext[{i}] must be a valid ciphertext for this key, "
                                       f"got {type(exc).__name__}") from None
                if vec.size() != c:
                    raise MessageError(f"BFV batch ciphertext[{i}] must hold {c} values, got {vec.size()}")
                row.append(vec)
                pos += clen
            vectors.append(row)
        if pos != len(data):
            raise MessageError(f"BFV batch must end after its ciphertexts, got {len(data) - pos} trailing bytes")
        return cls(public_key, chunks, bound, noise, vectors, layout)

    @property
    def nbytes(self) -> int:
        return len(self.to_bytes())


def _encrypt_residues(public_key: BFVPublicKey, values: Any, chunks: Sequence[int]) -> list[list[Any]]:
    ts = _ts()
    out = []
    for t, ctx in zip(public_key.params.plain_moduli, public_key.contexts):
        out.append([ts.bfv_vector(ctx, part) for part in _split(_residues(values, t), chunks)])
    return out


def encrypt_bfv(public_key: BFVPublicKey, values: Sequence[int], *, bound: int, chunks: Sequence[int] | None = None,
                layout: Any = None) -> BFVArray:
    """Encrypt signed integers ``|x| <= bound`` (checked first; ``bound`` within the CRT range).

    Raises
    ------
    OverflowRiskError
        A value above ``bound``, or ``bound`` beyond ``(T - 1) / 2``.
    """
    vals, top = _as_ints("values", values)
    bound = check_int("bound", bound, minimum=0)
    public_key.check_bound(bound, "encrypt")
    if top > bound:
        raise OverflowRiskError(f"encrypt values must be within the declared bound {bound}, got |value| = {top}")
    n = public_key.params.ring_degree
    if chunks is None:
        chunks = [min(n, len(vals) - a) for a in range(0, len(vals), n)]
    chunks = [int(c) for c in chunks]
    if sum(chunks) != len(vals) or any(not 1 <= c <= n for c in chunks):
        raise param_error("chunks", f"sizes 1..{n} summing to {len(vals)}", f"{len(chunks)} chunks")
    return BFVArray(public_key, chunks, bound, public_key.params.fresh_noise,
                    _encrypt_residues(public_key, vals, chunks), layout)


def decrypt_bfv(private_key: BFVPrivateKey, enc: BFVArray) -> list[int]:
    """Decrypt and recombine with the CRT: the centred residue mod ``T``, checked against the declared bound.

    Raises
    ------
    KeyMismatchError
        ``enc`` under another key.
    MessageError
        A value beyond the declared bound (tampering or a false declaration).
    """
    if enc.public_key != private_key.public_key:
        raise KeyMismatchError(f"decrypt needs the key {enc.public_key.fingerprint[:16]}, got "
                               f"{private_key.public_key.fingerprint[:16]}")
    params = private_key.public_key.params
    residues: list[list[int]] = []
    for t, ctx, row in zip(params.plain_moduli, private_key._contexts, enc._vectors):
        vals: list[int] = []
        for vec in row:
            vec.link_context(ctx)
            vals.extend(int(x) % t for x in vec.decrypt())
        residues.append(vals)
    out = _crt(params.plain_moduli, residues)
    top = max((abs(v) for v in out), default=0)
    if top > enc.bound:
        raise MessageError(f"decrypted values must be within the declared bound {enc.bound}, got |value| = {top}")
    return out


@functools.lru_cache(maxsize=8)
def _crt_basis(moduli: tuple[int, ...]) -> tuple[int, list[int]]:
    T = math.prod(moduli)
    return T, [(T // t) * pow(T // t, -1, t) for t in moduli]


def _crt(moduli: tuple[int, ...], residues: list[list[int]]) -> list[int]:
    if len(moduli) == 1:
        t = moduli[0]
        half = t // 2
        return [r - t if r > half else r for r in residues[0]]
    T, basis = _crt_basis(moduli)
    half = T // 2
    out = []
    for rs in zip(*residues):
        x = sum(r * b for r, b in zip(rs, basis)) % T
        out.append(x - T if x > half else x)
    return out


def sum_bfv(arrays: Sequence[BFVArray]) -> BFVArray:
    """The slot-wise sum of arrays with one layout (bounds and noise add, checked first)."""
    if not arrays:
        raise param_error("arrays", "non-empty", 0)
    out = arrays[0]
    for a in arrays[1:]:
        out = out.add(a)
    return out
