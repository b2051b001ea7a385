"""Every party as its own OS process, talking only through message bytes.

``run_in_processes`` (behind ``dpdpca run --processes``) starts, with the
multiprocessing ``"spawn"`` context, one process for the data user, one for
the proxy and one per owner, and wires byte pipes between them:
owner -> proxy, proxy -> user (the data user sends nothing).  Each process gets only its own inputs over a
control pipe from the coordinator, as JSON or ``.npy`` bytes (never pickled
data): an owner gets its rows and the public parameters, the proxy gets the
public parameters, the owners' verify keys and the privacy options (never the
private key), the user generates the key pair itself and returns only the
public parameters and, at the end, its result.  Each owner generates its own
Ed25519 signing key and reports only the verify key, which the coordinator
hands to the proxy and the user.  (``spawn`` hands the pipe *handles* to the children with
its own reduction; no protocol data goes through it.)
"""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import threading
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Sequence

import numpy as np

import dpdpca.errors as errors
from dpdpca.dp import PrivacyReport
from dpdpca.errors import DpdpcaError, ProtocolError
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.linalg import pack_upper
from dpdpca.protocol.params import ProtocolParams
from dpdpca.protocol.parties import DataOwner, DataUser, Proxy
from dpdpca.protocol.add_remove import owner_noise_calibration
from dpdpca.protocol.add_remove import owner_noise_calibration
from dpdpca.protocol.rounds import collect_shares, finish_run, verify_add_remove, verify_exact
from dpdpca.protocol.transport import PipeTransport
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


def _owner_main(ctrl: Connection, to_proxy: Connection) -> None:
    def body() -> None:
        cfg = json.loads(ctrl.recv_bytes().decode())
        params = ProtocolParams.from_json(cfg["params"])
        identity = OwnerIdentity.generate(cfg["owner_id"])  # the signing key never leaves this process
        _send_json(ctrl, {"verify_key": identity.verify_key_b64})
        X = _from_npy(ctrl.recv_bytes())
        noise = cfg.get("noise") or {}
        cal = owner_noise_calibration(noise, d=int(X.shape[1]), frac_bits=params.frac_bits,
                                      owners=int(noise.get("owners", 1)), quorum=noise.get("quorum"),
                                      present=int(noise.get("present", 1))) if noise else None
        owner = DataOwner(params, identity, clip=cfg["clip"], insecure_test_key=cfg["insecure_test_key"],
                          release=cfg.get("release", "centred"), noise=cal, record_noise_for_testing=cfg["verify"])
        net = PipeTransport(owner.party, {"proxy": to_proxy})
        data = owner.share(X)
        net.send(owner.party, "proxy", data)
        out = {"timings": owner.timings_.to_dict(), "bytes_sent": net.bytes_sent, "rows_clipped": owner.rows_clipped_}
        if cfg["verify"] and cal is not None:
            out["noise_blocks"] = {b: [str(z) for z in v] for b, v in (owner.noise_blocks_for_testing_ or {}).items()}
        _send_json(ctrl, out)
    _guard(ctrl, body)


def _discard_until_closed(net: PipeTransport) -> None:
    while net.receive("proxy", timeout=None) is not None:
        pass


def _proxy_main(ctrl: Connection, owner_conns: dict[str, Connection], to_user: Connection) -> None:
    def body() -> None:
        cfg = json.loads(ctrl.recv_bytes().decode())
        params = ProtocolParams.from_json(cfg["params"])
        proxy = Proxy(params, OwnerKeyring.from_json(cfg["owner_keys"]), quorum=cfg["quorum"],
                      record_noise_for_testing=cfg["verify"], release=cfg.get("release", "centred"))
        from_owners = PipeTransport("proxy", owner_conns)
        collect_shares(proxy, from_owners, deadline_s=cfg["deadline_s"])
        proxy.close_collection()
        _send_json(ctrl, {"progress": "aggregate"})  # the coordinator ticks when it happens
        # Late shares are refused; keep reading them so no owner blocks on a full pipe.
        threading.Thread(target=_discard_until_closed, args=(from_owners,), daemon=True).start()
        net = PipeTransport("proxy", {"user": to_user})
        net.send("proxy", "user", proxy.finish(**cfg["options"]))
        _send_json(ctrl, {"progress": "mask and noise"})
        out = {"timings": proxy.timings_.to_dict(), "bytes_sent": net.bytes_sent, "owners": proxy.owners_}
        if cfg["verify"] and proxy.release == "add-remove":
            blocks = getattr(proxy, "noise_blocks_for_testing_", None)
            if blocks is not None:
                out["noise_blocks"] = {b: [str(z) for z in v] for b, v in blocks.items()}
        elif cfg["verify"]:
            out["noise_for_testing"] = [str(g) for g in proxy.noise_for_testing_]
        _send_json(ctrl, out)
    _guard(ctrl, body)


def _user_main(ctrl: Connection, to_proxy: Connection) -> None:
    def body() -> None:
        cfg = json.loads(ctrl.recv_bytes().decode())
        user = DataUser.generate(key_bits=cfg["key_bits"], insecure_test_key=cfg["insecure_test_key"],
                                 **cfg["param_kwargs"])
        _send_json(ctrl, {"params": user.params.to_json()})
        user.owner_keys = OwnerKeyring.from_json(_recv_json(ctrl)["owner_keys"])
        net = PipeTransport("user", {"proxy": to_proxy})
        final = net.receive("user", timeout=_TIMEOUT_S)
        if final is None:
            raise ProtocolError("user must receive the masked result, got none")
        result = user.finish(final, n_components=cfg["n_components"])
        reply: dict[str, Any] = {"timings": result.timings.to_dict(), "bytes_sent": net.bytes_sent,
                                 "privacy": result.privacy.to_dict(), "params": dict(result.params),
                                 "extra": dict(result.extra)}
        if hasattr(user, "noisy_blocks_"):
            reply["blocks"] = {b: [str(z) for z in v] for b, v in user.noisy_blocks_.items()}
        else:
            reply["scale"] = str(user.scale_)
            reply["M_upper"] = [str(x) for x in pack_upper(user.noisy_scatter_int_)]
        _send_json(ctrl, reply)
        ctrl.send_bytes(_npy_bytes(result.components))
        ctrl.send_bytes(_npy_bytes(result.eigenvalues))
    _guard(ctrl, body)


def _raise_if_error(reply: Any) -> Any:
    if isinstance(reply, dict) and "error" in reply:
        cls = getattr(errors, str(reply["error"]), ProtocolError)
        if not (isinstance(cls, type) and issubclass(cls, DpdpcaError)):
            cls = ProtocolError
        raise cls(str(reply["message"]))
    return reply


def _add_remove_run(usr: dict[str, Any], prox: dict[str, Any], owner_noise: dict[str, Any],
                    used: list[np.ndarray], components: np.ndarray, eigenvalues: np.ndarray, timings: Timings,
                    bytes_sent: dict[str, int], rows_clipped: dict[str, int], public: Any, *, verify: bool,
                    clip: bool, n_owners: int) -> Any:
    """The run record of an add/remove release (no M, no scale: the user holds noisy R, v, N)."""
    params = ProtocolParams.from_json(public)
    blocks = {b: [int(z) for z in v] for b, v in usr["blocks"].items()}
    check = None
    if verify:
        shares = ([owner_noise[o] for o in prox["owners"]] if owner_noise else [prox["noise_blocks"]])
        noises = [{b: [int(z) for z in v] for b, v in sh.items()} for sh in shares]
        check = verify_add_remove(blocks, noises, used, frac_bits=params.frac_bits, clip=clip)
    extra = {**usr["extra"], "n_rows": int(sum(p.shape[0] for p in used))}
    result = PCAResult(method="dpdpca", components=components, eigenvalues=eigenvalues,
                       explained_variance=np.asarray(usr["extra"]["explained_variance"], dtype=np.float64),
                       privacy=PrivacyReport.from_dict(usr["privacy"]), params=usr["params"], extra=extra)
    run = finish_run(result, timings, bytes_sent, prox["owners"], rows_clipped, check,
                     np.empty((0, 0), dtype=object), 0, params, n_owners)
    run.extra["noisy_blocks"] = blocks
    return run


def run_in_processes(parts: Sequence[np.ndarray], *, ids: list[str], present: list[int], n_components: int,
                     key_bits: int, insecure_test_key: bool, param_kwargs: dict[str, Any], clip: bool,
                     quorum: int | None, deadline_s: float | None, verify: bool, options: dict[str, Any],
                     progress: Callable[[str], None] | None = None, release: str = "centred") -> Any:
    """Run the protocol with one OS process per party (see the module docstring)."""
    from dpdpca.crypto import upper_triangle_unflatten

    tick = progress or (lambda label: None)
    ctx = mp.get_context("spawn")
    procs: list[Any] = []
    ctrls: list[Connection] = []
    ok = False
    try:
        user_ctrl, user_ctrl_child = ctx.Pipe()
        proxy_ctrl, proxy_ctrl_child = ctx.Pipe()
        user_end, proxy_user_end = ctx.Pipe()
        owner_ends: dict[str, Connection] = {}
        owner_ctrls: dict[str, Connection] = {}
        owner_children = {}
        for i in present:
            a, b = ctx.Pipe()
            c, c_child = ctx.Pipe()
            owner_ends[ids[i]] = a
            owner_ctrls[ids[i]] = c
            ctrls.append(c)
            owner_children[ids[i]] = (c_child, b)
        # Owners that never start still get a pipe, so the proxy can wait for them.
        for i in range(len(ids)):
            if i not in present:
                a, b = ctx.Pipe()
                owner_ends[ids[i]] = a
                b.close()
        user = ctx.Process(target=_user_main, args=(user_ctrl_child, user_end), name="dpdpca-user")
        proxy = ctx.Process(target=_proxy_main, args=(proxy_ctrl_child, owner_ends, proxy_user_end),
                            name="dpdpca-proxy")
        procs += [user, proxy]
        ctrls += [user_ctrl, proxy_ctrl]
        user.start()
        user_ctrl_child.close()
        user_end.close()
        _send_json(user_ctrl, {"key_bits": key_bits, "insecure_test_key": insecure_test_key,
                               "param_kwargs": param_kwargs, "n_components": n_components})
        public = _raise_if_error(_recv_json(user_ctrl))["params"]
        tick("keygen")
        proxy.start()
        proxy_ctrl_child.close()
        proxy_user_end.close()
        for conn in owner_ends.values():
            conn.close()
        for i in present:
            c_child, b = owner_children[ids[i]]
            proc = ctx.Process(target=_owner_main, args=(c_child, b), name=f"dpdpca-owner-{ids[i]}")
            procs.append(proc)
            proc.start()
            c_child.close()
            b.close()
            noise = ({**{k: options[k] for k in ("epsilon", "delta", "honest_owners", "noise_by")},
                      "owners": len(ids), "quorum": quorum, "present": len(present)}
                     if options.get("noise_by") == "owners" else None)
            _send_json(owner_ctrls[ids[i]], {"params": public, "owner_id": ids[i], "clip": clip,
                                             "insecure_test_key": insecure_test_key, "release": release,
                                             "noise": noise, "verify": verify})
        # Each owner made its own signing key; only the verify keys come back.
        keyring = OwnerKeyring({ids[i]: _raise_if_error(_recv_json(owner_ctrls[ids[i]]))["verify_key"]
                                for i in present}).to_json()
        _send_json(proxy_ctrl, {"params": public, "owner_keys": keyring, "deadline_s": deadline_s,
                                "verify": verify, "quorum": len(present) if quorum is None else quorum,
                                "options": options, "release": release})
        _send_json(user_ctrl, {"owner_keys": keyring})
        for i in present:
            owner_ctrls[ids[i]].send_bytes(_npy_bytes(parts[i]))
        timings = Timings(parallel_roles=("owner",))
        bytes_sent: dict[str, int] = {}
        rows_clipped: dict[str, int] = {}
        # Tick each step when its party reports it, in the order they happen: every owner's share,
        # then the proxy's aggregation and its masking and noise.
        owner_noise: dict[str, Any] = {}
        waiting = {conn: oid for oid, conn in owner_ctrls.items()}
        waiting[proxy_ctrl] = "proxy"
        prox: dict[str, Any] = {}
        while waiting:
            ready = wait(list(waiting), timeout=_TIMEOUT_S)
            if not ready:
                raise ProtocolError(f"a party must answer within {_TIMEOUT_S} s, got no answer")
            for reporter in [c for c in waiting if c in ready]:
                rep = _raise_if_error(_recv_json(reporter))
                name = waiting[reporter]
                if name == "proxy":
                    if "progress" in rep:
                        tick(str(rep["progress"]))
                        continue
                    prox = rep
                else:
                    if "noise_blocks" in rep:
                        owner_noise[name] = rep["noise_blocks"]
                    timings.merge(Timings.from_dict(rep["timings"]))
                    bytes_sent.update(rep["bytes_sent"])
                    rows_clipped[name] = int(rep["rows_clipped"])
                    tick(f"owner {name}")
                del waiting[reporter]
        usr = _raise_if_error(_recv_json(user_ctrl))
        components = _from_npy(user_ctrl.recv_bytes())
        eigenvalues = _from_npy(user_ctrl.recv_bytes())
        tick("decrypt and eigh")
        for party in (prox, usr):
            timings.merge(Timings.from_dict(party["timings"]))
            for name, nb in party["bytes_sent"].items():
                bytes_sent[name] = bytes_sent.get(name, 0) + int(nb)
        d = components.shape[0]
        used = [parts[ids.index(o)] for o in prox["owners"]]
        if release == "add-remove":
            run = _add_remove_run(usr, prox, owner_noise, used, components, eigenvalues, timings, bytes_sent,
                                  rows_clipped, public, verify=verify, clip=clip, n_owners=len(ids))
            run.extra["processes"] = len(procs)
            ok = True
            return run
        M = upper_triangle_unflatten([int(x) for x in usr["M_upper"]], d)
        check = None
        if verify:
            check = verify_exact(M, [int(g) for g in prox["noise_for_testing"]],
                                 [parts[ids.index(o)] for o in prox["owners"]],
                                 frac_bits=int(param_kwargs["frac_bits"]), clip=clip)
        result = PCAResult(method="dpdpca", components=components, eigenvalues=eigenvalues,
                           explained_variance=np.asarray(usr["extra"]["explained_variance"], dtype=np.float64),
                           privacy=PrivacyReport.from_dict(usr["privacy"]), params=usr["params"], extra=usr["extra"])
        params = ProtocolParams.from_json(public)
        run = finish_run(result, timings, bytes_sent, prox["owners"], rows_clipped, check, M, int(usr["scale"]),
                          params, len(ids))
        run.extra["processes"] = len(procs)
        if verify:
            run.noise_for_testing = [int(g) for g in prox["noise_for_testing"]]
        ok = True
        return run
    finally:
        if not ok:  # a party failed: the others may be waiting for it, stop them quietly
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
        for conn in ctrls:
            conn.close()
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
