"""Strangers against the real service (uvicorn, TLS, its own process): a small version of ``bench strangers``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time

import pytest

pytest.importorskip("trustme")

from dpdpca.bench.strangers import run_strangers
from dpdpca.errors import ParameterError
from dpdpca.net.app import create_app
from dpdpca.net.auth import PartyKeys, sign_headers
from dpdpca.net.collection import Collection
from dpdpca.net.config import NoiseConfig
from dpdpca.net.guard import CLOSE_LINGER_S, ConnectionGuard, ConnectionLimits, guarded_protocol_factory
from dpdpca.protocol import DataOwner
from dpdpca.protocol.identity import OwnerKeyring


def test_slow_headers_and_forged_bodies_do_not_stop_honest_owners(tmp_path):
    """40 slowloris connections (more than the cap of 16) and two forged 32 MiB bodies under a listed owner's
    party while 6 owners upload: every owner is accepted, every slow stranger is closed within the header
    timeout, and each forged body is answered 401 after its headers and cut off long before its end."""
    out = run_strangers(owners=6, slow=40, forged=2, forged_mib=32, d=3, key_bits=768, header_timeout_s=1.5,
                        max_connections=16, big_headers=2, root=tmp_path)
    assert out["accepted"] == 6 and out["acknowledged"] == 6
    assert out["slow_still_open"] == 0
    # the server's clock starts at its accept, before the TLS handshake the client's clock ends with
    assert out["slow_closed_after_handshake_max_s"] <= 1.5 + 0.5, out
    assert out["forged_statuses"] in ([401], [0, 401], [0]), out  # 0: the reset overtook the answer
    assert out["forged_sent_max_mib"] < 16, out  # the proxy stopped reading after the headers (kernel buffers hold the rest)
    assert out["forged_answered_after_headers_max_s"] <= 1.0, out
    assert out["forged_closed_after_headers_max_s"] <= 1.0 + 1.5, out  # dropped after the 1 s linger
    assert out["server_rss_mib"]["peak"] < 400, out
    # a header block of 64 KiB (4 x max_header_bytes) is refused and its connection closed
    assert out["big_header_statuses"] in ([400], [0, 400], [0]) and out["big_header_closed_max_s"] <= 1.5 + 1.5, out


@contextlib.contextmanager
def _guarded_server(app, limits: ConnectionLimits, *, lifespan: str = "on"):
    """``(port, guard)``: real uvicorn with the service's guarded h11 protocol, plain HTTP on 127.0.0.1, in a
    thread of this process (the guard's logic is the same under TLS)."""
    uvicorn = pytest.importorskip("uvicorn")
    guard = ConnectionGuard(limits)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan=lifespan,
                                           http=guarded_protocol_factory(guard, None),
                                           h11_max_incomplete_event_size=limits.max_header_bytes))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    t0 = time.monotonic()
    while not server.started:
        assert thread.is_alive() and time.monotonic() - t0 < 10, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield port, guard
    finally:
        server.should_exit = True
        thread.join(10)


def _answer_head(sock: socket.socket) -> bytes:
    """The status line and headers of the answer on ``sock`` (lower case)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed before a whole answer: {data!r}"
        data += chunk
    return data.split(b"\r\n\r\n")[0].lower()


def _closed_by_server(sock: socket.socket, within_s: float) -> bool:
    """Whether the server closes ``sock`` (EOF or reset) within ``within_s``, reading whatever comes first."""
    end = time.monotonic() + within_s
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(65536) == b"":
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


def test_unread_bodies_on_routes_that_never_read_them_do_not_hold_the_slots(tmp_path, net_params, identities,
                                                                            owner_keyring, rows_for):
    """As many strangers as the cap send whole headers with a 1 MB Content-Length to routes that need no key and
    never read a body (the public GET /v1/session, a 404, a 405), get their answer and send one body byte to keep
    the connection.  Each answer says Connection: close and each connection is closed within the close linger;
    an owner then uploads its share, signed, slowly (its body takes longer than the header timeout) and it is
    accepted: only a signature the service accepted buys a connection the long body timeout."""
    coll = Collection(net_params, tmp_path / "state", owner_keys=owner_keyring, quorum=3, min_shares=1,
                      collection_seconds=60.0, noise=NoiseConfig(epsilon=1.0, delta=1e-5, release="centred"))
    keys = PartyKeys(owner_keyring, OwnerKeyring.from_identities([identities["user"]]))
    app = create_app(coll, keys, max_body_bytes=1 << 20)
    share = DataOwner(net_params, identities["1"], insecure_test_key=True, release="centred").share(rows_for(7))
    limits = ConnectionLimits(header_timeout_s=0.5, body_timeout_s=30.0, max_connections=4)
    with _guarded_server(app, limits) as (port, guard), contextlib.ExitStack() as held:
        strangers, heads = [], []
        for method, path, status in [("GET", "/v1/session", b" 200 "), ("GET", "/v1/session", b" 200 "),
                                     ("GET", "/nothing-here", b" 404 "), ("POST", "/v1/session", b" 405 ")]:
            sock = held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=3))
            sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n".encode())
            heads.append(_answer_head(sock))
            assert status in heads[-1].split(b"\r\n")[0], heads[-1]
            with contextlib.suppress(OSError):
                sock.sendall(b"x")  # one body byte after the answer (it used to keep the connection for good)
            strangers.append(sock)
        sent = time.monotonic()
        # an owner, while the strangers try to hold every slot: admitted, its slow signed body read to the end
        path = "/v1/shares/1"
        headers = {"host": "x", "content-type": "application/octet-stream", "content-length": str(len(share)),
                   **sign_headers(identities["1"], "owner:1", "POST", path, share)}
        states = []
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as owner:
                owner.sendall(f"POST {path} HTTP/1.1\r\n".encode()
                              + "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode() + b"\r\n")
                third = len(share) // 3
                for piece in (share[:third], share[third:2 * third], share[2 * third:]):
                    time.sleep(0.35)  # 1.05 s for the body in all: longer than the 0.5 s header timeout
                    states.append(sorted(c.state for c in guard._conns.values() if c.state != "closing"))
                    owner.sendall(piece)
                head = _answer_head(owner)
        except OSError as exc:  # the owner's connection was refused at the cap
            head = repr(exc).encode()
        assert head.startswith(b"http/1.1 201 "), (head, guard.counts)
        assert states == [["body"]] * 3, states  # the owner's signed body, on the body timer
        assert [_closed_by_server(sock, max(0.1, sent + CLOSE_LINGER_S + 0.5 - time.monotonic()))
                for sock in strangers] == [True] * 4
        assert all(b"\r\nconnection: close" in head for head in heads), heads  # their bodies will not be read
        assert guard.counts["refused"] == 0 and guard.counts["body_timeouts"] == 0, guard.counts
    assert coll.accepted() == ["1"]


def test_a_body_no_signature_vouched_for_stays_evictable_and_on_the_header_timer():
    """Whole headers with a Content-Length earn nothing by themselves: while the application has not accepted a
    signature (here a slow route that never reads the body), the connection is still waiting, so a newcomer at
    the cap evicts it and the header timeout drops it."""
    async def slow_route(scope, receive, send):
        await asyncio.sleep(1.0)  # longer than the header timeout; neither authenticates nor reads the body
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    limits = ConnectionLimits(header_timeout_s=0.6, body_timeout_s=30.0, max_connections=2)
    with _guarded_server(slow_route, limits, lifespan="off") as (port, guard), contextlib.ExitStack() as held:
        strangers = []
        for _ in range(2):
            sock = held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=3))
            sock.sendall(b"PUT /anything HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nxyz")
            strangers.append(sock)
            time.sleep(0.05)
        states = sorted(c.state for c in guard._conns.values())
        with socket.create_connection(("127.0.0.1", port), timeout=3) as honest:  # evicts the older stranger
            honest.sendall(b"GET /v1/session HTTP/1.1\r\nHost: x\r\n\r\n")
            evicted_first = _closed_by_server(strangers[0], 0.3)
            timed_out = _closed_by_server(strangers[1], 1.5)  # 0.6 s after its accept
            head = _answer_head(honest)
        assert states == ["waiting", "waiting"], states
        assert head.startswith(b"http/1.1 200 "), head
        assert (evicted_first, timed_out) == (True, True)
        assert guard.counts["evicted"] == 1 and guard.counts["header_timeouts"] == 1, guard.counts


class _Transport:
    def __init__(self) -> None:
        self.aborted = False
        self.paused = False

    def abort(self) -> None:
        self.aborted = True

    def pause_reading(self) -> None:
        self.paused = True


def test_the_guard_evicts_the_oldest_waiting_connection_never_a_busy_one():
    async def run() -> None:
        guard = ConnectionGuard(ConnectionLimits(header_timeout_s=0.2, max_connections=2))
        t1, t2, t3, t4 = (_Transport() for _ in range(4))
        c1 = guard.admit(t1)
        assert guard.admit(t2) is not None
        guard.body(c1)  # c1 is uploading a signed body: not evictable
        c3 = guard.admit(t3)  # evicts c2, the oldest still waiting
        assert c3 is not None and t2.aborted and not t1.aborted
        guard.busy(c3)
        assert guard.admit(t4) is None  # nothing waiting: the newcomer is refused
        assert guard.counts["evicted"] == 1 and guard.counts["refused"] == 1
        guard.closing(c3, body_unread=True)
        assert t3.paused
        await asyncio.sleep(0.3)  # c1's body timeout is long; c3 is dropped after the linger (1 s)
        assert not t1.aborted
        await asyncio.sleep(1.0)
        assert t3.aborted and guard.open_connections == 1
        guard.wait(c1)
        t0 = time.monotonic()
        while not t1.aborted and time.monotonic() - t0 < 2:
            await asyncio.sleep(0.05)
        assert t1.aborted and guard.counts["header_timeouts"] == 1 and guard.open_connections == 0

    asyncio.run(run())


def test_a_signed_body_that_stalls_is_dropped_at_the_body_timeout():
    async def run() -> None:
        guard = ConnectionGuard(ConnectionLimits(header_timeout_s=5.0, body_timeout_s=0.2, max_connections=4))
        t = _Transport()
        conn = guard.admit(t)
        guard.body(conn)  # headers complete: the header timer is replaced by the body timer
        await asyncio.sleep(0.5)
        assert t.aborted and guard.counts["body_timeouts"] == 1 and guard.open_connections == 0

    asyncio.run(run())


@pytest.mark.parametrize("field, value", [("header_timeout_s", 0), ("body_timeout_s", -1.0),
                                          ("max_connections", 1), ("max_header_bytes", 10 ** 9),
                                          ("header_timeout_s", True)])
def test_connection_limits_are_validated(field, value):
    with pytest.raises(ParameterError, match=f"server.{field} must be"):
        ConnectionLimits(**{field: value})
