"""Start the proxy service as its own process on loopback (tests, benchmark, local trials).

* :func:`throwaway_tls` -- a fresh CA and a certificate for 127.0.0.1 (``trustme``);
* :func:`write_proxy_toml` -- a ``proxy.toml`` for given identities;
* :class:`ServerProcess` -- ``dpdpca proxy serve`` in a child process,
  waited for until it answers, stopped by its PID, and (on Linux) stopped
  too if the process that started it dies first (:func:`exit_with_this_process`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from dpdpca._io import atomic_write_bytes
from dpdpca.errors import MissingDependencyError, ProtocolError
from dpdpca.net.auth import USER
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

__all__ = ["TLSFiles", "throwaway_tls", "free_port", "write_proxy_toml", "ServerProcess", "exit_with_this_process"]

LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


def exit_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has a child sent SIGTERM when this process's calling thread dies; None off Linux.

    A benchmark killed outright (SIGKILL, or SIGTERM, which runs no
    ``finally``) would otherwise leave its proxy service running, bound to
    its port, with nobody to stop it.  Linux's ``PR_SET_PDEATHSIG`` signals
    the child when the thread that started it ends, so start the child from
    a thread that lives as long as the child should (the main thread).  The
    ``prctl`` is looked up here, before the fork; the child only calls it,
    then exits at once if this process died before the call took effect.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - every Linux libc has prctl
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent is already gone: no signal would ever come
            os._exit(1)

    return preexec


@dataclass(frozen=True)
class TLSFiles:
    ca_cert: Path
    cert: Path
    key: Path


def throwaway_tls(directory: str | os.PathLike[str]) -> TLSFiles:
    """A new CA and a server certificate for 127.0.0.1, as PEM files (key mode 0600)."""
    try:
        import trustme
    except ImportError:
        raise MissingDependencyError("a throwaway TLS certificate needs the 'trustme' package; install it with: "
                                     "pip install trustme") from None
    out = Path(directory)
    ca = trustme.CA()
    leaf = ca.issue_cert(LOOPBACK)
    files = TLSFiles(out / "ca.pem", out / "server.pem", out / "server.key")
    atomic_write_bytes(files.ca_cert, ca.cert_pem.bytes())
    atomic_write_bytes(files.cert, b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    atomic_write_bytes(files.key, leaf.private_key_pem.bytes(), mode=0o600)
    return files


def free_port() -> int:
    """A TCP port on 127.0.0.1 free at the time of the call."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def write_proxy_toml(path: str | os.PathLike[str], *, public: str | os.PathLike[str],
                     owners: Mapping[str, OwnerIdentity], user: OwnerIdentity, tls: TLSFiles | None, port: int,
                     state_dir: str | os.PathLike[str], quorum: int | None = None, min_shares: int = 1,
                     collection_seconds: float = 3600.0, epsilon: float = 1.0, delta: float = 1e-5,
                     max_body_bytes: int | None = None, tokens: Mapping[str, str] | None = None,
                     release: str = "on-close", release_mode: str | None = None,
                     budget: tuple[float, float] | None = None,
                     budget_ledger: str | os.PathLike[str] | None = None,
                     limits: Mapping[str, float] | None = None, insecure_test_key: bool = False) -> Path:
    """Write a ``proxy.toml`` (absolute paths) and the verify-key files it names, beside it.

    ``tokens`` maps owner ids (and ``"user"``) to bearer tokens; ``release``
    is when the proxy finishes, ``release_mode`` which release it makes
    (None: the default, add/remove); ``budget`` the service's total
    ``(epsilon, delta)`` over every session recorded in ``budget_ledger``;
    ``limits`` the ``[server]`` connection limits
    (:class:`dpdpca.net.guard.ConnectionLimits` field names);
    ``insecure_test_key`` writes ``protocol.insecure_test_key = true`` (the
    proxy accepts a test key below 2048 bits that ``public`` declares).
    """
    target = Path(path)
    owners_file, user_file = target.parent / "owners.verify.json", target.parent / "user.verify.json"
    OwnerKeyring.from_identities(owners.values()).save(owners_file, overwrite=True)
    OwnerKeyring.from_identities([user]).save(user_file, overwrite=True)
    tokens = dict(tokens or {})
    lines = ["[server]", f'host = "{LOOPBACK}"', f"port = {int(port)}", f'state_dir = "{Path(state_dir).resolve()}"']
    if tls is not None:
        lines += [f'tls_cert = "{tls.cert.resolve()}"', f'tls_key = "{tls.key.resolve()}"']
    if max_body_bytes is not None:
        lines.append(f"max_body_bytes = {int(max_body_bytes)}")
    lines += [f"{key} = {value!r}" for key, value in dict(limits or {}).items()]
    lines += ["", "[protocol]", f'public = "{Path(public).resolve()}"', f'owner_keys = ["{owners_file.resolve()}"]',
              f"quorum = {len(owners) if quorum is None else int(quorum)}", f"min_shares = {int(min_shares)}",
              f"collection_seconds = {float(collection_seconds)}", f"epsilon = {float(epsilon)}",
              f"delta = {float(delta)}", f'release = "{release}"']
    if release_mode is not None:
        lines.append(f'release_mode = "{release_mode}"')
    if budget is not None:
        lines += [f"budget_epsilon = {float(budget[0])}", f"budget_delta = {float(budget[1])}"]
    if budget_ledger is not None:
        lines.append(f'budget_ledger = "{Path(budget_ledger).resolve()}"')
    if insecure_test_key:
        lines.append("insecure_test_key = true")
    lines += ["", "[user]", f'verify_keys = "{user_file.resolve()}"']
    if USER in tokens:
        lines.append(f'token = "{tokens.pop(USER)}"')
    if tokens:
        lines += ["", "[tokens]"] + [f'"{oid}" = "{tok}"' for oid, tok in tokens.items()]
    atomic_write_bytes(target, ("\n".join(lines) + "\n").encode())
    return target


class ServerProcess:
    """``dpdpca proxy serve --config CONFIG`` as a child process, which gets SIGTERM (a graceful stop) if the
    thread that started it dies first, on Linux (:func:`exit_with_this_process`).

    Parameters
    ----------
    config : path
    url : str
        Where it will listen (``https://127.0.0.1:PORT``).
    """

    def __init__(self, config: str | os.PathLike[str], url: str) -> None:
        self.config = Path(config)
        self.url = url
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.config.parent / "proxy-server.log"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ProtocolError("the proxy server must be started first, got no process")
        return self.proc.pid

    def start(self, *, ready_client: Any = None, timeout_s: float = 120.0) -> "ServerProcess":
        """Start, then wait until ``ready_client.status()`` answers (if given)."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "dpdpca.cli", "proxy", "serve", "--config",
                                          str(self.config)], stdout=log, stderr=log,
                                         preexec_fn=exit_with_this_process())
        if ready_client is not None:
            stop = time.monotonic() + timeout_s
            while True:
                if self.proc.poll() is not None:
                    raise ProtocolError(f"proxy server must start, got exit {self.proc.returncode}: "
                                        f"{self.log.read_text()[-500:]}")
                try:
                    ready_client.status()
                    break
                except ProtocolError:
                    if time.monotonic() > stop:
                        raise
                    time.sleep(0.1)
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        os.kill(self.pid, signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(timeout=30)

    def stop(self, *, timeout_s: float = 30.0) -> int:
        """SIGTERM by PID (uvicorn's graceful shutdown); the exit status.

        uvicorn re-raises the signal once it has shut down, so a clean stop
        is ``-SIGTERM`` (or 0); ``-SIGKILL`` means it had to be killed.
        """
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()
        return int(self.proc.returncode)
