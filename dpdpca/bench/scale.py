"""``dpdpca bench scale [--quick] [--scheduler tcp://HOST:8786] --json``: the proxy's aggregation scaled out.

Aggregates L = 10 encrypted arrays (one per owner; ``--owners``) position by position, the
proxy's homomorphic sum, and reports throughput in input ciphertexts per
second on each engine, with every ratio taken between runs of the same
iteration (the runs of one iteration follow each other; the median over
iterations is reported):

* ``serial``: :func:`dpdpca.crypto.sum_arrays` in this process, on ``mpz``
  values already in its memory;
* ``dask`` (the headline): the same products on a Dask cluster (two local
  single-threaded worker processes, or the cluster at ``--scheduler``) with
  the shares already on the workers, each chunk's runs on one worker, as
  ``mpz`` values in the workers' memory (:meth:`DaskEngine.place
  <dpdpca.crypto.compute.DaskEngine.place>`, not timed; reported as
  ``dask_place_s``): the scale-out case, where owners' shares land on the
  workers as they arrive.  Timed: one product task per worker and the
  results' return to this process as packed bytes, decoded to ``mpz``;
* ``dask_shipped``: :func:`~dpdpca.crypto.sum_arrays` with the Dask engine
  from arrays in this process (packing, shipping, products, return): what
  ``--scheduler`` costs when the proxy holds the shares itself;
* ``pool_shipped``: the same with a local process pool of as many workers.

Aggregation costs one ``a * b mod n**2`` (about 4 microseconds at 2048 bits)
per input ciphertext, less than packing and shipping it, so the shipped
figures measure transport; the resident figure measures the cluster.
``parallel_capacity`` is the throughput of two pool processes running the
serial product loop on data of their own against one, in the same run: the
ceiling any engine can reach on this machine at that moment (other jobs on
a shared machine lower it).  Every run checks each engine's result equals the
serial one bit for bit.  Clusters and pools start before any timing.

JSON keys: ``key_bits``, ``owners``, ``ciphertexts_per_owner``,
``serial_ciphertexts_per_s``, ``dask_ciphertexts_per_s``,
``dask_vs_serial_aggregation``, ``dask_shipped_ciphertexts_per_s``,
``dask_shipped_vs_serial``, ``pool_shipped_ciphertexts_per_s``,
``pool_shipped_vs_serial``, ``parallel_capacity``, ``dask_place_s``,
``dask_workers``, ``pool_workers``, ``scheduler`` (``"local"`` or the
address), ``runs``, ``bit_identical``, ``cpu_count``, ``load_average`` (1, 5,
15 minutes, at the start), ``quick``.  Needs the optional extra
``pip install 'dpdpca[distributed]'``.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

import click

from dpdpca._validation import check_int
from dpdpca.crypto import EncryptedArray, SlotLayout, generate_keypair, sum_arrays
from dpdpca.crypto.ciphertexts import product_mod, random_below, random_unit
from dpdpca.crypto.compute import DaskEngine, Ints, dask_engine, local_process_pool, spans
from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.errors import ParameterError
from dpdpca.progress import Progress, quiet_option

OWNERS = 10


def _local_engine(workers: int) -> tuple[DaskEngine, Any]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ParameterError("bench scale needs the optional extra: pip install 'dpdpca[distributed]', "
                             "got no distributed package") from None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
    return DaskEngine(Client(cluster), owns_client=True), cluster


def product_loop_seconds(bits: int, count: int) -> float:
    """Pool side: seconds for ``OWNERS - 1`` rounds of ``count`` products mod a ``bits``-bit modulus.

    The serial aggregation's inner loop on operands made in this process
    (nothing shipped), used to measure how much parallel throughput the
    machine gives at the moment.
    """
    m = int(random_below(1 << bits)) | 1 | (1 << (bits - 1))
    rows = [[random_below(m) for _ in range(count)] for _ in range(OWNERS)]
    t0 = time.perf_counter()
    product_mod(rows, m)
    return time.perf_counter() - t0


def _parallel_capacity(pool: ProcessPoolExecutor, workers: int, bits: int, count: int) -> float:
    """Throughput of ``workers`` concurrent product loops against one loop alone."""
    alone = pool.submit(product_loop_seconds, bits, count).result()
    together = [f.result() for f in [pool.submit(product_loop_seconds, bits, count) for _ in range(workers)]]
    return workers * alone / max(together)


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_benchmark(*, quick: bool, key_bits: int = 2048, insecure_test_key: bool = False,
                  scheduler: str | None = None, workers: int = 2, ciphertexts: int | None = None,
                  owners: int = OWNERS, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Serial against Dask (resident and shipped) and a process pool (see the module docstring); ``progress``
    is called after set-up and after each run (``runs + 1`` calls: 4 with ``quick``, else 6)."""
    tick = progress or (lambda label: None)
    load = os.getloadavg()
    pk, _ = generate_keypair(key_bits, insecure_test_key=insecure_test_key)
    count = ciphertexts if ciphertexts is not None else (2000 if quick else 10_400)
    runs = 3 if quick else 5
    layout = SlotLayout(slot_bits=64, slots=max(1, (pk.bits - 2) // 64))
    n2 = pk.nsquare
    width = pk.ciphertext_bytes
    # Benchmark operands: random units mod n**2 stand in for the owners' ciphertexts (aggregation
    # does the same work whatever they encrypt); their declared bounds sum within the layout.
    arrays = [EncryptedArray(pk, layout, (layout.slots,) * count, 1, [random_unit(n2) for _ in range(count)])
              for _ in range(check_int("owners", owners, minimum=2))]
    cluster = None
    engine, cluster = (dask_engine(scheduler), None) if scheduler else _local_engine(workers)
    pool = local_process_pool(workers)
    times: dict[str, list[float]] = {"serial": [], "dask": [], "dask_shipped": [], "pool_shipped": []}
    place_t: list[float] = []
    capacity: list[float] = []
    identical = True
    try:
        sum_arrays(arrays[:2], executor=engine)  # workers' imports and connections before timing
        sum_arrays(arrays[:2], executor=pool)
        groups = [[Ints(a.ciphertexts[lo:hi], width) for a in arrays]
                  for lo, hi in spans(count, engine, engine.product_items(count))]  # as sum_arrays splits
        tick("key, operands and workers")
        for run_index in range(1, runs + 1):
            ref, t = _timed(lambda: sum_arrays(arrays))
            times["serial"].append(t)
            placed, t = _timed(lambda: engine.place(width, groups))
            place_t.append(t)
            out, t = _timed(lambda p=placed: engine.tree_product(n2, width, p))
            placed.release()
            times["dask"].append(t)
            identical = identical and out == ref.ciphertexts
            shipped, t = _timed(lambda: sum_arrays(arrays, executor=engine))
            times["dask_shipped"].append(t)
            pooled, t = _timed(lambda: sum_arrays(arrays, executor=pool))
            times["pool_shipped"].append(t)
            identical = identical and shipped.ciphertexts == ref.ciphertexts == pooled.ciphertexts
            capacity.append(_parallel_capacity(pool, workers, 2 * pk.bits, min(count, 2000)))
            tick(f"run {run_index}/{runs}: serial, Dask, process pool")
        n_workers = engine.workers
    finally:
        pool.shutdown()
        engine.close()
        if cluster is not None:
            cluster.close()
    total = owners * count

    def ratio(name: str) -> float:
        return statistics.median(s / t for s, t in zip(times["serial"], times[name]))

    return {
        "key_bits": pk.bits,
        "owners": owners,
        "ciphertexts_per_owner": count,
        "serial_ciphertexts_per_s": total / min(times["serial"]),
        "dask_ciphertexts_per_s": total / min(times["dask"]),
        "dask_vs_serial_aggregation": ratio("dask"),
        "dask_shipped_ciphertexts_per_s": total / min(times["dask_shipped"]),
        "dask_shipped_vs_serial": ratio("dask_shipped"),
        "pool_shipped_ciphertexts_per_s": total / min(times["pool_shipped"]),
        "pool_shipped_vs_serial": ratio("pool_shipped"),
        "parallel_capacity": statistics.median(capacity),
        "dask_place_s": statistics.median(place_t),
        "dask_workers": n_workers,
        "pool_workers": workers,
        "scheduler": scheduler or "local",
        "runs": runs,
        "bit_identical": identical,
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
        "quick": quick,
    }


@click.command("scale")
@click.option("--quick", is_flag=True, help="2000 ciphertexts per owner instead of 10 400, 3 runs.")
@click.option("--scheduler", default=None, metavar="tcp://HOST:8786",
              help="Use this Dask cluster instead of two local worker processes.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=1),
              help="Local Dask worker processes (without --scheduler).")
@click.option("--key-bits", default=2048, show_default=True, type=click.IntRange(max=MAX_KEY_BITS),
              help=f"Paillier modulus size (at most {MAX_KEY_BITS}).")
@click.option("--insecure-test-key", is_flag=True, help="Allow --key-bits below 2048 (testing only).")
@click.option("--owners", default=OWNERS, show_default=True, type=click.IntRange(min=2),
              help="Arrays aggregated (one per owner); each worker's product grows with it, Dask's round trips do not.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(quick: bool, scheduler: str | None, workers: int, key_bits: int, insecure_test_key: bool,
            owners: int, as_json: bool, quiet: bool) -> None:
    """The proxy's aggregation: 2 local Dask workers (or --scheduler) and a process pool against serial."""
    with Progress("bench scale", total=(3 if quick else 5) + 1, quiet=quiet) as progress:
        out = run_benchmark(quick=quick, key_bits=key_bits, insecure_test_key=insecure_test_key, scheduler=scheduler,
                            workers=workers, owners=owners, progress=progress)
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
    else:
        for k in sorted(out):
            click.echo(f"{k}: {out[k]}")
