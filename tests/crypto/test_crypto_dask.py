"""The Dask engine: bit-for-bit the serial engine's results; decryption refused; no leaked processes."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Executor, Future, ThreadPoolExecutor

import pytest
from distributed import Client, LocalCluster

from dpdpca.bench.scale import run_benchmark
from dpdpca.crypto import SlotLayout, decrypt, encrypt, scalar_times_packed, scalars_times_packed, sum_arrays
from dpdpca.crypto.compute import (DaskEngine, ExecutorEngine, Ints, SerialEngine, as_engine,
                                   dask_engine, spans)
from dpdpca.errors import ParameterError

LAYOUT = SlotLayout(slot_bits=40, slots=12)
RAND = lambda i: 1000 + 7 * i  # noqa: E731  (fixed DJN exponents: reproducible ciphertexts)


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster) as c:
            yield c


def _operations(pk, executor):
    """Every engine-backed operation with fixed randomness; returns their ciphertexts."""
    values = list(range(-700, 700))  # 117 ciphertexts: several tasks
    a = encrypt(pk, values, layout=LAYOUT, bound=700, executor=executor, _test_randomness=RAND)
    b = encrypt(pk, values[::-1], layout=LAYOUT, bound=700, executor=executor, _test_randomness=RAND)
    arrays = [a, b, a, b, a]
    total = sum_arrays(arrays, executor=executor)
    ks = [(-1) ** i * (i % 9) for i in range(len(a.ciphertexts))]
    scaled = a.mul_scalars(ks, executor=executor)
    x = encrypt(pk, [-9], layout=LAYOUT, bound=9, _test_randomness=RAND)
    packed = scalar_times_packed(x, [[i, -i, 2 * i] for i in range(100)], vector_bound=200, executor=executor)
    xs = encrypt(pk, [2, -3], layout=LAYOUT, bound=3, chunks=[1, 1], _test_randomness=RAND)
    many = scalars_times_packed(xs, [[[1, 2]], [[3], [4, 5]]], vector_bound=5, executor=executor)
    singles = encrypt(pk, values[:150], layout=LAYOUT, bound=700, chunks=[1] * 150, _test_randomness=RAND)
    repacked = singles.repack(SlotLayout(slot_bits=12, slots=20), executor=executor)
    return {"encrypt": a.ciphertexts, "sum": total.ciphertexts, "mul_scalars": scaled.ciphertexts,
            "scalar_times_packed": packed.ciphertexts, "scalars_times_packed": many.ciphertexts,
            "repack": repacked.ciphertexts}, values, arrays


def test_dask_engine_equals_serial_bit_for_bit(keys512, client):
    pk, sk = keys512
    serial, values, _ = _operations(pk, None)
    dask, _, arrays = _operations(pk, client)
    assert dask.keys() == serial.keys()
    for name in serial:
        assert dask[name] == serial[name], name
    rerandomized = arrays[0].rerandomize(executor=client)
    assert rerandomized.ciphertexts != arrays[0].ciphertexts
    assert decrypt(sk, rerandomized) == values


def test_resident_runs_equal_serial(keys512, client):
    pk, sk = keys512
    width = pk.ciphertext_bytes
    arrays = [encrypt(pk, [i - 40, 3 * i, -i], layout=LAYOUT, bound=60, chunks=[1, 1, 1], _test_randomness=RAND)
              for i in range(18)]  # 18 runs per group, one flat product each
    serial = sum_arrays(arrays)
    engine = DaskEngine(client)
    assert sum_arrays(arrays, executor=engine).ciphertexts == serial.ciphertexts
    groups = [[Ints(a.ciphertexts[lo:hi], width) for a in arrays] for lo, hi in [(0, 1), (1, 2), (2, 3)]]
    placed = engine.place(width, groups)
    assert placed.decoded and [len(g) for g in placed.groups] == [len(arrays)] * 3
    # one group per worker thread, round robin: groups 0 and 2 on the first worker, 1 on the second
    homes = [client.who_has(g)[g[0].key] for g in placed.groups]
    assert homes[0] == homes[2] != homes[1]
    assert [[home] for home in placed.homes] == [list(h) for h in homes]
    assert all(len(set(map(tuple, client.who_has(g).values()))) == 1 for g in placed.groups)
    assert engine.tree_product(pk.nsquare, width, placed) == serial.ciphertexts
    placed.release()
    assert placed.groups == []
    assert decrypt(sk, serial) == [sum(i - 40 for i in range(18)), sum(3 * i for i in range(18)), -153]
    assert spans(1000, engine) == [(s, min(s + 125, 1000)) for s in range(0, 1000, 125)]  # 4 tasks per worker
    assert engine.product_items(1000) == 500 and engine.product_items(100) == 64  # the sum: 1 per thread
    # scatter goes straight to workers only on the client's host; elsewhere through Dask's default route
    assert engine._direct(["tcp://127.0.0.1:4001", "tcp://[::1]:4002", "tcp://localhost:4003"]) is True
    assert engine._direct(["tcp://127.0.0.1:4001", "tcp://10.1.2.3:4002"]) is None and engine._direct([]) is None


def test_decryption_is_refused_on_remote_engines(keys512, client):
    pk, sk = keys512
    enc = encrypt(pk, [1, 2, 3], layout=LAYOUT, bound=3)
    for remote in (client, DaskEngine(client), client.get_executor()):
        with pytest.raises(ParameterError, match="the secret key never leaves the key holder's host"):
            decrypt(sk, enc, executor=remote)

    class Elsewhere(Executor):  # an unknown executor may run anywhere: remote by default
        def submit(self, fn, /, *args, **kwargs):
            f: Future = Future()
            f.set_result(fn(*args, **kwargs))
            return f

    with pytest.raises(ParameterError, match="got a remote executor engine"):
        decrypt(sk, enc, executor=Elsewhere())
    assert isinstance(as_engine(None), SerialEngine) and not as_engine(None).remote
    assert isinstance(as_engine(client.get_executor()), DaskEngine)
    assert ExecutorEngine(Elsewhere()).remote
    with ThreadPoolExecutor(1) as local:
        assert not ExecutorEngine(local).remote
        assert decrypt(sk, enc, executor=local) == [1, 2, 3]


def test_bad_executor_and_scheduler_arguments():
    with pytest.raises(ParameterError, match="executor must be None, a compute Engine"):
        as_engine("tcp://localhost:8786")
    with pytest.raises(ParameterError, match="scheduler must be an address like tcp://HOST:8786"):
        dask_engine("localhost")


def test_multiprocess_cluster_smoke_and_no_leaked_processes(keys512):
    pk, sk = keys512
    before = set(multiprocessing.active_children())
    serial, values, _ = _operations(pk, None)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster) as c:
            assert len(c.scheduler_info()["workers"]) == 2
            engine = DaskEngine(c)
            a = encrypt(pk, values, layout=LAYOUT, bound=700, executor=engine, _test_randomness=RAND)
            assert a.ciphertexts == serial["encrypt"]
            b = encrypt(pk, values[::-1], layout=LAYOUT, bound=700, _test_randomness=RAND)
            assert sum_arrays([a, b, a, b, a], executor=engine).ciphertexts == serial["sum"]
            # bench scale end to end on this cluster (and a local pool of two processes)
            out = run_benchmark(quick=True, key_bits=512, insecure_test_key=True,
                                scheduler=cluster.scheduler_address, ciphertexts=40, owners=3)
            assert out["bit_identical"] is True and out["dask_workers"] == 2 and out["runs"] == 3
            assert out["owners"] == 3 and out["serial_ciphertexts_per_s"] > 0
            assert out["scheduler"] == cluster.scheduler_address
            for key in ("dask_vs_serial_aggregation", "dask_shipped_vs_serial", "pool_shipped_vs_serial",
                        "parallel_capacity", "serial_ciphertexts_per_s", "dask_ciphertexts_per_s"):
                assert out[key] > 0, key
    leaked = [p for p in multiprocessing.active_children() if p not in before]
    assert leaked == []
