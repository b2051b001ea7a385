"""Strangers against the real service (uvicorn, TLS, its own process): a small version of ``bench strangers``."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("trustme")

from dpdpca.bench.strangers import run_strangers
from dpdpca.errors import ParameterError
from dpdpca.net.guard import ConnectionGuard, ConnectionLimits


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
