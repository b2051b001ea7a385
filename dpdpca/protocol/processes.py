"""The multi-process launcher: every party as its own OS process, talking only through message bytes.

``run_in_processes`` (behind ``dpdpca run --processes``) starts, with the
multiprocessing ``"spawn"`` context, one process for the data user, one for
the proxy and one per owner, and wires byte pipes between them
(:class:`~dpdpca.protocol.transport.PipeTransport`): owner -> proxy, proxy ->
user (the data user sends nothing).  Each process then runs its party's steps
of :mod:`dpdpca.protocol.roles`, the same functions the in-process launcher
calls, and reports each step to the coordinator over a control pipe the
moment it happens, so the coordinator's progress ticks are real.

Each process gets only its own inputs over its control pipe, as JSON or
``.npy`` bytes (never pickled data): an owner gets its rows and the public
parameters, the proxy gets the public parameters, the owners' verify keys and
the release options (never the private key), the user generates the key pair
itself and returns only the public parameters and, at the end, its result.
Each owner generates its own Ed25519 signing key and reports only the verify
key, which the coordinator hands to the proxy and the user.  (``spawn`` hands
the pipe *handles* to the children with its own reduction; no protocol data
goes through it.)
"""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import threading
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any, Callable

import numpy as np

import dpdpca.errors as errors
from dpdpca.dp import PrivacyReport
from dpdpca.dp.accountant import PrivacyLedger
from dpdpca.errors import DpdpcaError, ProtocolError
from dpdpca.linalg import pack_upper
from dpdpca.protocol.config import ReleaseOptions
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.protocol.owner import DataOwner
from dpdpca.protocol.params import ProtocolParams
from dpdpca.protocol.plan import RunPlan
from dpdpca.protocol.proxy import Proxy
from dpdpca.protocol.roles import PROXY, USER, ProxySteps, Tick, owner_round, proxy_round, user_round
from dpdpca.protocol.rounds import ProtocolRun, assemble_run
from dpdpca.protocol.transport import PipeTransport, Transport
from dpdpca.protocol.user import DataUser
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["run_in_processes"]

_TIMEOUT_S = 3600.0


def _send_json(conn: Connection, obj: Any) -> None:
    conn.send_bytes(json.dumps(obj).encode())


def _recv_json(conn: Connection, timeout: float = _TIMEOUT_S) -> Any:
    if not conn.poll(timeout):
        raise ProtocolError(f"a party must answer within {timeout} s, got no answer")
    try:
        return json.loads(conn.recv_bytes().decode())
    except EOFError:
        raise ProtocolError("a party process must report back, got a closed pipe (it crashed)") from None


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _from_npy(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def _ticker(ctrl: Connection) -> Tick:
    """A party's ``tick``: each step reported to the coordinator when it happens."""
    return lambda label: _send_json(ctrl, {"progress": label})


def _guard(ctrl: Connection, body: Callable[[], None]) -> None:
    """Run a party; report a DpdpcaError (or any crash) as one JSON object to the coordinator.

    Nothing is printed: if the coordinator has already gone (another party
    failed first), the report is dropped and the process exits quietly.
    """
    try:
        body()
    except DpdpcaError as exc:
        report = {"error": type(exc).__name__, "message": str(exc)}
    except Exception as exc:  # an unexpected crash, surfaced to the coordinator as one line
        report = {"error": "ProtocolError",
                  "message": f"party crashed: {type(exc).__name__}: {exc} "
                             f"({traceback.format_exc(limit=1).splitlines()[-1]})"}
    else:
        return
    try:
        _send_json(ctrl, report)
    except OSError:
        pass


def _str_blocks(blocks: Any) -> dict[str, list[str]]:
    return {b: [str(z) for z in v] for b, v in (blocks or {}).items()}


def _int_blocks(blocks: Any) -> dict[str, list[int]]:
    return {b: [int(z) for z in v] for b, v in blocks.items()}


def _owner_main(ctrl: Connection, to_proxy: Connection) -> None:
    def body() -> None:
        cfg = json.loads(ctrl.recv_bytes().decode())
        params = ProtocolParams.from_json(cfg["params"], insecure_test_key=cfg["insecure_test_key"])
        identity = OwnerIdentity.generate(cfg["owner_id"])  # the signing key never leaves this process
        _send_json(ctrl, {"verify_key": identity.verify_key_b64})
        X = _from_npy(ctrl.recv_bytes())
        release = ReleaseOptions.from_json(cfg["release"])
        cal = release.owner_noise(d=int(X.shape[1]), frac_bits=params.frac_bits, owners=cfg["owners"],
                                  quorum=cfg["quorum"], present=cfg["present"])
        owner = DataOwner(params, identity, clip=cfg["clip"], insecure_test_key=cfg["insecure_test_key"],
                          release=release.mode, noise=cal, record_noise_for_testing=cfg["verify"],
                          range_proofs=cfg["range_proofs"], range_proof_mode=cfg["range_proof_mode"])
        net = PipeTransport(owner.party, {PROXY: to_proxy})
        if not owner.range_proofs:  # a proving owner encrypts under a base whose n-th root it knows
            owner.precompute(int(X.shape[1]))  # offline: the share's DJN factors (key, d and release only)
        owner_round(owner, X, net, tick=_ticker(ctrl))
        out = {"timings": owner.timings_.to_dict(), "bytes_sent": net.bytes_sent, "rows_clipped": owner.rows_clipped_}
        if cfg["verify"] and cal is not None:
            out["noise_blocks"] = _str_blocks(owner.noise_blocks_for_testing_)
        _send_json(ctrl, out)
    _guard(ctrl, body)


def _drain_late(steps: ProxySteps, net: Transport) -> int:
    """Late shares are refused; keep reading them so no owner blocks on a full pipe."""
    def discard() -> None:
        while net.receive(PROXY, timeout=None) is not None:
            pass
    threading.Thread(target=discard, daemon=True).start()
    return 0


def _proxy_main(ctrl: Connection, owner_conns: dict[str, Connection], to_user: Connection) -> None:
    def body() -> None:
        cfg = json.loads(ctrl.recv_bytes().decode())
        params = ProtocolParams.from_json(cfg["params"], insecure_test_key=cfg["insecure_test_key"])
        release = ReleaseOptions.from_json(cfg["release"])
        proxy = Proxy(params, OwnerKeyring.from_json(cfg["owner_keys"]), quorum=cfg["quorum"],
                      record_noise_for_testing=cfg["verify"], release=release.mode,
                      range_proofs=cfg["range_proofs"], range_proof_mode=cfg["range_proof_mode"])
        net = PipeTransport(PROXY, {**owner_conns, USER: to_user}, send_only=(USER,))
        led = cfg.get("ledger")
        ledger = None if led is None else PrivacyLedger(
            led["path"], **({} if not led["budget"] else {"budget_epsilon": led["budget"]["epsilon"],
                                                          "budget_delta": led["budget"]["delta"]}))
        proxy_round(ProxySteps(proxy, release, owners=cfg["owners"], ledger=ledger,
                               label="" if led is None else led["label"]), net, deadline_s=cfg["deadline_s"],
                    tick=_ticker(ctrl), late=_drain_late)
        out = {"timings": proxy.timings_.to_dict(), "bytes_sent": net.bytes_sent, "owners": proxy.owners_}
        if cfg["verify"] and proxy.release.noisy_blocks:
            blocks = getattr(proxy, "noise_blocks_for_testing_", None)
            if blocks is not None:
                out["noise_blocks"] = _str_blocks(blocks)
        elif cfg["verify"]:
            out["noise_for_testing"] = [str(g) for g in proxy.noise_for_testing_]
        _send_json(ctrl, out)
    _guard(ctrl, body)


def _user_main(ctrl: Connection, to_proxy: Connection) -> None:
    def body() -> None:
        cfg = json.loads(ctrl.recv_bytes().decode())
        user = DataUser.generate(key_bits=cfg["key_bits"], insecure_test_key=cfg["insecure_test_key"],
                                 scheme=cfg.get("scheme", "paillier"), **cfg["param_kwargs"])
        _send_json(ctrl, {"params": user.params.to_json()})
        user.owner_keys = OwnerKeyring.from_json(_recv_json(ctrl)["owner_keys"])
        net = PipeTransport(USER, {PROXY: to_proxy})
        result = user_round(user, net, n_components=cfg["n_components"], timeout=_TIMEOUT_S, tick=_ticker(ctrl))
        reply: dict[str, Any] = {"timings": result.timings.to_dict(), "bytes_sent": net.bytes_sent,
                                 "privacy": result.privacy.to_dict(), "params": dict(result.params),
                                 "extra": dict(result.extra)}
        if hasattr(user, "noisy_blocks_"):
            reply["blocks"] = _str_blocks(user.noisy_blocks_)
        else:
            reply["scale"] = str(user.scale_)
            reply["M_upper"] = [str(x) for x in pack_upper(user.noisy_scatter_int_)]
        _send_json(ctrl, reply)
        ctrl.send_bytes(_npy_bytes(result.components))
        ctrl.send_bytes(_npy_bytes(result.eigenvalues))
    _guard(ctrl, body)


def _raise_if_error(reply: Any) -> Any:
    if isinstance(reply, dict) and "error" in reply:
        name = str(reply["error"])
        cls = getattr(errors, name, ProtocolError)  # every error a party may send back lives in dpdpca.errors
        if not (isinstance(cls, type) and issubclass(cls, DpdpcaError)):
            cls = ProtocolError
        raise cls(str(reply["message"]))
    return reply


class _Parties:
    """The party processes of one run, each with its control pipe; all stopped together on the way out.

    ``start`` hands a process its pipe ends and closes the parent's copies, so
    a party that exits is seen as gone (EOF) by its peers.
    """

    def __init__(self) -> None:
        self.ctx = mp.get_context("spawn")
        self.procs: list[Any] = []
        self.ctrls: dict[str, Connection] = {}

    def pipe(self) -> tuple[Connection, Connection]:
        return self.ctx.Pipe()

    def start(self, name: str, target: Callable[..., None], *ends: Connection | dict[str, Connection]) -> Connection:
        """Run ``target(ctrl, *ends)`` as process ``name``; return the coordinator's end of its control pipe."""
        ctrl, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=target, args=(child, *ends), name=f"dpdpca-{name}")
        self.procs.append(proc)
        self.ctrls[name] = ctrl
        proc.start()
        for end in (child, *ends):
            for conn in (end.values() if isinstance(end, dict) else [end]):
                conn.close()
        return ctrl

    def __enter__(self) -> "_Parties":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:  # a party failed: the others may be waiting for it, stop them quietly
            for proc in self.procs:
                if proc.is_alive():
                    proc.terminate()
        for conn in self.ctrls.values():
            conn.close()
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()


def run_in_processes(plan: RunPlan, *, progress: Tick, ledger: PrivacyLedger | None = None,
                     ledger_label: str = "") -> ProtocolRun:
    """Run the protocol with one OS process per party (see the module docstring).

    Parameters
    ----------
    plan : RunPlan
        The validated run (:func:`dpdpca.protocol.plan.plan_run`).
    progress : callable
        Called with each step's label when its party reports it.
    """
    opts = plan.options
    rel, key, dep = opts.release, opts.key, opts.deployment
    with _Parties() as parties:
        user_end, proxy_user_end = parties.pipe()
        owner_pipes = {oid: parties.pipe() for oid in plan.ids}  # (the proxy's end, the owner's end)
        for oid in set(plan.ids) - set(plan.present):
            owner_pipes[oid][1].close()  # an owner that never starts: the proxy sees it gone
        user = parties.start(USER, _user_main, user_end)
        _send_json(user, {"key_bits": key.key_bits, "insecure_test_key": key.insecure_test_key, "scheme": key.scheme,
                          "param_kwargs": plan.param_kwargs(), "n_components": plan.n_components})
        public = _raise_if_error(_recv_json(user))["params"]
        progress("keygen")
        proxy = parties.start(PROXY, _proxy_main, {oid: ends[0] for oid, ends in owner_pipes.items()},
                              proxy_user_end)
        owners = {oid: parties.start(f"owner-{oid}", _owner_main, owner_pipes[oid][1]) for oid in plan.present}
        for oid, ctrl in owners.items():
            _send_json(ctrl, {"params": public, "owner_id": oid, "clip": opts.bounds.clip,
                              "insecure_test_key": key.insecure_test_key, "release": rel.to_json(),
                              "owners": len(plan.ids), "quorum": dep.quorum, "present": len(plan.present),
                              "verify": dep.verify, "range_proofs": opts.bounds.range_proofs,
                              "range_proof_mode": opts.bounds.range_proof_mode})
        # Each owner made its own signing key; only the verify keys come back.
        keyring = OwnerKeyring({oid: _raise_if_error(_recv_json(ctrl))["verify_key"]
                                for oid, ctrl in owners.items()}).to_json()
        _send_json(proxy, {"params": public, "insecure_test_key": key.insecure_test_key,
                           "owner_keys": keyring, "deadline_s": dep.deadline_s,
                           "verify": dep.verify, "quorum": plan.quorum, "release": rel.to_json(),
                           "owners": len(plan.ids), "range_proofs": opts.bounds.range_proofs,
                           "range_proof_mode": opts.bounds.range_proof_mode,
                           "ledger": None if ledger is None else {"path": str(ledger.path), "budget": ledger.budget,
                                                                  "label": ledger_label}})
        _send_json(user, {"owner_keys": keyring})
        for oid, ctrl in owners.items():
            ctrl.send_bytes(_npy_bytes(plan.partitions[oid]))
        # Every party reports each step as it happens, then its final account.
        reports: dict[str, Any] = {}
        waiting = {ctrl: oid for oid, ctrl in owners.items()}
        waiting.update({proxy: PROXY, user: USER})
        arrays: list[np.ndarray] = []
        while waiting:
            ready = wait(list(waiting), timeout=_TIMEOUT_S)
            if not ready:
                raise ProtocolError(f"a party must answer within {_TIMEOUT_S} s, got no answer")
            for reporter in [c for c in waiting if c in ready]:
                rep = _raise_if_error(_recv_json(reporter))
                if "progress" in rep:
                    progress(str(rep["progress"]))
                    continue
                name = waiting.pop(reporter)
                reports[name] = rep
                if name == USER:
                    arrays = [_from_npy(user.recv_bytes()), _from_npy(user.recv_bytes())]
        run = _assemble(plan, public, reports, *arrays)
        run.extra["processes"] = len(parties.procs)
        return run


def _assemble(plan: RunPlan, public: Any, reports: dict[str, Any], components: np.ndarray,
              eigenvalues: np.ndarray) -> ProtocolRun:
    """The run record from the parties' final reports (:func:`dpdpca.protocol.rounds.assemble_run`)."""
    from dpdpca.crypto import upper_triangle_unflatten

    opts = plan.options
    usr, prox = reports[USER], reports[PROXY]
    owners = {o: r for o, r in reports.items() if o not in (USER, PROXY)}
    timings = Timings(parallel_roles=("owner",))
    bytes_sent: dict[str, int] = {}
    for rep in [*owners.values(), prox, usr]:
        timings.merge(Timings.from_dict(rep["timings"]))
        for name, nb in rep["bytes_sent"].items():
            bytes_sent[name] = bytes_sent.get(name, 0) + int(nb)
    result = PCAResult(method="dpdpca", components=components, eigenvalues=eigenvalues,
                       explained_variance=np.asarray(usr["extra"]["explained_variance"], dtype=np.float64),
                       privacy=PrivacyReport.from_dict(usr["privacy"]), params=usr["params"], extra=usr["extra"])
    verify = opts.deployment.verify
    common: dict[str, Any] = dict(
        release=opts.release.mode, timings=timings, bytes_sent=bytes_sent, owners=prox["owners"],
        rows_clipped={o: int(owners[o]["rows_clipped"]) for o in plan.present}, n_owners=len(plan.ids),
        used=[plan.partitions[o] for o in prox["owners"]],
        params=ProtocolParams.from_json(public, insecure_test_key=opts.key.insecure_test_key),
        clip=opts.bounds.clip, verify=verify)
    if opts.release.kind.noisy_blocks:
        noises = None
        if verify:
            with_noise = [owners[o] for o in prox["owners"] if "noise_blocks" in owners[o]]
            shares = [r["noise_blocks"] for r in with_noise] if with_noise else [prox["noise_blocks"]]
            noises = [_int_blocks(sh) for sh in shares]
        return assemble_run(result, noisy_blocks=_int_blocks(usr["blocks"]), noise_blocks=noises, **common)
    d = components.shape[0]
    M = upper_triangle_unflatten([int(x) for x in usr["M_upper"]], d)
    noise = [int(g) for g in prox["noise_for_testing"]] if verify else None
    return assemble_run(result, M=M, scale=int(usr["scale"]), noise_upper=noise, **common)
