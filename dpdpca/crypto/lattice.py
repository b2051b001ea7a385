"""BFV (Brakerski/Fan–Vercauteren) ring-LWE encryption of exact signed integers, over TenSEAL.

A post-quantum second scheme beside packed Paillier, for what the protocol's
add/remove release does: sums of encrypted integer vectors, plaintext
additions and a rerandomization.  With :mod:`dpdpca.crypto.seal_wire` (the
binding's bytes) the only module that imports ``tenseal`` (optional extra
``dpdpca[lattice]``; :mod:`dpdpca.crypto.lattice_flood`, the proxy's noise
flooding, goes through this one); nothing outside :mod:`dpdpca.crypto`
talks to the binding.  Ciphertexts travel as their RNS residues (:meth:`BFVArray.to_bytes`),
which a receiver checks and sums in numpy.

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

Packing
-------
A share's sections (the protocol's R, v, N) are one slot stream
(:func:`encrypt_segments`): ``ceil(values / N)`` ciphertexts per plaintext
prime, not one per section; each section is a *segment* with its own declared
bound, and :class:`BFVSection` is the protocol's per-name view of it.

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
import contextlib
import functools
import hashlib
import json
import math
import operator
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdpca._io import atomic_write_json
from dpdpca._validation import check_int, param_error
from dpdpca.crypto.seal_wire import ciphertext_blob, parse_bfv_vector, require_extra, zstd_available
from dpdpca.errors import (InsecureKeyError, KeyMismatchError, MessageError, OverflowRiskError)

__all__ = ["HE_STANDARD_128", "refused_if_transparent", "check_not_transparent", "transparent_secret",
           "public_secret_correlations", "BFVParameters", "smallest_parameters", "encrypt_bfv", "encrypt_segments", "packed_chunks", "EncryptionZeros", "BFVSection", "pack_of", "views_of", "split_segments", "decrypt_bfv", "sum_bfv", "BFVPublicKey", "BFVPrivateKey", "BFVArray", "RingLevel",
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
_MAGIC = b"DPBFV2"
#: Bytes of a ciphertext's replay key (:meth:`BFVArray.replay_keys`).
REPLAY_KEY_BYTES = 32


def bfv_available() -> bool:
    """Whether the optional extra (``pip install 'dpdpca[lattice]'``: TenSEAL and zstandard) is installed."""
    try:
        import tenseal  # noqa: F401
    except ImportError:
        return False
    return zstd_available()


def _ts() -> Any:
    return require_extra("tenseal", "TenSEAL")


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
        # SEAL makes each b-bit coefficient prime the largest ones below 2**b that are 1 mod 2N, which is how the
        # plaintext primes are found too: skip those, or t would equal a coefficient prime (SEAL refuses the pair)
        skip = sum(1 for b in coeff if b == plain_bits)
        primes: tuple[int, ...] = ()
        for count in range(1, 64):
            primes = batching_primes(ring_degree, plain_bits, count + skip)[skip:]
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


#: Ring degrees tried, smallest first (1024 and 2048 leave no room for a useful plaintext prime under the noise).
RING_DEGREES = (4096, 8192, 16384, 32768)
#: Largest coefficient-modulus prime SEAL makes (bits); the smallest this module asks for.
MAX_COEFF_BITS, MIN_COEFF_BITS = 60, 20


def _special_bits(ring_degree: int) -> int:
    """Bits of the key-level (special) prime: small, since no key switching is done.

    SEAL encrypts at the key level and divides by this prime (which only
    shrinks the noise below :attr:`BFVParameters.fresh_noise`), so its size
    buys nothing here; it is the smallest size with several primes
    ``= 1 (mod 2N)`` (at least ``20`` bits, ``bits(2N) + 6``).
    """
    return max(MIN_COEFF_BITS, (2 * ring_degree).bit_length() + 6)


def _data_bits(need: int) -> tuple[int, ...] | None:
    """Fewest data primes (each 20..60 bits) with ``sum(b - 1) >= need``, sizes as even as SEAL allows."""
    count = max(1, -(-need // (MAX_COEFF_BITS - 1)))
    total = need + count  # each prime of b bits counts b - 1 in the worst case
    sizes = [total // count + (1 if i < total % count else 0) for i in range(count)]
    sizes = [max(MIN_COEFF_BITS, b) for b in sizes]
    return tuple(sorted(sizes, reverse=True)) if max(sizes) <= MAX_COEFF_BITS else None


#: Bits a 64-bit coefficient word of a b-bit prime takes once SEAL has compressed a ciphertext (measured: b + 5).
def _word_bits(bits: int) -> int:
    return min(64, bits + 5)


def smallest_parameters(max_abs: int, *, additions: int, reserve_bits: int = 0,
                        values: int | None = None) -> BFVParameters:
    """The parameters with the fewest bytes (then the smallest ring) holding ``|x| <= max_abs``.

    ``reserve_bits``: room for noise flooding (:meth:`BFVParameters.for_bound`).

    For each ring degree N and each count k of CRT plaintext primes, the
    plaintext primes are the narrowest whose product exceeds ``2 max_abs``;
    the data-level coefficient modulus is the smallest that keeps the
    worst-case noise of ``additions`` encryptions and plain additions below
    ``q / (2 t)`` (:meth:`BFVParameters.for_bound` checks it again), plus a
    small special prime; a candidate whose total modulus bits exceed the HE
    Standard's 128-bit bound for N is skipped.  A serialized ciphertext takes
    about ``2 N sum(b_i + 5) / 8`` bytes (SEAL compresses the unused high
    bits of each 64-bit word), so the cost is ``k * sum(b_i + 5)`` per value
    of a full ciphertext, or, given ``values`` (the values of one array, e.g.
    a share), ``k * ceil(values / N) * N * sum(b_i + 5)``: a small share
    wastes the slots of a large ring.  Ties go to the smaller ring.

    Raises
    ------
    OverflowRiskError
        No ring up to N = 32768 holds the range under that noise.
    """
    check_int("max_abs", max_abs, minimum=1)
    check_int("additions", additions, minimum=1)
    need_bits = (2 * max_abs).bit_length()  # T > 2 max_abs: prod of k primes of b bits each > 2**(k (b - 1))
    best: tuple[int, int, BFVParameters] | None = None
    for ring in RING_DEGREES:
        fresh = BFVParameters(ring, (MAX_COEFF_BITS, _special_bits(ring)), (2 * ring + 1,)).fresh_noise
        noise_bits = (fresh * additions).bit_length() + reserve_bits
        for k in range(1, 64):
            plain = -(-need_bits // k) + 1
            if plain > MAX_PLAIN_BITS:
                continue
            plain = max(plain, 17)
            data = _data_bits(plain + noise_bits + 1)
            if data is None:
                continue
            coeff = data + (_special_bits(ring),)
            if sum(coeff) > HE_STANDARD_128[ring]:
                continue  # more, narrower plaintext primes need a narrower q each
            try:
                params = BFVParameters.for_bound(max_abs, additions=additions, ring_degree=ring, coeff_bits=coeff,
                                                 reserve_bits=reserve_bits)
            except (OverflowRiskError, InsecureKeyError):
                continue
            per_value = len(params.plain_moduli) * sum(_word_bits(b) for b in data)
            cost = per_value if values is None else per_value * -(-values // ring) * ring
            if best is None or cost < best[0]:
                best = (cost, ring, params)
            break  # more CRT primes for this ring only cost more
    if best is None:
        raise OverflowRiskError(f"BFV parameters must hold |value| <= {max_abs} after {additions} additions "
                                f"(noise reserve 2**{reserve_bits}), got no ring up to {RING_DEGREES[-1]} that does")
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


#: A fresh encryption's phase under a candidate secret key with a mean cosine above this is decryptable (refused).
TRANSPARENT_CORRELATION = 0.5
#: Fingerprints of the public keys found not transparent in this process (the check runs once per process and key).
_NOT_TRANSPARENT: set[str] = set()


def public_secret_correlations(c0: Any, c1: Any) -> tuple[float, np.ndarray, np.ndarray]:
    """How near 0 the phase ``c_0 + c_1 s`` is for each publicly known secret key ``s``: 0 and every ``+-x^i``.

    Parameters
    ----------
    c0, c1 : array_like of float, length N
        A ciphertext's two polynomials as fractions of ``q`` (mod 1): only
        their values mod 1 matter.

    Returns
    -------
    zero : float
        The mean of ``cos(2 pi c_0)`` over the N coefficients (``s = 0``).
    plus, minus : ndarray of shape (N,)
        ``plus[i]``: the mean of ``cos(2 pi (c_0 + x^i c_1))`` (``s = x^i``,
        the product negacyclic mod ``x^N + 1``); ``minus[i]``: ``s = -x^i``.
        Both from one FFT correlation (about 7 ms at N = 8192), not ``2 N``
        products.

    Notes
    -----
    The mean cosine is 1 when every phase is 0 mod 1 and about ``N**-0.5``
    for uniform phases; with ``z = exp(2 pi i c_0)``, ``w = exp(2 pi i c_1)``
    and ``E = [conj(w), w]`` (a negacyclic shift negates the wrapped
    coefficients: conjugates their phasors), ``plus[i]`` is
    ``Re sum_j z_j E[j - i + N] / N``.

    Examples
    --------
    >>> c1 = (np.arange(8) ** 2 * 0.4142135624) % 1  # any phases (a Weyl sequence here)
    >>> c0 = -np.concatenate([-c1[-3:], c1[:-3]])  # c0 + x^3 c1 = 0: s = x^3 decrypts
    >>> zero, plus, minus = public_secret_correlations(c0, c1)
    >>> int(np.argmax(plus)), round(float(plus[3]), 6)
    (3, 1.0)
    """
    z = np.exp(2j * np.pi * np.asarray(c0, dtype=float))
    w = np.exp(2j * np.pi * np.asarray(c1, dtype=float))
    n = z.size
    size = 4 * n  # >= 3 N: the linear correlation of N with 2N values, no wrap-around
    head = np.conj(np.fft.fft(np.conj(z), size))
    lags = n - np.arange(n)
    plus, minus = (np.fft.ifft(head * np.fft.fft(b, size))[lags].real / n
                   for b in (np.concatenate([np.conj(w), w]), np.concatenate([w, np.conj(w)])))
    return float(z.real.mean()), plus, minus


def transparent_secret(c0: Any, c1: Any) -> str | None:
    """The publicly known secret key (``0`` or ``+-x^i``) under which ``(c0, c1)`` decrypts, or None.

    ``c0, c1``: a fresh encryption of 0 as fractions of ``q``
    (:func:`public_secret_correlations`).  A candidate decrypts it when the
    mean cosine of its phase exceeds :data:`TRANSPARENT_CORRELATION` (1/2).

    Examples
    --------
    >>> c1 = (np.arange(64) ** 2 * 0.4142135624) % 1  # equidistributed phases, standing for uniform ones
    >>> small = 1e-6 * np.sin(np.arange(64))  # an error far below q / (2t)
    >>> transparent_secret((np.arange(64) ** 3 * 0.7320508076) % 1, c1) is None  # an honest key
    True
    >>> transparent_secret(small, c1)  # pk = (-e, a): s = 0
    '0'
    >>> transparent_secret(c1 + small, c1)  # c0 - c1 = small: s = -1
    '-1'
    """
    zero, plus, minus = public_secret_correlations(c0, c1)
    if zero > TRANSPARENT_CORRELATION:
        return "0"
    for sign, corr in (("", plus), ("-", minus)):
        i = int(np.argmax(corr))
        if corr[i] > TRANSPARENT_CORRELATION:
            return f"{sign}{'1' if i == 0 else f'x^{i}'}"
    return None


def _encryption_phases(ctx: Any, workdir: str) -> tuple[np.ndarray, np.ndarray]:
    """A fresh encryption of 0 under ``ctx``'s public key: ``c_0 / q`` and ``c_1 / q`` mod 1, each within ``2 / t``.

    SEAL shows a ciphertext's polynomials only through decryption, which
    gives ``round(t (c_0 + c_1 s) / q) mod t`` for the secret key ``s``: so it
    is decrypted under ``s = 0`` (``c_0``) and ``s = 1`` (``c_0 + c_1``).
    Both keys are public; ``1`` (NTT form at the key level, as SEAL holds a
    secret key) goes through a file in ``workdir``, SEAL's only way to load one.
    """
    import tenseal.sealapi as sealapi  # SEAL's own types (the binding's contexts share them)

    seal = ctx.seal_context().data
    n = seal.key_context_data().parms().poly_modulus_degree()
    t = int(seal.key_context_data().parms().plain_modulus().value())
    probe = sealapi.Ciphertext()
    sealapi.Encryptor(seal, ctx.public_key().data).encrypt_zero(probe)
    zero = sealapi.KeyGenerator(seal).secret_key()
    zero.data().set_zero()
    one = sealapi.Plaintext("1")
    sealapi.Evaluator(seal).transform_to_ntt_inplace(one, seal.key_parms_id())
    path = os.path.join(workdir, "one.sk")
    one.save(path)
    one_key = sealapi.SecretKey()
    one_key.load(seal, path)
    phases = []
    for key in (zero, one_key):
        plain = sealapi.Plaintext()
        sealapi.Decryptor(seal, key).decrypt(probe, plain)
        coeffs = np.zeros(n, dtype=np.float64)
        coeffs[:plain.coeff_count()] = [plain[j] for j in range(plain.coeff_count())]
        phases.append(coeffs / t)
    return phases[0], phases[1] - phases[0]


def check_not_transparent(public_key: "BFVPublicKey") -> None:
    """Refuse a public key under which anyone decrypts: one made from a publicly known secret key.

    A BFV public key is ``(-(a s + e), a)``; with ``s = 0`` it is ``(-e, a)``
    and every encryption ``(pk_0 u + e_1 + Delta m, pk_1 u + e_2)`` decrypts
    under the key 0 (``c_0`` alone), so whoever sees an owner's share reads
    it: the lattice analogue of a Paillier ``hs = 1``.  Per plaintext prime, a
    fresh encryption of 0 under the key is tested against the secret keys
    ``0`` and ``+-x^i`` (``i < N``, so ``+-1`` too): under an honest key its
    phase is uniform mod ``q`` for each (``a (s - s')`` is uniform), its mean
    cosine about ``N**-0.5`` and above 1/2 with probability below
    ``exp(-N / 8)`` (Hoeffding); a key under which a fresh encryption
    decrypts has noise below ``q / (2t)``, a mean cosine near 1.  The phase is
    taken modulo the whole ``q``, so a large error ``e`` (above every RNS
    prime, below ``q / (2t)``) does not hide it.  No test tells a
    well-formed key from one whose secret the data user chose to publish: this
    refuses the keys anyone decrypts under without one.  Once per process and
    key (about 15 ms per plaintext prime at N = 8192, the check's probe, two decryptions and FFTs).

    Raises
    ------
    InsecureKeyError
        A context's fresh encryption decrypts under one of those keys.
    """
    import tempfile

    if public_key.fingerprint in _NOT_TRANSPARENT:
        return
    _ts()
    with tempfile.TemporaryDirectory(prefix="dpdpca-bfv-") as workdir:
        for i, ctx in enumerate(public_key.contexts):
            found = transparent_secret(*_encryption_phases(ctx, workdir))
            if found is not None:
                raise InsecureKeyError(f"BFV public key must not be transparent (context {i}'s encryptions decrypt "
                                       f"under the publicly known secret key {found}), got one that does")
    _NOT_TRANSPARENT.add(public_key.fingerprint)


class RingLevel:
    """A context's data level: its ``parms_id`` and coefficient primes ``q_1..q_k`` (what wire ciphertexts are at).

    ``column`` holds the primes as ``uint64`` of shape ``(1, k, 1)``, to
    broadcast against a ciphertext's residues of shape ``(2, k, N)``.
    """

    def __init__(self, parms_id: Sequence[int], moduli: Sequence[int]) -> None:
        self.parms_id = tuple(int(x) for x in parms_id)
        self.moduli = tuple(int(q) for q in moduli)
        if any(not 2 <= q < 1 << 61 for q in self.moduli):  # SEAL's primes are at most 60 bits: sums fit uint64
            raise param_error("moduli", "primes below 2**61", [q.bit_length() for q in self.moduli])
        self.column = np.array(self.moduli, dtype=np.uint64).reshape(1, -1, 1)

    def __repr__(self) -> str:
        return f"RingLevel(primes={len(self.moduli)}, bits={[q.bit_length() for q in self.moduli]})"


def _level_of(ctx: Any) -> RingLevel:
    require_extra("tenseal.sealapi", "TenSEAL")  # registers SEAL's Modulus type: the primes are read below
    seal = ctx.seal_context().data
    return RingLevel(list(seal.first_parms_id()),
                     [int(m.value()) for m in seal.first_context_data().parms().coeff_modulus()])


def _residues_of(vector: Any, level: RingLevel) -> np.ndarray:
    """A TenSEAL vector's ciphertext as residues of shape ``(2, k, N)`` (read from its serialization)."""
    _, ct = parse_bfv_vector(vector.serialize())
    if (ct.parms_id != level.parms_id or ct.is_ntt_form or ct.size != 2
            or ct.coeff_modulus_size != len(level.moduli)):
        raise MessageError("BFV ciphertext must be size 2, in coefficient form, at the key's data level, got a "
                           "foreign ciphertext")
    return ct.data


def _vector_of(ctx: Any, level: RingLevel, words: np.ndarray, count: int) -> Any:
    """The TenSEAL vector of ``count`` values whose ciphertext has residues ``words`` (SEAL validates them)."""
    return _ts().bfv_vector_from(ctx, ciphertext_blob(words, level.parms_id, count))


def _reduce_once(x: np.ndarray, column: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """``x`` (``uint64``, each value in ``[0, 2q)``) reduced modulo each prime, in place; ``x`` is returned.

    ``x - q`` wraps above ``x`` where ``x < q``, so the smaller of the two is
    the residue (``scratch``: a buffer of ``x``'s shape for the difference).
    """
    np.minimum(x, np.subtract(x, column, out=scratch), out=x)
    return x


def _ring_sum(a: np.ndarray, b: np.ndarray, column: np.ndarray) -> np.ndarray:
    """``a + b`` modulo each prime, residues in ``[0, q)`` (``q < 2**61``: the sum fits ``uint64``)."""
    return _reduce_once(np.add(a, b, dtype=np.uint64), column)


def _ring_difference(a: np.ndarray, b: np.ndarray, column: np.ndarray) -> np.ndarray:
    """``a - b`` modulo each prime: ``a + (q - b)``, then reduced once."""
    return _reduce_once(np.add(a, column - b, dtype=np.uint64), column)


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

    @functools.cached_property
    def levels(self) -> list[RingLevel]:
        """Per context (plaintext prime), its data level: the ``parms_id`` and primes every ciphertext is at."""
        return [_level_of(ctx) for ctx in self._contexts]

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


def _plus_plain(vector: Any, values: list[int]) -> Any:
    """``vector`` plus the plaintext ``values`` (residues, one per slot), as a new TenSEAL vector.

    ``vector + values`` through TenSEAL's Python layer converts the list to
    numpy, back to a list, to a C++ plain tensor and out to a list again before
    the C++ addition (about 0.5 ms of 0.8 at N = 8192); the wrapped C++ vector
    (``vector.data``) adds the list directly: the same SEAL encoding and
    ``add_plain``, the same result (tested against the Python layer).
    """
    return type(vector)(data=vector.data + values)


@contextlib.contextmanager
def refused_if_transparent(operation: str) -> Iterator[None]:
    """Turn SEAL's refusal of a transparent result into a one-line MessageError naming ``operation``.

    A ciphertext ``(c_0, c_1)`` with ``c_1 = 0`` is *transparent*: it
    decrypts without the secret key.  A sum makes one only when its
    operands' ``c_1`` cancel (one is the negation of the others' sum, which
    a fresh encryption's uniform ``c_1`` meets with negligible probability),
    and SEAL (built with ``SEAL_THROW_ON_TRANSPARENT_CIPHERTEXT``) then raises
    a bare ``RuntimeError``.  Any other error of the binding passes through.
    """
    try:
        yield
    except RuntimeError as exc:
        if "transparent" not in str(exc):
            raise
        raise _transparent_error(operation) from None


def _transparent_error(operation: str) -> MessageError:
    return MessageError(f"BFV {operation} result must have a nonzero mask part c1, got c1 = 0 (a transparent "
                        f"ciphertext: the operands' ciphertexts cancel)")


class BFVArray:
    """An encrypted vector of signed integers: ciphertexts per plaintext prime per chunk, with public bounds.

    The vector may be the concatenation of several *segments* (the sections of
    an owner's share packed into one slot stream), each with its own declared
    bound; ``bound`` is the largest of them (what the CRT range must hold).

    Parameters
    ----------
    public_key : BFVPublicKey
    chunks : tuple of int
        Values per ciphertext, each ``<= N``.
    bound : int
        Declared public bound on every ``|value|`` (one segment), or the
        largest segment bound.
    noise : int
        Worst-case decryption noise bound (half-units, :class:`BFVParameters`).
    vectors : list over plaintext primes of lists of TenSEAL BFV vectors, or None
        The ciphertexts as the binding's objects; ``None`` when ``residues``
        holds them.
    layout : object
        The caller's layout tag, carried along (the protocol's slot layout).
    segments : sequence of (length, bound), optional
        The segments in order, lengths summing to the vector's; default one
        segment ``(length, bound)``.
    residues : list over plaintext primes of lists of arrays, optional
        The ciphertexts as their RNS residues (:meth:`residues`), instead of
        ``vectors``.

    Notes
    -----
    An array holds its ciphertexts in one of two forms and makes the other
    when asked: TenSEAL vectors (what encryption, plaintext additions and
    decryption need) or their residues, ``uint64`` arrays of shape ``(2, k,
    N)`` (``c_0`` and ``c_1``, modulo each of the ``k`` data-level primes).
    The wire carries residues (:meth:`to_bytes`), so a received share is
    checked and summed in numpy: the sum of two residue-held arrays is the
    same ring sum SEAL computes, coefficient-wise modulo each prime, and
    never goes through the binding.
    """

    def __init__(self, public_key: BFVPublicKey, chunks: Sequence[int], bound: int, noise: int,
                 vectors: list[list[Any]] | None, layout: Any = None, segments: Sequence[tuple[int, int]] | None = None,
                 *, residues: list[list[np.ndarray]] | None = None) -> None:
        self.public_key = public_key
        self.chunks = tuple(int(c) for c in chunks)
        length = sum(self.chunks)
        self.segments = (((length, int(bound)),) if segments is None
                         else tuple((int(n), int(b)) for n, b in segments))
        if sum(n for n, _ in self.segments) != length:
            raise param_error("segments", f"lengths summing to {length}", [n for n, _ in self.segments])
        self.bound = max(b for _, b in self.segments)
        self.noise = int(noise)
        if (vectors is None) == (residues is None):
            raise param_error("vectors", "exactly one of vectors and residues", "both" if vectors else "neither")
        if residues is not None:
            shapes = {(words.dtype.kind, words.dtype.itemsize, words.shape) for row in residues for words in row}
            want = {("u", 8, (2, len(level.moduli), public_key.params.ring_degree)) for level in public_key.levels}
            if (len(residues) != len(public_key.params.plain_moduli) or any(len(r) != len(self.chunks) for r in residues)
                    or not shapes <= want):
                raise param_error("residues", f"per plaintext prime, per chunk, uint64 arrays of shape {sorted(want)[0][2]}",
                                  sorted(shapes)[:2])
        self._held_vectors = vectors
        self._held_residues = residues
        self.layout = layout

    @property
    def _vectors(self) -> list[list[Any]]:
        """The ciphertexts as TenSEAL vectors, made from the residues (SEAL validates them) when held as those."""
        if self._held_vectors is None:
            rows = self._held_residues or []
            self._held_vectors = [[_vector_of(ctx, level, words, c) for words, c in zip(row, self.chunks)]
                                  for ctx, level, row in zip(self.public_key.contexts, self.public_key.levels, rows)]
        return self._held_vectors

    def residues(self) -> list[list[np.ndarray]]:
        """The ciphertexts' RNS residues, per plaintext prime, per chunk: ``uint64`` arrays of shape ``(2, k, N)``.

        Read from the binding's serialization when held as vectors (and kept).
        The arrays may be read-only views of received bytes: never written.
        """
        if self._held_residues is None:
            self._held_residues = [[_residues_of(vec, level) for vec in row]
                                   for level, row in zip(self.public_key.levels, self._vectors)]
        return self._held_residues

    @property
    def holds_residues(self) -> bool:
        """Whether the ciphertexts are held as residues (read from the wire, or their numpy sums)."""
        return self._held_residues is not None

    def _in_residues(self, other: "BFVArray") -> bool:
        """Both arrays hold residues: combine them in numpy."""
        return self.holds_residues and other.holds_residues

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
        return len(self.chunks) * len(self.public_key.params.plain_moduli)

    def _check_other(self, other: "BFVArray", operation: str) -> None:
        if not isinstance(other, BFVArray):
            raise TypeError(f"{operation} operand must be a BFVArray, got {type(other).__name__}")
        if other.public_key != self.public_key:
            raise KeyMismatchError(f"{operation} operands must be under one key, got {self.public_key.fingerprint[:16]}"
                                   f" and {other.public_key.fingerprint[:16]}")
        if other.chunks != self.chunks:
            raise MessageError(f"{operation} operands must have one chunk layout, got {len(self.chunks)} and "
                               f"{len(other.chunks)} chunks")
        if [n for n, _ in other.segments] != [n for n, _ in self.segments]:
            raise MessageError(f"{operation} operands must have one segment layout, got {len(self.segments)} and "
                               f"{len(other.segments)} segments")

    def _shifted(self, extra: Sequence[int]) -> tuple[int, ...]:
        """Segment bounds plus ``extra`` (one per segment)."""
        return tuple(b + e for (_, b), e in zip(self.segments, extra))

    def add(self, other: "BFVArray", *, executor: Any = None) -> "BFVArray":
        """Slot-wise sum; bounds and noise add (checked first); MessageError if it is transparent (c1 = 0)."""
        self._check_other(other, "add")
        bounds = self._shifted([b for _, b in other.segments])
        noise = self.noise + other.noise
        self.public_key.check_bound(max(bounds), "add")
        self.public_key.check_noise(noise, "add")
        segments = [(n, b) for (n, _), b in zip(self.segments, bounds)]
        if self._in_residues(other):
            return self._from_residues(_ring_sum, other.residues(), noise, segments, "add")
        with refused_if_transparent("add"):
            vectors = [[a + b for a, b in zip(mine, theirs)] for mine, theirs in zip(self._vectors, other._vectors)]
        return BFVArray(self.public_key, self.chunks, 0, noise, vectors, self.layout, segments)

    def _from_residues(self, op: Any, others: list[list[np.ndarray]], noise: int, segments: list[tuple[int, int]],
                       operation: str) -> "BFVArray":
        """``op`` (:func:`_ring_sum` or :func:`_ring_difference`) of this array's residues and ``others`` (laid out
        as :meth:`residues`), ciphertext by ciphertext, in numpy; a transparent result is refused."""
        rows = [[op(a, b, level.column) for a, b in zip(mine, theirs)]
                for level, mine, theirs in zip(self.public_key.levels, self.residues(), others)]
        if any(not words[1].any() for row in rows for words in row):
            raise _transparent_error(operation)
        return BFVArray(self.public_key, self.chunks, 0, noise, None, self.layout, segments, residues=rows)

    __add__ = add

    def take_out(self, summand: "BFVArray") -> "BFVArray":
        """``self`` minus ``summand``, one of the arrays summed into it: the other summands' sum, exactly.

        Ciphertext by ciphertext (exact in the ring); segment bounds and the
        noise bound less the summand's, so the difference's noise is the other
        summands'.  MessageError if ``summand`` cannot be one (a bound above
        this array's) or the difference is transparent (the others cancel).
        """
        self._check_other(summand, "take_out")
        segments = [(n, b - sb) for (n, b), (_, sb) in zip(self.segments, summand.segments)]
        if any(b < 0 for _, b in segments) or self.noise < summand.noise:
            raise MessageError("take_out share must be a summand of the total, got bounds above the total's")
        if self._in_residues(summand):
            return self._from_residues(_ring_difference, summand.residues(), self.noise - summand.noise, segments,
                                       "take_out")
        with refused_if_transparent("take_out"):  # the other summands cancel (c1 = 0)
            vectors = [[a - b for a, b in zip(mine, theirs)] for mine, theirs in zip(self._vectors, summand._vectors)]
        return BFVArray(self.public_key, self.chunks, 0, self.noise - summand.noise, vectors, self.layout, segments)

    def add_plain(self, values: Sequence[int], *, plain_bound: int | None = None,
                  executor: Any = None) -> "BFVArray":
        """Add a plaintext integer vector (its residues); bound ``+ plain_bound``, noise ``+ 1`` half-unit."""
        vals, top = _as_ints("values", values)
        if len(vals) != self.length:
            raise param_error("values", f"length {self.length}", len(vals))
        plain_bound = top if plain_bound is None else int(plain_bound)
        if top > plain_bound:
            raise OverflowRiskError(f"add_plain values must be within plain_bound={plain_bound}, got {top}")
        bounds, noise = self._shifted([plain_bound] * len(self.segments)), self.noise + 1
        self.public_key.check_bound(max(bounds), "add_plain")
        self.public_key.check_noise(noise, "add_plain")
        vectors = []
        for t, mine in zip(self.public_key.params.plain_moduli, self._vectors):
            parts = _split(_residues(vals, t), self.chunks)
            with refused_if_transparent("add_plain"):  # only if this array already is transparent
                vectors.append([_plus_plain(c, p) for c, p in zip(mine, parts)])
        return BFVArray(self.public_key, self.chunks, 0, noise, vectors, self.layout,
                        [(n, b) for (n, _), b in zip(self.segments, bounds)])

    def rerandomize(self, *, executor: Any = None, **_: Any) -> "BFVArray":
        """Add a fresh public-key encryption of zero to every ciphertext (the proxy's step before release).

        The result is distributed as a fresh encryption of the same values
        plus the previous noise (RLWE: indistinguishable from uniform to
        anyone without the secret key); what the key holder learns from the
        noise term is discussed in docs/threat-model.md.
        """
        fresh = self.public_key.params.fresh_noise
        self.public_key.check_noise(self.noise + fresh, "rerandomize")
        return self.add_zeros(_encryptions_of_zero(self.public_key, self.chunks), fresh)

    def per_prime_vectors(self) -> list[list[Any]]:
        """The TenSEAL vectors, a list per plaintext prime (chunk order); the lists are copies."""
        return [list(row) for row in self._vectors]

    def add_zeros(self, zeros: list[list[Any]] | None, noise: int, *, residues: list[list[np.ndarray]] | None = None,
                  plain_bound: int = 0) -> "BFVArray":
        """Add encryptions of 0 (TenSEAL vectors laid out as :meth:`per_prime_vectors`) of noise ``<= noise``.

        The values and bounds are unchanged; the noise bound grows by
        ``noise`` half-units (checked first).  The step of :meth:`rerandomize`
        and of noise flooding (:func:`dpdpca.crypto.lattice_flood.flood_bfv`).
        ``residues``: the same ciphertexts as residues (laid out as
        :meth:`residues`), added in numpy when this array holds residues too
        or when no vectors are given (this array's ciphertexts are then read
        out as residues: the flood ``(e, 0)`` is only ever residues).
        ``plain_bound``: the "zeros" carry a plaintext of at most that bound
        (the release's noise folded into them ahead:
        :meth:`~dpdpca.crypto.lattice_flood.ReleaseZeros.fold_plain`), which
        every segment's bound grows by (checked first).
        """
        total = self.noise + int(noise)
        self.public_key.check_noise(total, "add_zeros")
        segments = [(n, b + int(plain_bound)) for n, b in self.segments]
        self.public_key.check_bound(max(b for _, b in segments), "add_zeros")
        count = len(self.public_key.params.plain_moduli)
        given = residues if residues is not None else zeros
        if given is None or [len(r) for r in given] != [len(self.chunks)] * count:
            raise param_error("zeros", f"{count} lists of {len(self.chunks)} ciphertexts",
                              None if given is None else [len(r) for r in given])
        if residues is not None and (self.holds_residues or zeros is None):
            return self._from_residues(_ring_sum, residues, total, segments, "add_zeros")
        assert zeros is not None  # residues alone were summed above, and one of the two was given
        with refused_if_transparent("add_zeros"):
            vectors = [[a + z for a, z in zip(mine, zs)] for mine, zs in zip(self._vectors, zeros)]
        return BFVArray(self.public_key, self.chunks, 0, total, vectors, self.layout, segments)

    def with_bound(self, bound: int) -> "BFVArray":
        """The same ciphertexts under a larger declared bound (never smaller), every segment's."""
        if bound < self.bound:
            raise param_error("bound", f">= the current bound {self.bound}", bound)
        self.public_key.check_bound(bound, "with_bound")
        return BFVArray(self.public_key, self.chunks, 0, self.noise, self._held_vectors, self.layout,
                        [(n, bound) for n, _ in self.segments],
                        residues=None if self._held_vectors is not None else self._held_residues)

    def ciphertext_blobs(self) -> list[bytes]:
        """Every ciphertext's wire bytes (its residues, little-endian ``uint64``), prime by prime, chunk by chunk."""
        return [np.ascontiguousarray(words, dtype="<u8").tobytes() for row in self.residues() for words in row]

    def replay_keys(self) -> list[bytes]:
        """One key per ciphertext, in :meth:`ciphertext_blobs` order: the first four residues of its mask part ``c_1``
        modulo the first data prime (:data:`REPLAY_KEY_BYTES` bytes, read from the residues: nothing is hashed).

        An honest encryption's ``c_1`` is uniform, so two honest ciphertexts
        share a key with probability about ``2**-190``.  A copy of another
        ciphertext has its key, verbatim or with a plaintext added to ``c_0``
        (which a digest of the whole ciphertext would not catch); like any
        key read from a ciphertext, it cannot catch a copy rerandomized with
        an encryption of 0 (docs/threat-model.md: what only range proofs
        refuse).
        """
        return [np.ascontiguousarray(words[1, 0, :4], dtype="<u8").tobytes()
                for row in self.residues() for words in row]

    def to_bytes(self) -> bytes:
        """``DPBFV2`` + header length + JSON header (key fingerprint, chunks, bound, noise, segments), padded with
        spaces to a multiple of 8 bytes, + every ciphertext's residues (:meth:`ciphertext_blobs`; ``segments``
        only when there are several)."""
        head: dict[str, Any] = {"key": self.public_key.fingerprint, "chunks": list(self.chunks),
                                "bound": str(self.bound), "noise": str(self.noise),
                                "primes": len(self.public_key.params.plain_moduli)}
        if len(self.segments) > 1:
            head["segments"] = [[n, str(b)] for n, b in self.segments]
        header = json.dumps(head, separators=(",", ":")).encode()
        header += b" " * (-(len(_MAGIC) + 4 + len(header)) % 8)  # the residues start 8-byte aligned
        return b"".join([_MAGIC, struct.pack(">I", len(header)), header, *self.ciphertext_blobs()])

    @classmethod
    def from_bytes(cls, data: bytes, public_key: BFVPublicKey, *, layout: Any = None, **_: Any) -> "BFVArray":
        """Inverse of :meth:`to_bytes`; checks the key, the length, the bound, the noise and every residue.

        The ciphertexts stay residues (read-only views of ``data``, no copy):
        each must be below its prime and have a nonzero ``c_1``, the checks
        SEAL makes when it loads a ciphertext, and the transparency check.

        Raises
        ------
        MessageError
            Truncated, malformed, a residue at or above its prime, or a
            transparent ciphertext (``c1 = 0``: it decrypts without the secret
            key, and a sum holding only it would be transparent too).
        KeyMismatchError
            Another key's fingerprint.
        """
        if not isinstance(data, (bytes, memoryview)):
            data = bytes(data)  # a memoryview (a section of a received message) is read in place
        if bytes(data[:len(_MAGIC)]) != _MAGIC or len(data) < len(_MAGIC) + 4:
            raise MessageError(f"BFV batch must start with {_MAGIC!r}, got {bytes(data[:6])!r}")
        pos = len(_MAGIC)
        (hlen,) = struct.unpack(">I", data[pos:pos + 4])
        pos += 4
        if hlen > 1 << 24 or pos + hlen > len(data):
            raise MessageError(f"BFV batch header must fit the message, got {hlen} bytes")
        try:
            head = json.loads(bytes(data[pos:pos + hlen]).decode())
            chunks = tuple(int(c) for c in head["chunks"])
            bound, noise, primes = int(head["bound"]), int(head["noise"]), int(head["primes"])
            key = str(head["key"])
            segments = ([(int(n), int(b)) for n, b in head["segments"]] if "segments" in head
                        else [(sum(chunks), bound)])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise MessageError("BFV batch header must be JSON with key, chunks, bound, noise and primes, "
                               "got a malformed header") from None
        if (not segments or sum(n for n, _ in segments) != sum(chunks) or any(n < 1 or b < 0 for n, b in segments)
                or max(b for _, b in segments) != bound):
            raise MessageError(f"BFV batch segments must be positive lengths summing to {sum(chunks)} with bounds "
                               f"0..{bound} (the largest equal to it), got {len(segments)} segments")
        pos += hlen
        if key != public_key.fingerprint:
            raise KeyMismatchError(f"BFV batch must be under key {public_key.fingerprint[:16]}, got {key[:16]}")
        n = public_key.params.ring_degree
        if primes != len(public_key.params.plain_moduli) or any(not 1 <= c <= n for c in chunks):
            raise MessageError(f"BFV batch must have {len(public_key.params.plain_moduli)} primes and chunks of 1..{n},"
                               f" got {primes} primes")
        public_key.check_bound(bound, "BFV batch")
        public_key.check_noise(noise, "BFV batch")
        levels = public_key.levels
        width = 2 * len(levels[0].moduli) * n * 8  # bytes of one ciphertext: c_0, c_1, each k residue rows
        if len(data) - pos != width * primes * len(chunks):
            got = len(data) - pos
            raise MessageError(f"BFV batch must hold {primes * len(chunks)} ciphertexts of {width} bytes, got {got} "
                               f"bytes after its header ({'truncated' if got < width * primes * len(chunks) else 'trailing bytes'})")
        rows: list[list[np.ndarray]] = []
        for level in levels:
            k = len(level.moduli)
            row = []
            for i in range(len(chunks)):
                words = np.frombuffer(data, dtype="<u8", count=2 * k * n, offset=pos).reshape(2, k, n)
                if (words >= level.column).any():
                    raise MessageError(f"BFV batch ciphertext[{i}] must have every residue below its prime, "
                                       f"got one at or above it")
                if not words[1].any():  # c1 = 0: readable without the key
                    raise MessageError(f"BFV batch ciphertext[{i}] must have a nonzero mask part c1, got c1 = 0 "
                                       f"(a transparent ciphertext)")
                row.append(words)
                pos += width
            rows.append(row)
        return cls(public_key, chunks, bound, noise, None, layout, segments, residues=rows)

    @property
    def nbytes(self) -> int:
        return len(self.to_bytes())


def _encryptions_of_zero(public_key: BFVPublicKey, chunks: Sequence[int]) -> list[list[Any]]:
    """Fresh public-key encryptions of 0, per plaintext prime, per chunk (laid out as :meth:`BFVArray.per_prime_vectors`).

    One plaintext tensor of zeros per chunk size, reused: TenSEAL then skips
    converting a list of zeros for every ciphertext; each encryption draws its
    own randomness all the same.
    """
    ts = _ts()
    plain = {c: ts.plain_tensor([0] * c, dtype="int") for c in set(chunks)}
    return [[ts.bfv_vector(ctx, plain[c]) for c in chunks] for ctx in public_key.contexts]


def _encrypt_residues(public_key: BFVPublicKey, values: Any, chunks: Sequence[int],
                      zeros: "EncryptionZeros | None" = None) -> list[list[Any]]:
    """Per plaintext prime, per chunk: an encryption of the values' residues (``zeros``: made ahead, used once)."""
    ts = _ts()
    made = None if zeros is None else zeros.take(public_key, chunks)
    out = []
    for i, (t, ctx) in enumerate(zip(public_key.params.plain_moduli, public_key.contexts)):
        parts = _split(_residues(values, t), chunks)
        if made is None:
            out.append([ts.bfv_vector(ctx, part) for part in parts])
        else:  # SEAL's encryptor adds the scaled plaintext to an encryption of 0 exactly as add_plain does
            out.append([_plus_plain(z, part) for z, part in zip(made[i], parts)])
    return out


class EncryptionZeros:
    """Public-key encryptions of 0 for one packed array of ``chunks``, made ahead (an owner's offline work).

    A BFV encryption of ``m`` is an encryption of 0 plus ``m`` scaled by
    ``Delta = floor(q / t)``: SEAL's encryptor makes the encryption of 0 and
    adds the plaintext the same way a plaintext addition does, so a
    ciphertext made from these zeros has the distribution and the noise bound
    of a fresh one.  They depend on the key and the chunk layout only, so an
    owner makes them before its data arrive and its online encryption is one
    plaintext addition per ciphertext.

    Whoever holds them reads the values later added to them (the
    encryption's randomness ``u`` and errors are inside), so they are as
    secret as the data: they live only in this process's memory, are never
    serialized, and are used once (:meth:`take` hands them out and forgets
    them; ``repr`` shows counts only).

    Parameters
    ----------
    public_key : BFVPublicKey
    chunks : sequence of int
        Values per ciphertext (:func:`packed_chunks` for a packed share).
    """

    def __init__(self, public_key: BFVPublicKey, chunks: Sequence[int]) -> None:
        self.public_key = public_key
        self.chunks = tuple(int(c) for c in chunks)
        if not self.chunks or any(not 1 <= c <= public_key.params.ring_degree for c in self.chunks):
            raise param_error("chunks", f"sizes 1..{public_key.params.ring_degree}", list(self.chunks)[:8])
        self._vectors: list[list[Any]] | None = _encryptions_of_zero(public_key, self.chunks)

    def __repr__(self) -> str:  # never the ciphertexts
        state = "used" if self._vectors is None else "ready"
        return f"EncryptionZeros(ciphertexts={len(self.chunks) * len(self.public_key.params.plain_moduli)}, {state})"

    def fits(self, public_key: BFVPublicKey, chunks: Sequence[int]) -> bool:
        """True if unused and made for this key and chunk layout."""
        return self._vectors is not None and public_key == self.public_key and tuple(chunks) == self.chunks

    def take(self, public_key: BFVPublicKey, chunks: Sequence[int]) -> list[list[Any]]:
        """The encryptions of 0, per plaintext prime, per chunk; once.

        Raises
        ------
        ParameterError
            Already used, or made for another key or chunk layout.
        """
        if not self.fits(public_key, chunks):
            raise param_error("zeros", f"unused and made for this key and {len(tuple(chunks))} chunks", repr(self))
        vectors, self._vectors = self._vectors or [], None
        return vectors


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
    return _encrypt_checked(public_key, vals, [(len(vals), bound)], chunks, layout)


def encrypt_segments(public_key: BFVPublicKey, segments: Sequence[tuple[Sequence[int], int]], *,
                     layout: Any = None, zeros: EncryptionZeros | None = None) -> BFVArray:
    """Encrypt several integer vectors, each with its own bound, as ONE slot stream (``ceil(total / N)`` chunks).

    Every value is checked against its own segment's declared bound, and every
    bound against the CRT range, before anything is encrypted.  ``zeros``:
    encryptions of 0 made ahead for this layout (:class:`EncryptionZeros`),
    used once instead of fresh ones.

    Raises
    ------
    OverflowRiskError
        A value above its segment's bound, or a bound beyond ``(T - 1) / 2``.
    """
    if not segments:
        raise param_error("segments", "non-empty", 0)
    parts, declared = [], []
    for i, (values, bound) in enumerate(segments):
        vals, top = _as_ints(f"segments[{i}]", values)
        bound = check_int(f"segments[{i}] bound", bound, minimum=0)
        public_key.check_bound(bound, "encrypt")
        if top > bound:
            raise OverflowRiskError(f"encrypt segment {i} values must be within its declared bound {bound}, got "
                                    f"|value| = {top}")
        if len(vals) < 1:
            raise param_error(f"segments[{i}]", "at least one value", 0)
        parts.append(vals)
        declared.append((len(vals), bound))
    if all(isinstance(p, np.ndarray) for p in parts):
        flat: Any = np.concatenate(parts)
    else:
        flat = [int(v) for p in parts for v in (p.tolist() if isinstance(p, np.ndarray) else p)]
    return _encrypt_checked(public_key, flat, declared, None, layout, zeros)


def packed_chunks(public_key: BFVPublicKey, total: int) -> tuple[int, ...]:
    """The chunk sizes of ``total`` values packed as one slot stream: ``ceil(total / N)`` ciphertexts of ``<= N``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> packed_chunks(SimpleNamespace(params=SimpleNamespace(ring_degree=4)), 10)
    (4, 4, 2)
    """
    n = public_key.params.ring_degree
    return tuple(min(n, total - a) for a in range(0, total, n))


def _encrypt_checked(public_key: BFVPublicKey, vals: Any, segments: list[tuple[int, int]],
                     chunks: Sequence[int] | None, layout: Any, zeros: EncryptionZeros | None = None) -> BFVArray:
    n = public_key.params.ring_degree
    if chunks is None:
        chunks = packed_chunks(public_key, len(vals))
    chunks = [int(c) for c in chunks]
    if sum(chunks) != len(vals) or any(not 1 <= c <= n for c in chunks):
        raise param_error("chunks", f"sizes 1..{n} summing to {len(vals)}", f"{len(chunks)} chunks")
    return BFVArray(public_key, chunks, 0, public_key.params.fresh_noise,
                    _encrypt_residues(public_key, vals, chunks, zeros), layout, segments)


def decrypt_bfv(private_key: BFVPrivateKey, enc: BFVArray) -> list[int]:
    """Decrypt and recombine with the CRT: the centred residue mod ``T``, checked against the declared bound.

    Raises
    ------
    KeyMismatchError
        ``enc`` under another key.
    MessageError
        A value beyond the declared bound (tampering or a false declaration):
        the message names the segment and its bound, never the value.
    """
    if enc.public_key != private_key.public_key:
        raise KeyMismatchError(f"decrypt needs the key {enc.public_key.fingerprint[:16]}, got "
                               f"{private_key.public_key.fingerprint[:16]}")
    params = private_key.public_key.params
    residues: list[np.ndarray] = []
    for t, ctx, row in zip(params.plain_moduli, private_key._contexts, enc._vectors):
        parts = []
        for vec in row:
            vec.link_context(ctx)
            parts.append(np.asarray(vec.decrypt(), dtype=np.int64))  # |value| < t < 2**59: exact in int64
        residues.append(np.mod(np.concatenate(parts), t) if parts else np.zeros(0, dtype=np.int64))
    if len(residues) == 1:  # one prime: centre in numpy, no per-value Python
        t = params.plain_moduli[0]
        centred = np.where(residues[0] > t // 2, residues[0] - t, residues[0])
        tops = [int(np.abs(seg).max()) if seg.size else 0 for seg in _cut(centred, enc.segments)]
        out = centred.tolist()
    else:
        out = _crt(params.plain_moduli, [r.tolist() for r in residues])
        tops = [max((abs(v) for v in seg), default=0) for seg in _cut(out, enc.segments)]
    for i, ((_, bound), top) in enumerate(zip(enc.segments, tops)):
        if top > bound:
            where = f" in segment {i}" if len(enc.segments) > 1 else ""
            raise MessageError(f"decrypted values must be within the declared bound {bound}{where}, got a value "
                               f"beyond it (tampering or a false declaration)")  # never the value: a plaintext
    return out


def _cut(values: Any, segments: Sequence[tuple[int, int]]) -> list[Any]:
    out, start = [], 0
    for n, _ in segments:
        out.append(values[start:start + n])
        start += n
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
    """The slot-wise sum of arrays with one layout (bounds and noise add, checked first), added in order.

    Raises
    ------
    MessageError
        A partial sum is transparent: an array's ciphertexts cancel those
        of the arrays before it (:func:`refused_if_transparent`).
    """
    if not arrays:
        raise param_error("arrays", "non-empty", 0)
    if len(arrays) > 2 and all(a.holds_residues for a in arrays):
        return _sum_residues(arrays)
    out = arrays[0]
    for a in arrays[1:]:
        out = out.add(a)
    return out


def _sum_residues(arrays: Sequence[BFVArray]) -> BFVArray:
    """:func:`sum_bfv` of residue-held arrays into one buffer per ciphertext (the same checks, in the same order).

    Chained :meth:`BFVArray.add` would allocate a new buffer per operand;
    here each ciphertext's sum is accumulated in place and reduced after
    every operand, so each partial sum is checked for transparency as
    :meth:`BFVArray.add` checks it.
    """
    first = arrays[0]
    pk = first.public_key
    bounds = [b for _, b in first.segments]
    noise = first.noise
    for a in arrays[1:]:  # every layout, bound and noise check before any arithmetic
        first._check_other(a, "add")
        bounds = [b + e for b, (_, e) in zip(bounds, a.segments)]
        noise += a.noise
        pk.check_bound(max(bounds), "add")
        pk.check_noise(noise, "add")
    rows = [[np.array(words, dtype=np.uint64) for words in row] for row in first.residues()]
    scratch = np.empty_like(rows[0][0])
    for a in arrays[1:]:
        for level, mine, theirs in zip(pk.levels, rows, a.residues()):
            for acc, words in zip(mine, theirs):
                _reduce_once(np.add(acc, words, out=acc), level.column, scratch)
                if not acc[1].any():
                    raise _transparent_error("add")
    return BFVArray(pk, first.chunks, 0, noise, None, first.layout,
                    [(n, b) for (n, _), b in zip(first.segments, bounds)], residues=rows)


class BFVSection:
    """One named section of a share packed into a single :class:`BFVArray`: segment ``index`` of ``packed``.

    Under BFV the sections of an owner's share (R's upper triangle, v, N)
    travel as one slot stream, so a share costs ``ceil(values / N)``
    ciphertexts per plaintext prime instead of at least one per section;
    the protocol still holds its sections by name, each a view of the pack.
    Whole-share operations (:class:`~dpdpca.crypto.schemes.BFVScheme`'s
    ``*_sections`` methods) act on the pack once.

    Parameters
    ----------
    packed : BFVArray
    index : int
        The segment this section is.
    """

    def __init__(self, packed: BFVArray, index: int) -> None:
        if not 0 <= index < len(packed.segments):
            raise param_error("index", f"0..{len(packed.segments) - 1}", index)
        self.packed = packed
        self.index = int(index)

    @property
    def public_key(self) -> BFVPublicKey:
        return self.packed.public_key

    @property
    def layout(self) -> Any:
        return self.packed.layout

    @property
    def bound(self) -> int:
        """This section's declared bound."""
        return self.packed.segments[self.index][1]

    @property
    def length(self) -> int:
        return self.packed.segments[self.index][0]

    @property
    def chunks(self) -> tuple[int, ...]:
        """The ciphertext chunks this section carries on the wire: the pack's for the first, none for the others."""
        return self.packed.chunks if self.index == 0 else ()

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"BFVSection(index={self.index}, length={self.length}, bound={self.bound}, packed={self.packed!r})"


def pack_of(sections: dict[str, Any]) -> BFVArray:
    """The one :class:`BFVArray` behind ``sections`` (views of segments 0, 1, ... in order), else MessageError."""
    views = list(sections.values())
    if not views or not all(isinstance(v, BFVSection) for v in views):
        raise MessageError("BFV sections must be views of one packed array, got another kind of array")
    packed = views[0].packed
    if any(v.packed is not packed or v.index != i for i, v in enumerate(views)) or len(views) != len(packed.segments):
        raise MessageError(f"BFV sections must be the {len(packed.segments)} segments of one packed array in order, "
                           f"got {len(views)} views")
    return packed


def views_of(packed: BFVArray, names: Sequence[str]) -> dict[str, BFVSection]:
    """``{name: BFVSection(packed, i)}`` for the segments in order."""
    if len(names) != len(packed.segments):
        raise MessageError(f"BFV packed array must have one segment per section ({len(names)}), got "
                           f"{len(packed.segments)}")
    return {name: BFVSection(packed, i) for i, name in enumerate(names)}


def split_segments(packed: BFVArray, values: Sequence[int]) -> list[list[int]]:
    """``values`` (the packed array's decryption) cut at its segments."""
    out, start = [], 0
    for n, _ in packed.segments:
        out.append(list(values[start:start + n]))
        start += n
    return out
