"""Non-interactive zero-knowledge range proofs for every slot of packed DJN-Paillier ciphertexts.

The statement: ciphertexts ``C_k`` (grouped in sections, each with its public
chunks, slot width ``w`` and declared bound ``B``) encrypt packed integers
``sum_j y_kj 2**(w j)`` whose every slot satisfies ``|y_kj| <= S``, the
*proven bound* (:attr:`ProofGeometry.proven_bounds`, about ``2**(h+1) B``:
the slack of a sigma protocol, see below).  The honest prover needs
``|x_kj| <= B``.

Why not one range proof per ciphertext: a range proof on a packed plaintext
bounds only its top slot (a lower slot can carry into it).  Why not large
challenges: without an integer commitment (a second, strong-RSA modulus) the
extractor divides by the challenge difference modulo n, and a prover that
encrypts ``pack(y) / 2 mod n`` (garbage in every slot) answers every even
challenge, so each repetition has soundness error 1/2 whatever the challenge
set.  This protocol therefore uses **binary challenges** repeated ``T`` times
(the classic cut-and-choose of Brickell-Chaum-Damgård-van de Graaf 1987, in
the sigma-protocol-with-slack form of Lindell 2017 and Canetti et al. 2020's
Π^enc, with Lyubashevsky's rejection sampling 2009 for perfect hiding of the
responses), and packs the masks in the very slots of the statement, so one
repetition costs one encryption of a share-sized mask vector.

Protocol (Fiat-Shamir over ``context``, which the caller makes from the
session, the key, the owner's id and the share's digest):

* The prover encrypts under its own DJN base ``h = y**n mod n**2`` (it knows
  the n-th root ``y``; :class:`ProverBase`), so ``C_k = (1+n)**P_k h**a_k``.
* ``h`` is an n-th residue: Guillou-Quisquater-style proof ``R = r**n``,
  ``s = r y**e0`` with a 48-bit challenge ``e0``; ``s**n = R h**e0``.
* For ``t < T``: masks ``alpha_tj`` uniform in ``[-2**l, 2**l)`` with
  ``l = bits(B) + h_bits`` (one per slot of every ciphertext),
  ``A_tk = (1+n)**pack_k(alpha_t) h**beta_tk``.  ``G = h**gamma``.
* ``e_t`` (bits) and ``e0`` = H1(context, statement, h, R, G, every A).
* ``z_tj = alpha_tj + e_t x_j``; if any ``|z_tj| > A' = 2**l - 1 - B`` the
  prover starts again with fresh masks (rejection sampling: accepted ``z``
  are uniform on ``[-A', A']`` whatever x is).
* ``c_tk`` (48 bits) = H2(H1, every z);
  ``Z = gamma + sum c_tk (beta_tk + e_t a_k)``.
* The verifier checks ``|z_tj| <= A'``, ``s**n = R h**e0`` and
  ``G prod_tk D_tk**c_tk = h**Z`` with
  ``D_tk = A_tk C_k**e_t (1+n)**(-pack_k(z_t))``.

Soundness (error ``<= 2**-41 + 2 * 2**-48 < 2**-40`` per hash query, in the
random-oracle model).  ``(1+n)**m u**n`` is the unique decomposition of a
unit of ``Z*_{n^2}``; call ``m`` its class.  The GQ check makes ``h`` of
class 0 except with probability ``2**-48`` (``R`` is fixed before ``e0``).
Then the combined check says ``sum c_tk m(D_tk) + m(G) = 0 (mod n)`` with
every ``m(D_tk)`` and ``m(G)`` fixed before ``c`` is drawn; if some
``m(D_tk) != 0`` it is non-zero modulo ``p`` or ``q``, and the 2**48 values
of its coefficient are distinct modulo that prime, so at most one of them
passes: probability ``<= 2**-48``.  So every ``D_tk`` has class 0:
``Dec(A_tk) + e_t Dec(C_k) = pack_k(z_t) (mod n)``.  A repetition answered
for both ``e_t = 0`` and ``1`` yields ``Dec(C_k) = pack_k(z^1 - z^0)`` with
every slot ``|z^1_j - z^0_j| <= 2 A' = S``; a prover that cannot answer both
passes each repetition with probability 1/2, all ``T = 41`` with ``2**-41``.
Since packing is Z-linear, ``Dec(C_k) = pack_k(y) (mod n)`` with
``|y_j| <= S``: the owner could have encrypted ``y`` honestly under the
bound ``S``, and no slot of ``C`` holds anything else (unique balanced
digits once ``S <= 2**(w-1) - 1``).

Zero knowledge (honest verifier, then Fiat-Shamir in the random-oracle
model).  Simulator: draw ``z_t`` uniform on ``[-A', A']`` (the real
distribution exactly, by the rejection step), ``Z`` uniform on
``[0, 2**lg)`` (real ``Z`` is ``gamma`` plus a sum below ``2**(lg - 40)``:
statistical distance ``<= 2**-40``), ``s`` uniform, ``R = s**n h**-e0``,
``A_tk = (1+n)**pack_k(z_t) h**beta C_k**-e_t`` (a fresh DJN encryption) and
``G = h**Z prod D**-c``.  Real and simulated ``A`` differ only in the
plaintext of fresh DJN encryptions: indistinguishable under the DCR
assumption and DJN's short-exponent assumption (the same ones the shares
rest on).  Leaked: nothing beyond the statement, up to ``2**-40``
statistical distance and the number of restarts (timing).

References
----------
E. Brickell, D. Chaum, I. Damgård, J. van de Graaf, "Gradual and verifiable
release of a secret", CRYPTO 1987 (binary-challenge interval proofs).
Y. Lindell, "Fast secure two-party ECDSA signing", CRYPTO 2017 (Paillier
range proof with slack).  R. Canetti, R. Gennaro, S. Goldfeder, N.
Makriyannis, U. Peled, "UC non-interactive, proactive, threshold ECDSA with
identifiable aborts", CCS 2020, Π^enc (the slack analysis).  V. Lyubashevsky,
"Fiat-Shamir with aborts", ASIACRYPT 2009 (rejection sampling).  L. Guillou,
J.-J. Quisquater, CRYPTO 1988 (n-th roots).  I. Damgård, M. Jurik, J.
Nielsen, "A generalization of Paillier's public-key system", IJIS 2010.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

from dpdpca._validation import check_int, param_error
from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.encrypted import EncryptedArray, encrypt
from dpdpca.crypto.keys import PublicKey, derive_hs
from dpdpca.crypto.packing import SlotLayout, pack_slots
from dpdpca.errors import KeyMismatchError, MessageError, OverflowRiskError, ProofError

__all__ = [
    "CHALLENGE_BITS",
    "REPETITIONS",
    "STAT_BITS",
    "ProofGeometry",
    "ProofSection",
    "ProverBase",
    "RangeProof",
    "SectionWitness",
    "encrypt_for_proof",
    "multi_pow",
    "prove_ranges",
    "root_commitment_of",
    "verify_ranges",
]

#: Binary-challenge repetitions: soundness error 2**-41 from this part.
REPETITIONS = 41
#: Bits of the n-th-root challenge and of every combination coefficient.
CHALLENGE_BITS = 48
#: Statistical hiding of the combined randomness response.
STAT_BITS = 40

_MAGIC = b"DPRP"
_VERSION = 1
_HEAD = struct.Struct(">4sBHHI")  # magic, version, repetitions, headroom bits, ciphertext width


@dataclass(frozen=True, repr=False)
class ProverBase:
    """An owner's own DJN base ``h = -x**(2n) = y**n mod n**2`` with its n-th root ``y = -x**2 mod n``.

    ``public_key`` is the data user's key with ``hs = h``; ``root`` is secret
    (it is the owner's: it never leaves the prover).
    """

    public_key: PublicKey
    root: int

    @classmethod
    def draw(cls, public_key: PublicKey) -> ProverBase:
        """A fresh base for ``public_key``'s modulus (``x`` from :mod:`secrets`)."""
        n = int(public_key.n)
        x = bk.random_unit(n)
        key = PublicKey(n, derive_hs(n, x), insecure_test_key=True)  # the caller accepted the key's size
        return cls(key, int((n - x * x % n) % n))

    def root_commitment(self) -> tuple[int, int]:
        """A Guillou-Quisquater commitment ``(r, R = r**n mod n**2)`` for a proof that ``h`` is an n-th residue."""
        n = self.public_key.n
        r = bk.random_unit(n)
        return int(r), int(bk.powmod(r, n, self.public_key.nsquare))

    def root_response(self, r: int, challenge: int) -> int:
        """``s = r y**e mod n``: with it, ``s**n = R h**e mod n**2`` (:func:`root_commitment_of`)."""
        n = self.public_key.n
        return int(r * bk.powmod(self.root, challenge, n) % n)

    def __repr__(self) -> str:
        return f"ProverBase({self.public_key!r})"


def root_commitment_of(public_key: PublicKey, base: int, response: int, challenge: int) -> int:
    """The GQ commitment ``R = s**n h**-e mod n**2`` an n-th-root proof ``(e, s)`` of ``h`` answers.

    ``s**n = R h**e`` is the check; soundness: ``h**e`` has class ``e``
    times ``h``'s (``(1+n)**m u**n`` has class ``m``), and ``s**n`` and ``R``
    (fixed before ``e``) have class 0 and ``m(R)``, so a base of class
    ``!= 0`` passes for at most one ``e`` below ``min(p, q)``.
    """
    n, n2 = public_key.n, public_key.nsquare
    return int(bk.powmod(response, n, n2) * bk.powmod(base, -int(challenge), n2) % n2)


@dataclass(frozen=True)
class ProofSection:
    """The public part of one section: its ciphertexts, chunks (slots per ciphertext), slot width and bound."""

    name: str
    ciphertexts: Sequence[int]
    chunks: Sequence[int]
    slot_bits: int
    bound: int

    @classmethod
    def of(cls, name: str, array: EncryptedArray) -> ProofSection:
        """The section of an :class:`EncryptedArray` (its declared bound is the one proved)."""
        return cls(name, array.ciphertexts, array.chunks, array.layout.slot_bits, array.bound)


@dataclass(frozen=True, repr=False)
class SectionWitness:
    """The prover's secret for one section: the slot values and each ciphertext's DJN exponent."""

    values: Sequence[int]
    exponents: Sequence[int]


@dataclass(frozen=True)
class ProofGeometry:
    """Sizes every party derives from the public statement (never from the prover).

    Attributes
    ----------
    repetitions : int
    headroom_bits : int
        ``h = ceil(log2(T m)) + 2`` for ``m`` slots: a mask of ``bits(B) + h``
        bits makes a restart less likely than 1/4.
    mask_bits : tuple of int
        ``l`` per section.
    response_bounds : tuple of int
        ``A' = 2**l - 1 - B`` per section: the verifier's bound on ``|z|``.
    proven_bounds : dict
        ``S = 2 A'`` per section name: what an accepted proof guarantees.
    z_widths : tuple of int
        Bytes per response (two's complement) per section.
    """

    repetitions: int
    headroom_bits: int
    mask_bits: tuple[int, ...]
    response_bounds: tuple[int, ...]
    proven_bounds: dict[str, int]
    z_widths: tuple[int, ...]
    slots: int
    ciphertexts: int

    @classmethod
    def of(cls, sections: Sequence[ProofSection], repetitions: int = REPETITIONS) -> ProofGeometry:
        t = check_int("repetitions", repetitions, minimum=1, maximum=4096)
        m = sum(sum(int(c) for c in s.chunks) for s in sections)
        k = sum(len(s.ciphertexts) for s in sections)
        h = max(1, (t * max(1, m) - 1).bit_length()) + 2
        ls = tuple(int(s.bound).bit_length() + h for s in sections)
        a = tuple((1 << ell) - 1 - int(s.bound) for ell, s in zip(ls, sections))
        return cls(t, h, ls, a, {s.name: 2 * ap for s, ap in zip(sections, a)},
                   tuple((ell + 2 + 7) // 8 for ell in ls), m, k)


@dataclass(frozen=True)
class RangeProof:
    """A proof as sent: the base, the n-th-root proof, the mask ciphertexts, the responses.

    Sizes: ``T * K`` ciphertexts of ``A`` plus ``T * m`` responses (``K``
    ciphertexts and ``m`` slots in the statement), about ``T`` times the
    statement's ciphertext bytes.
    """

    repetitions: int
    headroom_bits: int
    base: int
    root_commit: int
    root_response: int
    gamma_commit: int
    combined: int
    masks: bytes
    responses: bytes

    def to_bytes(self, public_key: PublicKey) -> bytes:
        """Binary form: header, ``h, R, G`` (ciphertext width), ``s`` (n width), ``Z``, ``A`` blob, ``z`` blob."""
        cw = public_key.ciphertext_bytes
        nw = (public_key.bits + 7) // 8
        zb = bk.int_to_bytes(self.combined)
        return b"".join([
            _HEAD.pack(_MAGIC, _VERSION, self.repetitions, self.headroom_bits, cw),
            bk.ints_to_bytes([self.base, self.root_commit, self.gamma_commit], cw),
            int(self.root_response).to_bytes(nw, "big"),
            struct.pack(">I", len(zb)), zb,
            struct.pack(">Q", len(self.masks)), self.masks,
            struct.pack(">Q", len(self.responses)), self.responses,
        ])

    @classmethod
    def from_bytes(cls, data: bytes, public_key: PublicKey) -> RangeProof:
        """Parse :meth:`to_bytes` output; every length is checked before it is used.

        Raises
        ------
        MessageError
            Wrong magic or version, a length that does not match the bytes present.
        KeyMismatchError
            A proof made for a key of another size.
        """
        data = bytes(data)
        if len(data) < _HEAD.size:
            raise MessageError(f"range proof must be at least {_HEAD.size} bytes, got {len(data)}")
        magic, version, reps, hb, cw = _HEAD.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise MessageError(f"range proof magic/version must be {_MAGIC!r}/{_VERSION}, got {magic!r}/{version}")
        if cw != public_key.ciphertext_bytes:
            raise KeyMismatchError(f"range proof ciphertext width must be {public_key.ciphertext_bytes} bytes "
                                   f"(this key), got {cw}")
        nw = (public_key.bits + 7) // 8
        pos = _HEAD.size

        def take(count: int, what: str) -> bytes:
            nonlocal pos
            if count < 0 or pos + count > len(data):
                raise MessageError(f"range proof {what} must fit the {len(data)} bytes present, "
                                   f"got {count} bytes at offset {pos}")
            out = data[pos:pos + count]
            pos += count
            return out

        h, rc, gc = bk.bytes_to_ints(take(3 * cw, "commitments"), cw)
        s = int.from_bytes(take(nw, "root response"), "big")
        (zlen,) = struct.unpack(">I", take(4, "combined length"))
        z = int.from_bytes(take(zlen, "combined response"), "big")
        (alen,) = struct.unpack(">Q", take(8, "masks length"))
        masks = take(alen, "masks")
        (rlen,) = struct.unpack(">Q", take(8, "responses length"))
        responses = take(rlen, "responses")
        if pos != len(data):
            raise MessageError(f"range proof must end after its responses, got {len(data) - pos} extra bytes")
        return cls(reps, hb, int(h), int(rc), s, int(gc), z, masks, responses)


def encrypt_for_proof(base: ProverBase, values: Sequence[int], *, layout: SlotLayout, bound: int,
                      chunks: Sequence[int]) -> tuple[EncryptedArray, list[int]]:
    """Pack and DJN-encrypt under ``base`` and keep each ciphertext's exponent (the witness).

    As :func:`dpdpca.crypto.encrypt` (serial), with ``alpha`` drawn here from
    :mod:`secrets` and returned.

    Raises
    ------
    OverflowRiskError
        A value beyond ``bound`` or ``bound`` beyond the layout.
    """
    key = base.public_key
    chunk_t = tuple(int(c) for c in chunks)
    exps = [secrets.randbits(key.alpha_bits) for _ in chunk_t]
    # encrypt's own checks (integers only, the bound, the chunks), with this proof's factors
    arr = encrypt(key, values, layout=layout, bound=bound, chunks=chunk_t,
                  factors=key.djn_table(len(exps)).pow_many(exps))
    return arr, exps


def _h1(context: bytes, key: PublicKey, geom: ProofGeometry, sections: Sequence[ProofSection],
        commits: Sequence[int], masks: bytes) -> bytes:
    cw = key.ciphertext_bytes
    hsh = hashlib.sha256()
    hsh.update(b"dpdpca/rangeproof/v1/H1")
    hsh.update(struct.pack(">Q", len(context)) + context)
    hsh.update(bk.int_to_bytes(key.n))
    hsh.update(struct.pack(">HHHH", geom.repetitions, geom.headroom_bits, CHALLENGE_BITS, STAT_BITS))
    for s in sections:
        name = s.name.encode()
        hsh.update(struct.pack(">H", len(name)) + name + struct.pack(">II", s.slot_bits, len(s.chunks)))
        hsh.update(bk.int_to_bytes(s.bound))
        hsh.update(struct.pack(f">{len(s.chunks)}I", *s.chunks))
        hsh.update(bk.ints_to_bytes(list(s.ciphertexts), cw))
    hsh.update(bk.ints_to_bytes(list(commits), cw))
    hsh.update(masks)
    return hsh.digest()


def _challenges(d1: bytes, reps: int) -> tuple[list[int], int]:
    stream = hashlib.shake_256(b"e" + d1).digest((reps + 7) // 8 + CHALLENGE_BITS // 8)
    bits = int.from_bytes(stream[:(reps + 7) // 8], "big")
    return [(bits >> t) & 1 for t in range(reps)], int.from_bytes(stream[(reps + 7) // 8:], "big")


def _coefficients(d1: bytes, responses: bytes, count: int) -> list[int]:
    d2 = hashlib.sha256(b"dpdpca/rangeproof/v1/H2" + d1 + hashlib.sha256(responses).digest()).digest()
    cb = CHALLENGE_BITS // 8
    stream = hashlib.shake_256(b"c" + d2).digest(count * cb)
    return [int.from_bytes(stream[i:i + cb], "big") for i in range(0, count * cb, cb)]


def _gamma_bits(key: PublicKey, geom: ProofGeometry) -> int:
    # Z - gamma = sum c (beta + e a) < T K 2**48 2**(alpha_bits + 1): gamma STAT_BITS wider hides it.
    return key.alpha_bits + 1 + CHALLENGE_BITS + (geom.repetitions * max(1, geom.ciphertexts)).bit_length() \
        + STAT_BITS


def _section_slices(sections: Sequence[ProofSection]) -> list[list[tuple[int, int]]]:
    out = []
    for s in sections:
        spans, start = [], 0
        for c in s.chunks:
            spans.append((start, start + int(c)))
            start += int(c)
        out.append(spans)
    return out


def prove_ranges(base: ProverBase, sections: Sequence[ProofSection], witnesses: Sequence[SectionWitness], *,
                 context: bytes, repetitions: int = REPETITIONS,
                 timings: dict[str, float] | None = None) -> RangeProof:
    """Prove that every slot of every section's ciphertexts is within the proven bound (module docstring).

    Parameters
    ----------
    base : ProverBase
        The base every ciphertext of ``sections`` was encrypted under.
    sections : sequence of ProofSection
    witnesses : sequence of SectionWitness
        One per section: ``values`` (``sum(chunks)`` ints, ``|x| <= bound``)
        and one DJN exponent per ciphertext (:func:`encrypt_for_proof`).
    context : bytes
        What binds the proof to its use (session, key, owner, share digest).
    repetitions : int
        ``T``; fewer than :data:`REPETITIONS` only to measure (soundness
        error ``2**-T``).
    timings : dict or None
        Filled with ``commit_s`` (the masks and their encryptions: no data
        enters them, so they could be made offline), ``respond_s`` (hashing,
        responses, combination) and ``attempts`` (1 + rejection restarts).

    Returns
    -------
    RangeProof

    Raises
    ------
    OverflowRiskError
        A value beyond its section's declared bound (an honest prover proves
        nothing false).
    """
    key = base.public_key
    n, n2 = key.n, key.nsquare
    if len(witnesses) != len(sections):
        raise param_error("witnesses", f"one per section ({len(sections)})", len(witnesses))
    for s, w in zip(sections, witnesses):
        if len(w.values) != sum(int(c) for c in s.chunks) or len(w.exponents) != len(s.ciphertexts):
            raise param_error(f"witness of section {s.name}", "one value per slot and one exponent per ciphertext",
                              f"{len(w.values)} values and {len(w.exponents)} exponents")
        for i, v in enumerate(w.values):
            if abs(int(v)) > s.bound:
                raise OverflowRiskError(f"section {s.name} values[{i}] must satisfy |value| <= bound {s.bound}, "
                                        f"got {int(v)}")
    geom = ProofGeometry.of(sections, repetitions)
    reps = geom.repetitions
    spans = _section_slices(sections)
    values = [[int(v) for v in w.values] for w in witnesses]
    nbytes = [(ell + 1 + 7) // 8 for ell in geom.mask_bits]
    cw = key.ciphertext_bytes
    table = key.djn_table(reps * geom.ciphertexts)  # the base's cached table, rebuilt only if that pays
    hs = key.hs
    commit_s = respond_s = 0.0
    attempts = 0
    while True:
        attempts += 1
        t0 = time.perf_counter()
        r, root_commit = base.root_commitment()
        gamma = secrets.randbits(_gamma_bits(key, geom))
        gamma_commit = bk.powmod(hs, gamma, n2)
        alphas: list[list[list[int]]] = []
        betas: list[list[int]] = []
        mask_parts: list[bytes] = []
        group = max(1, 4096 // max(1, geom.ciphertexts))  # repetitions per table call (bounded memory)
        for start in range(0, reps, group):
            plains: list[int] = []
            for _t in range(start, min(reps, start + group)):
                alpha_t: list[list[int]] = []
                for s, sp, ell, nb in zip(sections, spans, geom.mask_bits, nbytes):
                    m = sp[-1][1] if sp else 0
                    raw = os.urandom(m * nb)
                    top, mask = 1 << ell, (1 << (ell + 1)) - 1
                    a = [(int.from_bytes(raw[i:i + nb], "big") & mask) - top for i in range(0, m * nb, nb)]
                    alpha_t.append(a)
                    plains.extend(pack_slots(a[lo:hi], s.slot_bits) % n for lo, hi in sp)
                alphas.append(alpha_t)
            beta_g = [secrets.randbits(key.alpha_bits) for _ in plains]
            cts = key.raw_encrypt_with(plains, table.pow_many(beta_g))
            mask_parts.append(bk.ints_to_bytes(cts, cw))
            kc = geom.ciphertexts
            betas.extend(beta_g[i:i + kc] for i in range(0, len(beta_g), max(1, kc)))
        masks = b"".join(mask_parts)
        t1 = time.perf_counter()
        commit_s += t1 - t0
        d1 = _h1(context, key, geom, sections, [hs, root_commit, gamma_commit], masks)
        es, e0 = _challenges(d1, reps)
        parts: list[bytes] = []
        ok = True
        for t in range(reps):
            for si, (ap, zw) in enumerate(zip(geom.response_bounds, geom.z_widths)):
                zs = alphas[t][si] if not es[t] else [a + x for a, x in zip(alphas[t][si], values[si])]
                if any(z > ap or z < -ap for z in zs):
                    ok = False
                    break
                parts.append(b"".join(z.to_bytes(zw, "big", signed=True) for z in zs))
            if not ok:
                break
        respond_s += time.perf_counter() - t1
        if ok:
            break  # else: rejection, start again with fresh masks (nothing of this attempt leaves)
    t1 = time.perf_counter()
    responses = b"".join(parts)
    coeffs = _coefficients(d1, responses, reps * geom.ciphertexts)
    exps = [int(e) for w in witnesses for e in w.exponents]
    combined = gamma
    i = 0
    for t in range(reps):
        for k in range(geom.ciphertexts):
            combined += coeffs[i] * (betas[t][k] + (exps[k] if es[t] else 0))
            i += 1
    root_response = base.root_response(r, e0)
    if timings is not None:
        timings.update(commit_s=commit_s, respond_s=respond_s + time.perf_counter() - t1, attempts=attempts)
    return RangeProof(reps, geom.headroom_bits, int(hs), int(root_commit), root_response, int(gamma_commit),
                      combined, masks, responses)


def multi_pow(bases: Sequence[int], exps: Sequence[int], mod: int, exp_bits: int) -> int:
    """``prod bases[i]**exps[i] mod mod`` by Pippenger's bucket method (exponents below ``2**exp_bits``)."""
    count = len(bases)
    if count < 24:  # a few bases: one C exponentiation each beats the buckets' fixed cost
        acc1 = bk.mpz(1)
        for b, e in zip(bases, exps):
            acc1 = acc1 * bk.powmod(b, e, mod) % mod
        return int(acc1)
    w = min(range(1, 13), key=lambda w: -(-exp_bits // w) * (count + (2 << w)))
    windows = -(-exp_bits // w)
    digit = (1 << w) - 1
    m = bk.mpz(mod)
    acc = bk.mpz(1)
    for i in reversed(range(windows)):
        if i != windows - 1:
            for _ in range(w):
                acc = acc * acc % m
        buckets = [bk.mpz(1)] * (1 << w)
        shift = i * w
        for b, e in zip(bases, exps):
            u = (e >> shift) & digit
            if u:
                buckets[u] = buckets[u] * b % m
        running = bk.mpz(1)
        total = bk.mpz(1)
        for u in range(digit, 0, -1):
            if buckets[u] != 1:
                running = running * buckets[u] % m
            total = total * running % m
        acc = acc * total % m
    return int(acc)


def verify_ranges(public_key: PublicKey, proof: RangeProof | bytes, sections: Sequence[ProofSection], *,
                  context: bytes, repetitions: int = REPETITIONS) -> dict[str, int]:
    """Check a proof of :func:`prove_ranges` for ``sections`` under ``context``; the proven bound per section.

    Every size comes from the statement (``sections``, ``repetitions``), not
    from the proof.

    Returns
    -------
    dict
        Section name -> proven bound ``S`` on every ``|slot|`` (``ProofGeometry.proven_bounds``).

    Raises
    ------
    ProofError
        The proof does not verify: wrong sizes, a response out of range, or a
        failing equation (named).
    MessageError, KeyMismatchError
        A malformed proof.
    """
    key = public_key
    n, n2 = key.n, key.nsquare
    pf = proof if isinstance(proof, RangeProof) else RangeProof.from_bytes(proof, key)
    for s in sections:
        if len(s.ciphertexts) != len(s.chunks):
            raise ProofError(f"statement section {s.name} must have one chunk per ciphertext, "
                             f"got {len(s.chunks)} chunks for {len(s.ciphertexts)} ciphertexts")
    geom = ProofGeometry.of(sections, repetitions)
    reps, kc = geom.repetitions, geom.ciphertexts
    cw = key.ciphertext_bytes
    if pf.repetitions != reps or pf.headroom_bits != geom.headroom_bits:
        raise ProofError(f"range proof repetitions/headroom must be {reps}/{geom.headroom_bits}, "
                         f"got {pf.repetitions}/{pf.headroom_bits}")
    if len(pf.masks) != reps * kc * cw:
        raise ProofError(f"range proof must hold {reps * kc} mask ciphertexts, got {len(pf.masks)} bytes")
    rep_bytes = sum(sum(int(c) for c in s.chunks) * zw for s, zw in zip(sections, geom.z_widths))
    if len(pf.responses) != reps * rep_bytes:
        raise ProofError(f"range proof must hold {reps * rep_bytes} response bytes, got {len(pf.responses)}")
    if not 0 < pf.root_response < n:
        raise ProofError("range proof root response must be in [1, n)")
    if not 0 <= pf.combined < 1 << (_gamma_bits(key, geom) + 1):
        raise ProofError("range proof combined response must be a non-negative integer of the declared size")
    masks = bk.bytes_to_ints(pf.masks, cw)
    commits = [bk.mpz(pf.base), bk.mpz(pf.root_commit), bk.mpz(pf.gamma_commit)]
    every = commits + masks + [bk.mpz(pf.root_response)]
    if any(not 0 < c < n2 for c in every):
        raise ProofError("range proof base, commitments and masks must be in [1, n**2)")
    if bk.first_non_unit(every, n) is not None:
        raise ProofError("range proof base, commitments and masks must be units modulo n")
    cts = [bk.mpz(c) for s in sections for c in s.ciphertexts]
    if any(not 0 < c < n2 for c in cts) or bk.first_non_unit(cts, n) is not None:
        raise ProofError("statement ciphertexts must be units in [1, n**2)")
    h = commits[0]
    d1 = _h1(context, key, geom, sections, commits, pf.masks)
    es, e0 = _challenges(d1, reps)
    # n-th root of h (Guillou-Quisquater): s**n = R h**e0.
    if root_commitment_of(key, h, pf.root_response, e0) != commits[1]:
        raise ProofError("range proof: the prover's DJN base is not shown to be an n-th residue")
    coeffs = _coefficients(d1, pf.responses, reps * kc)
    spans = _section_slices(sections)
    raw = pf.responses
    pos = 0
    lhs = bk.mpz(pf.gamma_commit)
    pending: list[int] = []  # D's waiting for one multi-exponentiation (bounded memory at large d)
    pending_c: list[int] = []
    for t in range(reps):
        plains: list[int] = []
        for s, sp, ap, zw in zip(sections, spans, geom.response_bounds, geom.z_widths):
            m = sp[-1][1] if sp else 0
            zs = [int.from_bytes(raw[i:i + zw], "big", signed=True) for i in range(pos, pos + m * zw, zw)]
            pos += m * zw
            for j, z in enumerate(zs):
                if z > ap or z < -ap:
                    raise ProofError(f"range proof response for section {s.name} slot {j} must satisfy "
                                     f"|z| <= {ap}, got {z}")
            plains.extend(pack_slots(zs[lo:hi], s.slot_bits) % n for lo, hi in sp)
        mk = masks[t * kc:(t + 1) * kc]
        if es[t]:
            ds = [(a - n * (a * p % n)) * c % n2 for a, p, c in zip(mk, plains, cts)]
        else:
            ds = [(a - n * (a * p % n)) % n2 for a, p in zip(mk, plains)]
        pending.extend(ds)
        pending_c.extend(coeffs[t * kc:(t + 1) * kc])
        if len(pending) >= 4096 or t == reps - 1:
            lhs = lhs * multi_pow(pending, pending_c, n2, CHALLENGE_BITS) % n2
            pending, pending_c = [], []
    if lhs != bk.powmod(h, pf.combined, n2):
        raise ProofError("range proof: the masked ciphertexts do not open to the responses")
    return dict(geom.proven_bounds)
