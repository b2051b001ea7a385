"""An exact (no-slack) interval proof for one DJN-Paillier ciphertext, by bit decomposition.

The statement: a ciphertext ``C`` under the prover's DJN base ``h``
(:class:`~dpdpca.crypto.rangeproof.ProverBase`) decrypts, modulo ``n``, to
``lower + scale * x`` for an *integer* ``x`` in ``[0, span]`` exactly
(:class:`IntervalStatement`).  The slack proof of
:mod:`~dpdpca.crypto.rangeproof` bounds every slot only up to ``2**(h+1)``
times its declared bound; this one costs ``k = bits(span)`` small
encryptions, so it is affordable for a single value such as a row count.

Decomposition (exact upper bound without a second decomposition): weights
``w_i = 2**i`` for ``i < k - 1`` and ``w_{k-1} = span - 2**(k-1) + 1``.  The
sums ``sum_i w_i b_i`` over bits ``b_i in {0, 1}`` are exactly the integers
of ``[0, span]``: the smallest is 0, the largest ``2**(k-1) - 1 + w_{k-1} =
span``; an ``x < 2**(k-1)`` is its binary digits with ``b_{k-1} = 0``, and an
``x >= 2**(k-1)`` is ``w_{k-1}`` plus ``x - w_{k-1}``, which lies in
``[2**k - 1 - span, 2**(k-1) - 1]`` (as ``span < 2**k`` and ``x <= span``),
in binary.  (The interval trick of Lipmaa, Asokan and Niemi 2002, in its
one-adjusted-weight form.)

Packed ciphertexts (:class:`PackedIntervalStatement`): ``C`` decrypts to
``sum_j (lower_j + scale_j x_j) 2**(w j)`` with every slot's integer ``x_j``
in its own ``[0, span_j]`` exactly.  Packing is Z-linear, so this is one
linear statement ``Dec(C) = L + sum_j c_j x_j (mod n)`` with ``L = sum_j
lower_j 2**(w j)`` and ``c_j = scale_j 2**(w j)``: the same protocol with one
bit decomposition per slot (``k = sum_j bits(span_j)`` bits) and ONE relation
proof for the ciphertext, ``D = C (1+n)**-L prod_{j,i} B_{j,i}**(-c_j w_{j,i})``.
The statement must fit the slots and the key (checked): every slot's value
``lower_j + scale_j x_j`` within ``|.| <= 2**(w-1) - 1`` and the packed integer
within ``|.| < n/2``, so the balanced digits of the decryption are exactly
the slot values (no slot carries into another).  :class:`IntervalStatement`
is the one-slot case.

Protocol (Fiat-Shamir over ``context``, which the caller makes from the
session, the key, the owner's id and the share's digest), with
``lambda = 128``-bit challenges:

* The prover encrypts every bit under ``h``: ``B_i = (1+n)**b_i h**a_i``.
* ``h`` is an n-th residue: Guillou-Quisquater, as in the slack proof
  (:meth:`ProverBase.root_commitment`, :func:`root_commitment_of`).
* Every ``B_i`` encrypts 0 or 1: a Cramer-Damgård-Schoenmakers OR of two
  Schnorr-type proofs "``c'`` is ``h`` to a known power" for
  ``c' = B_i`` and ``c' = B_i (1+n)**-1`` (the Damgård-Jurik proof that a
  ciphertext encrypts one of two values, with the randomness in ``h``'s
  exponent: knowing ``a`` with ``c' = h**a`` is knowing its n-th root
  ``y**a``).  The true branch: ``G = h**gamma``, ``Z = gamma + e a``; the
  other is simulated: ``e``, ``Z`` drawn, ``G = h**Z c'**-e``; the branch
  challenges XOR to the bit's challenge.
* The relation: ``D = C (1+n)**-L prod_i B_i**(-c_i w_i)`` (``L = lower``
  and ``c_i = scale`` for one slot) is ``h`` to the known power
  ``t = a_C - sum_i c_i w_i a_i`` (signed), by the same Schnorr-type proof.
* The challenges come from the hash (over the context, the statement,
  ``h``, every ``B_i`` and every commitment).  The proof sends the
  commitments, the GQ response, one challenge per bit (the other is the
  XOR) and every response.  The verifier recomputes the hash, checks GQ
  (``s**n = R h**e0``) and checks the ``2k + 1`` equations ``h**Z = G
  c'**e`` at once: ``h**(sum rho_j Z_j) = prod G_j**rho_j c'_j**(rho_j
  e_j)`` with its own fresh 48-bit ``rho_j`` (one exponentiation and one
  multi-exponentiation instead of ``2k + 1`` of each).

Soundness (error ``<= 2**-128`` per hash query in the random-oracle model,
for keys with ``min(p, q) > 2**128``: any key of 512 bits or more, plus
``2**-48`` per verification for the batching; so below the issue's
``2**-40``).  Write a unit of ``Z*_{n^2}`` uniquely as
``(1+n)**m u**n``; ``m`` in ``Z_n`` is its class, and "encrypts 0" means
"has class 0".  Every check ``h**Z = G c'**e`` says ``m(G) + e m(c') = 0
(mod n)`` once ``h`` has class 0; with ``G`` and ``c'`` fixed before the
hash, an ``m(c') != 0`` is non-zero modulo ``p`` or ``q`` and at most one
``e < 2**128`` passes.  So, per hash query: ``h`` has class 0 unless ``e0``
hits one value; each ``B_i`` has class 0 or 1 unless its challenge ``e_i =
e_i0 XOR e_i1`` hits the XOR of the two branches' single passing values;
and then ``m(D) = 0`` unless ``e_D`` hits one value, i.e.
``Dec(C) = L + sum_i c_i w_i b_i (mod n)`` with every ``b_i in {0, 1}``:
each slot's ``x_j = sum_i w_{j,i} b_{j,i}`` is in ``[0, span_j]`` (and, the
statement fitting the slots and the key, every slot of ``C`` decrypts to its
``lower_j + scale_j x_j``).  The same bound holds for packed statements of
any size: the bits' and the relation's challenges are each ``lambda`` bits,
so a packed proof's error is ``<= 2**-128`` per hash query too.  Batching: the one
check says ``sum_j rho_j delta_j = 0 (mod n)`` for the class terms
``delta_j = m(G_j) + e_j m(c'_j)`` of the equations (``h`` has class 0);
if some ``delta_j`` is non-zero modulo ``p`` (or ``q``), fixed before the
verifier draws ``rho_j``, at most one of the ``2**48`` values of ``rho_j``
passes: error ``2**-48`` per verification, which the prover cannot grind.  The verifier bounds no
response for soundness (only for the format's widths).

Zero knowledge (honest verifier, then Fiat-Shamir in the random-oracle
model): the simulator draws every challenge and every ``Z`` uniform in
``[0, 2**g)`` and computes the commitments from them, as the prover does
for its false branches; real true-branch responses are ``gamma + e a`` with
``gamma`` ``STAT_BITS + bits(2k + 2)`` bits wider than ``e a``, so all
responses together are within ``2**-40`` statistical distance.  The bit
ciphertexts are fresh DJN encryptions, indistinguishable from encryptions of
0 under the DCR and DJN short-exponent assumptions (those the shares rest
on).  Leaked: ``k``, which the public statement already fixes.

References
----------
R. Cramer, I. Damgård, B. Schoenmakers, "Proofs of partial knowledge and
simplified design of witness hiding protocols", CRYPTO 1994 (the OR).
I. Damgård, M. Jurik, "A generalisation, a simplification and some
applications of Paillier's probabilistic public-key system", PKC 2001
(proofs that a ciphertext encrypts 0 or 1).  H. Lipmaa, N. Asokan, V. Niemi,
"Secure Vickrey auctions without threshold trust", FC 2002 (arbitrary upper
bounds by adjusted weights).  L. Guillou, J.-J. Quisquater, CRYPTO 1988.
"""

from __future__ import annotations

import hashlib
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from dpdpca._validation import check_int, param_error
from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.keys import PublicKey
from dpdpca.crypto.packing import pack_slots
from dpdpca.crypto.rangeproof import STAT_BITS, ProverBase, multi_pow, root_commitment_of
from dpdpca.errors import DpdpcaError, KeyMismatchError, MessageError, OverflowRiskError, ProofError

__all__ = ["BATCH_BITS", "BIT_CHALLENGE_BITS", "IntervalProof", "IntervalStatement", "PackedIntervalStatement",
           "Statement", "prove_interval", "prove_packed_interval", "verify_interval"]

#: Bits of every challenge (GQ, each bit's OR, the relation): soundness error 2**-128 per hash query.
BIT_CHALLENGE_BITS = 128
#: Bits of the verifier's own coefficients that batch the equations: error 2**-48 per verification.
BATCH_BITS = 48

_MAGIC = b"DPIP"
_VERSION = 1
_HEAD = struct.Struct(">4sBHIHH")  # magic, version, bits k, ciphertext width, response width, relation width
_DOMAIN = b"dpdpca/bitproof/v1"
_PACKED_DOMAIN = b"dpdpca/bitproof/packed/v1"
_EB = BIT_CHALLENGE_BITS // 8


@dataclass(frozen=True)
class IntervalStatement:
    """``Dec(ciphertext) = lower + scale * x (mod n)`` for an integer ``x`` in ``[0, span]`` exactly.

    Parameters
    ----------
    ciphertext : int
    lower : int
        Any integer (the value for ``x = 0``).
    scale : int >= 1
    span : int >= 1

    Examples
    --------
    >>> st = IntervalStatement(ciphertext=1, lower=0, scale=1, span=1000)
    >>> st.bits, st.weights()[-1], sum(st.weights())
    (10, 489, 1000)
    >>> st.decompose(1000), st.decompose(511)
    ([1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1, 0])
    """

    ciphertext: int
    lower: int
    scale: int
    span: int

    def __post_init__(self) -> None:
        check_int("scale", self.scale, minimum=1)
        check_int("span", self.span, minimum=1)

    @property
    def bits(self) -> int:
        """``k``: how many bit ciphertexts the proof holds."""
        return int(self.span).bit_length()

    def weights(self) -> list[int]:
        """``w_i``: ``2**i`` below the top one, ``span - 2**(k-1) + 1`` at the top (module docstring)."""
        return _weights(self.span)

    def offset_of(self, value: int) -> int | None:
        """``x`` with ``value = lower + scale x`` and ``0 <= x <= span``, else None."""
        q, rem = divmod(int(value) - int(self.lower), int(self.scale))
        return q if rem == 0 and 0 <= q <= self.span else None

    def decompose(self, x: int) -> list[int]:
        """Bits ``b_i`` with ``sum_i w_i b_i = x`` for ``x`` in ``[0, span]``."""
        return _decompose(self.span, x)

    @property
    def constant(self) -> int:
        """``L``: the plaintext for ``x = 0``."""
        return int(self.lower)

    def terms(self) -> list[tuple[int, int]]:
        """``(c_j, span_j)`` per slot: ``Dec(C) = L + sum_j c_j x_j``."""
        return [(int(self.scale), int(self.span))]

    def offsets_of(self, values: Sequence[int]) -> list[int] | None:
        """Each slot's ``x`` for one value per slot, None if one is outside."""
        x = self.offset_of(values[0]) if len(values) == 1 else None
        return None if x is None else [x]

    def hash_fields(self) -> tuple[bytes, list[int]]:
        """The hash's domain and the statement's integers."""
        return _DOMAIN, [int(self.lower), int(self.scale), int(self.span)]


def _weights(span: int) -> list[int]:
    k = int(span).bit_length()
    return [1 << i for i in range(k - 1)] + [int(span) - (1 << (k - 1)) + 1]


def _decompose(span: int, x: int) -> list[int]:
    k = int(span).bit_length()
    top = 1 if x >= 1 << (k - 1) else 0
    rest = x - top * _weights(span)[-1]
    return [(rest >> i) & 1 for i in range(k - 1)] + [top]


@dataclass(frozen=True)
class PackedIntervalStatement:
    """``Dec(ciphertext)`` packs ``lowers[j] + scales[j] x_j`` in slot ``j`` (``2**(slot_bits j)``), ``x_j`` in ``[0, spans[j]]``.

    Parameters
    ----------
    ciphertext : int
    slot_bits : int >= 2
    lowers, scales, spans : tuple of int
        One per slot: any integer, ``>= 1``, ``>= 1``; every slot's values
        within ``|.| <= 2**(slot_bits-1) - 1`` (so the slots decode uniquely).

    Examples
    --------
    >>> st = PackedIntervalStatement(1, 16, (0, -5), (1, 1), (10, 10))
    >>> st.bits, st.constant, st.terms()
    (8, -327680, [(1, 10), (65536, 10)])
    >>> st.offsets_of([10, 5]), st.offsets_of([11, 5]), st.offsets_of([0, -6])
    ([10, 10], None, None)
    """

    ciphertext: int
    slot_bits: int
    lowers: tuple[int, ...]
    scales: tuple[int, ...]
    spans: tuple[int, ...]

    def __post_init__(self) -> None:
        w = check_int("slot_bits", self.slot_bits, minimum=2)
        if not len(self.lowers) == len(self.scales) == len(self.spans) >= 1:
            raise param_error("lowers, scales, spans", "one entry per slot each (at least one slot)",
                              f"{len(self.lowers)}, {len(self.scales)}, {len(self.spans)}")
        limit = (1 << (w - 1)) - 1
        for j, (lo, sc, sp) in enumerate(zip(self.lowers, self.scales, self.spans)):
            check_int(f"scales[{j}]", sc, minimum=1)
            check_int(f"spans[{j}]", sp, minimum=1)
            if max(abs(int(lo)), abs(int(lo) + int(sc) * int(sp))) > limit:
                raise param_error(f"slot {j} interval", f"within |value| <= 2**{w - 1} - 1 (the slot width)",
                                  f"[{int(lo)}, {int(lo) + int(sc) * int(sp)}]")

    @property
    def bits(self) -> int:
        """``k = sum_j bits(span_j)``: how many bit ciphertexts the proof holds."""
        return sum(int(sp).bit_length() for sp in self.spans)

    @property
    def constant(self) -> int:
        """``L = sum_j lowers[j] 2**(w j)``."""
        return pack_slots(self.lowers, self.slot_bits)

    def terms(self) -> list[tuple[int, int]]:
        """``(c_j, span_j) = (scales[j] 2**(w j), spans[j])`` per slot."""
        return [(int(sc) << (self.slot_bits * j), int(sp)) for j, (sc, sp) in enumerate(zip(self.scales, self.spans))]

    def offsets_of(self, values: Sequence[int]) -> list[int] | None:
        """Each slot's ``x_j`` (``values[j] = lowers[j] + scales[j] x_j``), None if a slot is outside or miscounted."""
        if len(values) != len(self.spans):
            return None
        out = []
        for v, lo, sc, sp in zip(values, self.lowers, self.scales, self.spans):
            q, rem = divmod(int(v) - int(lo), int(sc))
            if rem or not 0 <= q <= sp:
                return None
            out.append(q)
        return out

    def hash_fields(self) -> tuple[bytes, list[int]]:
        """The hash's domain and the statement's integers (slot width, count, then each slot's three)."""
        return _PACKED_DOMAIN, [int(self.slot_bits), len(self.spans),
                                *(int(v) for t in zip(self.lowers, self.scales, self.spans) for v in t)]

    def magnitude(self) -> int:
        """The largest ``|packed value|`` the statement allows (at most ``n/2`` for a key it fits)."""
        return sum(max(abs(int(lo)), abs(int(lo) + int(sc) * int(sp))) << (self.slot_bits * j)
                   for j, (lo, sc, sp) in enumerate(zip(self.lowers, self.scales, self.spans)))


#: Either statement: one value or the slots of a packed ciphertext.
Statement = Union[IntervalStatement, PackedIntervalStatement]


def _check_fits(key: PublicKey, st: Statement) -> None:
    if isinstance(st, PackedIntervalStatement) and 2 * st.magnitude() >= key.n:
        raise param_error("packed interval statement", "packed values below n/2 in absolute value (this key)",
                          f"{st.magnitude().bit_length()} bits against a {key.bits}-bit n")


def _bit_coefficients(st: Statement) -> list[int]:
    """``c_j w_{j,i}`` for every bit, slot by slot: the relation's exponents."""
    return [c * w for c, span in st.terms() for w in _weights(span)]


def _sizes(key: PublicKey, st: Statement) -> tuple[int, int, int, int]:
    """``(g, response bytes, relation bits, relation bytes)`` from the public key and statement."""
    k = st.bits
    margin = STAT_BITS + (2 * k + 2).bit_length()
    g = key.alpha_bits + BIT_CHALLENGE_BITS + margin
    # |t| < 2**alpha (1 + sum_j c_j span_j): its gamma is that wide plus the challenge and the margin
    gd = key.alpha_bits + sum(c * span for c, span in st.terms()).bit_length() + 1 + BIT_CHALLENGE_BITS + margin
    return g, (g + 1 + 7) // 8, gd, (gd + 2 + 7) // 8


@dataclass(frozen=True)
class IntervalProof:
    """A proof as sent: the base, the GQ response, the bit ciphertexts, the commitments, challenges and responses.

    ``commitments`` holds ``2k + 2`` ciphertexts: each bit's two branch
    commitments, the relation's, then the GQ commitment ``R``.
    """

    base: int
    root_response: int
    bit_ciphertexts: bytes
    commitments: bytes
    branch_challenges: bytes
    responses: bytes
    relation_response: int

    def to_bytes(self, public_key: PublicKey, statement: Statement) -> bytes:
        """Header, ``h`` (ciphertext width), ``s`` (n width), ``B`` blob, commitments, ``e_i0`` blob, ``Z`` blob, ``Z_D``."""
        cw = public_key.ciphertext_bytes
        nw = (public_key.bits + 7) // 8
        _g, zw, _gd, rw = _sizes(public_key, statement)
        return b"".join([
            _HEAD.pack(_MAGIC, _VERSION, statement.bits, cw, zw, rw),
            bk.ints_to_bytes([self.base], cw), int(self.root_response).to_bytes(nw, "big"),
            self.bit_ciphertexts, self.commitments, self.branch_challenges, self.responses,
            int(self.relation_response).to_bytes(rw, "big", signed=True),
        ])

    @classmethod
    def from_bytes(cls, data: bytes, public_key: PublicKey, statement: Statement) -> IntervalProof:
        """Parse :meth:`to_bytes` output for ``statement``: every size is the statement's, checked first.

        Raises
        ------
        MessageError
            Wrong magic, version or sizes.
        KeyMismatchError
            A proof made for a key of another size.
        """
        data = bytes(data)
        if len(data) < _HEAD.size:
            raise MessageError(f"interval proof must be at least {_HEAD.size} bytes, got {len(data)}")
        magic, version, k, cw, zw, rw = _HEAD.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise MessageError(f"interval proof magic/version must be {_MAGIC!r}/{_VERSION}, "
                               f"got {magic!r}/{version}")
        if cw != public_key.ciphertext_bytes:
            raise KeyMismatchError(f"interval proof ciphertext width must be {public_key.ciphertext_bytes} bytes "
                                   f"(this key), got {cw}")
        _g, zw0, _gd, rw0 = _sizes(public_key, statement)
        if (k, zw, rw) != (statement.bits, zw0, rw0):
            raise MessageError(f"interval proof bits/response widths must be {statement.bits}/{zw0}/{rw0} "
                               f"(the statement's), got {k}/{zw}/{rw}")
        nw = (public_key.bits + 7) // 8
        sizes = (cw, nw, k * cw, (2 * k + 2) * cw, k * _EB, 2 * k * zw, rw)
        if len(data) != _HEAD.size + sum(sizes):
            raise MessageError(f"interval proof must be {_HEAD.size + sum(sizes)} bytes for {k} bits, "
                               f"got {len(data)}")
        pos = _HEAD.size
        parts = []
        for size in sizes:
            parts.append(data[pos:pos + size])
            pos += size
        return cls(int.from_bytes(parts[0], "big"), int.from_bytes(parts[1], "big"), parts[2], parts[3], parts[4],
                   parts[5], int.from_bytes(parts[6], "big", signed=True))


def _hash(context: bytes, key: PublicKey, st: Statement, h: int, bits: bytes, commits: list[int]) -> bytes:
    cw = key.ciphertext_bytes
    domain, fields = st.hash_fields()
    hsh = hashlib.sha256()
    hsh.update(domain)
    hsh.update(struct.pack(">Q", len(context)) + context)
    hsh.update(bk.int_to_bytes(key.n))
    for v in fields:
        b = int(v).to_bytes((int(v).bit_length() + 8) // 8, "big", signed=True)
        hsh.update(struct.pack(">I", len(b)) + b)
    hsh.update(bk.ints_to_bytes([st.ciphertext, h], cw))
    hsh.update(bits)
    hsh.update(bk.ints_to_bytes(commits, cw))
    return hsh.digest()


def _subchallenges(c: bytes, k: int) -> tuple[list[int], int, int]:
    """Each bit's challenge, the relation's and the GQ one (``lambda`` bits each) from the hash ``c``."""
    stream = hashlib.shake_256(b"e" + c).digest((k + 2) * _EB)
    es = [int.from_bytes(stream[i * _EB:(i + 1) * _EB], "big") for i in range(k + 2)]
    return es[:k], es[k], es[k + 1]


def _powers(key: PublicKey, base: int, exps: list[int], exp_bits: int) -> list[int]:
    """``base**e mod n**2`` for every ``e`` (``0 <= e < 2**exp_bits``).

    A fixed-base table above 1024-bit keys (measured for 31 exponents of
    ``alpha + 173`` bits: 3.5x faster than one exponentiation each at 2048
    bits), plain exponentiations below (9x faster at 256 bits, where the
    table's Python loop dominates).
    """
    n2 = key.nsquare
    if key.bits < 1024:
        return [int(bk.powmod(base, e, n2)) for e in exps]
    table = bk.FixedBaseTable(base, n2, exp_bits, window=bk.FixedBaseTable.best_window(exp_bits, len(exps)))
    return [int(v) for v in table.pow_many(exps)]


def _weighted_product(key: PublicKey, st: Statement, cts: list[int]) -> int:
    """``prod_{j,i} B_{j,i}**(c_j w_{j,i}) mod n**2`` by Horner's rule (about one full exponentiation, not k).

    Per slot ``P_j = prod_i B_{j,i}**w_{j,i}`` (``w_{j,i} = 2**i`` below the
    top bit: squarings), then ``prod_j P_j**c_j`` with ``c_j = scale_j
    2**(w j)``: from the top slot down, ``acc = acc**(2**w) P_j**scale_j``.
    """
    n2 = key.nsquare
    slots: list[tuple[int, int]] = []  # (P_j, scale_j)
    pos = 0
    if isinstance(st, PackedIntervalStatement):
        spans, scales, shift = list(st.spans), list(st.scales), int(st.slot_bits)
    else:
        spans, scales, shift = [int(st.span)], [int(st.scale)], 0
    for span, scale in zip(spans, scales):
        k = int(span).bit_length()
        b = [bk.mpz(c) for c in cts[pos:pos + k]]
        pos += k
        acc = bk.mpz(1)
        for i in reversed(range(k - 1)):  # sum_{i<k-1} 2**i b_i
            acc = acc * acc % n2 * b[i] % n2
        acc = acc * bk.powmod(b[k - 1], _weights(span)[-1], n2) % n2
        slots.append((acc, int(scale)))
    total = bk.mpz(1)
    for acc, scale in reversed(slots):
        if shift and total != 1:
            total = bk.powmod(total, 1 << shift, n2)
        total = total * (acc if scale == 1 else bk.powmod(acc, scale, n2)) % n2
    return int(total)


def _check_units(values: list[int], n: int, n2: int, what: str) -> None:
    if any(not 0 < v < n2 for v in values) or bk.first_non_unit([bk.mpz(v) for v in values], n) is not None:
        raise ProofError(f"interval proof {what} must be units in [1, n**2)")


def prove_interval(base: ProverBase, statement: Statement, *, value: int, exponent: int,
                   context: bytes) -> IntervalProof:
    """Prove :class:`IntervalStatement` for a ciphertext encrypted under ``base`` (module docstring).

    Parameters
    ----------
    base : ProverBase
        The base ``statement.ciphertext`` was encrypted under.
    statement : IntervalStatement
    value : int
        The plaintext (``lower + scale x``, as encrypted: a signed integer).
    exponent : int
        The ciphertext's DJN exponent (:func:`~dpdpca.crypto.rangeproof.encrypt_for_proof`).
    context : bytes
        What binds the proof to its use (session, key, owner, share digest).

    Raises
    ------
    OverflowRiskError
        ``value`` is not ``lower + scale x`` with ``x`` in ``[0, span]`` (an
        honest prover proves nothing false).
    """
    if not isinstance(statement, IntervalStatement):
        raise param_error("statement", "an IntervalStatement (prove_packed_interval proves packed ones)",
                          type(statement).__name__)
    value = check_int("value", value)  # a float is refused, never truncated
    x = statement.offset_of(value)
    if x is None:
        raise OverflowRiskError(f"value must be lower + scale * x with x in [0, {statement.span}] "
                                f"(lower {statement.lower}, scale {statement.scale}), got {int(value)}")
    return _prove(base, statement, [x], exponent, context)


def prove_packed_interval(base: ProverBase, statement: PackedIntervalStatement, *, values: Sequence[int],
                          exponent: int, context: bytes) -> IntervalProof:
    """Prove :class:`PackedIntervalStatement` for a packed ciphertext encrypted under ``base`` (module docstring).

    Parameters
    ----------
    base : ProverBase
    statement : PackedIntervalStatement
    values : sequence of int
        The slot values as packed (``lowers[j] + scales[j] x_j``).
    exponent : int
        The ciphertext's DJN exponent.
    context : bytes

    Raises
    ------
    OverflowRiskError
        A slot value outside its interval (named; an honest prover proves nothing false).
    ParameterError
        A statement that does not fit the key (packed values reaching ``n/2``).
    """
    vals = [check_int(f"values[{j}]", v) for j, v in enumerate(values)]
    xs = statement.offsets_of(vals)
    if xs is None:
        if len(vals) != len(statement.spans):
            raise param_error("values", f"one per slot ({len(statement.spans)})", len(vals))
        j = next(j for j, (v, lo, sc, sp) in enumerate(zip(vals, statement.lowers, statement.scales, statement.spans))
                 if (v - lo) % sc or not 0 <= (v - lo) // sc <= sp)
        lo, sc, sp = statement.lowers[j], statement.scales[j], statement.spans[j]
        raise OverflowRiskError(f"values[{j}] must be {lo} + {sc} * x with x in [0, {sp}], got {vals[j]}")
    _check_fits(base.public_key, statement)
    return _prove(base, statement, xs, exponent, context)


def _prove(base: ProverBase, statement: Statement, xs: list[int], exponent: int, context: bytes) -> IntervalProof:
    key = base.public_key
    n, n2, h = key.n, key.nsquare, int(key.hs)
    k = statement.bits
    g, zw, gd, _rw = _sizes(key, statement)
    bits = [b for (_c, span), x in zip(statement.terms(), xs) for b in _decompose(span, x)]
    a = [secrets.randbits(key.alpha_bits) for _ in bits]
    gam = [secrets.randbits(g) for _ in bits]
    sim_e = [secrets.randbits(BIT_CHALLENGE_BITS) for _ in bits]
    sim_z = [secrets.randbits(g) for _ in bits]
    gamma_d = secrets.randbits(gd)
    exps = a + gam + sim_z + [gamma_d]
    powers = _powers(key, h, exps, gd)
    h_a, h_gam, h_sim = powers[:k], powers[k:2 * k], powers[2 * k:3 * k]
    cts = key.raw_encrypt_with(bits, h_a)
    one_minus_n = (1 - n) % n2  # (1+n)**-1 mod n**2
    commits: list[int] = []
    for i, b in enumerate(bits):
        false_c = cts[i] * one_minus_n % n2 if b == 0 else cts[i]  # the branch the prover cannot open
        g_false = h_sim[i] * bk.powmod(bk.invert(false_c, n2), sim_e[i], n2) % n2
        pair = (h_gam[i], g_false) if b == 0 else (g_false, h_gam[i])
        commits.extend(int(v) for v in pair)
    commits.append(int(powers[3 * k]))
    r, root_commit = base.root_commitment()
    commits.append(root_commit)
    bit_blob = bk.ints_to_bytes(cts, key.ciphertext_bytes)
    c = _hash(context, key, statement, h, bit_blob, commits)
    es, e_rel, e_root = _subchallenges(c, k)
    e0s: list[int] = []
    zs: list[int] = []
    for i, b in enumerate(bits):
        e_true = es[i] ^ sim_e[i]
        z_true = gam[i] + e_true * a[i]
        e0s.append(e_true if b == 0 else sim_e[i])
        zs.extend((z_true, sim_z[i]) if b == 0 else (sim_z[i], z_true))
    t = int(exponent) - sum(cw * ai for cw, ai in zip(_bit_coefficients(statement), a))
    return IntervalProof(h, base.root_response(r, e_root), bit_blob, bk.ints_to_bytes(commits, key.ciphertext_bytes),
                         b"".join(e.to_bytes(_EB, "big") for e in e0s),
                         b"".join(z.to_bytes(zw, "big") for z in zs), gamma_d + e_rel * t)


def verify_interval(public_key: PublicKey, proof: IntervalProof | bytes, statement: Statement, *,
                    context: bytes) -> None:
    """Check a proof of :func:`prove_interval` for ``statement`` under ``context``.

    The hash gives the challenges; the GQ equation is checked alone and the
    ``2k + 1`` equations ``h**Z = G c'**e`` in one, with fresh
    ``BATCH_BITS``-bit coefficients from :mod:`secrets` (module docstring).

    Raises
    ------
    ProofError
        The proof does not verify (a ciphertext not a unit, a response out of
        its width, the base not an n-th residue, or the equations: named).
    MessageError, KeyMismatchError
        A malformed proof.
    """
    key = public_key
    n, n2 = key.n, key.nsquare
    try:
        _check_fits(key, statement)
    except DpdpcaError as exc:
        raise ProofError(f"interval proof statement must fit the key: {exc}") from None
    pf = proof if isinstance(proof, IntervalProof) else IntervalProof.from_bytes(proof, key, statement)
    k = statement.bits
    g, zw, gd, _rw = _sizes(key, statement)
    cw = key.ciphertext_bytes
    if len(pf.bit_ciphertexts) != k * cw or len(pf.commitments) != (2 * k + 2) * cw \
            or len(pf.branch_challenges) != k * _EB or len(pf.responses) != 2 * k * zw:
        raise ProofError(f"interval proof must hold {k} bit ciphertexts, {2 * k + 2} commitments, {k} challenges "
                         f"and {2 * k} responses")
    h = int(pf.base)
    cts = [int(v) for v in bk.bytes_to_ints(pf.bit_ciphertexts, cw)]
    commits = [int(v) for v in bk.bytes_to_ints(pf.commitments, cw)]
    _check_units([h, int(statement.ciphertext), *cts, *commits], n, n2, "base, ciphertexts and commitments")
    if not 0 < pf.root_response < n:
        raise ProofError("interval proof root response must be in [1, n)")
    zs = [int.from_bytes(pf.responses[i:i + zw], "big") for i in range(0, 2 * k * zw, zw)]
    if any(z >> (g + 1) for z in zs):
        raise ProofError(f"interval proof responses must be below 2**{g + 1}")
    if abs(pf.relation_response) >> (gd + 1):
        raise ProofError(f"interval proof relation response must be below 2**{gd + 1} in absolute value")
    e0s = [int.from_bytes(pf.branch_challenges[i:i + _EB], "big") for i in range(0, k * _EB, _EB)]
    es, e_rel, e_root = _subchallenges(_hash(context, key, statement, h, pf.bit_ciphertexts, commits), k)
    if root_commitment_of(key, h, pf.root_response, e_root) != commits[-1]:
        raise ProofError("interval proof: the prover's DJN base is not shown to be an n-th residue")
    # the statements c' and their challenges: per bit B_i (branch 0) and B_i (1+n)**-1 (branch 1), then D
    one_minus_n = (1 - n) % n2  # (1+n)**-1 mod n**2
    xs: list[int] = []
    chal: list[int] = []
    for ct, e0, e in zip(cts, e0s, es):
        xs.extend((ct, ct * one_minus_n % n2))
        chal.extend((e0, e ^ e0))
    # D = C (1+n)**-L prod B_i**(-c_i w_i)
    d = int(statement.ciphertext) * ((1 - int(statement.constant) % n * n) % n2) % n2 \
        * bk.invert(_weighted_product(key, statement, cts), n2) % n2
    xs.append(int(d))
    chal.append(e_rel)
    # one check for all: h**(sum rho Z) = prod G**rho * prod c'**(rho e), rho fresh (a failing equation survives
    # with probability <= 2**-BATCH_BITS: its class term is non-zero modulo p or q)
    rhos = [secrets.randbits(BATCH_BITS) for _ in xs]
    lhs = bk.powmod(h, sum(r * z for r, z in zip(rhos, [*zs, int(pf.relation_response)])), n2)
    rhs = multi_pow(commits[:-1] + xs, rhos + [r * e for r, e in zip(rhos, chal)], n2,
                    BATCH_BITS + BIT_CHALLENGE_BITS)
    if lhs != rhs:
        raise ProofError("interval proof: the bits, the relation or the base do not open to the challenges "
                         "(a value outside the interval, another ciphertext or context, or a tampered proof)")
