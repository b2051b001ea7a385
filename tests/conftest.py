"""Fixtures shared by every test directory."""

from __future__ import annotations

from typing import Callable

import gmpy2
import pytest


def _prime_3mod4(bits: int, seed: int) -> int:
    """A reproducible ``bits``-bit prime p ≡ 3 (mod 4) (a Blum prime) from ``seed``: test moduli only."""
    state = gmpy2.random_state(seed)
    while True:
        p = gmpy2.next_prime(gmpy2.mpz_urandomb(state, bits) | (gmpy2.mpz(1) << (bits - 1)))
        if p % 4 == 3:
            return int(p)


@pytest.fixture
def prime_3mod4() -> Callable[[int, int], int]:
    """``prime_3mod4(bits, seed)``: a reproducible Blum prime, for building moduli that attack the key checks."""
    return _prime_3mod4


def _proto_fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """The top-level ``(key, value)`` fields of a protobuf message: ints for varints, the raw bytes otherwise."""
    from dpdpca.crypto.seal_wire import read_varint as _read_varint

    out: list[tuple[int, bytes | int]] = []
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        if key & 7 == 0:
            value, pos = _read_varint(data, pos)
            out.append((key, value))
            continue
        if key & 7 == 2:
            size, pos = _read_varint(data, pos)
        else:  # fixed 64 or 32 bits
            size = {1: 8, 5: 4}[key & 7]
        out.append((key, data[pos:pos + size]))
        pos += size
    return out


def _proto_encode(fields: list[tuple[int, bytes | int]]) -> bytes:
    from dpdpca.crypto.seal_wire import varint as _varint

    out = b""
    for key, value in fields:
        if isinstance(value, int):
            out += _varint(key) + _varint(value)
        else:
            out += _varint(key) + (_varint(len(value)) if key & 7 == 2 else b"") + value
    return out


def _public_context_of_secret(blob: bytes, secret: str, workdir: str) -> bytes:
    """The TenSEAL public context ``blob`` with its public key replaced by one made from the secret ``secret``.

    ``secret``: ``"0"``, or a polynomial in SEAL's hex form (``"1"``, ``"1x^5"``): a key anyone decrypts under.
    """
    import os

    import tenseal as ts
    import tenseal.sealapi as sealapi

    seal = ts.context_from(blob).seal_context().data
    sk = sealapi.KeyGenerator(seal).secret_key()
    if secret == "0":
        sk.data().set_zero()
    else:
        plain = sealapi.Plaintext(secret)
        sealapi.Evaluator(seal).transform_to_ntt_inplace(plain, seal.key_parms_id())
        plain.save(os.path.join(workdir, "sk"))
        sk = sealapi.SecretKey()
        sk.load(seal, os.path.join(workdir, "sk"))
    pk = sealapi.PublicKey()
    sealapi.KeyGenerator(seal, sk).create_public_key(pk)
    pk.save(os.path.join(workdir, "pk"))
    with open(os.path.join(workdir, "pk"), "rb") as fh:
        pk_bytes = fh.read()
    # TenSEAL's context message: field 2 holds the public key, whose field 1 is SEAL's serialized PublicKey
    return _proto_encode([(k, _proto_encode([(kk, pk_bytes if kk == (1 << 3 | 2) else vv) for kk, vv in _proto_fields(v)])
                           if k == (2 << 3 | 2) and isinstance(v, bytes) else v) for k, v in _proto_fields(blob)])


@pytest.fixture
def transparent_bfv_key(tmp_path) -> Callable[..., dict]:
    """``transparent_bfv_key(public_json, secret, contexts=None)``: the BFV key JSON (the ``public.json`` or the
    key's ``to_json()``) with the public key of ``contexts`` (default every one) made from the publicly known secret
    ``secret`` (``"0"``, ``"1"``, ``"1x^5"``): the data user's attack on the owners, as in a crafted ``public.json``."""
    import base64

    def make(public_json: dict, secret: str, contexts=None) -> dict:
        blobs = list(public_json["contexts"])
        for i in range(len(blobs)) if contexts is None else contexts:
            raw = _public_context_of_secret(base64.b64decode(blobs[i]), secret, str(tmp_path))
            blobs[i] = base64.b64encode(raw).decode()
        return {**public_json, "contexts": blobs}
    return make


@pytest.fixture
def owner_signed() -> Callable[..., bytes]:
    """``owner_signed(msg, identity, params, **sections)``: ``msg`` with ``sections`` in place of its own and its
    proof section signed by its owner ``identity`` (an OwnerIdentity): the owner itself sends this proof
    (:func:`dpdpca.protocol.proofs.sign_proof`), so a proof that fails is its own."""
    from dpdpca.protocol.messages import Message
    from dpdpca.protocol.proofs import PROOF_SECTION, PROOF_SIGNATURE, sign_proof

    def sign(msg: Message, identity, params, **sections: bytes) -> bytes:
        sections = dict(msg.sections, **sections)
        sig = sign_proof(identity, params, d=msg.meta["d"], digest=msg.meta["statement"]["ciphertext_sha256"],
                         proof=sections[PROOF_SECTION])
        return Message(msg.type, msg.session, msg.key_fingerprint, msg.sender,
                       dict(msg.meta, **{PROOF_SIGNATURE: sig}), sections).to_bytes()
    return sign


@pytest.fixture
def sent_as() -> Callable[..., bytes]:
    """``sent_as(msg, identity, params, **sections)``: the ciphertexts and proof section of ``msg`` (``sections`` in
    place of its own) sent by ``identity`` in the session of ``params``, under its own share statement and proof
    signature: what any listed owner can make of a proved share it got hold of.  So a refusal is the proof's."""
    from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
    from dpdpca.protocol.messages import Message
    from dpdpca.protocol.proofs import PROOF_SECTION, PROOF_SIGNATURE, sign_proof
    from dpdpca.protocol.releases import as_release

    def send(msg: Message, identity, params, **sections: bytes) -> bytes:
        sections = dict(msg.sections, **sections)
        st = ShareStatement.from_json(msg.meta["statement"])
        digest = ciphertext_digest(sections, as_release(msg.meta["release"]).sections)
        new = ShareStatement.sign(identity, session=params.session_id, key_fingerprint=params.key_fingerprint,
                                  d=st.d, n_rows=st.n_rows, ciphertext_sha256=digest, noise=st.noise)
        meta = dict(msg.meta, owner_id=identity.owner_id, statement=new.to_json(),
                    **{PROOF_SIGNATURE: sign_proof(identity, params, d=st.d, digest=digest,
                                                   proof=sections[PROOF_SECTION])})
        return Message(msg.type, params.session_id, params.key_fingerprint, f"owner:{identity.owner_id}", meta,
                       sections).to_bytes()
    return send
