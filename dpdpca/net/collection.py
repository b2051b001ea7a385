"""The proxy's collection as a crash-safe state machine, independent of HTTP.

Phases::

    collecting --(quorum reached, or deadline with >= min_shares)--> closed --(finish)--> released
    collecting --(deadline with < min_shares, or a close the release refuses)--> failed
    closed --(killed after the ledger claim, before result.msg)--> lost

The proxy finishes (mask, DP noise under encryption) as soon as the
collection closes; the data user then fetches the one release.  No round
asks the data user for anything (owners sign their row counts,
:mod:`dpdpca.protocol.counts`).

Everything the proxy accepts is on disk before it is acknowledged, and every
file is written whole or not at all (temporary file, fsync, rename, fsync of
the directory).  Layout of ``state_dir``::

    state.json          phase, deadline, session, the admission settings, accepted owners and N at closing
    shares/<id>.msg     each accepted owner share, byte for byte
    aggregate.msg       the aggregated ciphertexts and signed counts (PROXY_STATE)
    ledger.json         the release ledger (:mod:`dpdpca.protocol.ledger`)
    result.msg          the one release (MASKED_RESULT)

Commit points, so a SIGKILL at any instant loses no accepted share and never
releases twice:

* a share is accepted when ``shares/<id>.msg`` exists (it is validated in
  full first, signature included).  On restart a file that fails the
  message's integrity check was cut short or corrupted, never acknowledged
  whole: it is removed, with a line in the log.  A whole file the proxy no
  longer accepts (its owner left ``owner_keys`` or was re-keyed, the file was
  rewritten) stops the start with one line naming it, and nothing is
  deleted: the operator restores ``owner_keys`` or removes the file;
* the collection is closed when ``state.json`` says so (aggregating again from
  the same share files after a crash gives the same aggregate);
* the release is claimed in the ledger by :meth:`dpdpca.protocol.Proxy.finish`
  before the result leaves it, then written to ``result.msg`` before anyone
  sees it; from then on every request gets those same bytes.  A kill between
  the claim and the write loses the release (phase ``lost``) rather than
  risking a second one: the ledger refuses to finish the session again.

A session's admission settings (:data:`PINNED`: the release, who adds the
noise, range proofs and their mode, and with the owners' noise what their
signed noise labels hold) decide which shares are valid, and its privacy
setting (epsilon, delta, calibration, sensitivity mode, noise lattice,
neighbouring relation) is what the status page tells the owners while they
send; both are kept in ``state.json`` at the first start that succeeds (a
start that fails writes nothing) and a restart with others is refused (one
line naming the setting): shares acknowledged under one rule are never
re-checked under another, a release is never made from shares admitted under
two, and shares sent under one announced epsilon are never released under
another.

Faults at closing: a close the release refuses (the centred release over
fewer than 2 rows) fails the session with its reason (409 to the data user);
a failed write of ``aggregate.msg`` or ``result.msg`` answers 503 until a
restart, which closes again from the share files (or finds the release
``lost``).  ``dpdpca proxy serve`` holds ``state_dir/.lock`` for its life, so a
second service on the same directory is refused at start.

The proxy knows its release setting while collecting, so a share whose signed
noise label is not the session's (owners' noise for another epsilon, delta,
L = the listed owners, t or quorum = ``min_shares``; or the wrong kind) is
refused on arrival (400 ``invalid``, as any invalid share) and never stored:
it cannot make the session unreleasable, and its owner, not excluded, may
send a share with the session's noise.

Retries are idempotent: the same share again is ``duplicate`` (even after
closing); another share under an accepted owner id is ``conflict``.
"""

from __future__ import annotations

import datetime
import enum
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpdpca._io import atomic_write_bytes
from dpdpca.dp.accountant import BudgetExceededError, PrivacyLedger
from dpdpca.errors import AuthenticationError, DpdpcaError, MessageError, ParameterError, ProofError, ProtocolError
from dpdpca.net.auth import USER
from dpdpca.protocol.identity import OwnerKeyring, check_owner_id
from dpdpca.protocol.ledger import ReleaseLedger
from dpdpca.protocol.messages import Message
from dpdpca.protocol.config import ReleaseOptions
from dpdpca.protocol.params import ProtocolParams
from dpdpca.protocol.proxy import Proxy
from dpdpca.protocol.roles import ProxySteps

__all__ = ["Collection", "Outcome", "Phase", "LOG", "PINNED"]

#: The operator's log: one line per event (share accepted or refused, collection closed, release made,
#: budget spent), never a secret, a share or a ciphertext.  ``dpdpca proxy serve`` sends it to stderr.
LOG = logging.getLogger("dpdpca.proxy")
#: The settings kept in ``state.json`` at a session's first start (``proxy.toml`` ``[protocol]`` names): those that
#: decide which shares it admits (``range_proof_mode`` only counts with ``range_proofs`` on; with ``noise_by =
#: "owners"`` also what the owners' signed noise label holds: honest_owners, min_shares, the number of owners) and
#: the privacy setting of its one release, which the status page shows the owners while they send.
PINNED = ("release_mode", "noise_by", "range_proofs", "range_proof_mode", "epsilon", "delta", "calibration",
          "sensitivity_mode", "noise_lattice", "neighbouring", "honest_owners", "min_shares", "owners")


def _when(unix: float) -> str:
    """A unix time as ISO 8601 UTC to the second (the log's deadlines)."""
    return datetime.datetime.fromtimestamp(unix, tz=datetime.timezone.utc).isoformat(timespec="seconds")


def _one_line(text: str, limit: int = 200) -> str:
    """A refusal's reason for the log: one line, bounded (it names a parameter, never carries a message)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class Phase(str, enum.Enum):
    COLLECTING = "collecting"
    CLOSED = "closed"
    RELEASED = "released"
    FAILED = "failed"
    LOST = "lost"


@dataclass(frozen=True)
class Outcome:
    """What one request did: an HTTP-like ``code``, a ``status`` word, a one-line ``detail``, maybe ``body`` bytes."""

    code: int
    status: str
    detail: str = ""
    body: bytes | None = None

    def as_json(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def durable_write(path: Path, data: bytes) -> None:
    """Atomic write, then fsync of the directory so the rename itself survives a crash."""
    atomic_write_bytes(path, data, mode=0o600)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Collection:
    """Accept owner shares, close at a quorum or a deadline, release once.

    Parameters
    ----------
    params : ProtocolParams
        The data user's public parameters.
    state_dir : path
        Created if absent; reopened (after a crash) if present.
    owner_keys : OwnerKeyring
        The owners allowed to send a share, with their verify keys.
    quorum : int
        Close as soon as this many shares were accepted.
    min_shares : int
        At the deadline, close if at least this many arrived, else fail.
    deadline : float or None
        Absolute unix time; or ``collection_seconds`` after the first start
        (persisted in ``state.json``, so a restart keeps it).
    noise : ReleaseOptions
        The release and its DP options; default the add/remove release.
    release : {"on-close", "on-request"}
        Finish (mask, noise, release) as soon as the collection closes, or
        when the data user first asks for the result.
    executor : Executor or None
        Runs the homomorphic batches.
    clock : callable
        ``time.time``; tests pass a fake clock.
    range_proofs : bool
        Every share must carry a valid range proof (:mod:`dpdpca.protocol.proofs`);
        an owner whose own signed proof fails is refused and excluded (kept in
        ``state.json``); a proof section its owner did not sign (missing, or
        changed in transit) is refused (400) without excluding anyone.
    range_proof_mode : {"slack", "exact"}
        The session's proof mode (:data:`dpdpca.protocol.proofs.RANGE_PROOF_MODES`);
        a share proved in the other mode is refused and its owner excluded.

    Raises
    ------
    ProtocolError
        ``state_dir`` belongs to another session or key.
    """

    def __init__(self, params: ProtocolParams, state_dir: str | os.PathLike[str], *,
                 owner_keys: OwnerKeyring, quorum: int, min_shares: int = 1, deadline: float | None = None,
                 collection_seconds: float | None = None, noise: ReleaseOptions | None = None,
                 release: str = "on-close", executor: Executor | None = None,
                 clock: Callable[[], float] = time.time, budget: PrivacyLedger | None = None,
                 range_proofs: bool = False, range_proof_mode: str = "slack") -> None:
        self.params = params
        self.range_proofs = bool(range_proofs)
        self.range_proof_mode = str(range_proof_mode)
        self.root = Path(state_dir)
        self.owner_keys = owner_keys
        self.quorum = int(quorum)
        self.min_shares = int(min_shares)
        self.noise = ReleaseOptions() if noise is None else noise
        if release not in ("on-close", "on-request"):
            raise ParameterError(f"release must be 'on-close' or 'on-request', got {release!r}")
        self.release = release
        self.executor = executor
        self.clock = clock
        self.budget = budget
        self._lock = threading.Lock()
        self._broken: str | None = None
        self._refused: str | None = None
        if params.d is None:  # else the first share accepted would fix d for every other owner
            raise ParameterError("public.json must declare d, the number of features, for the proxy service "
                                 "(dpdpca keygen --features D), got none")
        (self.root / "shares").mkdir(parents=True, exist_ok=True)
        self._remove_partial_writes()
        self.ledger = ReleaseLedger(self.root / "ledger.json")
        self._result: bytes | None = None
        state = self._read_state()
        settings = self._settings()
        if state is None:
            if deadline is None and collection_seconds is None:
                raise ProtocolError("deadline or collection_seconds must be given, got neither")
            due = float(deadline) if deadline is not None else self.clock() + float(collection_seconds or 0)
            state = {"phase": Phase.COLLECTING.value, "deadline_unix": due, "session": params.session_id,
                     "key_fingerprint": params.key_fingerprint, "owners": []}
        elif state.get("session") != params.session_id or state.get("key_fingerprint") != params.key_fingerprint:
            raise ProtocolError(f"state_dir {str(self.root)!r} must belong to session {params.session_id}, "
                                f"got session {state.get('session')!r}")
        # a state written before (some of) the settings were kept adopts this start's for those
        kept = {**settings, **dict(state.get("settings", {}))}
        self._check_settings(kept, settings)
        if deadline is not None and float(deadline) != float(state["deadline_unix"]):
            LOG.warning("deadline %s of the config is not this session's: it keeps %s, fixed at its first start",
                        _when(float(deadline)), _when(float(state["deadline_unix"])))
        fresh = kept != state.get("settings")  # a new state, or one written before (some of) the settings were kept
        state = {**state, "settings": kept}
        self._state = state
        self._steps = self._new_steps()  # checks the settings against the public parameters: nothing is
        if fresh:                        # written for a start that fails (a failed start pins nothing)
            self._write_state(state)
        self._recover()

    # -- persistence -----------------------------------------------------------
    def _remove_partial_writes(self) -> None:
        """Delete the temporary files of writes a crash cut short (``.<name>.*.tmp``, never renamed into place).

        Every file of the state is written to such a file and renamed (:func:`durable_write`), so a
        temporary file left at start-up belongs to no acknowledged share and no committed state.
        """
        for folder in (self.root, self.root / "shares"):
            for tmp in folder.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)

    def _new_steps(self, proxy: Proxy | None = None) -> ProxySteps:
        """The proxy's steps (:mod:`dpdpca.protocol.roles`), the same every deployment drives."""
        if proxy is None:
            proxy = Proxy(self.params, self.owner_keys, quorum=self.min_shares, executor=self.executor,
                          ledger=self.ledger, release=self.noise.mode, range_proofs=self.range_proofs,
                          range_proof_mode=self.range_proof_mode)
        proxy.excluded_.update({str(k): str(v) for k, v in dict(self._state.get("excluded", {})).items()})
        return ProxySteps(proxy, self.noise, ledger=self.budget,
                          label=f"proxy service session {self.params.session_id}")

    def _settings(self) -> dict[str, Any]:
        """The admission settings of this start, as ``state.json`` keeps them (keys: :data:`PINNED`)."""
        noise = self.noise
        out: dict[str, Any] = {"release_mode": noise.mode, "noise_by": noise.noise_by,
                               "range_proofs": self.range_proofs,
                               "range_proof_mode": self.range_proof_mode if self.range_proofs else None,
                               # the release's privacy setting, as announced while the owners send
                               "epsilon": float(noise.epsilon), "delta": float(noise.delta),
                               "calibration": noise.calibration, "sensitivity_mode": noise.sensitivity_mode,
                               "noise_lattice": noise.noise_lattice, "neighbouring": noise.neighbouring}
        if noise.noise_by == "owners":  # what the owners' signed noise label holds (their shares' sigma)
            out.update(honest_owners=noise.honest_owners, min_shares=self.min_shares, owners=len(self.owner_keys))
        return out

    def _check_settings(self, kept: dict[str, Any], given: dict[str, Any]) -> None:
        """Refuse a (re)start whose admission settings differ from those the session started with."""
        for key in PINNED:
            if kept.get(key) != given.get(key):
                name = "owner_keys (how many owners it lists)" if key == "owners" else key
                raise ParameterError(f"protocol.{name} must be {kept.get(key)!r}, the setting session "
                                     f"{self.params.session_id} started with (kept in "
                                     f"{str(self.root / 'state.json')!r}), got {given.get(key)!r}")

    def _read_state(self) -> dict[str, Any] | None:
        path = self.root / "state.json"
        if not path.is_file():
            return None
        try:
            state = json.loads(path.read_text())
            Phase(state["phase"])
            float(state["deadline_unix"])
        except (ValueError, KeyError, TypeError, RecursionError):
            raise MessageError(f"proxy state {str(path)!r} must be JSON written by the service, got other content") \
                from None
        return dict(state)

    def _write_state(self, state: dict[str, Any]) -> None:
        durable_write(self.root / "state.json", (json.dumps(state, sort_keys=True, indent=1) + "\n").encode())
        self._state = state

    def _share_path(self, owner_id: str) -> Path:
        return self.root / "shares" / f"{owner_id}.msg"

    def _recover(self) -> None:
        """Rebuild the in-memory proxy from disk after a (re)start."""
        phase = Phase(self._state["phase"])
        result = self.root / "result.msg"
        if phase in (Phase.CLOSED, Phase.RELEASED, Phase.LOST):
            try:
                proxy = Proxy.from_state(self.params, self.owner_keys, (self.root / "aggregate.msg").read_bytes(),
                                         executor=self.executor, ledger=self.ledger)
            except AuthenticationError as exc:  # an owner of the closed aggregate left owner_keys, or was re-keyed
                raise ParameterError(f"protocol.owner_keys must hold the verify key of every owner of this "
                                     f"session's closed aggregate ({str(self.root / 'aggregate.msg')!r}), got: "
                                     f"{_one_line(str(exc))}") from None
            self._steps = self._new_steps(proxy)
            if result.is_file():
                self._result = result.read_bytes()
                if phase is not Phase.RELEASED:  # killed between writing result.msg and state.json
                    self._write_state({**self._state, "phase": Phase.RELEASED.value})
            elif phase is Phase.CLOSED and self.ledger.is_released(self.params.session_id):
                self._write_state({**self._state, "phase": Phase.LOST.value})
            return
        if phase is Phase.COLLECTING:
            for path in sorted((self.root / "shares").glob("*.msg"), key=lambda p: p.stat().st_mtime_ns):
                data = path.read_bytes()
                try:
                    Message.from_bytes(data)
                except MessageError as exc:  # cut short or corrupted: never acknowledged whole
                    LOG.warning("stored share %s refused on restart and removed: %s", path.name, _one_line(str(exc)))
                    path.unlink()
                    continue
                try:
                    self._steps.accept(data)
                except DpdpcaError as exc:
                    # acknowledged under these settings (PINNED), so something else changed: an owner left
                    # owner_keys or was re-keyed, or the file was rewritten; the operator decides, nothing is lost
                    raise ParameterError(f"stored share {str(path)!r} must still be accepted on restart (it was "
                                         f"acknowledged), got: {_one_line(str(exc))}; restore protocol.owner_keys, "
                                         f"or remove the file to drop that share from the session") from None
            self._close_if_due_locked()

    # -- queries ----------------------------------------------------------------
    @property
    def phase(self) -> Phase:
        return Phase(self._state["phase"])

    @property
    def deadline(self) -> float:
        return float(self._state["deadline_unix"])

    def accepted(self) -> list[str]:
        """Owner ids of the accepted shares (the closed set once collection closed)."""
        if self.phase is Phase.COLLECTING:
            return self._steps.received
        return list(self._state.get("owners", []))

    def status(self, party: str | None = None) -> dict[str, Any]:
        """Progress for ``party`` (``/v1/status``): phase, counts, quorum and deadline (no owner data).

        ``n_rows``, the centred release's total N, is shown to the data user
        only (the release gives it N exactly): an owner who knows its own
        count would read the other owners' total from it, and the threat model
        says an owner learns nothing.  Under the add/remove release N is never
        known to the proxy, so it is None for everyone.

        Reads without the lock (one consistent dict), so it answers while the
        proxy finishes.
        """
        state = self._state
        phase = Phase(state["phase"])
        accepted = len(self._steps.received) if phase is Phase.COLLECTING else len(state.get("owners", []))
        n_rows = state.get("n_rows") if party == USER else None
        return {"phase": phase.value, "accepted": accepted, "quorum": self.quorum, "n_rows": n_rows,
                "min_shares": self.min_shares, "expected": len(self.owner_keys),
                "range_proofs": self.range_proofs, "range_proof_mode": self.range_proof_mode, "excluded": sorted(state.get("excluded", {})),
                "deadline_unix": float(state["deadline_unix"]), "session": self.params.session_id,
                "seconds_left": max(0.0, float(state["deadline_unix"]) - self.clock())
                if phase is Phase.COLLECTING else 0.0,
                "refused": self._refused}

    def session(self) -> dict[str, Any]:
        """What the operator watches (``/v1/session``, the page at ``/``, ``dpdpca proxy status``).

        Owner ids (expected, accepted, still missing), quorum, deadline,
        release state and the privacy budget this session spent: no share,
        no ciphertext, no row count, no secret.
        """
        state = self._state
        phase = Phase(state["phase"])
        accepted = list(self._steps.received) if phase is Phase.COLLECTING else list(state.get("owners", []))
        expected = sorted(self.owner_keys)
        spent = state.get("budget") if phase is Phase.RELEASED else None
        when = {"on-close": "when the collection closes", "on-request": "when the data user asks"}[self.release]
        return {"session": self.params.session_id, "phase": phase.value, "quorum": self.quorum,
                "min_shares": self.min_shares, "deadline_unix": float(state["deadline_unix"]),
                "seconds_left": max(0.0, float(state["deadline_unix"]) - self.clock())
                if phase is Phase.COLLECTING else 0.0,
                "owners_expected": expected, "owners_accepted": sorted(accepted),
                "owners_missing": [o for o in expected if o not in set(accepted)],
                "closed_because": state.get("closed_because"),
                "release": {"state": {Phase.RELEASED: "released", Phase.LOST: "lost", Phase.FAILED: "none (failed)"}
                            .get(phase, "not yet"), "mode": self.noise.mode, "when": when},
                "budget": {"epsilon": float(self.noise.epsilon), "delta": float(self.noise.delta),
                           "epsilon_spent": float(spent["epsilon"]) if spent else 0.0,
                           "delta_spent": float(spent["delta"]) if spent else 0.0,
                           "service": self._service_budget()}}

    def _service_budget(self) -> dict[str, Any] | None:
        """The service's budget over every session (``budget_epsilon`` in proxy.toml), or None."""
        if self.budget is None:
            return None
        try:
            spent = self.budget.spent()
        except DpdpcaError:
            return None
        budget = spent.get("budget") or {}
        return {"epsilon_spent": float(spent["epsilon"]), "delta_spent": float(spent["delta"]),
                "epsilon": budget.get("epsilon"), "delta": budget.get("delta"), "releases": spent.get("releases")}

    # -- round 1 ------------------------------------------------------------------
    def submit_share(self, owner_id: str, data: bytes) -> Outcome:
        """Accept, re-acknowledge or refuse one owner's share (see the module docstring); logs one line."""
        owner_id = check_owner_id(owner_id)
        outcome = self._submit_share(owner_id, data)
        if outcome.code == 201:
            LOG.info("share accepted: owner %s (%s)", owner_id, outcome.detail.rpartition("(")[2].rstrip(")"))
        elif outcome.code == 200:
            LOG.info("share of owner %s received again: duplicate, nothing changed", owner_id)
        else:
            LOG.warning("share refused: owner %s, %d %s: %s", owner_id, outcome.code, outcome.status,
                        _one_line(outcome.detail))
        return outcome

    def _submit_share(self, owner_id: str, data: bytes) -> Outcome:
        with self._lock:
            if self._broken is not None:
                return Outcome(503, "unavailable", self._broken)
            path = self._share_path(owner_id)
            if path.is_file():
                if _sha256(path.read_bytes()) == _sha256(data):
                    return Outcome(200, "duplicate", f"share of owner {owner_id} was already accepted")
                return Outcome(409, "conflict", f"owner {owner_id} already has a different accepted share")
            if owner_id not in self.owner_keys:
                return Outcome(403, "forbidden", f"owner id must be an expected owner, got {owner_id!r}")
            if self.phase is not Phase.COLLECTING or self.clock() >= self.deadline:
                return Outcome(410, "late", f"collection closed ({self.phase.value}) before the share of owner "
                                            f"{owner_id} arrived")
            try:
                msg = Message.from_bytes(data)
                if msg.meta.get("owner_id") != owner_id or msg.sender != f"owner:{owner_id}":
                    return Outcome(403, "forbidden", f"share must be owner {owner_id}'s own, got sender "
                                                     f"{msg.sender!r}")
                self._steps.accept(data)
            except ProofError as exc:  # the proxy logged it and excluded the owner: keep that across restarts
                self._write_state({**self._state, "excluded": dict(self._steps.proxy.excluded_)})
                return Outcome(400, "invalid", str(exc))
            except DpdpcaError as exc:
                return Outcome(400, "invalid", str(exc))
            try:
                durable_write(path, data)
            except OSError as exc:
                # The in-memory proxy now holds a share the disk lacks: refuse everything until a
                # restart rebuilds the proxy from disk (where this share is absent, as acknowledged).
                self._broken = f"proxy storage failed ({type(exc).__name__}); restart the service"
                return Outcome(503, "unavailable", self._broken)
            return Outcome(201, "accepted", f"share of owner {owner_id} accepted "
                                            f"({len(self._steps.received)}/{self.quorum})")

    def close_if_due(self) -> bool:
        """Close at the quorum or the deadline, then finish; True if the phase changed."""
        with self._lock:
            changed = self._close_if_due_locked()
            if self.release == "on-close":
                changed = self._finish_locked() or changed
            return changed

    def _close_if_due_locked(self) -> bool:
        if self.phase is not Phase.COLLECTING or self._broken is not None:
            return False
        n = len(self._steps.received)
        if n < self.quorum and self.clock() < self.deadline:
            return False
        if n < self.min_shares:
            self._write_state({**self._state, "phase": Phase.FAILED.value, "owners": self._steps.received})
            LOG.warning("collection failed: the deadline passed with %d share(s), fewer than min_shares=%d; "
                        "no release will be made", n, self.min_shares)
            return True
        try:
            n_rows = self._steps.close()
        except DpdpcaError as exc:  # e.g. the centred release over fewer than 2 rows: no release can be made
            self._write_state({**self._state, "phase": Phase.FAILED.value, "owners": self._steps.received,
                               "failed_because": _one_line(str(exc))})
            LOG.warning("collection failed at closing: %s; no release will be made", _one_line(str(exc)))
            return True
        try:
            durable_write(self.root / "aggregate.msg", self._steps.proxy.state_bytes())
        except OSError as exc:  # the proxy closed in memory, not on disk: a restart closes again from the shares
            self._broken = f"proxy storage failed at closing ({type(exc).__name__}); restart the service"
            LOG.error("%s", self._broken)
            return False
        self._write_state({**self._state, "phase": Phase.CLOSED.value, "owners": self._steps.proxy.owners_,
                           "n_rows": n_rows, "closed_unix": self.clock(),
                           "closed_because": "quorum" if n >= self.quorum else "deadline"})
        why = f"quorum reached ({n} of {self.quorum})" if n >= self.quorum else \
            f"deadline passed with {n} share(s) (quorum {self.quorum}, min_shares {self.min_shares})"
        LOG.info("collection closed: %s; owners %s", why, ", ".join(self._steps.proxy.owners_))
        return True

    def _finish_locked(self) -> bool:
        """Mask and add the noise once; the release is on disk before anyone can fetch it."""
        if self.phase is not Phase.CLOSED or self._result is not None or self._broken is not None:
            return False
        if self._refused is not None:
            return False
        try:
            result = self._steps.release()
        except BudgetExceededError as exc:  # priced before any noise is drawn: nothing was released
            self._refused = str(exc)
            return False
        except DpdpcaError as exc:  # e.g. an epsilon too small for the declared noise allowance
            self._broken = f"proxy finish failed: {exc}"
            LOG.error("release failed: %s", _one_line(str(exc)))
            return False
        try:
            durable_write(self.root / "result.msg", result)  # the commit point of the release
        except OSError as exc:  # claimed in the ledger, not stored: a restart finds the session lost (410)
            self._broken = f"proxy storage failed writing the release ({type(exc).__name__}); restart the service"
            LOG.error("%s", self._broken)
            return False
        self._result = result
        privacy = self._steps.proxy.privacy_
        self._write_state({**self._state, "phase": Phase.RELEASED.value, "released_unix": self.clock(),
                           "budget": {"epsilon": float(privacy.epsilon), "delta": float(privacy.delta)}})
        LOG.info("release made: the %s release of session %s, %s noise (%s), sigma %.4g, added by %s",
                 self.noise.mode, self.params.session_id, privacy.mechanism, privacy.calibration,
                 float(privacy.sigma) if privacy.sigma is not None else float("nan"), privacy.noise_added_by)
        LOG.info("budget spent: epsilon %g, delta %g by this session's one release (recorded in %s)%s",
                 float(privacy.epsilon), float(privacy.delta), self.ledger.path, self._service_budget_note())
        return True

    def _service_budget_note(self) -> str:
        """With a service budget (``budget_epsilon`` in proxy.toml): what every session spent together."""
        service = self._service_budget()
        if service is None or self.budget is None:
            return ""
        return (f"; the service's budget ledger {self.budget.path}: {service['releases']} release(s), "
                f"composed epsilon {service['epsilon_spent']:.4g} of {service['epsilon']}")

    # -- the data user --------------------------------------------------------------
    def result(self) -> Outcome:
        """The released ``MASKED_RESULT``, the same bytes every time."""
        with self._lock:
            if self._result is None and self.release == "on-request":
                self._finish_locked()
            if self._result is not None:
                LOG.info("release sent to the data user (%d bytes, the same every time)", len(self._result))
                return Outcome(200, "released", body=self._result)
            phase = self.phase
            if self._refused is not None:
                return Outcome(403, "refused", f"release refused: {self._refused}")
            if self._broken is not None:
                return Outcome(503, "unavailable", self._broken)
            if phase is Phase.FAILED:
                why = self._state.get("failed_because")
                return Outcome(409, "failed", f"collection failed: {why}" if why else
                               f"collection failed: fewer than min_shares={self.min_shares} shares by the deadline")
            if phase is Phase.LOST:
                return Outcome(410, "lost", "the proxy was stopped between claiming the release and storing it; "
                                            "the ledger refuses a second release of this session")
            return Outcome(409, phase.value, f"the result needs a finished collection, got phase {phase.value}")
