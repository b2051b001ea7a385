"""``dpdpca bench intake [--owners 25,50,100,150,200] [--workers 2] --json``: the proxy's cost per share, taken apart.

``dpdpca bench timing`` reports the proxy's cost per extra share against its
floor (:func:`dpdpca.bench.floor.intake_per_share`: one 4096-bit
multiplication per ciphertext into the aggregate, one SHA-256 pass over the
share and one Ed25519 verification, over the proxy's cores).  This benchmark
says where the rest goes.  The same share files (owners of the timing
benchmark's data, under one Paillier key and one set of public parameters,
declared for the largest L, so every L has shares of one size) are taken in
three ways, interleaved, at each L:

* ``proxy``: :meth:`~dpdpca.protocol.proxy.Proxy.receive_shares` on a local
  pool of ``--workers`` processes, every file read by the proxy's process
  from a :class:`~dpdpca.protocol.transport.FileTransport` (every check, the
  bookkeeping, the aggregate: what ``bench timing`` times, without the rest of
  the proxy's segment);
* ``floor_ops``: the same reads, pool and chunks
  (:func:`~dpdpca.protocol.proxy.intake_chunk_sizes`) and a kernel,
  :func:`floor_kernel`, that does only the floor's operations on each share:
  a SHA-256 of its bytes, one Ed25519 verification (of a fixed statement),
  its ciphertexts read as integers and one multiplication each into the
  chunk's product.  Nothing is parsed or checked: this is no intake, only
  what the floor's operations cost in Python on this pool, with each share's
  bytes sent to a worker;
* ``floor_ops_worker_reads``: the same kernel, each worker reading (and moving
  aside) its chunk's files itself, :func:`floor_kernel_files`: the proxy's
  process only lists them, so no share passes through it or the pool's pipes.

Two more figures place them.  ``ceiling`` is the most any intake of received
bytes can reach: the floor's work over the floor's work plus reading each
ciphertext from its wire bytes as an integer (``from_bytes_s`` of
:func:`~dpdpca.crypto.primitives.time_primitives`, timed in the same run),
as if reading the files, parsing, checking, carrying the bytes to the
workers and the bookkeeping cost nothing.  ``one_process`` is the CPU time a
share costs :func:`floor_kernel` and the pool's real kernel
(:func:`~dpdpca.protocol.intake.check_and_sum`) in this process, on the
largest L's shares, against the floor's work on one core: the code's cost
without the pool's.

Each intake's cost per share is the least-squares slope of its wall time
over L (:func:`~dpdpca.bench.timing.per_share_slope`; fixed costs cancel),
its ``fraction_of_floor`` the floor over that slope.  ``proxy`` against
``floor_ops`` is what parsing, checking and bookkeeping cost; ``floor_ops``
against ``floor_ops_worker_reads`` what moving the bytes through the proxy's
process costs.  Each L runs ``--repeats`` times, the fastest run counts; the
garbage collector is off inside each timed run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import click

from dpdpca._validation import check_int, param_error
from dpdpca.bench._data import blas_threads_limited, no_gc, real_or_synthetic
from dpdpca.bench.floor import fastest, intake_per_share, verify_seconds
from dpdpca.bench.timing import DATASET, DELTA, EPSILON, N_COMPONENTS, SHAPE, per_share_slope
from dpdpca.crypto import local_process_pool
from dpdpca.crypto.ciphertexts import from_fixed_bytes, product_mod, to_fixed_bytes
from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.crypto.primitives import time_primitives
from dpdpca.data import partition, preprocess
from dpdpca.progress import Progress, quiet_option
from dpdpca.protocol import DataOwner, DataUser, Proxy
from dpdpca.protocol.config import ProtocolOptions
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.protocol.intake import IntakeContext, check_and_sum, check_share
from dpdpca.protocol.plan import plan_run
from dpdpca.protocol.proxy import intake_chunk_sizes
from dpdpca.protocol.releases import as_release
from dpdpca.protocol.transport import FileTransport, take_message_file
from dpdpca.runinfo import run_record

__all__ = ["floor_kernel", "floor_kernel_files", "run_intake", "command"]

OWNERS = (25, 50, 100, 150, 200)
INTAKES = ("proxy", "floor_ops", "floor_ops_worker_reads")

#: A worker's kernel state, rebuilt once per spec: (modulus, keyring, owner id, statement, signature, runs, width).
_SPECS: dict[bytes, tuple[Any, ...]] = {}


def _kernel_state(spec: bytes) -> tuple[Any, ...]:
    state = _SPECS.get(spec)
    if state is None:
        obj = json.loads(spec)
        _SPECS.clear()
        state = _SPECS[spec] = (int(obj["modulus"]), OwnerKeyring.from_json(obj["keyring"]), obj["owner"],
                                bytes.fromhex(obj["message"]), bytes.fromhex(obj["signature"]),
                                [tuple(run) for run in obj["runs"]], int(obj["width"]))
    return state


def floor_kernel(spec: bytes, datas: Sequence[bytes]) -> tuple[int, bytes]:
    """The floor's operations on each share of a chunk, nothing else; ``(shares taken, their product's bytes)``.

    Per share: a SHA-256 of its bytes, one signature check of the fixed
    statement ``spec`` names, its ciphertexts read as integers (``spec``'s
    ``runs``: ``(back, length)``, each run starting ``back`` bytes before
    the share's end, where the ciphertext sections lie whatever the length
    of the header before them, which differs with the owner's id); then one multiplication modulo n**2 per ciphertext and
    share after the first (:func:`~dpdpca.crypto.ciphertexts.product_mod`),
    whose result goes back as the pooled intake's chunk sums do.
    """
    modulus, ring, owner, message, signature, runs, width = _kernel_state(spec)
    rows = []
    for data in datas:
        hashlib.sha256(data).digest()
        ring.verify(owner, message, signature)
        end = len(data)
        rows.append([c for back, length in runs
                     for c in from_fixed_bytes(data[end - back:end - back + length], width)])
    return len(rows), to_fixed_bytes(product_mod(rows, modulus), width) if rows else b""


def floor_kernel_files(spec: bytes, paths: Sequence[str]) -> tuple[int, bytes]:
    """:func:`floor_kernel` on files this worker reads and moves aside itself, as
    :class:`~dpdpca.protocol.transport.FileTransport` reads a message (``keep_read``)."""
    return floor_kernel(spec, [take_message_file(path, keep_read=True) for path in paths])


def _box(root: Path, shares: Sequence[bytes]) -> Path:
    """The proxy's box under ``root`` holding ``shares``, sent as the owners send them (written with ``fsync``,
    as in ``bench timing``: no write-back of fresh pages runs beside the timed intake); not timed."""
    net = FileTransport(root)
    for i, data in enumerate(shares):
        net.send(f"owner:{i + 1}", "proxy", data)
    box = root / "proxy"
    (box / "read").mkdir()
    return box


def _reads(net: FileTransport, count: int) -> Iterator[bytes]:
    for _ in range(count):
        data = net.receive("proxy", timeout=10.0)
        if data is None:  # pragma: no cover - the files were written before
            raise RuntimeError("the proxy's box ran out of shares")
        yield data


def _chunked(items: Iterable[Any], sizes: Sequence[int]) -> Iterator[list[Any]]:
    """``items`` in chunks of ``sizes`` (an intake's chunk sizes), each taken lazily: reading overlaps the work."""
    it = iter(items)
    for size in sizes:
        chunk = list(itertools.islice(it, size))
        if chunk:
            yield chunk


def _timed_intake(kind: str, root: Path, shares: Sequence[bytes], *, params: Any, keyring: OwnerKeyring, d: int,
                  pool: Any, workers: int, spec: bytes, release: str) -> float:
    """One intake of ``shares`` of the kind named, from files written under ``root`` first (removed after); its
    wall seconds."""
    try:
        return _intake_once(kind, root, shares, params=params, keyring=keyring, d=d, pool=pool, workers=workers,
                            spec=spec, release=release)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _intake_once(kind: str, root: Path, shares: Sequence[bytes], *, params: Any, keyring: OwnerKeyring, d: int,
                 pool: Any, workers: int, spec: bytes, release: str) -> float:
    box = _box(root, shares)
    count = len(shares)
    sizes = intake_chunk_sizes(count, workers)
    proxy = None
    if kind == "proxy":
        proxy = Proxy(params, keyring, quorum=1, executor=pool, release=release)
        proxy.prepare(d, wait=True)  # the offline work, and the workers load the session's context: not timed
    net = FileTransport(root, poll_s=0.001, keep_read=True)
    with no_gc():
        start = time.perf_counter()
        if proxy is not None:
            verdicts = proxy.receive_shares(_reads(net, count), expected=count)
            taken = sum(isinstance(v, str) for v in verdicts)
        elif kind == "floor_ops":
            futures = [pool.submit(floor_kernel, spec, chunk) for chunk in _chunked(_reads(net, count), sizes)]
            taken = sum(f.result()[0] for f in futures)
        else:
            paths = sorted(os.fspath(p) for p in box.glob("*.msg"))
            futures = [pool.submit(floor_kernel_files, spec, chunk) for chunk in _chunked(paths, sizes)]
            taken = sum(f.result()[0] for f in futures)
        seconds = time.perf_counter() - start
    if taken != count:  # every share of the benchmark is an honest one
        raise RuntimeError(f"intake {kind} must take all {count} shares, took {taken}")
    return seconds


def _one_process(spec: bytes, ctx: IntakeContext, shares: Sequence[bytes], rounds: int = 3) -> dict[str, float]:
    """CPU seconds per share of :func:`floor_kernel` and of the pool's real kernel,
    :func:`~dpdpca.protocol.intake.check_and_sum`, on ``shares`` in this process (no pool, no reads): the
    fastest of ``rounds``, the garbage collector off."""
    out = {}
    for name, run in (("floor_ops", lambda: floor_kernel(spec, shares)),
                      ("check_and_sum", lambda: check_and_sum(ctx, None, shares))):
        best = float("inf")
        with no_gc():
            for _ in range(rounds):
                t0 = time.process_time()
                run()
                best = min(best, time.process_time() - t0)
        out[name] = best / len(shares)
    return out


def run_intake(*, owners: Sequence[int] = OWNERS, workers: int = 2, repeats: int = 5, key_bits: int = 2048,
               insecure_test_key: bool = False, seed: int = 0, progress: Any = None) -> dict[str, Any]:
    """Time the three intakes at each L; return the JSON-ready dict (see the module docstring)."""
    workers = check_int("workers", workers, minimum=2)
    repeats = check_int("repeats", repeats, minimum=1)
    Ls = sorted({check_int("owners[i]", L, minimum=2) for L in owners})
    if len(Ls) < 2:
        raise param_error("--owners", "at least two distinct values (the cost per share is a slope)", list(owners))
    started = time.perf_counter()
    tick = progress or (lambda label: None)
    X_raw, dataset = real_or_synthetic(DATASET, SHAPE, seed=seed)
    X = preprocess(X_raw)
    if Ls[-1] > X.shape[0]:
        raise param_error("--owners", f"at most the {X.shape[0]} rows", Ls[-1])
    parts = partition(X, Ls[-1])
    d = int(X.shape[1])
    options = ProtocolOptions.from_flat(epsilon=EPSILON, delta=DELTA, key_bits=key_bits,
                                        insecure_test_key=insecure_test_key)
    plan = plan_run(parts, n_components=N_COMPONENTS, options=options)
    with blas_threads_limited(1), local_process_pool(workers) as pool, \
            tempfile.TemporaryDirectory(prefix="dpdpca-intake-") as tmp:
        user = DataUser.generate(key_bits=key_bits, insecure_test_key=insecure_test_key, **plan.param_kwargs())
        params = user.params
        identities = {oid: OwnerIdentity.generate(oid) for oid in plan.ids}
        keyring = OwnerKeyring.from_identities(identities.values())
        shares = [DataOwner(params, identities[oid], executor=pool, insecure_test_key=insecure_test_key,
                            release=options.release.mode).share(plan.partitions[oid]) for oid in plan.ids]
        tick(f"{len(shares)} shares made")
        ctx = IntakeContext(params, keyring, as_release(options.release.mode), d)
        checked = check_share(shares[0], ctx)
        runs, width = checked.key_ref()
        if not isinstance(runs, tuple):  # pragma: no cover - Paillier's keys are its ciphertexts' bytes
            raise RuntimeError("the floor kernel needs the ciphertexts' byte runs (Paillier)")
        signer = OwnerIdentity.generate("floor")
        message = os.urandom(200)
        spec = json.dumps({"modulus": str(int(params.public_key.nsquare)), "width": width,
                           "runs": [(len(shares[0]) - start, length) for start, length in runs],
                           "keyring": OwnerKeyring.from_identities([signer]).to_json(), "owner": "floor",
                           "message": message.hex(), "signature": signer.sign(message).hex()}).encode()
        before = time_primitives(params.public_key)  # timed before and after the runs: the faster counts
        seconds: dict[str, dict[int, list[float]]] = {kind: {L: [] for L in Ls} for kind in INTAKES}
        # warm-up, not counted: the workers' imports and kernel state, the proxy's context
        for kind in INTAKES:
            _timed_intake(kind, Path(tmp) / f"warm-{kind}", shares[:2 * workers], params=params, keyring=keyring,
                          d=d, pool=pool, workers=workers, spec=spec,
                          release=options.release.mode)
        tick("warm-up")
        for rep in range(repeats):
            for L in Ls:
                for kind in INTAKES:  # interleaved, so drift hits all three alike
                    seconds[kind][L].append(_timed_intake(kind, Path(tmp) / f"{kind}-L{L}-{rep}", shares[:L],
                                                          params=params, keyring=keyring, d=d, pool=pool,
                                                          workers=workers, spec=spec,
                                                          release=options.release.mode))
            tick(f"run {rep + 1} of {repeats}")
        cpu = _one_process(spec, ctx, shares)
        after = time_primitives(params.public_key)
    prims = fastest(before, after)
    count = sum(length for _, length in runs) // width
    floor = intake_per_share(count, len(shares[0]), prims, verify_s=verify_seconds(), cores=workers)
    reading = count * prims["from_bytes_s"]
    intakes: dict[str, Any] = {}
    for kind in INTAKES:
        best = [min(seconds[kind][L]) for L in Ls]
        slope = per_share_slope(Ls, best)
        intakes[kind] = {"seconds": best, "per_share_s": slope,
                         "fraction_of_floor": floor["floor_s"] / slope if slope and slope > 0 else None}
    return {
        "L": Ls, "workers": workers, "repeats": repeats, "key_bits": key_bits, "insecure_test_key": insecure_test_key,
        "dataset": dataset, "n_features": d, "max_owners": params.max_owners,
        "ciphertexts_per_share": count, "share_bytes": len(shares[0]),
        "floor": floor, "primitives": prims, "intakes": intakes,
        "ceiling": {"from_bytes_s": reading, "fraction_of_floor": floor["work_s"] / (floor["work_s"] + reading)},
        "one_process": {name: {"cpu_s": c, "fraction_of_floor": floor["work_s"] / c} for name, c in cpu.items()},
        "note": ("per_share_s: least-squares slope of the fastest wall time over L; floor_ops and "
                 "floor_ops_worker_reads do only the floor's operations (no parsing, no checks, no bookkeeping): "
                 "they bound what any intake in Python on this pool could reach, not an intake; ceiling: the "
                 "floor over the floor plus reading each ciphertext from its bytes (primitives.from_bytes_s), the "
                 "most an intake that receives bytes can reach with everything else free; one_process: CPU per "
                 "share of floor_ops' kernel and of the pool's real kernel (check_and_sum) in one process, "
                 "against the floor's work on one core"),
        "run": run_record(seed=seed, started=started),
    }


def format_table(result: dict[str, Any]) -> str:
    """The three intakes side by side: seconds per L, the cost per share and its fraction of the floor."""
    floor = result["floor"]["floor_s"]
    lines = [f"proxy intake at d={result['n_features']}, {result['ciphertexts_per_share']} ciphertexts "
             f"({result['share_bytes']} bytes) a share, {result['workers']} workers; floor per share "
             f"{floor * 1e3:.3f} ms",
             "intake                    " + "".join(f"L={L:<9}" for L in result["L"]) + "per share   of floor"]
    for kind in INTAKES:
        r = result["intakes"][kind]
        per, fraction = r["per_share_s"], r["fraction_of_floor"]
        lines.append(f"{kind:<26}" + "".join(f"{s:<11.4f}" for s in r["seconds"])
                     + (f"{per * 1e3:.3f} ms" if per is not None else "n/a").ljust(12)
                     + (f"{fraction:.2f}" if fraction is not None else "n/a (the slope is not positive)"))
    cpu = result["one_process"]
    lines.append("in one process, CPU a share: " + ", ".join(
        f"{name} {r['cpu_s'] * 1e3:.3f} ms ({r['fraction_of_floor']:.2f} of the floor's work)" for name, r in cpu.items()))
    ceiling = result["ceiling"]
    lines.append(f"ceiling: {ceiling['fraction_of_floor']:.2f} of the floor (reading the ciphertexts from their "
                 f"bytes, {ceiling['from_bytes_s'] * 1e3:.3f} ms a share, with everything else free)")
    return "\n".join(lines)


def _parse_owners(text: str) -> list[int]:
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise param_error("--owners", "a comma-separated list of at least two integers >= 2", text) from None
    if len(values) < 2 or values[0] < 2:
        raise param_error("--owners", "a comma-separated list of at least two integers >= 2", text)
    return values


@click.command("intake")
@click.option("--owners", default=",".join(map(str, OWNERS)), show_default=True,
              help="Comma-separated L values (at least two: the cost per share is a slope).")
@click.option("--workers", type=click.IntRange(min=2), default=2, show_default=True,
              help="Processes of the proxy's pool (its host's cores).")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True,
              help="Runs per L and intake; the fastest counts.")
@click.option("--key-bits", type=click.IntRange(max=MAX_KEY_BITS), default=2048, show_default=True,
              help=f"Paillier modulus bits (at most {MAX_KEY_BITS}).")
@click.option("--insecure-test-key", is_flag=True, help="Allow keys below 2048 bits (tests only).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the synthetic stand-in data.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(owners: str, workers: int, repeats: int, key_bits: int, insecure_test_key: bool, seed: int,
            as_json: bool, quiet: bool) -> None:
    """The proxy's cost per share against its floor, and against the floor's operations alone."""
    Ls = _parse_owners(owners)
    with Progress("bench intake", total=repeats + 2, quiet=quiet) as progress:
        result = run_intake(owners=Ls, workers=workers, repeats=repeats, key_bits=key_bits,
                            insecure_test_key=insecure_test_key, seed=seed, progress=progress)
    click.echo(json.dumps(result, sort_keys=True) if as_json else format_table(result))
