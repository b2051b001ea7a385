"""``dpdpca bench strangers [--quick] --json``: the proxy service under strangers while honest owners upload.

Loopback only, bounded in count (``--slow`` <= 5000, ``--forged`` <= 20 bodies of
<= 64 MiB, ``--owners`` <= 1000) and in time (every stranger gives up
``header_timeout + 15`` s after it connected).  ``dpdpca proxy serve`` runs in
its own process with TLS (a throwaway CA) and the ``[server]`` limits given
here; in this process, at once:

``slow``
    Strangers that complete the TLS handshake, send a request line and then
    one header byte per second, never finishing the headers (slowloris).
    ``slow_closed_after_handshake_max_s``: the longest a slow stranger stayed
    connected after its handshake (must be <= ``header_timeout_s``: the
    server's clock starts at its accept, before the handshake);
    ``slow_closed_max_s`` counts from the client's connect call, so it also
    holds the time a connection waited in the kernel's backlog during the
    flood.  A stranger closed during its handshake (evicted, or the server at
    its cap) counts as closed.
``forged``
    Strangers that send the headers of a share upload under a listed owner's
    party with a forged signature and ``Content-Length`` of ``--forged-mib``
    MiB, then stream that many bytes.  ``forged_sent_max_mib``: the most any
    of them got onto the wire before the proxy closed the connection (the
    kernel's socket buffers, a few MiB on loopback, included);
    ``forged_answered_after_headers_max_s`` and
    ``forged_closed_after_headers_max_s``: when the 401 came and when the
    connection was dropped, after the headers were sent.
``honest``
    ``--owners`` owners POST their signed shares
    (:func:`dpdpca.net.client.upload_shares`, 32 in flight, retried on a
    connection error: an owner evicted while its handshake was still waiting
    connects again).  ``accepted`` must equal ``owners``.

``big_headers`` (0 unless asked; the test sends two)
    Strangers whose header block is four times ``max_header_bytes``:
    ``big_header_statuses`` (400: refused by h11's limit) and
    ``big_header_closed_max_s`` after they were sent.

``server_rss_mib``: the server process's resident memory before the attack and
its peak during it (``/proc/PID/status`` sampled every 50 ms).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np

from dpdpca.bench.network import _owner_shares
from dpdpca.progress import Progress, quiet_option
from dpdpca.protocol.identity import OwnerIdentity
from dpdpca.protocol.parties import DataOwner, DataUser

__all__ = ["run_strangers", "command"]

HOST = "127.0.0.1"


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class _RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, _rss_mib(self.pid))
            time.sleep(0.05)


async def _slow_header(port: int, ctx: ssl.SSLContext, give_up_s: float) -> tuple[float, float]:
    """Seconds until the server closed this connection, from the connect call and from the end of the TLS
    handshake (``give_up_s`` if it never did; 0 after the handshake if it was closed during it)."""
    t0 = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port, ssl=ctx), timeout=give_up_s)
    except (OSError, ssl.SSLError, asyncio.TimeoutError):
        return time.monotonic() - t0, 0.0  # refused or dropped during the handshake: closed
    t1 = time.monotonic()
    try:
        writer.write(b"POST /v1/shares/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        while time.monotonic() - t0 < give_up_s:
            try:
                if not await asyncio.wait_for(reader.read(4096), timeout=1.0):
                    break  # EOF: the server closed it
            except asyncio.TimeoutError:
                writer.write(b"x")
                await writer.drain()
    except (OSError, ssl.SSLError, ConnectionError):
        pass
    closed = time.monotonic()
    writer.transport.abort()
    return closed - t0, closed - t1


async def _forged_body(port: int, ctx: ssl.SSLContext, owner_id: str, size: int, give_up_s: float
                       ) -> dict[str, Any]:
    """Headers of an upload under ``owner:<owner_id>`` with a forged signature, then ``size`` bytes of body."""
    t0 = time.monotonic()
    sent = 0
    status = 0
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port, ssl=ctx), timeout=give_up_s)
    except (OSError, ssl.SSLError, asyncio.TimeoutError):  # refused or dropped during the handshake
        return {"status": 0, "sent_mib": 0.0, "answered_after_headers_s": 0.0, "closed_s": time.monotonic() - t0,
                "closed_after_headers_s": 0.0}
    head = (f"POST /v1/shares/{owner_id} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {size}\r\nX-Dpdpca-Party: owner:{owner_id}\r\nX-Dpdpca-Time: {int(time.time())}\r\n"
            f"X-Dpdpca-Body-Sha256: {'0' * 64}\r\nX-Dpdpca-Signature: {'ab' * 64}\r\n\r\n").encode()
    headers_done = time.monotonic()
    chunk = b"\0" * (64 << 10)

    async def pump() -> None:
        nonlocal sent
        writer.write(head)
        while sent < size and not writer.transport.is_closing():
            writer.write(chunk)
            await writer.drain()
            sent += len(chunk)

    async def answer() -> int:
        line = await reader.readline()
        parts = line.split()
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0

    pumping = asyncio.ensure_future(pump())
    try:
        status = await asyncio.wait_for(answer(), timeout=give_up_s)
        answered = time.monotonic() - headers_done
        while not pumping.done() and time.monotonic() - t0 < give_up_s:  # until the server drops us
            await asyncio.sleep(0.05)
    except (OSError, ssl.SSLError, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        answered = time.monotonic() - headers_done
    closed = time.monotonic()
    pumping.cancel()
    try:
        await pumping
    except (asyncio.CancelledError, OSError, ssl.SSLError, ConnectionError):
        pass
    writer.transport.abort()
    return {"status": status, "sent_mib": sent / 2**20, "answered_after_headers_s": answered, "closed_s": closed - t0,
            "closed_after_headers_s": closed - headers_done}


async def _big_header(port: int, ctx: ssl.SSLContext, size: int, give_up_s: float) -> dict[str, Any]:
    """A request whose header block is ``size`` bytes: the status it gets and when it is closed after sending."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port, ssl=ctx), timeout=give_up_s)
    except (OSError, ssl.SSLError, asyncio.TimeoutError):
        return {"status": 0, "closed_after_headers_s": 0.0}
    status = 0
    sent = time.monotonic()
    try:
        writer.write(b"GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
        await writer.drain()
        sent = time.monotonic()
        line = await asyncio.wait_for(reader.readline(), timeout=give_up_s)
        parts = line.split()
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        while await asyncio.wait_for(reader.read(4096), timeout=give_up_s):
            pass  # until the server closes the connection
    except (OSError, ssl.SSLError, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        pass  # reset by the server: closed
    closed = time.monotonic() - sent
    writer.transport.abort()
    return {"status": status, "closed_after_headers_s": closed}


def run_strangers(*, owners: int = 200, slow: int = 1500, forged: int = 5, forged_mib: int = 60, d: int = 8,
                  key_bits: int = 1024, header_timeout_s: float = 5.0, max_connections: int = 256,
                  big_headers: int = 0, root: Path | None = None,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the attack once on loopback and return its figures (see the module docstring); ``progress`` is told
    when the shares are made, the server is up and the attack is over."""
    tick = progress or (lambda label: None)
    from dpdpca.net.auth import USER
    from dpdpca.net.client import ProxyClient, tls_context, upload_shares
    from dpdpca.net.launch import (
        ServerProcess,
        free_port,
        throwaway_tls,
        write_proxy_toml,
    )
    from dpdpca.net.guard import ConnectionLimits

    user = DataUser.generate(key_bits=key_bits, insecure_test_key=key_bits < 2048, max_owners=owners,
                             max_rows_per_owner=16, d=d)  # the service needs the session's d declared
    X = np.random.default_rng(0).normal(size=(16, d))
    X = 0.9 * X / np.linalg.norm(X, axis=1, keepdims=True)
    identities = [OwnerIdentity.generate(str(i)) for i in range(1, owners + 1)]
    first = DataOwner(user.params, identities[0], insecure_test_key=key_bits < 2048).share(X)
    shares = {"1": first, **_owner_shares(user, first, identities[1:])}
    me = OwnerIdentity.generate(USER)
    with tempfile.TemporaryDirectory(prefix="dpdpca-bench-strangers-") as tmp:
        base = Path(tmp) if root is None else root
        (base / "public.json").write_text(json.dumps(user.params.to_json()))
        tls = throwaway_tls(base)
        port = free_port()
        url = f"https://{HOST}:{port}"
        limits = {"header_timeout_s": float(header_timeout_s), "max_connections": int(max_connections)}
        max_header_bytes = ConnectionLimits().max_header_bytes  # the default; big-header strangers send 4 times it
        config = write_proxy_toml(base / "proxy.toml", public=base / "public.json",
                                  owners={i.owner_id: i for i in identities}, user=me, tls=tls, port=port,
                                  state_dir=base / "state", limits=limits, insecure_test_key=key_bits < 2048)
        watcher = ProxyClient(url, me, USER, ca_cert=tls.ca_cert, retries=8)
        tick("key and shares")
        server = ServerProcess(config, url).start(ready_client=watcher)
        tick("server up")
        sampler = _RssSampler(server.pid)
        try:
            time.sleep(0.5)
            rss_before = _rss_mib(server.pid)
            sampler.start()
            ctx = tls_context(tls.ca_cert)
            give_up = header_timeout_s + 15.0

            async def attack() -> tuple[list[tuple[float, float]], list[dict[str, Any]], list[int], float,
                                        list[dict[str, Any]]]:
                big_tasks = [asyncio.ensure_future(_big_header(port, ctx, 4 * max_header_bytes, give_up))
                             for _ in range(big_headers)]
                slow_tasks = [asyncio.ensure_future(_slow_header(port, ctx, give_up)) for _ in range(slow)]
                forged_tasks = [asyncio.ensure_future(_forged_body(port, ctx, str(k % owners + 1), forged_mib << 20,
                                                                   give_up)) for k in range(forged)]
                await asyncio.sleep(0.5)  # the flood is under way before the first honest owner connects
                t0 = time.perf_counter()
                codes = await upload_shares(url, [(i, shares[i.owner_id]) for i in identities], ca_cert=tls.ca_cert,
                                            concurrency=32, retries=10)
                honest_s = time.perf_counter() - t0
                return (list(await asyncio.gather(*slow_tasks)), list(await asyncio.gather(*forged_tasks)), codes,
                        honest_s, list(await asyncio.gather(*big_tasks)))

            quiet = logging.getLogger("asyncio")  # the strangers' own writes after the proxy closed them
            level = quiet.level
            quiet.setLevel(logging.CRITICAL)
            try:
                slow_closed, forged_out, codes, honest_s, big_out = asyncio.run(attack())
                tick("attack")
            finally:
                quiet.setLevel(level)
            status = watcher.status()
        finally:
            sampler.stop.set()
            watcher.close()
            server.stop()
    out: dict[str, Any] = {
        "owners": owners, "slow": slow, "forged": forged, "forged_mib": forged_mib, "key_bits": key_bits, "d": d,
        "share_bytes": len(first), "header_timeout_s": header_timeout_s, "max_connections": max_connections,
        "accepted": int(status["accepted"]), "acknowledged": sum(1 for c in codes if c in (200, 201)),
        "honest_time_s": honest_s,
        "server_rss_mib": {"before": rss_before, "peak": max(sampler.peak, rss_before)},
        "slow_closed_max_s": max((s for s, _ in slow_closed), default=0.0),
        "slow_closed_median_s": float(np.median([s for s, _ in slow_closed])) if slow_closed else 0.0,
        "slow_closed_after_handshake_max_s": max((h for _, h in slow_closed), default=0.0),
        "slow_still_open": sum(1 for s, _ in slow_closed if s >= give_up),
        "forged_statuses": sorted({f["status"] for f in forged_out}),
        "forged_sent_max_mib": max((f["sent_mib"] for f in forged_out), default=0.0),
        "forged_closed_max_s": max((f["closed_s"] for f in forged_out), default=0.0),
        "forged_answered_after_headers_max_s": max((f["answered_after_headers_s"] for f in forged_out), default=0.0),
        "forged_closed_after_headers_max_s": max((f["closed_after_headers_s"] for f in forged_out), default=0.0),
        "big_headers": big_headers, "big_header_statuses": sorted({b["status"] for b in big_out}),
        "big_header_closed_max_s": max((b["closed_after_headers_s"] for b in big_out), default=0.0),
    }
    out["all_accepted"] = out["accepted"] == owners
    out["rss_below_200_mib"] = out["server_rss_mib"]["peak"] < 200
    # The server's clock starts at its accept(); under a flood a connection may wait in the kernel's backlog
    # and the handshake queue first, so the timeout is checked from the end of the client's handshake.
    out["strangers_closed_within_timeout"] = (out["slow_still_open"] == 0
                                              and out["slow_closed_after_handshake_max_s"] <= header_timeout_s + 0.5
                                              and out["forged_closed_after_headers_max_s"] <= header_timeout_s)
    return out


@click.command("strangers")
@click.option("--owners", default=200, show_default=True, type=click.IntRange(1, 1000), help="Honest owners.")
@click.option("--slow", default=1500, show_default=True, type=click.IntRange(0, 5000),
              help="Slow-header (slowloris) connections.")
@click.option("--forged", default=5, show_default=True, type=click.IntRange(0, 20),
              help="Strangers streaming a body under a forged signature.")
@click.option("--forged-mib", default=60, show_default=True, type=click.IntRange(1, 64), help="Each forged body's size.")
@click.option("--header-timeout", default=5.0, show_default=True, type=click.FloatRange(0.5, 30.0),
              help="The server's header_timeout_s.")
@click.option("--max-connections", default=256, show_default=True, type=click.IntRange(16, 4096),
              help="The server's max_connections.")
@click.option("--big-headers", default=0, show_default=True, type=click.IntRange(0, 100),
              help="Strangers sending a header block of 4 x max_header_bytes.")
@click.option("--quick", is_flag=True, help="20 owners, 200 slow, 2 forged bodies of 8 MiB.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(owners: int, slow: int, forged: int, forged_mib: int, header_timeout: float, max_connections: int,
            big_headers: int, quick: bool, as_json: bool, quiet: bool) -> None:
    """The proxy service under slow-header and forged-body strangers while honest owners upload (loopback)."""
    from dpdpca.net import require

    for module in ("starlette", "uvicorn", "httpx", "nacl", "trustme"):
        require(module)
    if sys.platform != "linux":
        raise click.UsageError("bench strangers reads the server's memory from /proc: Linux only")
    if quick:
        owners, slow, forged, forged_mib = min(owners, 20), min(slow, 200), min(forged, 2), min(forged_mib, 8)
    with Progress("bench strangers", total=3, quiet=quiet) as progress:
        out = run_strangers(owners=owners, slow=slow, forged=forged, forged_mib=forged_mib,
                            header_timeout_s=header_timeout, max_connections=max_connections, big_headers=big_headers,
                            progress=progress)
    out["load_average"] = os.getloadavg()[0]
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
    else:
        rss = out["server_rss_mib"]
        click.echo(f"{out['accepted']}/{owners} honest shares accepted in {out['honest_time_s']:.1f} s while {slow} "
                   f"slow-header and {forged} forged {forged_mib} MiB strangers connected; server RSS "
                   f"{rss['before']:.0f} -> peak {rss['peak']:.0f} MiB; slow strangers closed after <= "
                   f"{out['slow_closed_max_s']:.1f} s (timeout {header_timeout} s), forged bodies answered "
                   f"{out['forged_statuses']} after <= {out['forged_sent_max_mib']:.1f} MiB sent, closed after <= "
                   f"{out['forged_closed_max_s']:.1f} s")
