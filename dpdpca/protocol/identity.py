"""Owner identities: Ed25519 signing keys and the verify-key list (PyNaCl).

Wang & Chang's parties share no authentication keys, so in the paper anyone
who can reach the proxy can send a share under any owner id.  Here every data
owner holds an Ed25519 signing key; the proxy and the data user are configured
with the owners' verify keys (an :class:`OwnerKeyring`) and refuse a share
that is unsigned, signed by a key they do not list, or whose signature does
not cover exactly what it claims.

What is signed is a *statement*: a domain string and a small mapping of
public fields, serialized canonically by :func:`statement_bytes`.  Protocol
code decides which fields a statement has (the owner share signs the
session, the key fingerprint, its owner id, d, its row count N_l and the
SHA-256 of its ciphertexts, so a share replayed under another id, in another
session or with another count fails to verify).

Files
-----
* identity file (mode 0600, written by :meth:`OwnerIdentity.save`)::

      {"dpdpca_owner_identity": {"version": 1, "owner_id": "alice",
                                 "signing_key": "<base64url 32-byte seed>",
                                 "verify_key": "<base64url 32 bytes>"}}

* verify-key file (public; one or more owners, written by
  :meth:`OwnerKeyring.save`)::

      {"dpdpca_owner_keys": {"version": 1, "keys": {"alice": "<base64url 32 bytes>"}}}

No error message ever contains any part of a signing key.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from typing import Any, Iterable, Iterator, Mapping

import nacl.exceptions
import nacl.signing

from dpdpca._io import atomic_write_json, read_json_file
from dpdpca.errors import AuthenticationError, MessageError, ProtocolError

__all__ = ["OwnerIdentity", "OwnerKeyring", "statement_bytes", "check_owner_id", "b64url", "unb64url", "SIGNATURE_BYTES",
           "IDENTITY_KEY", "KEYRING_KEY"]

#: Length of an Ed25519 signature.
SIGNATURE_BYTES = 64
IDENTITY_KEY = "dpdpca_owner_identity"
KEYRING_KEY = "dpdpca_owner_keys"
_OWNER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
_KEY_BYTES = 32


def check_owner_id(owner_id: Any) -> str:
    """An owner id: 1-64 characters of ``[A-Za-z0-9_.:-]`` starting alphanumeric (whole string).

    Raises
    ------
    ProtocolError
        Not a string, or not matching in full (a trailing newline is refused).
    """
    if not isinstance(owner_id, str) or _OWNER_ID.fullmatch(owner_id) is None:
        shown = owner_id if not isinstance(owner_id, str) else owner_id[:80]
        raise ProtocolError(f"owner_id must match {_OWNER_ID.pattern} in full, got {shown!r}")
    return owner_id


def b64url(raw: bytes) -> str:
    """``raw`` as unpadded base64url: how signatures and keys travel in JSON."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unb64url(text: str) -> bytes | None:
    """The bytes of unpadded base64url ``text`` (:func:`b64url`), or None if it is not base64url."""
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def _unb64_public(name: str, text: Any, length: int) -> bytes:
    """Decode a public base64url field of exactly ``length`` bytes (the value may be echoed: it is public)."""
    if not isinstance(text, str) or len(text) > 4 * length:
        raise MessageError(f"{name} must be a base64url string of {length} bytes, got {type(text).__name__}")
    raw = unb64url(text)
    if raw is None:
        raise MessageError(f"{name} must be base64url, got {text!r}")
    if len(raw) != length:
        raise MessageError(f"{name} must decode to {length} bytes, got {len(raw)}")
    return raw


def statement_bytes(domain: str, fields: Mapping[str, str | int]) -> bytes:
    """Canonical bytes of a signed statement: ``domain``, a NUL, sorted compact JSON of ``fields``.

    The domain separates statements of different kinds (a signature on one
    can never verify as another).  Values must be strings or integers.
    """
    if not isinstance(domain, str) or not domain or "\0" in domain:
        raise ProtocolError(f"statement domain must be a non-empty string without NUL, got {domain!r}")
    for key, value in fields.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ProtocolError(f"statement field {key!r} must be a string or an integer, got {type(value).__name__}")
    body = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return domain.encode() + b"\0" + body.encode()


class OwnerIdentity:
    """One owner's Ed25519 signing key and its owner id.

    Parameters
    ----------
    owner_id : str
        See :func:`check_owner_id`.
    signing_key : nacl.signing.SigningKey

    Examples
    --------
    >>> alice = OwnerIdentity.generate("alice")
    >>> ring = OwnerKeyring.from_identities([alice])
    >>> sig = alice.sign(statement_bytes("example", {"n": 3}))
    >>> ring.verify("alice", statement_bytes("example", {"n": 3}), sig)
    >>> ring.verify("alice", statement_bytes("example", {"n": 4}), sig)
    Traceback (most recent call last):
    ...
    dpdpca.errors.AuthenticationError: signature of owner 'alice' must verify under its listed key, got a mismatch
    """

    __slots__ = ("owner_id", "_signing_key")

    def __init__(self, owner_id: str, signing_key: nacl.signing.SigningKey) -> None:
        self.owner_id = check_owner_id(owner_id)
        if not isinstance(signing_key, nacl.signing.SigningKey):
            raise ProtocolError(f"signing_key must be a nacl.signing.SigningKey, got {type(signing_key).__name__}")
        self._signing_key = signing_key

    def __repr__(self) -> str:  # never shows the key
        return f"OwnerIdentity({self.owner_id!r}, verify_key={self.verify_key_b64!r})"

    @classmethod
    def generate(cls, owner_id: str) -> "OwnerIdentity":
        """A fresh key from the OS CSPRNG (libsodium's ``randombytes``)."""
        return cls(owner_id, nacl.signing.SigningKey.generate())

    @property
    def verify_key(self) -> nacl.signing.VerifyKey:
        return self._signing_key.verify_key

    @property
    def verify_key_b64(self) -> str:
        """The public verify key, base64url without padding."""
        return b64url(bytes(self._signing_key.verify_key))

    def sign(self, message: bytes) -> bytes:
        """The 64-byte detached Ed25519 signature of ``message`` (use :func:`statement_bytes`)."""
        return bytes(self._signing_key.sign(bytes(message)).signature)

    # -- files --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The identity file's content (holds the secret seed: write it with mode 0600)."""
        return {IDENTITY_KEY: {"version": 1, "owner_id": self.owner_id,
                               "signing_key": b64url(bytes(self._signing_key)),
                               "verify_key": self.verify_key_b64}}

    @classmethod
    def from_json(cls, data: Any) -> "OwnerIdentity":
        """Inverse of :meth:`to_json`; the stored verify key must match the seed.

        Raises
        ------
        MessageError
            Missing or malformed fields; the message never quotes the seed.
        """
        if not isinstance(data, Mapping) or not isinstance(data.get(IDENTITY_KEY), Mapping):
            raise MessageError(f"owner identity must be an object with {IDENTITY_KEY!r}, got "
                               f"{type(data).__name__ if not isinstance(data, Mapping) else sorted(map(str, data))[:8]}")
        obj = data[IDENTITY_KEY]
        if obj.get("version") != 1:
            raise MessageError(f"{IDENTITY_KEY}.version must be 1, got {obj.get('version')!r:.20}")
        seed_text = obj.get("signing_key")
        if not isinstance(seed_text, str):
            raise MessageError(f"{IDENTITY_KEY}.signing_key must be a base64url string, got {type(seed_text).__name__}")
        seed = unb64url(seed_text)
        if seed is None:
            raise MessageError(f"{IDENTITY_KEY}.signing_key must be base64url, got a malformed value "
                               f"of {len(seed_text)} characters")
        if len(seed) != _KEY_BYTES:
            raise MessageError(f"{IDENTITY_KEY}.signing_key must decode to {_KEY_BYTES} bytes, got {len(seed)}")
        ident = cls(check_owner_id(obj.get("owner_id")), nacl.signing.SigningKey(seed))
        if obj.get("verify_key") != ident.verify_key_b64:
            raise MessageError(f"{IDENTITY_KEY}.verify_key must be the signing key's verify key, got a mismatch")
        return ident

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Write the identity file with mode 0600; refuse an existing file unless ``overwrite``.

        Raises
        ------
        FileAccessError
            The file exists (and ``overwrite`` is False) or cannot be written.
        """
        atomic_write_json(path, self.to_json(), mode=0o600, exclusive=not overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "OwnerIdentity":
        """Read an identity file (see :meth:`from_json`)."""
        return cls.from_json(read_json_file(path, "owner identity"))


class OwnerKeyring(Mapping[str, str]):
    """The owners' verify keys: owner id -> base64url Ed25519 verify key.

    The proxy's and the data user's configuration.  A read-only mapping.

    Parameters
    ----------
    keys : mapping of str to str
        Owner id -> base64url verify key (32 bytes).
    """

    def __init__(self, keys: Mapping[str, str]) -> None:
        self._keys: dict[str, str] = {}
        self._verify: dict[str, nacl.signing.VerifyKey] = {}
        if not isinstance(keys, Mapping):
            raise MessageError(f"owner keys must be a mapping of owner id to verify key, got {type(keys).__name__}")
        for owner, text in keys.items():
            oid = check_owner_id(owner)
            raw = _unb64_public(f"verify key of owner {oid!r}", text, _KEY_BYTES)
            try:
                self._verify[oid] = nacl.signing.VerifyKey(raw)
            except (nacl.exceptions.CryptoError, ValueError, TypeError):
                raise MessageError(f"verify key of owner {oid!r} must be an Ed25519 public key, got {text!r}") \
                    from None
            self._keys[oid] = b64url(raw)

    def __getitem__(self, owner_id: str) -> str:
        return self._keys[owner_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"OwnerKeyring({sorted(self._keys)})"

    @classmethod
    def from_identities(cls, identities: Iterable[OwnerIdentity]) -> "OwnerKeyring":
        """The keyring listing these identities' verify keys (ids must be distinct)."""
        return cls.merge([cls({i.owner_id: i.verify_key_b64}) for i in identities])

    @classmethod
    def merge(cls, rings: Iterable["OwnerKeyring"]) -> "OwnerKeyring":
        """One keyring from several; the same id with two different keys is refused.

        Raises
        ------
        ProtocolError
            An owner id listed with two different keys.
        """
        out: dict[str, str] = {}
        for ring in rings:
            for oid, key in ring.items():
                if out.get(oid, key) != key:
                    raise ProtocolError(f"owner id {oid!r} must have one verify key, got two different keys")
                out[oid] = key
        return cls(out)

    def verify(self, owner_id: str, message: bytes, signature: bytes) -> None:
        """Check an owner's detached signature of ``message``.

        Raises
        ------
        AuthenticationError
            Unknown owner, a signature of the wrong length, or one that does not verify.
        """
        key = self._verify.get(owner_id) if isinstance(owner_id, str) else None
        if key is None:
            raise AuthenticationError(f"signer must be a listed owner {sorted(self._keys)[:20]}, got {owner_id!r:.80}")
        if not isinstance(signature, (bytes, bytearray)) or len(signature) != SIGNATURE_BYTES:
            raise AuthenticationError(f"signature of owner {owner_id!r} must be {SIGNATURE_BYTES} bytes, got "
                                      f"{len(signature) if isinstance(signature, (bytes, bytearray)) else 'none'}")
        try:
            key.verify(bytes(message), bytes(signature))
        except nacl.exceptions.BadSignatureError:
            raise AuthenticationError(f"signature of owner {owner_id!r} must verify under its listed key, "
                                      f"got a mismatch") from None

    # -- files --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {KEYRING_KEY: {"version": 1, "keys": dict(sorted(self._keys.items()))}}

    @classmethod
    def from_json(cls, data: Any, *, what: str = "owner verify keys") -> "OwnerKeyring":
        """Inverse of :meth:`to_json`; ``what`` names the source in errors (:meth:`load`: the file).

        Raises
        ------
        MessageError
            Not a verify-key file (saying which part is wrong), or a malformed key.
        """
        if not isinstance(data, Mapping) or not isinstance(data.get(KEYRING_KEY), Mapping):
            raise MessageError(f"{what} must be an object with {KEYRING_KEY!r}, got "
                               f"{type(data).__name__ if not isinstance(data, Mapping) else sorted(map(str, data))[:8]}")
        obj = data[KEYRING_KEY]
        if obj.get("version") != 1:
            raise MessageError(f"{what} must have {KEYRING_KEY}.version 1, got {obj.get('version')!r:.20}")
        if not isinstance(obj.get("keys"), Mapping):
            keys = obj.get("keys")
            raise MessageError(f"{what} must have {KEYRING_KEY}.keys an object of owner id to verify key, got "
                               f"{'no keys' if keys is None else 'a ' + type(keys).__name__}")
        return cls(obj["keys"])

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Write the (public) verify-key file; refuse an existing file unless ``overwrite``."""
        atomic_write_json(path, self.to_json(), exclusive=not overwrite)

    @classmethod
    def load(cls, paths: Iterable[str | os.PathLike[str]]) -> "OwnerKeyring":
        """Merge one or more verify-key files (see :meth:`merge`).

        Raises
        ------
        MessageError, FileAccessError, ProtocolError
            No file given, a file that is not a verify-key file, or conflicting keys.
        """
        rings = [cls.from_json(read_json_file(p, "owner verify keys"), what=f"owner verify keys file {str(p)!r}")
                 for p in paths]
        if not rings:
            raise MessageError("owner verify keys must be given (at least one file), got none")
        return cls.merge(rings)
