"""Versioned, typed, integrity-checked protocol messages (no pickle).

Wire format (all integers big-endian)::

    magic     6 bytes  b"DPDPCA"
    version   1 byte   (currently 1)
    type      1 byte   (:class:`MessageType`)
    hlen      4 bytes  length of the JSON header
    header    hlen bytes of UTF-8 JSON: session, key_fingerprint, sender,
              round, meta (public metadata) and the section table
              [[name, length], ...]
    sections  the section bodies, concatenated in table order (serialized
              ``EncryptedArray`` bytes from :mod:`dpdpca.crypto`)
    digest    32 bytes SHA-256 over everything above

The digest detects truncation and corruption; it is not a signature (the
parties share no authentication keys in the paper's model), so a deliberate
attacker who recomputes it is stopped only by the semantic checks: session,
key fingerprint, round, sender and the replay/duplicate rules enforced by the
parties.
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

__all__ = ["MessageType", "Message", "MAGIC", "VERSION", "check_owner_id"]

MAGIC = b"DPDPCA"
VERSION = 1
_PREFIX = struct.Struct(">6sBBI")
_DIGEST = 32
_OWNER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class MessageType(enum.IntEnum):
    """Message types, in protocol order (the value is also the round)."""

    OWNER_SHARE = 1      # owner -> proxy: E[R^l] (packed upper triangle), E[v^l], E[N^l]
    COUNT_REQUEST = 2    # proxy -> user:  E[N]
    COUNT_REPLY = 3      # user -> proxy:  N in the clear
    MASKED_RESULT = 4    # proxy -> user:  E[R''], E[v'] and the privacy report
    PROXY_STATE = 5      # proxy -> itself (file CLI): aggregated E[R], E[v], E[N]


def check_owner_id(owner_id: Any) -> str:
    """An owner id: 1-64 characters of ``[A-Za-z0-9_.:-]`` starting alphanumeric."""
    if not isinstance(owner_id, str) or not _OWNER_ID.match(owner_id):
        raise ProtocolError(f"owner_id must match {_OWNER_ID.pattern}, got {owner_id!r}")
    return owner_id


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

    @property
    def round(self) -> int:
        return int(self.type)

    def to_bytes(self) -> bytes:
        """Serialize; the result ends with a SHA-256 digest of the rest."""
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
        body = b"".join([_PREFIX.pack(MAGIC, VERSION, int(self.type), len(hbytes)), hbytes,
                         *self.sections.values()])
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Message":
        """Parse and check integrity.

        Raises
        ------
        MessageError
            Truncated, tampered (digest mismatch), wrong magic or version,
            unknown type, malformed header or section table.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise MessageError(f"message must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _PREFIX.size + _DIGEST:
            raise MessageError(f"message must be at least {_PREFIX.size + _DIGEST} bytes, got {len(data)} (truncated)")
        body, digest = data[:-_DIGEST], data[-_DIGEST:]
        magic, version, mtype, hlen = _PREFIX.unpack_from(body)
        if magic != MAGIC:
            raise MessageError(f"message magic must be {MAGIC!r}, got {magic!r}")
        if version != VERSION:
            raise MessageError(f"message version must be {VERSION}, got {version}")
        if hashlib.sha256(body).digest() != digest:
            raise MessageError("message digest must match its content, got a mismatch (truncated or tampered)")
        try:
            kind = MessageType(mtype)
        except ValueError:
            raise MessageError(f"message type must be one of {[int(t) for t in MessageType]}, got {mtype}") from None
        start = _PREFIX.size
        if start + hlen > len(body):
            raise MessageError(f"message header length must be <= {len(body) - start}, got {hlen}")
        try:
            header = json.loads(body[start:start + hlen].decode())
            session = str(header["session"])
            fingerprint = str(header["key_fingerprint"])
            sender = str(header["sender"])
            rnd = int(header["round"])
            meta = dict(header["meta"])
            table = [(str(n), int(ln)) for n, ln in header["sections"]]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise MessageError(f"message header must be valid JSON with the required fields, got {type(exc).__name__}") from None
        if rnd != int(kind):
            raise MessageError(f"message round must be {int(kind)} for {kind.name}, got {rnd}")
        pos = start + hlen
        sections: dict[str, bytes] = {}
        for name, length in table:
            if length < 0 or pos + length > len(body) or name in sections:
                raise MessageError(f"message section {name!r} must fit the message, got length {length}")
            sections[name] = body[pos:pos + length]
            pos += length
        if pos != len(body):
            raise MessageError(f"message sections must cover the body exactly, got {len(body) - pos} extra bytes")
        return cls(kind, session, fingerprint, sender, meta, sections)

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
        """An integer from ``meta`` (stored as decimal string for big values)."""
        try:
            value = int(self.meta[name])
        except (KeyError, ValueError, TypeError):
            raise MessageError(f"message {self.type.name} must have integer meta {name!r}, got {self.meta.get(name)!r}") from None
        if minimum is not None and value < minimum:
            raise MessageError(f"message meta {name} must be >= {minimum}, got {value}")
        return value
