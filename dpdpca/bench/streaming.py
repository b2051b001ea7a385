"""``dpdpca bench streaming``: FPCA-Edge against one batch SVD, and the sketch's time against m.

Data: a synthetic ``n x d`` matrix (default 200000 x 1000, float64, 1.6 GB)
with 10 strong directions over a decaying floor (seed 0, :func:`write_bench_data`), written block by block to a
temporary ``.npy`` file (the generator never holds it whole) and removed
afterwards.  No download, no extra package.

Two figures, each approach in its own fresh Python process (so one cannot
inherit the other's memory), BLAS single-threaded by default
(``--blas-threads``) so the ratios are ratios of work on a shared machine:

* ``fpca``: one FPCA-Edge client (rank ``r``, blocks of ``b`` rows, no DP:
  the paper's setting for this comparison) streams the file with
  :func:`~dpdpca.data.iter_row_blocks` (``.npy`` opened with
  ``mmap_mode="r"``).  ``batch``: ``numpy.load`` of the whole file and one
  ``scipy.linalg.svd(X, full_matrices=False)`` (gesdd).  Both report
  ``seconds``, ``peak_traced_bytes`` (``tracemalloc``: every numpy/Python
  allocation, not the file's mapped pages, not LAPACK's private workspace)
  and ``peak_anon_rss_bytes`` (high-water of the process's anonymous resident
  memory, sampled every 2 ms from ``/proc/self/status`` above the level after
  imports: counts LAPACK's workspace, excludes file pages; null where
  ``/proc`` is missing), and the subspace agreement with the batch result
  (``min_cosine``: smallest principal-angle cosine of the top ``k``).
* ``sketch``: :func:`~dpdpca.baselines.sketch.site_sketch` of the first
  ``sketch_rows`` rows with orthonormal structured frequencies, and the decoder,
  for each ``m`` in ``sketch_sizes``.

JSON keys: ``fpca`` and ``batch`` (``seconds``, ``peak_traced_bytes``,
``peak_anon_rss_bytes``), ``memory_ratio_traced`` and ``memory_ratio_anon``
(fpca / batch), ``time_ratio`` (fpca / batch), ``min_cosine``, ``goals``
(``memory_ratio <= 0.05``, ``time_ratio <= 3``) and ``goals_met``,
``sketch`` (list of ``{m, sketch_seconds, decode_seconds,
captured_energy_ratio}``, m = 1, 2, 4 times ``sketch_n_components * d'``),
``n``, ``d``, ``rank``, ``block_size``, ``n_components``, ``sketch_rows``,
``sketch_n_components``, ``blas_threads``, ``quick``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np

from dpdpca.bench._data import blas_threads_limited
from dpdpca.errors import DpdpcaError
from dpdpca.progress import Progress, quiet_option

MEMORY_GOAL, TIME_GOAL = 0.05, 3.0


def write_bench_data(path: Path, n: int, d: int, *, seed: int = 0, chunk: int = 20000) -> None:
    """Rows ``z diag(s) Q^T`` written to ``.npy`` block by block.

    ``z`` standard normal, ``Q`` random orthogonal, ``s``: 10 strong directions
    (1 down to 0.3) over a floor decaying from 0.03 to 0.003, the usual shape
    of data one runs PCA on.
    """
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    top = min(10, d)
    spectrum = np.concatenate([np.geomspace(1.0, 0.3, top), np.geomspace(0.03, 0.003, d - top)])
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
    for i in range(0, n, chunk):
        m = min(chunk, n - i)
        out[i:i + m] = (rng.normal(size=(m, d)) * spectrum) @ Q.T
    out.flush()
    del out


class _AnonPeak:
    """High-water of ``RssAnon`` (Linux), sampled in a thread."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def read() -> int | None:
        try:
            with open("/proc/self/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("RssAnon:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            v = self.read()
            if v is not None:
                self.peak = max(self.peak, v)
            time.sleep(self.interval)

    def __enter__(self) -> "_AnonPeak":
        self.base = self.read()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        v = self.read()
        if v is not None:
            self.peak = max(self.peak, v)


def _child(kind: str, path: str, rank: int, block: int, k: int, blas_threads: int) -> None:
    """Run one approach in this (fresh) process and print its JSON figures."""
    import scipy.linalg

    if blas_threads:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # no scikit-learn: the BLAS variables _spawn sets already limit the threads
            pass
        else:
            threadpool_limits(limits=blas_threads, user_api="blas")
    from dpdpca.baselines.fpca import FPCAEdge
    from dpdpca.data import iter_row_blocks

    d = int(np.load(path, mmap_mode="r").shape[1])
    with _AnonPeak() as anon:
        tracemalloc.start()
        t0 = time.perf_counter()
        if kind == "fpca":
            edge = FPCAEdge(d, rank, block).update_blocks(iter_row_blocks(path, block)).flush()
            V = edge.U_[:, :k]
        else:
            X = np.load(path)
            _, _, Vt = scipy.linalg.svd(X, full_matrices=False, overwrite_a=True, check_finite=False,
                                        lapack_driver="gesdd")
            V = Vt[:k].T
            del X
        seconds = time.perf_counter() - t0
        _, traced = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    np.save(path + f".{kind}.V.npy", V)
    anon_peak = None if anon.base is None else max(anon.peak - anon.base, 0)
    print(json.dumps({"seconds": seconds, "peak_traced_bytes": traced, "peak_anon_rss_bytes": anon_peak}))


def _spawn(kind: str, path: Path, rank: int, block: int, k: int, blas_threads: int) -> dict[str, Any]:
    code = (f"from dpdpca.bench.streaming import _child; "
            f"_child({kind!r}, {str(path)!r}, {rank}, {block}, {k}, {blas_threads})")
    env = dict(os.environ)
    if blas_threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(blas_threads)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise DpdpcaError(f"bench streaming: the {kind} process failed: {last}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _sketch_figures(path: Path, rows: int, sizes: list[int], k: int) -> list[dict[str, Any]]:
    from dpdpca.baselines.sketch import QuadraticSketchOperator, decode_subspace, site_sketch

    X = np.array(np.load(path, mmap_mode="r")[:rows])
    C = X.T @ X
    best = float(np.sort(np.linalg.eigvalsh(C))[::-1][:k].sum())
    out = []
    for m in sizes:
        op = QuadraticSketchOperator(X.shape[1], m, kind="orthonormal", seed=0)
        t0 = time.perf_counter()
        s = site_sketch(X, op)
        t1 = time.perf_counter()
        V, _, info = decode_subspace(s / rows, op.omega, k)
        t2 = time.perf_counter()
        out.append({"m": op.m, "sketch_seconds": t1 - t0, "decode_seconds": t2 - t1,
                    "decoder_iterations": info["iterations"],
                    "captured_energy_ratio": float(np.trace(V.T @ C @ V)) / best})
    return out


def run(*, n: int = 200_000, d: int = 1000, rank: int = 10, block: int = 100, k: int = 10,
        sketch_rows: int = 20_000, sketch_k: int = 3, sketch_multiples: tuple[int, ...] = (1, 2, 4),
        blas_threads: int = 1, quick: bool = False,
        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure; return the JSON-ready dict (``quick``: n=20000, d=200, 5000 sketch rows).

    ``progress`` is called after each of the 4 phases.

    The sketch sizes are ``multiple * sketch_k * d'`` (``d'``: d rounded up to a
    power of two), the regime ``m >= c k d`` in which the decoder recovers the
    top-``sketch_k`` subspace.
    """
    if quick:
        n, d, sketch_rows = 20_000, 200, 5_000
    d_pad = 1 << max(0, (d - 1).bit_length())
    sketch_sizes = [c * sketch_k * d_pad for c in sketch_multiples]
    with tempfile.TemporaryDirectory(prefix="dpdpca-bench-streaming-") as tmp:
        path = Path(tmp) / "stream.npy"
        tick = progress or (lambda label: None)
        write_bench_data(path, n, d)
        tick(f"{n} x {d} rows written")
        batch = _spawn("batch", path, rank, block, k, blas_threads)
        tick("batch SVD")
        fpca = _spawn("fpca", path, rank, block, k, blas_threads)
        tick("FPCA-Edge streamed")
        Vb, Vf = np.load(str(path) + ".batch.V.npy"), np.load(str(path) + ".fpca.V.npy")
        min_cos = float(np.linalg.svd(Vb.T @ Vf, compute_uv=False).min())
        with blas_threads_limited(blas_threads or None):
            sketch = _sketch_figures(path, min(sketch_rows, n), sketch_sizes, sketch_k)
        tick(f"sketches of {len(sketch_sizes)} sizes")

    def ratio(key: str) -> float | None:
        a, b = fpca[key], batch[key]
        return None if a is None or not b else a / b

    mem_t, mem_a, t_ratio = ratio("peak_traced_bytes"), ratio("peak_anon_rss_bytes"), ratio("seconds")
    mem_ok = all(r is not None and r <= MEMORY_GOAL for r in (mem_t, mem_a) if r is not None)
    return {"fpca": fpca, "batch": batch, "memory_ratio_traced": mem_t, "memory_ratio_anon": mem_a,
            "time_ratio": t_ratio, "min_cosine": min_cos,
            "goals": {"memory_ratio": MEMORY_GOAL, "time_ratio": TIME_GOAL},
            "goals_met": {"memory": mem_ok, "time": t_ratio is not None and t_ratio <= TIME_GOAL},
            "sketch": sketch, "n": n, "d": d, "rank": rank, "block_size": block, "n_components": k,
            "sketch_rows": min(sketch_rows, n), "sketch_n_components": sketch_k, "blas_threads": blas_threads or None, "quick": quick}


@click.command("streaming")
@click.option("--quick", is_flag=True, help="n=20000, d=200 (seconds instead of minutes).")
@click.option("--n", "n", type=click.IntRange(min=1), default=200_000, show_default=True, help="Rows streamed.")
@click.option("--d", "d", type=click.IntRange(min=2), default=1000, show_default=True, help="Features.")
@click.option("--rank", type=click.IntRange(min=1), default=10, show_default=True, help="FPCA-Edge rank r.")
@click.option("--block-size", type=click.IntRange(min=1), default=100, show_default=True, help="FPCA-Edge block b.")
@click.option("--blas-threads", type=click.IntRange(min=0), default=1, show_default=True,
              help="BLAS threads in every measured process (0: library default).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(quick: bool, n: int, d: int, rank: int, block_size: int, blas_threads: int, as_json: bool,
            quiet: bool) -> None:
    """FPCA-Edge (streamed from disk) vs one batch SVD: time and peak memory; sketch time vs m."""
    k = min(rank, d)
    with Progress("bench streaming", total=4, quiet=quiet) as progress:
        result = run(n=n, d=d, rank=rank, block=block_size, k=k, blas_threads=blas_threads, quick=quick,
                     progress=progress)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
        return
    f, b = result["fpca"], result["batch"]
    click.echo(f"{result['n']} x {result['d']}, FPCA-Edge r={result['rank']} b={result['block_size']}, "
               f"BLAS threads: {result['blas_threads'] or 'default'}")
    for name, row in (("fpca-edge", f), ("batch svd", b)):
        anon = "n/a" if row["peak_anon_rss_bytes"] is None else f"{row['peak_anon_rss_bytes'] / 2**20:.1f} MiB"
        click.echo(f"{name:<10} {row['seconds']:9.2f} s   traced peak {row['peak_traced_bytes'] / 2**20:9.1f} MiB"
                   f"   anon RSS peak {anon}")
    click.echo(f"time ratio {result['time_ratio']:.3f} (goal <= {TIME_GOAL}), memory ratio traced "
               f"{result['memory_ratio_traced']:.4f} / anon {result['memory_ratio_anon']} (goal <= {MEMORY_GOAL}), "
               f"min cosine to batch {result['min_cosine']:.6f}")
    for row in result["sketch"]:
        click.echo(f"sketch m={row['m']:>6}: sketch {row['sketch_seconds']:.2f} s, decode {row['decode_seconds']:.2f} s,"
                   f" q/q_o {row['captured_energy_ratio']:.4f}")
