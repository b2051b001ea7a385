"""The owners' and the data user's side of the proxy service (httpx).

:class:`ProxyClient` signs every request with the party's
:class:`~dpdpca.protocol.identity.OwnerIdentity` (the data user's has the id
``user``), verifies the server against a CA file
(TLS), and retries on connection errors and 503: every POST of the service is
idempotent, so a retry after a lost answer is safe.  :func:`upload_shares`
sends many owners' shares concurrently over one connection pool (the
benchmark and the concurrency test).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dpdpca.errors import ParameterError, ProtocolError
from dpdpca.net import require
from dpdpca.net.app import OCTET
from dpdpca.net.auth import sign_headers
from dpdpca.protocol.identity import OwnerIdentity
from dpdpca.protocol.roles import PROXY, USER
from dpdpca.protocol.transport import CountingTransport

__all__ = ["public_session", "ProxyClient", "ProxyRefused", "ServiceTransport", "check_proxy_url", "tls_context", "upload_shares"]

_RETRY_CODES = {502, 503, 504}


class ProxyRefused(ProtocolError):
    """The proxy answered with an error status; ``code`` and ``status`` say which."""

    def __init__(self, message: str, *, code: int, status: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def check_proxy_url(url: str, *, allow_http: bool = False) -> str:
    """``https://HOST:PORT`` (``http://`` only when ``allow_http``), without a trailing slash.

    Raises
    ------
    ParameterError
        Another scheme, no host, a port outside 1-65535, a query or fragment,
        or user information in the URL (never echoed: it may hold a password).
    """
    from urllib.parse import urlsplit

    if not isinstance(url, str):
        raise ParameterError(f"proxy must be an https://HOST:PORT URL, got {type(url).__name__}")
    schemes = ("https", "http") if allow_http else ("https",)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ParameterError(f"proxy must be an https://HOST:PORT URL with a port in 1-65535, got {url!r:.200}") \
            from None
    if parts.username is not None or parts.password is not None:
        raise ParameterError("proxy must be an https://HOST:PORT URL without user information, got a URL with "
                             "some (use --token for a credential)")
    if parts.scheme not in schemes or not parts.hostname or parts.query or parts.fragment or port == 0:
        raise ParameterError(f"proxy must be an https://HOST:PORT URL, got {url!r:.200}")
    return url.rstrip("/")


def tls_context(ca_cert: str | Path | None) -> ssl.SSLContext:
    """A client TLS context trusting ``ca_cert`` (PEM), or the system's CAs when None."""
    if ca_cert is not None and not Path(ca_cert).is_file():
        raise ParameterError(f"ca_cert must be an existing PEM file, got {str(ca_cert)!r}")
    try:
        return ssl.create_default_context(cafile=None if ca_cert is None else str(ca_cert))
    except (ssl.SSLError, OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"ca_cert must be a PEM file of CA certificates, got {str(ca_cert)!r} "
                             f"({type(exc).__name__})") from None


def _refusal(response: Any, what: str) -> ProxyRefused:
    try:
        info = response.json()
        status, detail = str(info.get("status")), str(info.get("detail"))
    except ValueError:
        status, detail = "error", response.text[:200]
    return ProxyRefused(f"proxy must accept {what}, got {response.status_code} {status}: {detail}",
                        code=response.status_code, status=status)


def public_session(base_url: str, *, ca_cert: str | Path | None = None, timeout_s: float = 30.0,
                   client: Any = None) -> dict[str, Any]:
    """The service's read-only session summary (``GET /v1/session``, no credential): ``dpdpca proxy status``.

    Raises
    ------
    ProxyRefused
        The proxy answered with an error, or could not be reached.
    """
    httpx = require("httpx")
    own = client is None
    if own:
        client = httpx.Client(base_url=check_proxy_url(base_url), verify=tls_context(ca_cert), timeout=timeout_s)
    try:
        try:
            response = client.get("/v1/session")
        except httpx.HTTPError as exc:
            raise ProxyRefused(f"proxy must be reachable at {base_url!r:.200}, got {type(exc).__name__}: "
                               f"{' '.join(str(exc).split())[:200]}", code=0, status="unreachable") from None
        if response.status_code != 200:
            raise _refusal(response, "a status request")
        return dict(response.json())
    finally:
        if own:
            client.close()


class ProxyClient:
    """One party talking to the proxy service.

    Parameters
    ----------
    base_url : str
        ``https://HOST:PORT``.
    identity : OwnerIdentity
        This party's signing key (an owner's, or the data user's with id ``"user"``).
    party : str
        ``"owner:<id>"`` or ``"user"`` (:func:`dpdpca.net.auth.party_of`).
    token : str or None
        Bearer token, when the proxy requires one for this party.
    ca_cert : path or None
        PEM file of the CA that signed the proxy's certificate.
    retries : int
        Attempts after the first on connection errors and 502/503/504.
    client : httpx.Client or None
        Use this client instead (e.g. Starlette's in-process ``TestClient``).
    """

    def __init__(self, base_url: str, identity: OwnerIdentity, party: str, *, token: str | None = None,
                 ca_cert: str | Path | None = None, timeout_s: float = 120.0, retries: int = 5,
                 backoff_s: float = 0.2, client: Any = None, allow_http: bool = False) -> None:
        self.identity = identity
        self.party = party
        self.token = token
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        if client is None:
            httpx = require("httpx")
            self.base_url = check_proxy_url(base_url, allow_http=allow_http)
            client = httpx.Client(base_url=self.base_url, verify=tls_context(ca_cert), timeout=timeout_s)
        else:
            self.base_url = base_url.rstrip("/")
        self._http = client

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ProxyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, body: bytes = b"") -> Any:
        """A signed request, retried on connection errors and 502/503/504; the httpx response."""
        httpx = require("httpx")
        for attempt in range(self.retries + 1):
            headers = sign_headers(self.identity, self.party, method, path, body, token=self.token)
            if body:
                headers["content-type"] = OCTET
            try:
                response = self._http.request(method, path, content=body, headers=headers)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise ProtocolError(f"proxy at {self.base_url} must be reachable, got {type(exc).__name__}: "
                                        f"{exc}") from None
            else:
                if response.status_code not in _RETRY_CODES or attempt == self.retries:
                    return response
            time.sleep(self.backoff_s * (2 ** attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def status(self) -> dict[str, Any]:
        response = self.request("GET", "/v1/status")
        if response.status_code != 200:
            raise _refusal(response, "the status request")
        return dict(response.json())

    def post_share(self, owner_id: str, data: bytes) -> dict[str, Any]:
        """Upload this owner's share; ``{"status": "accepted" | "duplicate", ...}`` or :class:`ProxyRefused`."""
        response = self.request("POST", f"/v1/shares/{owner_id}", data)
        if response.status_code not in (200, 201):
            raise _refusal(response, f"the share of owner {owner_id}")
        return dict(response.json())

    def wait_released(self, *, timeout_s: float = 3600.0, poll_s: float = 0.5) -> dict[str, Any]:
        """Poll the status until the proxy has released the result (or failed, or lost it)."""
        stop = time.monotonic() + timeout_s
        while True:
            info = self.status()
            if info["phase"] in ("released", "failed", "lost") or info.get("refused"):
                return info
            if time.monotonic() >= stop:
                raise ProtocolError(f"the proxy must release within {timeout_s} s, got phase {info['phase']}")
            time.sleep(min(poll_s, max(0.05, info.get("seconds_left", poll_s))))

    def fetch_result(self, *, timeout_s: float = 3600.0, poll_s: float = 0.5) -> bytes:
        """Wait for the collection to close, then take the release (asking for it makes it, if the proxy
        releases on request); :class:`ProxyRefused` if the collection failed or the release was lost."""
        stop = time.monotonic() + timeout_s
        while True:
            info = self.status()
            if info["phase"] != "collecting":
                try:
                    return self.result()
                except ProxyRefused as exc:
                    if exc.status != "closed":  # "closed": the proxy is still finishing
                        raise
            if time.monotonic() >= stop:
                raise ProtocolError(f"the proxy must release within {timeout_s} s, got phase {info['phase']}")
            time.sleep(min(poll_s, max(0.05, info.get("seconds_left", poll_s))))

    def result(self) -> bytes:
        """The released ``MASKED_RESULT`` (:class:`ProxyRefused` before it exists)."""
        response = self.request("GET", "/v1/result")
        if response.status_code != 200:
            raise _refusal(response, "the result request")
        return bytes(response.content)


class ServiceTransport(CountingTransport):
    """The proxy service as a :class:`~dpdpca.protocol.transport.Transport` for an owner or the data user.

    An owner's ``send`` to the proxy is an upload of its share
    (:meth:`ProxyClient.post_share`; the proxy's answer is kept in
    ``answer``); the data user's ``receive`` waits until the proxy has
    released the result and fetches it (:meth:`ProxyClient.fetch_result`).
    The proxy's own side is the service (:mod:`dpdpca.net.collection`).

    Parameters
    ----------
    client : ProxyClient
        Closed by :meth:`close`.
    timeout_s : float
        How long the data user waits for the release when ``receive`` is
        given no timeout.
    """

    def __init__(self, client: ProxyClient, *, timeout_s: float = 3600.0) -> None:
        super().__init__()
        self.client = client
        self.timeout_s = float(timeout_s)
        self.answer: dict[str, Any] = {}

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        if recipient != PROXY or not sender.startswith("owner:"):
            raise ProtocolError(f"the proxy service takes owners' shares for the proxy, got {sender} to {recipient}")
        self.answer = self.client.post_share(sender.split(":", 1)[1], payload)
        self._count(sender, recipient, payload)

    def receive(self, recipient: str, *, timeout: float | None = None) -> bytes | None:
        if recipient != USER:
            raise ProtocolError(f"the proxy service answers the data user only, got {recipient}")
        return self.client.fetch_result(timeout_s=self.timeout_s if timeout is None else timeout)

    def close(self) -> None:
        self.client.close()


async def upload_shares(base_url: str, uploads: Sequence[tuple[OwnerIdentity, bytes]], *,
                        ca_cert: str | Path | None = None, concurrency: int = 32, timeout_s: float = 300.0,
                        retries: int = 3, on_done: Callable[[str, int], None] | None = None,
                        allow_http: bool = False) -> list[int]:
    """POST many owners' shares at once; the final HTTP status of each upload, in order (0: no answer).

    Parameters
    ----------
    uploads : sequence of (owner identity, share bytes)
    concurrency : int
        Requests in flight at once (and pool connections).
    on_done : callable or None
        Called with ``(owner_id, status)`` after each share's final answer.
    """
    httpx = require("httpx")
    url = check_proxy_url(base_url, allow_http=allow_http)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    codes = [0] * len(uploads)
    async with httpx.AsyncClient(base_url=url, verify=tls_context(ca_cert), timeout=timeout_s,
                                 limits=limits) as http:
        async def one(k: int, identity: OwnerIdentity, data: bytes) -> None:
            owner_id = identity.owner_id
            path = f"/v1/shares/{owner_id}"
            code = 0
            async with gate:
                for attempt in range(retries + 1):
                    headers = {**sign_headers(identity, f"owner:{owner_id}", "POST", path, data),
                               "content-type": OCTET}
                    try:
                        code = (await http.post(path, content=data, headers=headers)).status_code
                    except httpx.TransportError:
                        code = 0
                    if code not in _RETRY_CODES and code != 0:
                        break
                    await asyncio.sleep(0.1 * (2 ** attempt))
            codes[k] = code
            if on_done is not None:
                on_done(owner_id, code)

        await asyncio.gather(*(one(k, i, d) for k, (i, d) in enumerate(uploads)))
    return codes
