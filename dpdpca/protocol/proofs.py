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

Wire format of the section (version 2): ``b"DPSP"``, the version byte, then
the range proof and the count proof, each behind an 8-byte length (the count
proof empty when the share has no encrypted count).  Version 1 was the range
proof alone (``b"DPRP"``): refused with a line saying so.
"""

from __future__ import annotations

import struct
from typing import Mapping

from dpdpca.crypto import EncryptedArray
from dpdpca.crypto.bitproof import IntervalStatement, prove_interval, verify_interval
from dpdpca.crypto.rangeproof import ProofSection, ProverBase, SectionWitness, prove_ranges, verify_ranges
from dpdpca.dp import block_scales
from dpdpca.errors import DpdpcaError, MessageError, ProofError
from dpdpca.protocol.add_remove import owner_count_noise_bound
from dpdpca.protocol.counts import NO_NOISE
from dpdpca.protocol.messages import Message
from dpdpca.protocol.params import ProtocolParams

__all__ = ["COUNT_SECTION", "PROOF_FORMAT_VERSION", "PROOF_SECTION", "check_share_proof", "count_statement",
           "join_proofs", "proof_context", "proof_sections", "prove_share", "split_proofs"]

#: The message section that carries an owner's range proof (and its count proof).
PROOF_SECTION = "rangeproof"
#: The ciphertext section holding an encrypted row count (one slot), proved exactly.
COUNT_SECTION = "N"
#: Version of the proof section's format (module docstring); 1 was the range proof alone.
PROOF_FORMAT_VERSION = 2
_MAGIC = b"DPSP"
_HEAD = struct.Struct(">4sB")


def join_proofs(range_proof: bytes, count_proof: bytes) -> bytes:
    """The proof section (version 2): header, then each proof behind its 8-byte length."""
    return b"".join([_HEAD.pack(_MAGIC, PROOF_FORMAT_VERSION), struct.pack(">Q", len(range_proof)), range_proof,
                     struct.pack(">Q", len(count_proof)), count_proof])


def split_proofs(data: bytes) -> tuple[bytes, bytes]:
    """``(range proof, count proof)`` of a proof section; every length checked.

    Raises
    ------
    MessageError
        Another format or version (version 1, the range proof alone, says so), or lengths that do not match.
    """
    data = bytes(data)
    if data[:4] == b"DPRP":
        raise MessageError(f"range proof section must be format version {PROOF_FORMAT_VERSION} (slot ranges and "
                           f"the exact count proof), got version 1 (a range proof alone, from an older dpdpca)")
    if len(data) < _HEAD.size or _HEAD.unpack_from(data) != (_MAGIC, PROOF_FORMAT_VERSION):
        raise MessageError(f"range proof section must start with {_MAGIC!r} version {PROOF_FORMAT_VERSION}, "
                           f"got {data[:5]!r}")
    pos = _HEAD.size
    out = []
    for what in ("range proof", "count proof"):
        if pos + 8 > len(data):
            raise MessageError(f"range proof section must hold the {what}'s length, got {len(data)} bytes")
        (size,) = struct.unpack_from(">Q", data, pos)
        if pos + 8 + size > len(data):
            raise MessageError(f"range proof section's {what} must fit the {len(data)} bytes present, "
                               f"got {size} bytes at offset {pos + 8}")
        out.append(data[pos + 8:pos + 8 + size])
        pos += 8 + size
    if pos != len(data):
        raise MessageError(f"range proof section must end after its count proof, got {len(data) - pos} extra bytes")
    return out[0], out[1]


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
                noise: str = NO_NOISE) -> bytes:
    """The ``rangeproof`` section of an owner's share (bytes): the range proof and, for an encrypted N, its count proof.

    ``noise`` is the label the owner signs in its statement (:func:`count_statement`).
    """
    sections = proof_sections(params, release, arrays)
    context = proof_context(params, owner_id=owner_id, d=d, release=release, digest=digest)
    proof = prove_ranges(base, sections, [witnesses[s.name] for s in sections], context=context)
    count = b""
    if COUNT_SECTION in arrays:
        st = count_statement(params, arrays[COUNT_SECTION].ciphertexts[0], d=d, noise=noise)
        wit = witnesses[COUNT_SECTION]
        count = prove_interval(base, st, value=int(wit.values[0]), exponent=int(wit.exponents[0]),
                               context=context).to_bytes(params.public_key, st)
    return join_proofs(proof.to_bytes(params.public_key), count)


def check_share_proof(msg: Message, params: ProtocolParams, release: str, arrays: Mapping[str, EncryptedArray], *,
                      owner_id: str, d: int, digest: str, noise: str = NO_NOISE) -> dict[str, int]:
    """Verify the range proof (and count proof) of a share whose signature was checked; the proven bound per section.

    ``noise`` is the share's signed noise label (:func:`count_statement`).

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
        range_proof, count_proof = split_proofs(msg.section(PROOF_SECTION))
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
