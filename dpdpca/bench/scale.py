"""``dpdpca bench scale [--quick] [--scheduler tcp://HOST:8786] --json``: the proxy's aggregation on Dask.

Aggregates L = 10 encrypted arrays (one per owner; the ciphertext count of a
d = 784 upper triangle under the wide layout by default) with
:func:`dpdpca.crypto.sum_arrays`, serially in this process and on a Dask
cluster (two local single-threaded worker processes, or the cluster at
``--scheduler``), back to back, and reports aggregation throughput in input
ciphertexts per second for both and their ratio.  The arrays start in this
process, as the owners' shares do at the proxy, so the Dask figure includes
packing them to bytes, shipping them and bringing the result back; every run
checks the Dask result equals the serial one bit for bit.

JSON keys: ``key_bits``, ``owners``, ``ciphertexts_per_owner``,
``serial_ciphertexts_per_s``, ``dask_ciphertexts_per_s``,
``dask_vs_serial_aggregation`` (median of paired ratios), ``dask_workers``,
``scheduler`` (``"local"`` or the address), ``runs``, ``bit_identical``,
``cpu_count``, ``quick``.  Needs the optional extra
``pip install 'dpdpca[distributed]'``.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

import click

from dpdpca.crypto import EncryptedArray, SlotLayout, generate_keypair, sum_arrays
from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.compute import DaskEngine, dask_engine
from dpdpca.errors import ParameterError

OWNERS = 10


def _local_engine(workers: int) -> tuple[DaskEngine, Any]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ParameterError("bench scale needs the optional extra: pip install 'dpdpca[distributed]', "
                             "got no distributed package") from None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
    return DaskEngine(Client(cluster), owns_client=True), cluster


def run_benchmark(*, quick: bool, key_bits: int = 2048, insecure_test_key: bool = False,
                  scheduler: str | None = None, workers: int = 2, ciphertexts: int | None = None) -> dict[str, Any]:
    """Serial against Dask aggregation of ``OWNERS`` arrays (see the module docstring)."""
    pk, _ = generate_keypair(key_bits, insecure_test_key=insecure_test_key)
    count = ciphertexts if ciphertexts is not None else (2000 if quick else 10_400)
    runs = 3 if quick else 5
    layout = SlotLayout(slot_bits=64, slots=max(1, (pk.bits - 2) // 64))
    n2 = pk.nsquare
    # Benchmark operands: random units mod n**2 stand in for the owners' ciphertexts (aggregation
    # does the same work whatever they encrypt); their declared bounds sum within the layout.
    arrays = [EncryptedArray(pk, layout, (layout.slots,) * count, 1, [bk.random_unit(n2) for _ in range(count)])
              for _ in range(OWNERS)]
    cluster = None
    engine, cluster = (dask_engine(scheduler), None) if scheduler else _local_engine(workers)
    try:
        sum_arrays(arrays[:2], executor=engine)  # start the workers' imports before timing
        serial_t: list[float] = []
        dask_t: list[float] = []
        identical = True
        for _ in range(runs):
            t0 = time.perf_counter()
            ref = sum_arrays(arrays)
            serial_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            out = sum_arrays(arrays, executor=engine)
            dask_t.append(time.perf_counter() - t0)
            identical = identical and out.ciphertexts == ref.ciphertexts
        n_workers = engine.workers
    finally:
        engine.close()
        if cluster is not None:
            cluster.close()
    total = OWNERS * count
    return {
        "key_bits": pk.bits,
        "owners": OWNERS,
        "ciphertexts_per_owner": count,
        "serial_ciphertexts_per_s": total / min(serial_t),
        "dask_ciphertexts_per_s": total / min(dask_t),
        "dask_vs_serial_aggregation": statistics.median(s / d for s, d in zip(serial_t, dask_t)),
        "dask_workers": n_workers,
        "scheduler": scheduler or "local",
        "runs": runs,
        "bit_identical": identical,
        "cpu_count": os.cpu_count(),
        "quick": quick,
    }


@click.command("scale")
@click.option("--quick", is_flag=True, help="2000 ciphertexts per owner instead of 10 400, 3 runs.")
@click.option("--scheduler", default=None, metavar="tcp://HOST:8786",
              help="Use this Dask cluster instead of two local worker processes.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=1),
              help="Local Dask worker processes (without --scheduler).")
@click.option("--key-bits", default=2048, show_default=True, type=int, help="Paillier modulus size.")
@click.option("--insecure-test-key", is_flag=True, help="Allow --key-bits below 2048 (testing only).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(quick: bool, scheduler: str | None, workers: int, key_bits: int, insecure_test_key: bool,
            as_json: bool) -> None:
    """The proxy's aggregation: 2 local Dask workers (or --scheduler) against serial, in ciphertexts/s."""
    out = run_benchmark(quick=quick, key_bits=key_bits, insecure_test_key=insecure_test_key, scheduler=scheduler,
                        workers=workers)
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
    else:
        for k in sorted(out):
            click.echo(f"{k}: {out[k]}")
