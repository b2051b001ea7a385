"""Signed HTTP requests, with the parties' Ed25519 keys of :mod:`dpdpca.protocol.identity`.

Every request to the proxy service names its party (``owner:<id>`` or
``user``) in ``X-Dpdpca-Party`` and carries, in ``X-Dpdpca-Signature``
(hex), that party's Ed25519 signature over the statement
(:func:`dpdpca.protocol.identity.statement_bytes`)::

    domain "dpdpca-http-request/1", fields {method, path, party, time, body_sha256}

with ``time`` the unix seconds of ``X-Dpdpca-Time``.  The domain keeps a
request signature from ever verifying as a share statement and vice versa.

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

from dpdpca.errors import AuthenticationError, DpdpcaError, ParameterError
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring, statement_bytes

__all__ = ["MAX_SKEW_S", "PARTY_HEADER", "SIGNATURE_HEADER", "TIME_HEADER", "USER", "AuthError", "PartyKeys",
           "party_of", "sign_headers", "request_statement"]

PARTY_HEADER = "x-dpdpca-party"
TIME_HEADER = "x-dpdpca-time"
SIGNATURE_HEADER = "x-dpdpca-signature"
#: The data user's party name (and the id inside its identity file).
USER = "user"
#: Largest accepted difference between a request's time and the proxy's clock.
MAX_SKEW_S = 300
_DOMAIN = "dpdpca-http-request/1"


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


def request_statement(method: str, path: str, party: str, timestamp: str, body: bytes | str) -> bytes:
    """The exact bytes a request signature covers; ``body`` may be its SHA-256 hex digest."""
    digest = body if isinstance(body, str) else hashlib.sha256(body).hexdigest()
    return statement_bytes(_DOMAIN, {"method": method.upper(), "path": path, "party": party, "time": timestamp,
                                     "body_sha256": digest})


def sign_headers(identity: OwnerIdentity, party: str, method: str, path: str, body: bytes, *,
                 token: str | None = None, now: float | None = None) -> dict[str, str]:
    """The headers that authenticate one request of ``party`` (signed by ``identity``)."""
    ts = str(int(time.time() if now is None else now))
    sig = identity.sign(request_statement(method, path, party, ts, body))
    headers = {PARTY_HEADER: party, TIME_HEADER: ts, SIGNATURE_HEADER: sig.hex()}
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

    def authenticate_headers(self, headers: Mapping[str, str], *, now: float | None = None) -> str:
        """Check party, time and token before the body is read; return the party.

        Raises
        ------
        AuthError
            Missing or unknown party, stale time, missing or wrong token (401).
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
        return party

    def verify_signature(self, headers: Mapping[str, str], method: str, path: str, body_sha256: str) -> None:
        """Check the Ed25519 signature over the request (after the body was hashed).

        Raises
        ------
        AuthError
            Missing, malformed or wrong signature (401).
        """
        party = str(headers.get(PARTY_HEADER))
        try:
            sig = bytes.fromhex(headers.get(SIGNATURE_HEADER, ""))
        except ValueError:
            sig = b""
        data = request_statement(method, path, party, str(headers.get(TIME_HEADER)), body_sha256)
        ring, signer = (self.user, USER) if party == USER else (self.owners, party[len("owner:"):])
        try:
            ring.verify(signer, data, sig)
        except AuthenticationError as exc:
            raise AuthError(f"request signature of {party} must verify, got: {exc}") from None
