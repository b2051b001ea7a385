"""What a stranger can hold: connection limits of the proxy service, below HTTP.

A stranger (anyone who can reach the port, with no key the proxy knows) must
not be able to exhaust the service.  Each connection, from the TCP accept on,
is in one of four states, each with its own bound:

``waiting``
    TLS handshake, a request's headers and the application's verdict on
    them.  The headers must be complete within ``header_timeout_s`` of the
    accept (or of the previous answer on a kept-alive connection); a byte
    every few seconds does not reset it.  Headers are capped at
    ``max_header_bytes`` (h11's incomplete-event limit: 431/400 and closed
    above it).  A request that carries a body stays ``waiting``, on the same
    timer, until the application accepts its signature: complete headers
    alone earn nothing.
``body``
    The application accepted the request's signature and reads its body
    (:mod:`dpdpca.net.app` checks party, time, token and the Ed25519
    signature over method, path, body length and body digest *before* it
    reads a byte of the body, then calls :func:`signed_body_follows`; a
    stranger is answered with ``Connection: close``).  The whole body must
    arrive within ``body_timeout_s``.  Only this hook grants the state: a
    route that answers without reading the body (a public page, 404, 405)
    never does.
``busy``
    The request is complete and the application works on it: no timer.
``closing``
    The answer said ``Connection: close``: the connection is dropped
    :data:`CLOSE_LINGER_S` later whatever the peer does, so a stranger still
    streaming its body cannot hold the TLS shutdown open.  Every answer sent
    while the request's body is still arriving says so (the guard adds the
    header when the application did not), and so does every refusal before
    the body is read: an answered request's unread body never keeps its
    connection.  If the body was not read, the socket is not read any more
    either (the answer still goes out): the rest of a stranger's body stays
    in its own send buffer.

At most ``max_connections`` connections exist at once, handshakes included.
A new connection beyond the cap evicts the oldest connection still
``waiting`` or ``closing`` (never one that is uploading a signed body or being answered);
if none is waiting, the new connection is closed at once.  So a flood of
slow strangers evicts itself, while an honest party, whose headers arrive in
one round trip, leaves ``waiting`` almost at once and is not evicted.

Bytes a stranger makes the proxy hold: per connection at most the TLS read
buffer (:data:`TLS_READ_BUFFER` instead of asyncio's 256 KiB), its headers
(``max_header_bytes``) and uvicorn's read-ahead of a body before reading
pauses (64 KiB); in all at most ``max_connections`` times that, whatever the
strangers send.  ``dpdpca bench strangers`` measures it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dpdpca._validation import check_int, param_error
from dpdpca.net import require

__all__ = ["ConnectionLimits", "ConnectionGuard", "guarded_protocol_factory", "signed_body_follows", "BODY_EXTENSION",
           "TLS_READ_BUFFER", "CLOSE_LINGER_S"]

#: Seconds a connection whose answer said ``Connection: close`` may take to flush it before it is dropped.
CLOSE_LINGER_S = 1.0
#: Bytes of the TLS layer's read buffer per connection (asyncio's default is 256 KiB; a TLS record is <= 16 KiB).
TLS_READ_BUFFER = 32 * 1024
#: The ASGI scope extension (``scope["extensions"]``) through which the application tells the guard that it
#: accepted a request's signature and reads its body now (:func:`signed_body_follows`).
BODY_EXTENSION = "dpdpca.signed_body"


def signed_body_follows(scope: Mapping[str, Any]) -> None:
    """The application accepted this request's signature and reads its body now: the guard gives the connection
    ``body_timeout_s`` for it (state ``body``) instead of the header timeout.

    Call it after authentication and before the first ``receive()`` of the body.  Outside the guard (an ASGI
    test client, another server) the extension is absent and this does nothing.
    """
    hook = (scope.get("extensions") or {}).get(BODY_EXTENSION)
    if callable(hook):
        hook()


@dataclass(frozen=True)
class ConnectionLimits:
    """The service's bounds on connections (``proxy.toml`` ``[server]``).

    Parameters
    ----------
    header_timeout_s : float > 0
        TLS handshake plus a request's headers, from the accept (default 10).
    body_timeout_s : float > 0
        A signed request's whole body, from its signature check (default 300: 64 MiB
        at 0.25 MB/s).
    max_connections : int >= 2
        Connections at once, handshakes included (default 256).
    max_header_bytes : int >= 1024
        A request's header block (default 16 KiB).
    """

    header_timeout_s: float = 10.0
    body_timeout_s: float = 300.0
    max_connections: int = 256
    max_header_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
                raise param_error(f"server.{name}", "a number of seconds in (0, 86400]", value)
        check_int("server.max_connections", self.max_connections, minimum=2, maximum=1 << 20)
        check_int("server.max_header_bytes", self.max_header_bytes, minimum=1024, maximum=1 << 20)


@dataclass(eq=False)
class _Conn:
    abort: Callable[[], None]
    pause_reading: Callable[[], None]
    state: str = "waiting"
    since: float = field(default_factory=time.monotonic)
    timer: asyncio.TimerHandle | None = None


class ConnectionGuard:
    """Every connection of one server, its state and its timer (see the module docstring).

    Attributes
    ----------
    counts : dict of str to int
        ``accepted``, ``evicted``, ``refused`` (over the cap, nothing to
        evict), ``header_timeouts``, ``body_timeouts``; ``open`` is
        :attr:`open_connections`.
    """

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._conns: dict[int, _Conn] = {}  # insertion order: the oldest first
        self.counts = {"accepted": 0, "evicted": 0, "refused": 0, "header_timeouts": 0, "body_timeouts": 0,
                       "dropped_after_close": 0}

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def admit(self, transport: Any) -> _Conn | None:
        """Register a new connection on its socket's ``transport``; None if it must be closed at once."""
        if len(self._conns) >= self.limits.max_connections:
            victim = next((c for c in self._conns.values() if c.state in ("waiting", "closing")), None)
            if victim is None:
                self.counts["refused"] += 1
                return None
            self.counts["evicted"] += 1
            self._drop(victim)
        conn = _Conn(transport.abort, transport.pause_reading)
        self._conns[id(conn)] = conn
        self.counts["accepted"] += 1
        self.wait(conn)
        return conn

    def wait(self, conn: _Conn) -> None:
        """``conn`` waits for a request's headers (after the accept, or after an answer on a kept-alive connection)."""
        self._enter(conn, "waiting", self.limits.header_timeout_s, "header_timeouts")

    def body(self, conn: _Conn) -> None:
        """``conn``'s request was authenticated from its headers; its body must follow within the body timeout."""
        self._enter(conn, "body", self.limits.body_timeout_s, "body_timeouts")

    def busy(self, conn: _Conn) -> None:
        """``conn``'s request is complete; no timer while the application answers."""
        self._enter(conn, "busy", None, "")

    def closing(self, conn: _Conn, *, body_unread: bool) -> None:
        """``conn`` is being closed after an answer; dropped :data:`CLOSE_LINGER_S` later if still open.

        ``body_unread``: the request's body was refused unread; stop reading the socket now.
        """
        if conn.state != "closing":
            if body_unread and id(conn) in self._conns:
                conn.pause_reading()
            self._enter(conn, "closing", CLOSE_LINGER_S, "dropped_after_close")

    def release(self, conn: _Conn | None) -> None:
        """``conn`` is closed (by either side)."""
        if conn is not None and self._conns.pop(id(conn), None) is not None and conn.timer is not None:
            conn.timer.cancel()

    def _enter(self, conn: _Conn, state: str, timeout: float | None, counter: str) -> None:
        if id(conn) not in self._conns:
            return
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        # Move to the end: the eviction order is the time a connection started waiting.
        self._conns.pop(id(conn))
        self._conns[id(conn)] = conn
        conn.state, conn.since = state, time.monotonic()
        if timeout is not None:
            conn.timer = asyncio.get_running_loop().call_later(timeout, self._expire, conn, counter)

    def _expire(self, conn: _Conn, counter: str) -> None:
        if id(conn) in self._conns:
            self.counts[counter] += 1
            self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        self.release(conn)
        conn.abort()


def guarded_protocol_factory(guard: ConnectionGuard, ssl_context: ssl.SSLContext | None) -> Callable[..., Any]:
    """uvicorn's ``http=`` protocol class: h11 under the guard, behind TLS when ``ssl_context`` is given.

    uvicorn then runs without its own ``ssl`` (the TLS layer is made here,
    per connection, so that the handshake counts against the cap and the
    header timeout, and its read buffer is :data:`TLS_READ_BUFFER`).
    """
    h11 = require("h11")
    h11_impl = require("uvicorn.protocols.http.h11_impl")
    sslproto = require("asyncio.sslproto")

    close_header = (b"connection", b"close")

    class GuardedH11Protocol(h11_impl.H11Protocol):  # type: ignore[misc, name-defined]
        app: Any  # the ASGI application uvicorn runs for each request (H11Protocol.__init__ sets it)

        def __init__(self, *args: Any, guard_conn: _Conn | None = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._guard_conn = guard_conn
            self._plain = guard_conn is None
            self._inner_app = self.app
            self.app = self._guarded_app

        async def _guarded_app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            """The application, with :data:`BODY_EXTENSION` in its scope and ``Connection: close`` added to an
            answer that starts while the request's body is still arriving (nothing will read the rest of it)."""
            scope["extensions"] = {**(scope.get("extensions") or {}),
                                   BODY_EXTENSION: lambda: self._signed_body_follows(scope)}

            async def send_closing(message: Any) -> None:
                if (message.get("type") == "http.response.start" and self.scope is scope
                        and self.conn.their_state is h11.SEND_BODY):
                    headers = list(message.get("headers", []))
                    if not any(bytes(k).lower() == b"connection" and b"close" in bytes(v).lower() for k, v in headers):
                        message = {**message, "headers": [*headers, close_header]}
                await send(message)

            await self._inner_app(scope, receive, send_closing)

        def _signed_body_follows(self, scope: dict[str, Any]) -> None:
            conn = self._guard_conn
            if (conn is not None and conn.state == "waiting" and self.scope is scope
                    and self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing()
                    and self.cycle is not None and not self.cycle.response_complete):
                guard.body(conn)

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if self._plain:
                self._guard_conn = guard.admit(transport)
                if self._guard_conn is None:
                    transport.abort()

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            if self._plain:
                guard.release(self._guard_conn)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._track()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()

        def _track(self) -> None:
            conn = self._guard_conn
            if conn is None:
                return
            theirs = self.conn.their_state
            if self.transport.is_closing():
                guard.closing(conn, body_unread=theirs is h11.SEND_BODY)
                return
            if theirs is h11.SEND_BODY:
                # Until the application vouches for the signature (state "body"), the connection stays "waiting":
                # evictable, on its header timer.  Answered with the body still arriving: nothing reads the rest.
                if self.cycle is not None and self.cycle.response_complete:
                    self.transport.close()
                    guard.closing(conn, body_unread=True)
            elif theirs is h11.IDLE:
                if conn.state == "busy" and self.cycle is not None and self.cycle.response_complete:
                    guard.wait(conn)
            elif conn.state != "busy":
                guard.busy(conn)

    class GuardedTLS(sslproto.SSLProtocol):  # type: ignore[misc, name-defined]
        max_size = TLS_READ_BUFFER

        def __init__(self, loop: Any, app: GuardedH11Protocol) -> None:
            super().__init__(loop, app, ssl_context, None, server_side=True,
                             ssl_handshake_timeout=guard.limits.header_timeout_s)
            self._app = app
            self._guard_conn: _Conn | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._guard_conn = self._app._guard_conn = guard.admit(transport)
            if self._guard_conn is None:
                transport.abort()

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            guard.release(self._guard_conn)

    def factory(*args: Any, **kwargs: Any) -> Any:
        if ssl_context is None:
            return GuardedH11Protocol(*args, **kwargs)
        app = GuardedH11Protocol(*args, guard_conn=None, **kwargs)
        app._plain = False
        return GuardedTLS(kwargs.get("_loop") or asyncio.get_event_loop(), app)

    return factory
