"""Signed HTTP requests, with the parties' Ed25519 keys of :mod:`dpdpca.protocol.identity`.

Every request to the proxy service names its party (``owner:<id>`` or
``user``) in ``X-Dpdpca-Party`` and carries, in ``X-Dpdpca-Signature``
(hex), that party's Ed25519 signature over the statement
(:func:`dpdpca.protocol.identity.statement_bytes`)::

    domain "dpdpca-http-request/2",
    fields {method, path, party, time, body_length, body_sha256}

with ``time`` the unix seconds of ``X-Dpdpca-Time``, ``body_length`` the
request's ``Content-Length`` (0 without a body) and ``body_sha256`` the hex
SHA-256 of the body in ``X-Dpdpca-Body-Sha256``.  Everything signed travels
in the headers, so the proxy checks party, time, token *and* signature
(:meth:`PartyKeys.authenticate_headers`) before it reads a byte of the body:
a stranger's body is refused after its headers.  The body is then read up to
the signed length only and must match the signed digest.  The domain keeps a
request signature from ever verifying as a share statement and vice versa
(version 1 signed the digest of a body it had already read).

* An owner signs with the same :class:`~dpdpca.protocol.identity.OwnerIdentity`
  that signs its share (``dpdpca owner keygen``); the proxy checks it against
  the owners' verify keys (an :class:`~dpdpca.protocol.identity.OwnerKeyring`).
* The data user has an identity of the same kind under the id ``user``
  (``dpdpca user identity``); the proxy lists its verify key separately, so
  an owner called ``user`` is still only ``owner:user``.

A per-party bearer token (``Authorization: Bearer ...``) may be required on
top.  The time bounds how long a captured request can be replayed
(:data:`MAX_SKEW_S`); a replay within that window changes nothing, because
every POST of the service is idempotent and every GET is read-only.

This authenticates the *transport*: who is talking to the proxy.  The
share's own signed statement is still checked by the proxy party.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass

from dpdpca.errors import AuthenticationError, DpdpcaError, ParameterError
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring, statement_bytes

__all__ = ["MAX_SKEW_S", "PARTY_HEADER", "SIGNATURE_HEADER", "TIME_HEADER", "BODY_SHA256_HEADER", "USER",
           "AuthError", "PartyKeys", "SignedRequest", "party_of", "sign_headers", "request_statement"]

PARTY_HEADER = "x-dpdpca-party"
TIME_HEADER = "x-dpdpca-time"
SIGNATURE_HEADER = "x-dpdpca-signature"
BODY_SHA256_HEADER = "x-dpdpca-body-sha256"
#: The data user's party name (and the id inside its identity file).
USER = "user"
#: Largest accepted difference between a request's time and the proxy's clock.
MAX_SKEW_S = 300
_DOMAIN = "dpdpca-http-request/2"
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class AuthError(DpdpcaError, PermissionError):
    """A request's party, token or signature is missing, unknown or wrong.

    ``status`` is the HTTP status the service answers with (401 or 403).
    """

    def __init__(self, message: str, *, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


def party_of(identity: OwnerIdentity, *, user: bool = False) -> str:
    """``"owner:<id>"`` for an owner's identity, ``"user"`` for the data user's."""
    if user:
        if identity.owner_id != USER:
            raise ParameterError(f"the data user's identity must have id {USER!r}, got {identity.owner_id!r}")
        return USER
    return f"owner:{identity.owner_id}"


def request_statement(method: str, path: str, party: str, timestamp: str, body_length: int,
                      body_sha256: str) -> bytes:
    """The exact bytes a request signature covers."""
    return statement_bytes(_DOMAIN, {"method": method.upper(), "path": path, "party": party, "time": timestamp,
                                     "body_length": int(body_length), "body_sha256": body_sha256})


@dataclass(frozen=True)
class SignedRequest:
    """A request whose headers were authenticated: its party and the body it promised (length, SHA-256 hex)."""

    party: str
    body_length: int
    body_sha256: str


def sign_headers(identity: OwnerIdentity, party: str, method: str, path: str, body: bytes, *,
                 token: str | None = None, now: float | None = None) -> dict[str, str]:
    """The headers that authenticate one request of ``party`` (signed by ``identity``).

    The client sends ``body`` with exactly ``len(body)`` as ``Content-Length``
    (httpx does); the signature covers that length and the body's SHA-256.
    """
    ts = str(int(time.time() if now is None else now))
    digest = hashlib.sha256(body).hexdigest()
    sig = identity.sign(request_statement(method, path, party, ts, len(body), digest))
    headers = {PARTY_HEADER: party, TIME_HEADER: ts, SIGNATURE_HEADER: sig.hex(), BODY_SHA256_HEADER: digest}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return headers


class PartyKeys:
    """The proxy's table of known parties: verify keys and optional bearer tokens.

    Parameters
    ----------
    owners : OwnerKeyring
        The owners allowed to send a share.
    user : OwnerKeyring
        The data user's verify key, under the id ``"user"``.
    tokens : mapping of party to token, optional
        Parties that must also present ``Authorization: Bearer <token>``.
    """

    def __init__(self, owners: OwnerKeyring, user: OwnerKeyring,
                 tokens: Mapping[str, str] | None = None) -> None:
        if list(user) != [USER]:
            raise ParameterError(f"the user's verify keys must list exactly the id {USER!r}, got {sorted(user)}")
        self.owners = owners
        self.user = user
        self.tokens = dict(tokens or {})
        for party in self.tokens:
            if party not in self:
                raise ParameterError(f"token party must be a known party, got {party!r}")

    def __contains__(self, party: object) -> bool:
        if party == USER:
            return True
        return isinstance(party, str) and party.startswith("owner:") and party[len("owner:"):] in self.owners

    def authenticate_headers(self, headers: Mapping[str, str], method: str, path: str, *,
                             now: float | None = None) -> SignedRequest:
        """Check party, time, token and the signature from the headers alone, before any body is read.

        Raises
        ------
        AuthError
            Missing or unknown party, stale time, missing or wrong token,
            a body length or digest that is not well formed, a missing,
            malformed or wrong signature (401).
        """
        party = headers.get(PARTY_HEADER)
        if party is None or party not in self:
            raise AuthError(f"party must be one the proxy knows, got {str(party)[:80]!r}")
        try:
            ts = int(headers.get(TIME_HEADER, ""))
        except ValueError:
            raise AuthError(f"{TIME_HEADER} must be integer unix seconds, got {str(headers.get(TIME_HEADER))[:40]!r}") \
                from None
        skew = abs((time.time() if now is None else now) - ts)
        if skew > MAX_SKEW_S:
            raise AuthError(f"request time must be within {MAX_SKEW_S} s of the proxy's clock, got {skew:.0f} s off")
        token = self.tokens.get(party)
        if token is not None:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                raise AuthError(f"bearer token of {party} must match, got a missing or wrong token")
        declared = headers.get("content-length", "0")
        if not (declared.isdigit() and len(declared) <= 12):
            raise AuthError(f"content-length must be a decimal byte count, got {declared[:20]!r}")
        length = int(declared)
        digest = headers.get(BODY_SHA256_HEADER, _EMPTY_SHA256 if length == 0 else "")
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise AuthError(f"{BODY_SHA256_HEADER} must be the body's SHA-256 in lower-case hex, got {digest[:80]!r}")
        try:
            sig = bytes.fromhex(headers.get(SIGNATURE_HEADER, ""))
        except ValueError:
            sig = b""
        data = request_statement(method, path, party, str(ts), length, digest)
        ring, signer = (self.user, USER) if party == USER else (self.owners, party[len("owner:"):])
        try:
            ring.verify(signer, data, sig)
        except AuthenticationError as exc:
            raise AuthError(f"request signature of {party} must verify, got: {exc}") from None
        return SignedRequest(party, length, digest)
