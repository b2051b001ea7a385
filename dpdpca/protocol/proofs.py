"""Owners' range proofs on their shares: what each proves, its Fiat-Shamir context, proving and checking.

With range proofs on (``--range-proofs``), an owner encrypts its share under
a DJN base whose n-th root it knows (:class:`dpdpca.crypto.rangeproof.ProverBase`)
and adds a ``rangeproof`` section: a non-interactive proof that every slot of
every ciphertext section (``R``, ``v``, and ``N`` for add/remove) is within the
proven bound of that section's public declared bound
(:mod:`dpdpca.crypto.rangeproof`).  That bound has slack (about ``2**(h+1)``
times the declared one), so where the share encrypts the row count (the
add/remove release's one-slot ``N`` section) the section also carries an
*exact* proof for it (:mod:`dpdpca.crypto.bitproof`, :func:`count_statement`):
``N = 2**(2f) n`` with ``n`` in ``[0, max_rows_per_owner]`` for a share
without noise, ``N`` in ``[-a, max_rows_per_owner 2**(2f) + a]`` for one
holding the owners' noise (``a`` the tail bound of its noise share, which
the signed label's calibration fixes; the proxy's finish refuses a label
that is not the session's).

Both proofs are bound to the session, the key, the owner's id, d, the
release and the SHA-256 of the share's ciphertexts (the digest the owner
signs), so neither can be replayed into another share.  The proxy checks
them in its intake (:func:`dpdpca.protocol.intake.check_share`), in process
or on its pool.

The owner also signs the proof section itself (:func:`sign_proof`): a second
Ed25519 statement, besides the share statement (whose format and domain do
not change), carried base64url in the share's meta ``proof_signature``::

    "dpdpca/owner-proof/v1" NUL {"ciphertext_sha256": ..., "d": ..., "key_fingerprint": ...,
                                 "owner_id": ..., "proof_sha256": ..., "session": ...}

``proof_sha256`` is the SHA-256 of the proof section's bytes.  Without it,
whoever could rewrite a share in transit (a hand-carried share file) could
replace a valid proof with garbage under the owner's valid share signature,
and the proxy, seeing the owner's statement and a failing proof, would
exclude an honest owner for good.  So the intake checks the proof signature
first (:func:`check_proof_signature`): a missing proof section, a missing or
non-verifying signature is an :class:`~dpdpca.errors.AuthenticationError`
(the share is refused, its owner is not excluded and may send it again);
only a proof its owner signed and that fails is a
:class:`~dpdpca.errors.ProofError` naming the owner, who is then excluded.

Exact mode (``--range-proof-mode exact``, :data:`RANGE_PROOF_MODES`): no
slack anywhere.  Every ciphertext of the share carries one exact packed
interval proof (:class:`dpdpca.crypto.bitproof.PackedIntervalStatement`,
:func:`slot_statements`): each slot in its own interval from the public
declared bounds, R's diagonal ``[0, B_R]`` (a sum of squares), R's other
entries ``[-B_R, B_R]``, v's ``[-B_v, B_v]``, N as the count proof above
(``B_R = max_rows 2**(2f)``, ``B_v = max_rows 2**f``); with the owners'
noise every interval widens by that section's noise tail bound on both sides
(:func:`dpdpca.protocol.add_remove.owner_noise_bound`, as for N).  It costs
one small encryption and an OR-proof per bit of every slot
(README: measured).  The session fixes the mode: a share proved in the
other mode is refused, naming its owner.

Wire format of the section (version 3): ``b"DPSP"``, the version byte, the
mode byte (0 slack, 1 exact), a 4-byte count, then the proofs, each behind
an 8-byte length: slack: the range proof and the count proof (empty when
the share has no encrypted count); exact: one interval proof per ciphertext,
sections in order.  Version 2 (slack without a mode byte) and version 1 (the
range proof alone, ``b"DPRP"``) are refused with a line saying so.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Mapping

from dpdpca.crypto import EncryptedArray
from dpdpca.crypto.bitproof import (IntervalStatement, PackedIntervalStatement, prove_interval,
                                     prove_packed_interval, verify_interval)
from dpdpca.crypto.rangeproof import (REPETITIONS, ProofSection, ProverBase, SectionWitness, prove_ranges,
                                       verify_ranges)
from dpdpca._validation import param_error
from dpdpca.dp import block_scales
from dpdpca.errors import AuthenticationError, DpdpcaError, MessageError, ProofError
from dpdpca.protocol.add_remove import owner_count_noise_bound, owner_noise_bound
from dpdpca.protocol.counts import NO_NOISE
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring, b64url, statement_bytes, unb64url
from dpdpca.protocol.messages import Message
from dpdpca.protocol.params import ProtocolParams
from dpdpca.protocol.releases import as_release

__all__ = ["COUNT_SECTION", "PROOF_DOMAIN", "PROOF_FORMAT_VERSION", "PROOF_SECTION", "PROOF_SIGNATURE",
           "RANGE_PROOF_MODES", "check_proof_signature", "check_range_proof_mode", "check_share_proof",
           "count_statement", "join_proofs", "min_proof_bytes", "proof_context", "proof_sections",
           "proof_statement", "prove_share", "sign_proof", "slot_statements", "split_proofs"]

#: The message section that carries an owner's range proof (and its count proof).
PROOF_SECTION = "rangeproof"
#: The ciphertext section holding an encrypted row count (one slot), proved exactly.
COUNT_SECTION = "N"
#: Version of the proof section's format (module docstring); 2 had no mode byte, 1 was the range proof alone.
PROOF_FORMAT_VERSION = 3
#: ``slack``: every slot within the slack range proof's bound, N exactly; ``exact``: every slot exactly.
RANGE_PROOF_MODES = ("slack", "exact")
#: Domain string of an owner's signature over its proof section (a signature on it verifies as nothing else).
PROOF_DOMAIN = "dpdpca/owner-proof/v1"
#: The share's meta field holding that signature (base64url, as the share statement's).
PROOF_SIGNATURE = "proof_signature"
_MAGIC = b"DPSP"
_HEAD = struct.Struct(">4sBBI")  # magic, version, mode, number of proofs


def check_range_proof_mode(mode: object) -> str:
    """``mode`` if it is one of :data:`RANGE_PROOF_MODES`, else a one-line ParameterError."""
    if mode not in RANGE_PROOF_MODES:
        raise param_error("range_proof_mode", f"one of {', '.join(RANGE_PROOF_MODES)}", mode)
    return str(mode)


def join_proofs(*proofs: bytes, mode: str = "slack") -> bytes:
    """The proof section (version 3): header with the mode and the count, then each proof behind its 8-byte length.

    Slack mode: ``join_proofs(range_proof, count_proof)``; exact: one interval proof per ciphertext.
    """
    code = RANGE_PROOF_MODES.index(check_range_proof_mode(mode))
    return b"".join([_HEAD.pack(_MAGIC, PROOF_FORMAT_VERSION, code, len(proofs)),
                     *(struct.pack(">Q", len(p)) + bytes(p) for p in proofs)])


def split_proofs(data: bytes, *, mode: str = "slack") -> list[bytes]:
    """The proofs of a proof section in ``mode`` (slack: ``[range proof, count proof]``); every length checked.

    Raises
    ------
    MessageError
        Another format or version (versions 1 and 2 say so), lengths that do not match, or a slack section
        without exactly its two proofs.
    ProofError
        A section proved in the other mode (``range proof mode must be 'exact' (the session's), got 'slack'``).
    """
    mode = check_range_proof_mode(mode)
    data = bytes(data)
    if data[:4] == b"DPRP":
        raise MessageError(f"range proof section must be format version {PROOF_FORMAT_VERSION} (with its mode), "
                           f"got version 1 (a range proof alone, from an older dpdpca)")
    if data[:5] == _MAGIC + b"\x02":
        raise MessageError(f"range proof section must be format version {PROOF_FORMAT_VERSION} (with its mode), "
                           f"got version 2 (slack proofs without a mode, from an older dpdpca)")
    if len(data) < _HEAD.size or data[:5] != _MAGIC + bytes([PROOF_FORMAT_VERSION]):
        raise MessageError(f"range proof section must start with {_MAGIC!r} version {PROOF_FORMAT_VERSION}, "
                           f"got {data[:5]!r}")
    _magic, _version, code, count = _HEAD.unpack_from(data)
    if code >= len(RANGE_PROOF_MODES):
        raise MessageError(f"range proof section mode must be one of 0..{len(RANGE_PROOF_MODES) - 1}, got {code}")
    if RANGE_PROOF_MODES[code] != mode:
        raise ProofError(f"range proof mode must be {mode!r} (the session's), got {RANGE_PROOF_MODES[code]!r}")
    if mode == "slack" and count != 2:
        raise MessageError(f"range proof section in mode 'slack' must hold 2 proofs (range and count), got {count}")
    pos = _HEAD.size
    out = []
    for i in range(count):
        if pos + 8 > len(data):
            raise MessageError(f"range proof section must hold proof {i}'s length, got {len(data)} bytes")
        (size,) = struct.unpack_from(">Q", data, pos)
        if pos + 8 + size > len(data):
            raise MessageError(f"range proof section's proof {i} must fit the {len(data)} bytes present, "
                               f"got {size} bytes at offset {pos + 8}")
        out.append(data[pos + 8:pos + 8 + size])
        pos += 8 + size
    if pos != len(data):
        raise MessageError(f"range proof section must end after its last proof, got {len(data) - pos} extra bytes")
    return out


def count_statement(params: ProtocolParams, ciphertext: int, *, d: int, noise: str = NO_NOISE) -> IntervalStatement:
    """What the count proof shows of the encrypted N slot (the add/remove release's ``N`` section).

    ``noise`` is the share's signed noise label: :data:`NO_NOISE` gives the
    exact count ``N = 2**(2f) n``, ``0 <= n <= max_rows_per_owner``; an
    owners' noise label gives ``-a <= N <= max_rows_per_owner 2**(2f) + a``
    with ``a`` the tail bound of the owner's noise share in N, which the
    label's calibration fixes (:func:`dpdpca.protocol.add_remove.owner_count_noise_bound`,
    at most the public noise allowance): the noise share travels in the same
    slot.

    Raises
    ------
    MessageError
        A noise label that is neither ``"none"`` nor a canonical owners' label.
    """
    scale = int(block_scales(params.frac_bits)["N"])
    rows = int(params.max_rows_per_owner)
    if noise == NO_NOISE:
        return IntervalStatement(int(ciphertext), 0, scale, rows)
    a = owner_count_noise_bound(noise, d=int(d), frac_bits=int(params.frac_bits),
                                allowance=int(params.noise_allowance))
    return IntervalStatement(int(ciphertext), -a, 1, rows * scale + 2 * a)


def slot_statements(params: ProtocolParams, release: str, arrays: Mapping[str, EncryptedArray], *, d: int,
                    noise: str = NO_NOISE) -> list[PackedIntervalStatement]:
    """The exact mode's statements: one per ciphertext, sections in order, every slot's interval (module docstring).

    From public values only: the release's sections and chunks, the
    session's ``max_rows_per_owner``, ``frac_bits`` and slot width, and the
    signed noise label (``"none"``, or an owners' label: every interval
    widens by its section's noise tail bound on both sides).

    Raises
    ------
    MessageError
        A noise label that is neither ``"none"`` nor a canonical owners' label.
    """
    rows, f = int(params.max_rows_per_owner), int(params.frac_bits)
    bound = {"R": rows << (2 * f), "v": rows << f}
    diagonal = {i * int(d) - i * (i - 1) // 2 for i in range(int(d))}  # R's upper triangle, row-major i <= j
    cst = count_statement(params, 1, d=d, noise=noise)  # N's interval (its ciphertext does not enter it)
    out: list[PackedIntervalStatement] = []
    for name, arr in arrays.items():
        a = 0 if noise == NO_NOISE else owner_noise_bound(noise, block=name, d=int(d), frac_bits=f,
                                                          allowance=int(params.noise_allowance))
        slots: list[tuple[int, int, int]] = []
        for i in range(sum(int(c) for c in arr.chunks)):
            if name == COUNT_SECTION:
                slots.append((int(cst.lower), int(cst.scale), int(cst.span)))
            elif name == "R" and i in diagonal:
                slots.append((-a, 1, bound["R"] + 2 * a))
            else:
                slots.append((-bound[name] - a, 1, 2 * (bound[name] + a)))
        start = 0
        for ct, c in zip(arr.ciphertexts, arr.chunks):
            lo, sc, sp = zip(*slots[start:start + int(c)])
            out.append(PackedIntervalStatement(int(ct), params.layout.slot_bits, lo, sc, sp))
            start += int(c)
    return out


def min_proof_bytes(params: ProtocolParams, d: int, release: str, mode: str = "slack") -> int:
    """The fewest bytes the proof section of a share of ``d`` features takes, from what its format must hold.

    Slack: the range proof's ``REPETITIONS`` (41) mask ciphertexts per ciphertext of the share (its responses,
    commitments and the count proof come on top); exact: per ciphertext one interval proof, holding at least its
    base, one ciphertext wide (its per-bit ciphertexts come on top).  With
    :func:`dpdpca.protocol.sections.min_share_bytes`, a bound a service's body limit can be checked against
    before any owner spends minutes proving a share it would refuse.
    """
    mode = check_range_proof_mode(mode)
    ciphertexts = sum(as_release(release).share_counts(d, params.layout.slots).values())
    return (REPETITIONS if mode == "slack" else 1) * ciphertexts * params.public_key.ciphertext_bytes


def proof_context(params: ProtocolParams, *, owner_id: str, d: int, release: str, digest: str) -> bytes:
    """The bytes the proofs' challenges are bound to: session, key, owner, d, release, ciphertext digest."""
    parts = [b"dpdpca share range proof v2", params.session_id.encode(), params.key_fingerprint.encode(),
             owner_id.encode(), str(int(d)).encode(), release.encode(), digest.encode()]
    return b"".join(struct.pack(">I", len(p)) + p for p in parts)


def proof_sections(params: ProtocolParams, release: str, arrays: Mapping[str, EncryptedArray]
                   ) -> list[ProofSection]:
    """The statement: every ciphertext section with its *public* declared bound (never the array's header)."""
    bounds = params.share_bounds(release)
    return [ProofSection(name, arr.ciphertexts, arr.chunks, arr.layout.slot_bits, bounds[name])
            for name, arr in arrays.items()]


def prove_share(base: ProverBase, params: ProtocolParams, release: str, arrays: Mapping[str, EncryptedArray],
                witnesses: Mapping[str, SectionWitness], *, owner_id: str, d: int, digest: str,
                noise: str = NO_NOISE, mode: str = "slack") -> bytes:
    """The ``rangeproof`` section of an owner's share (bytes) in ``mode`` (:data:`RANGE_PROOF_MODES`).

    Slack: the range proof and, for an encrypted N, its count proof; exact:
    one packed interval proof per ciphertext (:func:`slot_statements`).
    ``noise`` is the label the owner signs in its statement (:func:`count_statement`).

    Raises
    ------
    OverflowRiskError
        A slot outside its interval (exact mode names it; an honest owner never gets here).
    """
    mode = check_range_proof_mode(mode)
    context = proof_context(params, owner_id=owner_id, d=d, release=release, digest=digest)
    if mode == "exact":
        values = [int(v) for name in arrays for v in witnesses[name].values]
        exps = [int(e) for name in arrays for e in witnesses[name].exponents]
        proofs, pos = [], 0
        for st, exp in zip(slot_statements(params, release, arrays, d=d, noise=noise), exps):
            vals = values[pos:pos + len(st.spans)]
            pos += len(st.spans)
            proofs.append(prove_packed_interval(base, st, values=vals, exponent=exp, context=context)
                          .to_bytes(params.public_key, st))
        return join_proofs(*proofs, mode=mode)
    sections = proof_sections(params, release, arrays)
    proof = prove_ranges(base, sections, [witnesses[s.name] for s in sections], context=context)
    count = b""
    if COUNT_SECTION in arrays:
        cst = count_statement(params, arrays[COUNT_SECTION].ciphertexts[0], d=d, noise=noise)
        wit = witnesses[COUNT_SECTION]
        count = prove_interval(base, cst, value=int(wit.values[0]), exponent=int(wit.exponents[0]),
                               context=context).to_bytes(params.public_key, cst)
    return join_proofs(proof.to_bytes(params.public_key), count)


def proof_statement(params: ProtocolParams, *, owner_id: str, d: int, digest: str, proof: bytes) -> bytes:
    """The bytes an owner signs over its proof section: session, key, owner, d, ciphertext and proof SHA-256."""
    return statement_bytes(PROOF_DOMAIN, {"session": params.session_id, "key_fingerprint": params.key_fingerprint,
                                          "owner_id": owner_id, "d": int(d), "ciphertext_sha256": digest,
                                          "proof_sha256": hashlib.sha256(bytes(proof)).hexdigest()})


def sign_proof(identity: OwnerIdentity, params: ProtocolParams, *, d: int, digest: str, proof: bytes) -> str:
    """The owner's signature over its proof section ``proof`` (:func:`proof_statement`), base64url.

    The share carries it in its meta :data:`PROOF_SIGNATURE`; ``digest`` is
    the share's :func:`~dpdpca.protocol.counts.ciphertext_digest`.
    """
    raw = identity.sign(proof_statement(params, owner_id=identity.owner_id, d=d, digest=digest, proof=proof))
    return b64url(raw)


def check_proof_signature(msg: Message, params: ProtocolParams, keyring: OwnerKeyring, *, owner_id: str, d: int,
                          digest: str) -> None:
    """Check that the owner signed this share's proof section (:func:`sign_proof`); before its proofs are checked.

    ``owner_id``, ``d`` and ``digest`` are those of the share's statement,
    whose signature was checked.

    Raises
    ------
    AuthenticationError
        No proof section, no signature over it, or one that does not verify
        under the owner's listed key (the section was changed after the owner
        signed it): one line naming the owner.  Not a
        :class:`~dpdpca.errors.ProofError`: nothing shows the owner sent it, so
        the share is refused and its owner is not excluded.
    """
    what = f"share of owner {owner_id!r} must carry its range proof signed by its owner"
    if PROOF_SECTION not in msg.sections:
        raise AuthenticationError(f"{what}, got no {PROOF_SECTION!r} section")
    text = msg.meta.get(PROOF_SIGNATURE)
    if text is None:
        raise AuthenticationError(f"{what}, got no meta {PROOF_SIGNATURE!r}")
    if not isinstance(text, str) or len(text) > 128:
        raise AuthenticationError(f"{what}, got meta {PROOF_SIGNATURE!r} that is not a base64url signature "
                                  f"({type(text).__name__})")
    raw = unb64url(text)
    if raw is None:
        raise AuthenticationError(f"{what}, got meta {PROOF_SIGNATURE!r} that is not base64url")
    payload = proof_statement(params, owner_id=owner_id, d=d, digest=digest, proof=msg.section(PROOF_SECTION))
    try:
        keyring.verify(owner_id, payload, raw)
    except AuthenticationError:
        raise AuthenticationError(f"{what}, got a signature that does not verify over this proof section (changed "
                                  f"after the owner signed it?)") from None


def check_share_proof(msg: Message, params: ProtocolParams, release: str, arrays: Mapping[str, EncryptedArray], *,
                      owner_id: str, d: int, digest: str, noise: str = NO_NOISE, mode: str = "slack"
                      ) -> dict[str, int]:
    """Verify the proofs of a share whose signatures were checked in the session's ``mode``; the proven bound per section.

    Both signatures: the share statement's and :func:`check_proof_signature`'s,
    so a failure here is the owner's own proof.

    ``noise`` is the share's signed noise label (:func:`count_statement`).
    The proven bound is the largest ``|slot|`` the proofs allow (exact mode:
    the widest end of the section's intervals).

    Raises
    ------
    ProofError
        No proof, or one that does not verify: one line naming the owner
        (``share of owner 'mallory' must carry a valid range proof, got ...``);
        ``exc.party`` is the owner's id.
    """
    try:
        if PROOF_SECTION not in msg.sections:
            raise ProofError("no range proof section")
        context = proof_context(params, owner_id=owner_id, d=d, release=release, digest=digest)
        proofs = split_proofs(msg.section(PROOF_SECTION), mode=mode)
        if mode == "exact":
            statements = slot_statements(params, release, arrays, d=d, noise=noise)
            if len(proofs) != len(statements):
                raise ProofError(f"one exact proof per ciphertext ({len(statements)}), got {len(proofs)}")
            for pf, st in zip(proofs, statements):
                verify_interval(params.public_key, pf, st, context=context)
            out: dict[str, int] = {}
            sts = iter(statements)
            for name, arr in arrays.items():
                for _ct in arr.ciphertexts:
                    st = next(sts)
                    top = max(max(abs(lo), abs(lo + sc * sp)) for lo, sc, sp in zip(st.lowers, st.scales, st.spans))
                    out[name] = max(out.get(name, 0), top)
            return out
        range_proof, count_proof = proofs
        bounds = verify_ranges(params.public_key, range_proof, proof_sections(params, release, arrays),
                               context=context)
        if COUNT_SECTION in arrays:
            verify_interval(params.public_key, count_proof,
                            count_statement(params, arrays[COUNT_SECTION].ciphertexts[0], d=d, noise=noise),
                            context=context)
        elif count_proof:
            raise ProofError("a count proof for a share without an encrypted count")
        return bounds
    except DpdpcaError as exc:  # ProofError, or a malformed proof (MessageError, KeyMismatchError)
        err = ProofError(f"share of owner {owner_id!r} must carry a valid range proof, got: {exc}")
        err.party = owner_id
        raise err from None
