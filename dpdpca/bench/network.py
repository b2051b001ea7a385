"""``dpdpca bench network [--quick] --json``: owners' shares over HTTPS on loopback vs the file transport.

1000 owners (``--owners``), d = 64, a 2048-bit key.  One real share is
encrypted (owner ``"1"``); every other owner's share holds the same
plaintexts under fresh ciphertexts -- each ciphertext multiplied by
``z**j mod n**2`` for one encryption of zero ``z`` -- and its own signed
statement (its Ed25519 identity, its owner id, the new ciphertexts' digest).
Encrypting 1000 shares at d = 64 from scratch would take most of an hour; this
takes a second, and the proxy's replay check (no ciphertext twice) and
signature checks still pass.  Every share is validated by the proxy in full
(digest, session, key, layout, declared bounds, signature) on both paths.

``https``
    ``dpdpca proxy serve`` in its own process on 127.0.0.1 with a throwaway
    CA (TLS), every owner with its own Ed25519 identity; all shares POSTed
    through one connection pool (``concurrency`` in flight).  ``time_s`` runs
    from the first request to the last acknowledgement (each one persisted
    with fsync before it is acknowledged).  ``lost_shares`` = owners minus
    the shares the proxy reports accepted (must be 0).

``file``
    The same shares through :class:`dpdpca.protocol.FileTransport` (one
    atomically written file per message) into an in-process
    :class:`dpdpca.protocol.Proxy`: write, read, validate.

``ratio_https_over_file`` is measured in one run; the goal is <= 2.
Progress on stderr (:mod:`dpdpca.progress`) shows the parties' phases and the collection.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import numpy as np

from dpdpca.crypto import EncryptedArray, encrypt
from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.protocol.messages import Message
from dpdpca.protocol.parties import DataOwner, DataUser, Proxy
from dpdpca.protocol.roles import PROXY, ProxySteps
from dpdpca.protocol.transport import FileTransport
from dpdpca.progress import Progress, quiet_option


def _owner_shares(user: DataUser, first: bytes, identities: list[OwnerIdentity]) -> dict[str, bytes]:
    """Every owner's signed share: the first share's plaintexts under fresh ciphertexts (see the docstring)."""
    p = user.params
    pk = p.public_key
    msg = Message.from_bytes(first)
    names = p.check_release(msg.meta["release"]).sections
    arrays = {k: EncryptedArray.from_bytes(msg.section(k), pk) for k in names}
    n_rows = ShareStatement.from_json(msg.meta["statement"]).n_rows
    n2 = int(pk.nsquare)
    zero = int(encrypt(pk, [0], layout=p.layout, bound=1, chunks=[1]).ciphertexts[0])
    factor = 1
    out: dict[str, bytes] = {}
    for identity in identities:
        factor = factor * zero % n2
        sections = {k: EncryptedArray(pk, a.layout, a.chunks, a.bound,
                                      [int(c) * factor % n2 for c in a.ciphertexts]).to_bytes()
                    for k, a in arrays.items()}
        statement = ShareStatement.sign(identity, session=p.session_id, key_fingerprint=p.key_fingerprint,
                                        d=msg.meta_int("d"), n_rows=n_rows,
                                        ciphertext_sha256=ciphertext_digest(sections, names))
        meta = {**dict(msg.meta), "owner_id": identity.owner_id, "statement": statement.to_json()}
        out[identity.owner_id] = Message(msg.type, msg.session, msg.key_fingerprint, f"owner:{identity.owner_id}",
                                         meta=meta, sections=sections).to_bytes()
    return out


def _file_transport(user: DataUser, keyring: OwnerKeyring, shares: dict[str, bytes], root: Path
                    ) -> tuple[float, int]:
    net = FileTransport(root)
    steps = ProxySteps(Proxy(user.params, keyring))  # the proxy's steps, as the service takes them
    t0 = time.perf_counter()
    for oid, data in shares.items():
        net.send(f"owner:{oid}", PROXY, data)
    while (received := net.receive(PROXY, timeout=0.0)) is not None:
        steps.accept(received)
    return time.perf_counter() - t0, len(steps.received)


def _https(user: DataUser, owners: dict[str, OwnerIdentity], shares: dict[str, bytes], root: Path,
           concurrency: int) -> dict[str, Any]:
    from dpdpca.net.auth import USER
    from dpdpca.net.client import ProxyClient, upload_shares
    from dpdpca.net.launch import ServerProcess, free_port, throwaway_tls, write_proxy_toml

    me = OwnerIdentity.generate(USER)
    (root / "public.json").write_text(json.dumps(user.params.to_json()))
    tls = throwaway_tls(root)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    config = write_proxy_toml(root / "proxy.toml", public=root / "public.json", owners=owners, user=me, tls=tls,
                              port=port, state_dir=root / "state",  # DataOwner's default release, add/remove
                              insecure_test_key=user.params.public_key.bits < 2048)  # --quick's 1024-bit key
    watcher = ProxyClient(url, me, USER, ca_cert=tls.ca_cert, retries=8)
    server = ServerProcess(config, url).start(ready_client=watcher)
    try:
        uploads = [(owners[oid], data) for oid, data in shares.items()]
        t0 = time.perf_counter()
        codes = asyncio.run(upload_shares(url, uploads, ca_cert=tls.ca_cert, concurrency=concurrency))
        elapsed = time.perf_counter() - t0
        status = watcher.status()
    finally:
        watcher.close()
        server.stop()
    return {"time_s": elapsed, "accepted": int(status["accepted"]), "phase": status["phase"],
            "acknowledged": sum(1 for c in codes if c == 201),
            "failed_requests": sum(1 for c in codes if c not in (200, 201))}


@click.command("network")
@click.option("--owners", default=1000, show_default=True, type=click.IntRange(min=2), help="Owners sending a share.")
@click.option("--d", "d", default=64, show_default=True, type=click.IntRange(min=1), help="Features.")
@click.option("--key-bits", default=2048, show_default=True, type=click.IntRange(max=MAX_KEY_BITS),
              help=f"Paillier modulus bits (at most {MAX_KEY_BITS}).")
@click.option("--concurrency", default=32, show_default=True, type=click.IntRange(min=1),
              help="Uploads in flight at once.")
@click.option("--quick", is_flag=True, help="200 owners and a 1024-bit test key (seconds, not minutes).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(owners: int, d: int, key_bits: int, concurrency: int, quick: bool, as_json: bool, quiet: bool) -> None:
    """Owners' shares over HTTPS on loopback, against the file transport."""
    from dpdpca.net import require

    for module in ("starlette", "uvicorn", "httpx", "nacl"):
        require(module)
    if quick:
        owners, key_bits = min(owners, 200), 1024
    with Progress("bench network", total=5, quiet=quiet) as progress, \
            tempfile.TemporaryDirectory(prefix="dpdpca-bench-network-") as tmp:
        user = DataUser.generate(key_bits=key_bits, insecure_test_key=key_bits < 2048, max_owners=owners,
                                 max_rows_per_owner=16, d=d)  # the service needs the session's d declared
        progress(f"key of {key_bits} bits")
        X = np.random.default_rng(0).normal(size=(16, d))
        X = 0.9 * X / np.linalg.norm(X, axis=1, keepdims=True)
        t0 = time.perf_counter()
        identities = [OwnerIdentity.generate(str(i)) for i in range(1, owners + 1)]
        keyring = OwnerKeyring.from_identities(identities)
        first = DataOwner(user.params, identities[0], insecure_test_key=key_bits < 2048).share(X)
        encrypt_s = time.perf_counter() - t0
        progress("one owner's share encrypted")
        shares = {"1": first, **_owner_shares(user, first, identities[1:])}
        progress(f"the other {owners - 1} owners' signed shares")
        root = Path(tmp)
        file_s, file_n = _file_transport(user, keyring, shares, root / "files")
        progress(f"{owners} shares through the file transport")
        (root / "https").mkdir()
        https = _https(user, {i.owner_id: i for i in identities}, shares, root / "https", concurrency)
        progress(f"{owners} shares over HTTPS")
    lost = owners - https["accepted"]
    out = {
        "owners": owners, "d": d, "key_bits": key_bits, "share_bytes": len(first), "concurrency": concurrency,
        "one_share_encrypt_s": encrypt_s,
        "https": {"time_s": https["time_s"], "shares_per_s": owners / https["time_s"], "lost_shares": lost,
                  "accepted": https["accepted"], "acknowledged": https["acknowledged"],
                  "failed_requests": https["failed_requests"], "phase_after": https["phase"],
                  "mb_per_s": owners * len(first) / https["time_s"] / 1e6},
        "file": {"time_s": file_s, "shares_per_s": owners / file_s, "accepted": file_n},
        "ratio_https_over_file": https["time_s"] / file_s,
    }
    out["within_2x_of_file"] = out["ratio_https_over_file"] <= 2.0
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
    else:
        h, f = out["https"], out["file"]
        click.echo(f"{owners} shares of {len(first):,} bytes (d={d}, {key_bits}-bit key): HTTPS {h['time_s']:.2f} s "
                   f"({h['shares_per_s']:.0f}/s, lost {lost}), file transport {f['time_s']:.2f} s "
                   f"({f['shares_per_s']:.0f}/s); ratio {out['ratio_https_over_file']:.2f}")
