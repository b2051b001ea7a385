"""Owners' range proofs on their shares: what each proves, its Fiat-Shamir context, proving and checking.

With range proofs on (``--range-proofs``), an owner encrypts its share under
a DJN base whose n-th root it knows (:class:`dpdpca.crypto.rangeproof.ProverBase`)
and adds a ``rangeproof`` section: a non-interactive proof that every slot of
every ciphertext section (``R``, ``v``, and ``N`` for add/remove) is within the
proven bound of that section's public declared bound
(:mod:`dpdpca.crypto.rangeproof`).  The proof is bound to the session, the
key, the owner's id, d, the release and the SHA-256 of the share's
ciphertexts (the digest the owner signs), so it cannot be replayed into
another share.  The proxy checks it in its intake
(:func:`dpdpca.protocol.intake.check_share`), in process or on its pool.
"""

from __future__ import annotations

import struct
from typing import Mapping

from dpdpca.crypto import EncryptedArray
from dpdpca.crypto.rangeproof import ProofSection, ProverBase, SectionWitness, prove_ranges, verify_ranges
from dpdpca.errors import DpdpcaError, ProofError
from dpdpca.protocol.messages import Message
from dpdpca.protocol.params import ProtocolParams

__all__ = ["PROOF_SECTION", "proof_context", "proof_sections", "prove_share", "check_share_proof"]

#: The message section that carries an owner's range proof.
PROOF_SECTION = "rangeproof"


def proof_context(params: ProtocolParams, *, owner_id: str, d: int, release: str, digest: str) -> bytes:
    """The bytes the proof's challenges are bound to: session, key, owner, d, release, ciphertext digest."""
    parts = [b"dpdpca share range proof v1", params.session_id.encode(), params.key_fingerprint.encode(),
             owner_id.encode(), str(int(d)).encode(), release.encode(), digest.encode()]
    return b"".join(struct.pack(">I", len(p)) + p for p in parts)


def proof_sections(params: ProtocolParams, release: str, arrays: Mapping[str, EncryptedArray]
                   ) -> list[ProofSection]:
    """The statement: every ciphertext section with its *public* declared bound (never the array's header)."""
    bounds = params.share_bounds(release)
    return [ProofSection(name, arr.ciphertexts, arr.chunks, arr.layout.slot_bits, bounds[name])
            for name, arr in arrays.items()]


def prove_share(base: ProverBase, params: ProtocolParams, release: str, arrays: Mapping[str, EncryptedArray],
                witnesses: Mapping[str, SectionWitness], *, owner_id: str, d: int, digest: str) -> bytes:
    """The ``rangeproof`` section of an owner's share (bytes)."""
    sections = proof_sections(params, release, arrays)
    context = proof_context(params, owner_id=owner_id, d=d, release=release, digest=digest)
    proof = prove_ranges(base, sections, [witnesses[s.name] for s in sections], context=context)
    return proof.to_bytes(params.public_key)


def check_share_proof(msg: Message, params: ProtocolParams, release: str, arrays: Mapping[str, EncryptedArray], *,
                      owner_id: str, d: int, digest: str) -> dict[str, int]:
    """Verify the range proof of a share whose signature was checked; the proven bound per section.

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
        return verify_ranges(params.public_key, msg.section(PROOF_SECTION), proof_sections(params, release, arrays),
                             context=context)
    except DpdpcaError as exc:  # ProofError, or a malformed proof (MessageError, KeyMismatchError)
        err = ProofError(f"share of owner {owner_id!r} must carry a valid range proof, got: {exc}")
        err.party = owner_id
        raise err from None
