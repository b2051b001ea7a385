"""The release ledger: at most one differentially private release per session.

Two independent noisy releases of the same data, each (epsilon, delta)-DP,
average to a release with less noise; the budget of a session covers one.  A
:class:`ReleaseLedger` records, per session id, the digest of the one release
a party made (the proxy) or accepted (the data user), and refuses another:

* the proxy claims the session after it has built its ``MASKED_RESULT`` and
  before that message leaves it, so a crash can lose a release but never
  produce two;
* the data user claims the session before it decrypts; the *same* release
  again (same digest) is allowed, since decrypting identical bytes twice
  reveals nothing new; a different release of a claimed session is refused.

The ledger is a JSON file, persisted across processes::

    {"dpdpca_release_ledger": {"version": 1, "releases": {
        "<session id>": {"role": "proxy", "digest": "<sha256 hex>", "time": "<UTC ISO 8601>"}}}}

The data user adds ``"outcome"``: ``"released"`` or ``"refused: <check>"``
(:meth:`ReleaseLedger.record_outcome`; docs/protocol.md, "Decrypt, check, claim").

It is read and rewritten under an exclusive ``flock`` on a sidecar lock file
and replaced atomically (temporary file, fsync, rename), so two concurrent
claims of one session cannot both succeed and a crash leaves either the old
or the new ledger.  ``path=None`` keeps the ledger in memory (one process).

What it does not do: a party that deletes its own ledger file can release
again.  The ledger protects against accidents and retries by an honest
party; docs/threat-model.md says what a malicious proxy can still do.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
from pathlib import Path
from typing import Any, Mapping

from dpdpca._io import atomic_write_json, exclusive_lock, read_json_file
from dpdpca.errors import MessageError, ProtocolError
from dpdpca.protocol.messages import check_session_id

__all__ = ["ReleaseLedger", "LEDGER_KEY"]

LEDGER_KEY = "dpdpca_release_ledger"
_HEX64 = re.compile(r"[0-9a-f]{64}")

class ReleaseLedger:
    """Sessions already released, persisted atomically; refuses a second release.

    Parameters
    ----------
    path : str, path-like or None
        The ledger file (created on the first claim); None: in memory.

    Examples
    --------
    >>> ledger = ReleaseLedger()
    >>> ledger.claim("ab" * 16, role="proxy", digest="0" * 64)
    True
    >>> ledger.claim("ab" * 16, role="proxy", digest="1" * 64)
    Traceback (most recent call last):
    ...
    dpdpca.errors.ProtocolError: session abababababababababababababababab must be released once, got a second release (the ledger holds one from proxy)
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, what: str = "release ledger") -> None:
        self.path = None if path is None else Path(path)
        self.what = what  # its name in file errors (the CLI passes its option, "--ledger")
        self._memory: dict[str, dict[str, str]] = {}

    def __repr__(self) -> str:
        return f"ReleaseLedger({str(self.path) if self.path else None!r})"

    def _read(self) -> dict[str, dict[str, str]]:
        if self.path is None:
            return dict(self._memory)
        if not self.path.exists():
            return {}
        data = read_json_file(self.path, "release ledger")
        obj = data.get(LEDGER_KEY) if isinstance(data, Mapping) else None
        if not isinstance(obj, Mapping) or obj.get("version") != 1 or not isinstance(obj.get("releases"), Mapping):
            raise MessageError(f"release ledger {str(self.path)!r} must hold {LEDGER_KEY} version 1, got other JSON")
        out: dict[str, dict[str, str]] = {}
        for session, entry in obj["releases"].items():
            if not isinstance(entry, Mapping) or not isinstance(entry.get("digest"), str):
                raise MessageError(f"release ledger {str(self.path)!r} entry {str(session)[:64]!r} must have a digest")
            out[str(session)] = {k: str(v) for k, v in entry.items()}
        return out

    def releases(self) -> dict[str, dict[str, str]]:
        """Session id -> ``{"role", "digest", "time"}`` of every recorded release."""
        with self._locked():
            return self._read()

    def is_released(self, session_id: str) -> bool:
        return session_id in self.releases()

    def _locked(self) -> Any:
        """The exclusive lock on the ledger's ``.lock`` sidecar (none for an in-memory ledger)."""
        return contextlib.nullcontext() if self.path is None else exclusive_lock(self.path, what=self.what)

    def _write(self, releases: dict[str, dict[str, str]]) -> None:
        if self.path is None:
            self._memory = releases
        else:
            atomic_write_json(self.path, {LEDGER_KEY: {"version": 1, "releases": releases}}, mode=0o600,
                              what=self.what)

    def claim(self, session_id: str, *, role: str, digest: str) -> bool:
        """Record the release of ``session_id`` with ``digest`` (SHA-256 hex of the released bytes).

        Returns
        -------
        bool
            True if newly recorded; False if this session was already recorded
            with the same digest (the same release again, which reveals nothing new).

        Raises
        ------
        ProtocolError
            The session already holds a release with another digest.
        MessageError
            A malformed session id or digest, or a ledger file that is not one.
        FileAccessError
            The ledger cannot be written.
        """
        check_session_id(session_id)
        if not isinstance(digest, str) or _HEX64.fullmatch(digest) is None:
            raise MessageError(f"release digest must be 64 lowercase hex characters, got {str(digest)[:80]!r}")
        with self._locked():
            releases = self._read()
            held = releases.get(session_id)
            if held is not None:
                if held.get("digest") == digest:
                    return False
                raise ProtocolError(f"session {session_id} must be released once, got a second release "
                                    f"(the ledger holds one from {held.get('role', '?')})")
            releases[session_id] = {"role": str(role), "digest": digest,
                                    "time": datetime.datetime.now(datetime.timezone.utc).isoformat(
                                        timespec="seconds")}
            self._write(releases)
        return True

    def record_outcome(self, session_id: str, *, digest: str, outcome: str) -> None:
        """Note what became of the claimed release ``digest`` (``"released"``, or ``"refused: <check>"``).

        The session stays claimed either way: a refusal that depends on the
        decrypted values is itself a function of the release.

        Raises
        ------
        ProtocolError
            The session is not claimed with this digest.
        """
        with self._locked():
            releases = self._read()
            held = releases.get(session_id)
            if held is None or held.get("digest") != digest:
                raise ProtocolError(f"session {session_id} must be claimed with this release before its outcome "
                                    f"is recorded, got {'another release' if held else 'no claim'}")
            held["outcome"] = str(outcome)[:200]
            self._write(releases)
