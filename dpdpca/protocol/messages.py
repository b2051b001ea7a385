"""Versioned, typed, integrity-checked protocol messages (no pickle).

Wire format (all integers big-endian)::

    magic     6 bytes  b"DPDPCA"
    version   1 byte   (currently 3; version 2 hashed the whole message, so
              an owner's share was hashed twice, version 1 had a count
              round, types 2 and 3)
    type      1 byte   (:class:`MessageType`)
    hlen      4 bytes  length of the JSON header (at most MAX_HEADER_BYTES)
    header    hlen bytes of UTF-8 JSON: session, key_fingerprint, sender,
              round, meta (public metadata) and the section table
              [[name, length], ...]
    sections  the section bodies, concatenated in table order (serialized
              ``EncryptedArray`` bytes from :mod:`dpdpca.crypto`)
    digest    32 bytes SHA-256 over magic, version, type, hlen and header,
              then the sections' digest S (:func:`sections_digest`: SHA-256
              over each section as its name, a zero byte, its length in 8
              bytes and its bytes)

The digest detects truncation and corruption; it is not a signature.  S is
the digest an owner signs over its share's ciphertexts (the statement's
``ciphertext_sha256``, :func:`dpdpca.protocol.counts.ciphertext_digest`), so
the proxy hashes a share's bytes once (:attr:`Message.sections_sha256`).
Authentication is a separate layer: an owner share carries an Ed25519
signature over its session, key fingerprint, owner id, d, row count and the
SHA-256 of its ciphertexts (:mod:`dpdpca.protocol.identity`), checked by the
proxy against its list of owners' verify keys and forwarded to the data user,
who checks it again.  Proxy messages are not signed (there is one proxy, and
what it could forge is discussed in docs/threat-model.md); they are stopped by
the semantic checks: session, key fingerprint, round, sender and the parties'
replay, duplicate and count rules.

Sizes are checked before anything is allocated from them: the header length
against the bytes present and :data:`MAX_HEADER_BYTES`, the session id against
:func:`check_session_id`, every section length against the body.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Mapping

from dpdpca.errors import KeyMismatchError, MessageError, ProtocolError
from dpdpca.protocol.identity import check_owner_id

__all__ = ["MessageType", "Message", "MAGIC", "VERSION", "MAX_HEADER_BYTES", "check_frame", "sections_digest",
           "frame", "check_owner_id",
           "check_session_id", "strict_int", "decimal_int"]

MAGIC = b"DPDPCA"
VERSION = 3
#: Largest JSON header accepted (the owners' signed statements and the privacy report fit easily).
MAX_HEADER_BYTES = 1 << 22
_PREFIX = struct.Struct(">6sBBI")
_DIGEST = 32
_SESSION = re.compile(r"[0-9a-f]{16,64}")
_DECIMAL = re.compile(r"-?[0-9]{1,4000}")


def strict_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """A field that must be a JSON integer: ``4`` is one; ``4.5``, ``4.0``, ``"4"`` and ``true`` are not.

    Raises
    ------
    MessageError
        Not an ``int`` (``bool`` is not one either), or below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageError(f"{name} must be an integer, got {type(value).__name__} {str(value)[:40]!r}")
    if minimum is not None and value < minimum:
        raise MessageError(f"{name} must be >= {minimum}, got {value}")
    return value


def decimal_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """A big integer carried as a decimal string (``"-12"``): ASCII digits only, no sign but ``-``, no spaces.

    Raises
    ------
    MessageError
        Not a string of that form (``" 12"``, ``"1_000"``, ``"+5"``, ``"١٢"`` and ``12`` are refused),
        or below ``minimum``.
    """
    if not isinstance(value, str) or _DECIMAL.fullmatch(value) is None:
        raise MessageError(f"{name} must be a decimal string of ASCII digits, got {type(value).__name__} "
                           f"{str(value)[:40]!r}")
    out = int(value)
    if minimum is not None and out < minimum:
        raise MessageError(f"{name} must be >= {minimum}, got {out}")
    return out


class MessageType(enum.IntEnum):
    """Message types, in protocol order (the value is also the round).

    Values 2 and 3 (version 1's count request and reply) are retired: owners
    now send their row counts in the clear inside their signed shares, so the
    data user never decrypts anything for the proxy.
    """

    OWNER_SHARE = 1      # owner -> proxy: E[R^l] (packed upper triangle), E[v^l], signed N^l
    MASKED_RESULT = 4    # proxy -> user:  E[R''], E[v'], the owners' signed counts, the privacy report
    PROXY_STATE = 5      # proxy -> itself (file CLI): aggregated E[R], E[v] and the signed counts


def check_session_id(session_id: Any) -> str:
    """A session id: 16-64 lowercase hex characters (keygen draws 32 from the OS CSPRNG).

    Raises
    ------
    MessageError
        Not a string of that form (the value is shown truncated to 80 characters).
    """
    if not isinstance(session_id, str) or _SESSION.fullmatch(session_id) is None:
        shown = str(session_id)[:80]
        raise MessageError(f"session id must be 16-64 lowercase hex characters, got {shown!r}"
                           + (f" ({len(session_id)} characters)" if isinstance(session_id, str) else ""))
    return session_id


def sections_digest(sections: Mapping[str, Any]) -> bytes:
    """S: SHA-256 over each section in order as its name (UTF-8), a zero byte, its length in 8 bytes big-endian,
    then its bytes (hashed in place: a ``memoryview`` is not copied)."""
    h = hashlib.sha256()
    for name, body in sections.items():
        view = memoryview(body)
        h.update(name.encode() + b"\0" + view.nbytes.to_bytes(8, "big"))
        h.update(view)
    return h.digest()


def _structure(data: Any, end: int) -> tuple[dict[str, Any], list[tuple[str, int]]] | None:
    """The header and its section table (strictly typed), or None when they do not fit ``data[:end]`` exactly
    (a truncated or cut message: its digest cannot be checked, so the reader says it does not match)."""
    start = _PREFIX.size
    _, _, _, hlen = _PREFIX.unpack_from(data)
    if start + hlen > end or hlen > MAX_HEADER_BYTES:
        return None
    try:
        header = json.loads(bytes(data[start:start + hlen]).decode())
        if not isinstance(header, dict):
            raise MessageError(f"message header must be a JSON object, got {type(header).__name__}")
        if not isinstance(header["sections"], list):
            raise MessageError(f"message sections must be a list, got {type(header['sections']).__name__}")
        table = []
        for entry in header["sections"]:
            if not isinstance(entry, list) or len(entry) != 2:
                raise MessageError(f"message section table entries must be [name, length], got {str(entry)[:60]}")
            table.append((_strict_str("message section name", entry[0]),
                          strict_int("message section length", entry[1])))
    except MessageError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as exc:
        raise MessageError(f"message header must be valid JSON with the required fields, got {type(exc).__name__}") from None
    pos, names = start + hlen, set()
    for name, length in table:
        if name in names:
            raise MessageError(f"message section {name!r} must appear once in the table, got it twice")
        if length < 0 or pos + length > end:
            return None
        names.add(name)
        pos += length
    return (header, table) if pos == end else None


_MISMATCH = "message digest must match its content, got a mismatch (truncated or tampered)"


def _frame_digest(head: Any, sections_sha256: bytes) -> bytes:
    """The digest a message ends with: SHA-256 over its prefix and header (``head``), then S."""
    return hashlib.sha256(bytes(head) + sections_sha256).digest()


def _sections_of(data: Any, hlen: int, table: list[tuple[str, int]]) -> tuple[dict[str, Any], dict[str, int]]:
    """The sections of a message whose section table fits (:func:`_structure`), as slices of ``data``, and where
    each starts."""
    sections: dict[str, Any] = {}
    offsets: dict[str, int] = {}
    pos = _PREFIX.size + hlen
    for name, length in table:
        sections[name] = data[pos:pos + length]
        offsets[name] = pos
        pos += length
    return sections, offsets


def _read_frame(data: bytes) -> tuple[dict[str, Any], dict[str, memoryview], dict[str, int], bytes]:
    """``(header, sections as views of data, their offsets, S)`` of a whole message, its digest checked."""
    if len(data) < _PREFIX.size + _DIGEST:
        raise MessageError(f"message must be at least {_PREFIX.size + _DIGEST} bytes, got {len(data)} (truncated)")
    end = len(data) - _DIGEST
    magic, version, _, hlen = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise MessageError(f"message magic must be {MAGIC!r}, got {magic!r}")
    if version != VERSION:
        raise MessageError(f"message version must be {VERSION}, got {version}")
    structure = _structure(data, end)
    if structure is None:  # no table that fits: the digest, over the header and the sections, cannot match
        raise MessageError(_MISMATCH)
    header, table = structure
    view = memoryview(data).toreadonly()
    sections, offsets = _sections_of(view, hlen, table)
    digest = sections_digest(sections)  # the one pass over the sections' bytes
    if _frame_digest(view[:_PREFIX.size + hlen], digest) != data[end:]:
        raise MessageError(_MISMATCH)
    return header, sections, offsets, digest


def frame(body: bytes) -> bytes:
    """``body`` (a message without its digest) followed by its digest: anyone can compute it, it is no signature.

    A body whose header gives no section table that fits gets 32 zero
    bytes, which no reader gets past (it refuses the structure first).
    """
    try:
        structure = _structure(body, len(body)) if len(body) >= _PREFIX.size else None
    except MessageError:
        structure = None
    if structure is None:
        return bytes(body) + bytes(_DIGEST)
    hlen = _PREFIX.unpack_from(body)[3]
    sections, _ = _sections_of(body, hlen, structure[1])
    return bytes(body) + _frame_digest(body[:_PREFIX.size + hlen], sections_digest(sections))


def check_frame(data: bytes, source: str | None = None) -> None:
    """Refuse bytes that are no whole message: too short, another magic or version, a malformed header or
    section table, or a digest mismatch.

    :meth:`Message.from_bytes` checks this first; a command that reads a
    message from a file checks it as it reads, with ``source`` naming the
    file (``"share file 'a.msg'"``), so that a garbage or truncated file is
    refused naming it.

    Raises
    ------
    MessageError
        ``message magic must be b'DPDPCA', got ...`` (etc.); with ``source``:
        ``<source> must be a dpdpca message, got: message magic must be ...``.
    """
    try:
        _read_frame(data)
    except MessageError as exc:
        if source is None:
            raise
        raise MessageError(f"{source} must be a dpdpca message, got: {exc}") from None


@dataclass(frozen=True)
class Message:
    """One protocol message: typed header, public metadata and binary sections.

    Parameters
    ----------
    type : MessageType
    session : str
        Hex session id from the public parameters; a message of another
        session is a replay.
    key_fingerprint : str
        Fingerprint of the public key every ciphertext is under.
    sender : str
        ``"owner:<id>"``, ``"proxy"`` or ``"user"``.
    meta : dict
        JSON-serializable public metadata (declared bounds, ``d``, ``N``...).
    sections : dict of str to bytes
        Binary bodies, e.g. serialized encrypted arrays.
    """

    type: MessageType
    session: str
    key_fingerprint: str
    sender: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    sections: Mapping[str, bytes] = field(default_factory=dict)
    #: Where each section starts in the bytes :meth:`from_bytes` parsed (empty for a message built here).
    offsets: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)
    #: Hex S (:func:`sections_digest`) of the bytes :meth:`from_bytes` parsed ("" for a message built here).
    sections_sha256: str = field(default="", compare=False, repr=False)

    @property
    def round(self) -> int:
        return int(self.type)

    def to_bytes(self, *, sections_sha256: str | None = None) -> bytes:
        """Serialize; the result ends with its digest (over the header and the sections' digest: module docstring).

        ``sections_sha256``: S of these sections, hex, when the caller has it
        (an owner signed it: :func:`~dpdpca.protocol.counts.ciphertext_digest`
        of the same sections in the same order), so they are not hashed again.
        A wrong one makes a message every reader refuses.
        """
        table = [[name, len(body)] for name, body in self.sections.items()]
        header = {
            "session": self.session,
            "key_fingerprint": self.key_fingerprint,
            "sender": self.sender,
            "round": self.round,
            "meta": dict(self.meta),
            "sections": table,
        }
        hbytes = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        head = _PREFIX.pack(MAGIC, VERSION, int(self.type), len(hbytes)) + hbytes
        known = bytes.fromhex(sections_sha256) if sections_sha256 else sections_digest(self.sections)
        digest = _frame_digest(head, known)
        return b"".join([head, *self.sections.values(), digest])

    @classmethod
    def from_bytes(cls, data: bytes, *, views: bool = False) -> "Message":
        """Parse and check integrity.

        ``views=True``: each section is a read-only ``memoryview`` of
        ``data`` instead of a copy (the proxy's intake, which parses a share
        once and reads its sections in place: a BFV share's 394 kB would
        otherwise be copied into fresh memory while the GIL is held).

        Raises
        ------
        MessageError
            Truncated, tampered (digest mismatch), wrong magic or version,
            unknown type, malformed header or section table.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise MessageError(f"message must be bytes, got {type(data).__name__}")
        data = bytes(data)
        header, views_, offsets, digest = _read_frame(data)
        mtype = _PREFIX.unpack_from(data)[2]
        try:
            kind = MessageType(mtype)
        except ValueError:
            raise MessageError(f"message type must be one of {[int(t) for t in MessageType]}, got {mtype}") from None
        try:
            session = check_session_id(header["session"])
            fingerprint = _strict_str("message key_fingerprint", header["key_fingerprint"])
            sender = _strict_str("message sender", header["sender"])
            rnd = strict_int("message round", header["round"])
            meta = header["meta"]
            if not isinstance(meta, dict):
                raise MessageError(f"message meta must be a JSON object, got {type(meta).__name__}")
        except MessageError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise MessageError(f"message header must be valid JSON with the required fields, got {type(exc).__name__}") from None
        if rnd != int(kind):
            raise MessageError(f"message round must be {int(kind)} for {kind.name}, got {rnd}")
        sections: dict[str, Any] = (dict(views_) if views
                                    else {name: data[offsets[name]:offsets[name] + len(v)] for name, v in views_.items()})
        return cls(kind, session, fingerprint, sender, meta, sections, offsets, digest.hex())

    def expect(self, kind: MessageType, *, session: str, key_fingerprint: str) -> "Message":
        """Check type, session and key; return self.

        Raises
        ------
        ProtocolError
            Wrong type (a round out of order) or another session (a replay).
        KeyMismatchError
            Made under another public key.
        """
        if self.key_fingerprint != key_fingerprint:
            raise KeyMismatchError(f"message key_fingerprint must be {key_fingerprint}, got {self.key_fingerprint}")
        if self.type != kind:
            raise ProtocolError(f"message type must be {kind.name} at this round, got {self.type.name}")
        if self.session != session:
            raise ProtocolError(f"message session must be {session}, got {self.session} (replayed from another session)")
        return self

    def section(self, name: str) -> bytes:
        try:
            return self.sections[name]
        except KeyError:
            raise MessageError(f"message {self.type.name} must have section {name!r}, got {sorted(self.sections)}") from None

    def meta_int(self, name: str, *, minimum: int | None = None) -> int:
        """An integer field of ``meta``: a JSON integer, strictly (:func:`strict_int`; ``4.5``, ``"4"``, ``true`` are refused).

        Raises
        ------
        MessageError
            Missing, not an integer, or below ``minimum``.
        """
        if name not in self.meta:
            raise MessageError(f"message {self.type.name} must have integer meta {name!r}, got none")
        return strict_int(f"message {self.type.name} meta {name}", self.meta[name], minimum=minimum)

    def meta_decimal(self, name: str, *, minimum: int | None = None) -> int:
        """A big integer field of ``meta`` carried as a decimal string (:func:`decimal_int`), e.g. ``N``.

        Raises
        ------
        MessageError
            Missing, not a decimal string, or below ``minimum``.
        """
        if name not in self.meta:
            raise MessageError(f"message {self.type.name} must have decimal meta {name!r}, got none")
        return decimal_int(f"message {self.type.name} meta {name}", self.meta[name], minimum=minimum)


def _strict_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise MessageError(f"{name} must be a string, got {type(value).__name__}")
    return value
