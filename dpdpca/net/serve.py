"""Build the service from ``proxy.toml`` and run it under uvicorn with TLS.

uvicorn runs the h11 protocol of :func:`dpdpca.net.guard.guarded_protocol_factory`
(TLS made per connection there, so handshakes count against the connection
cap and the header timeout) instead of its own ``ssl`` options.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from dpdpca._validation import check_int
from dpdpca.errors import MessageError, ParameterError
from dpdpca.net import require
from dpdpca.net.app import create_app
from dpdpca.net.collection import Collection
from dpdpca.net.config import ServiceConfig
from dpdpca.net.guard import ConnectionGuard, guarded_protocol_factory
from dpdpca.protocol.params import ProtocolParams

__all__ = ["load_public", "lock_state_dir", "check_against_params", "check_body_limit", "build_service", "serve"]


#: The proxy service's consent to a test key, as its errors name it.
TEST_KEY_CONFIG = "proxy.toml sets protocol.insecure_test_key = true (or proxy serve --insecure-test-key)"


def load_public(path: Path, *, insecure_test_key: bool = False) -> ProtocolParams:
    """The data user's public parameters named by ``proxy.toml`` (one-line errors).

    ``insecure_test_key``: the proxy's own consent to a test key
    (``protocol.insecure_test_key``); the file's declaration alone is not enough.
    """
    if not path.is_file():
        raise MessageError(f"public parameters file {str(path)!r} must exist, got no such file")
    try:
        return ProtocolParams.from_json(json.loads(path.read_text()), insecure_test_key=insecure_test_key,
                                        test_key_consent=TEST_KEY_CONFIG)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise MessageError(f"public parameters file {str(path)!r} must be JSON, got {type(exc).__name__}") from None


def lock_state_dir(state_dir: Path) -> int:
    """Hold ``state_dir/.lock`` exclusively for this process's life (its descriptor; closing it releases the lock).

    Two services on one state directory would each acknowledge shares the
    other's release leaves out: the second is refused at start.

    Raises
    ------
    ParameterError
        Another running service holds it, or it cannot be made or written (one line naming
        ``server.state_dir``).
    """
    import fcntl

    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(state_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:  # under a file, unwritable, ...
        raise ParameterError(f"server.state_dir {str(state_dir)!r} must be a directory this service can create and "
                             f"write, got {type(exc).__name__}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ParameterError(f"server.state_dir {str(state_dir)!r} must not be in use by another running proxy "
                             f"service, got it locked by one") from None
    except OSError as exc:  # e.g. a file system without locks
        os.close(fd)
        raise ParameterError(f"server.state_dir {str(state_dir)!r} must be on a file system with file locks "
                             f"(flock), got {type(exc).__name__}: {exc.strerror or exc}") from None
    return fd


def check_against_params(config: ServiceConfig, params: ProtocolParams) -> None:
    """What ``proxy.toml`` asks that the public parameters must allow, checked at start (one line each).

    ``protocol.quorum`` must be at most ``max_owners``: the slots hold no more
    owners' shares, so a larger quorum is never reached (every owner past
    ``max_owners`` would be refused after encrypting, and the collection could
    only close at the deadline); then :func:`check_body_limit`.

    Raises
    ------
    ParameterError
        ``protocol.quorum must be <= ...``, or ``server.max_body_bytes must be >= ...``.
    """
    if config.quorum > params.max_owners:
        raise ParameterError(f"protocol.quorum must be <= max_owners={params.max_owners} of the public parameters "
                             f"(no more shares fit the slots, so a larger quorum is never reached), got "
                             f"{config.quorum}")
    check_body_limit(config, params)


def check_body_limit(config: ServiceConfig, params: ProtocolParams) -> None:
    """Refuse ``max_body_bytes`` below the fewest bytes a share of this session takes (one line, at start).

    The bound counts the share's ciphertexts and, with range proofs, what
    the proof section must hold (:func:`~dpdpca.protocol.sections.min_share_bytes`,
    :func:`~dpdpca.protocol.proofs.min_proof_bytes`): a limit below it would
    answer every owner 413, after each had encrypted (and proved) its share.

    Raises
    ------
    ParameterError
        ``server.max_body_bytes must be >= ...``, naming d, the release and the proofs.
    """
    from dpdpca.protocol.proofs import min_proof_bytes
    from dpdpca.protocol.sections import min_share_bytes

    if params.d is None:  # the collection refuses it, naming keygen --features
        return
    release = config.noise.mode
    need = min_share_bytes(params, params.d, release)
    what = f"d={params.d}, the {release} release"
    if config.range_proofs and params.scheme.range_proofs:
        need += min_proof_bytes(params, params.d, release, config.range_proof_mode)
        what += f", {config.range_proof_mode} range proofs"
    if config.max_body_bytes < need:
        raise ParameterError(f"server.max_body_bytes must be >= {need}, the fewest bytes a share of this session "
                             f"takes ({what}), got {config.max_body_bytes}")


def build_service(config: ServiceConfig, *, executor: Executor | None = None,
                  params: ProtocolParams | None = None) -> tuple[Collection, Any]:
    """The collection (reopened from ``state_dir`` if it exists) and its ASGI application.

    ``params``: the public parameters, if already loaded (default: read ``config.public_path``).
    """
    params = load_public(config.public_path, insecure_test_key=config.insecure_test_key) if params is None else params
    check_against_params(config, params)
    collection = Collection(params, config.state_dir, owner_keys=config.owner_keys, quorum=config.quorum,
                            min_shares=config.min_shares, deadline=config.deadline,
                            collection_seconds=config.collection_seconds, noise=config.noise,
                            release=config.release, executor=executor, budget=config.budget(),
                            range_proofs=config.range_proofs, range_proof_mode=config.range_proof_mode)
    return collection, create_app(collection, config.party_keys(), max_body_bytes=config.max_body_bytes,
                                  public_status=config.public_status)


def _server_tls(cert: Any, key: Any) -> ssl.SSLContext:
    """The server's TLS context (TLS 1.2 or later), loaded before anything is created."""
    try:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(cert), str(key))
        return context
    except (ssl.SSLError, OSError) as exc:
        raise ParameterError(f"server.tls_cert and server.tls_key must be a PEM certificate chain and its private "
                             f"key, got {str(cert)!r} and {str(key)!r} ({type(exc).__name__})") from None


def _check_bindable(host: str, port: int) -> None:
    """Bind the address once, before anything is created (uvicorn would exit with its own log line later).

    The port may still be taken between this check and uvicorn's bind; this
    catches the common mistakes (a port in use, an address not on this machine).
    """
    import socket

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            sock.bind(addr)
    except OSError as exc:
        raise ParameterError(f"server.host and server.port must be an address this machine can listen on, got "
                             f"{host}:{port} ({exc.strerror or type(exc).__name__})") from None


def _log_to_stderr() -> None:
    """The operator's log (:data:`dpdpca.net.collection.LOG`): one timestamped line per event on stderr."""
    import logging

    from dpdpca.net.collection import LOG

    if not any(getattr(h, "_dpdpca", False) for h in LOG.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s dpdpca proxy: %(message)s", "%Y-%m-%dT%H:%M:%S%z"))
        handler._dpdpca = True  # type: ignore[attr-defined]
        LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)


def serve(config: ServiceConfig, *, insecure_http: bool = False, executor: Executor | None = None,
          workers: int = 1, log_level: str = "warning") -> None:
    """Run the service until SIGINT/SIGTERM (uvicorn's graceful shutdown).

    ``workers > 1`` (without an ``executor``): a local pool of that many
    processes, started once after every check passed and before the first
    request (the intake kernels loaded in each), runs the proxy's large
    homomorphic batches: the aggregation at close, the rerandomizers made
    while collection is open and the release (each share is still checked in
    its request's thread as it arrives); it is shut down when the service
    stops.

    Raises
    ------
    ParameterError
        No TLS certificate and key configured, without ``insecure_http``.
    """
    if config.tls_cert is None and not insecure_http:
        raise ParameterError("server.tls_cert and server.tls_key must be set (TLS), got neither")
    for name, p in (("tls_cert", config.tls_cert), ("tls_key", config.tls_key)):
        if p is not None and not p.is_file():
            raise ParameterError(f"server.{name} must be an existing PEM file, got {str(p)!r}")
    context = None
    if config.tls_cert is not None and config.tls_key is not None:
        context = _server_tls(config.tls_cert, config.tls_key)
    check_int("workers", workers, minimum=1)
    params = load_public(config.public_path, insecure_test_key=config.insecure_test_key)
    check_against_params(config, params)
    _check_bindable(config.host, config.port)  # last: nothing is created before every check passed
    uvicorn = require("uvicorn")
    lock = lock_state_dir(config.state_dir)
    pool = None
    try:
        if executor is None and workers > 1:
            from dpdpca.crypto import local_process_pool, start_workers

            pool = executor = local_process_pool(workers)
            start_workers(pool, modules=("dpdpca.protocol.intake",))
        collection, app = build_service(config, executor=executor, params=params)
        scheme = "http" if config.tls_cert is None else "https"
        _log_to_stderr()
        pooled = f", {workers} worker processes" if pool is not None else ""
        print(f"dpdpca proxy: serving {scheme}://{config.host}:{config.port} (session "
              f"{collection.params.session_id}, phase {collection.phase.value}, {len(collection.accepted())} shares "
              f"accepted{pooled})", file=sys.stderr, flush=True)
        guard = ConnectionGuard(config.limits)
        # timeout_graceful_shutdown: an idle TLS keep-alive connection must not hold SIGTERM up forever.
        uvicorn.run(app, host=config.host, port=config.port, log_level=log_level, lifespan="on",
                    timeout_graceful_shutdown=5, http=guarded_protocol_factory(guard, context),
                    h11_max_incomplete_event_size=config.limits.max_header_bytes)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        os.close(lock)  # releases the state_dir's lock
