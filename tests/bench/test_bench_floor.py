"""The floor model: primitives timed now, operations counted as the code performs them, fractions."""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.bench.floor import floor_report, operation_counts
from dpdpca.crypto import generate_keypair
from dpdpca.crypto._gmp import FixedBaseTable
from dpdpca.crypto.primitives import PRIMITIVES, djn_joining_mulmods, djn_mulmods, time_primitives
from dpdpca.protocol.releases import ADD_REMOVE
from dpdpca.protocol.runner import run_protocol


@pytest.fixture(scope="module")
def keys():
    return generate_keypair(512, insecure_test_key=True)


def test_primitives_are_positive_and_ordered(keys):
    pk, sk = keys
    prims = time_primitives(pk, sk, rounds=2, batch=64)
    assert set(prims) == set(PRIMITIVES)
    assert all(v > 0 for v in prims.values())
    # an exponentiation costs many multiplications; a DJN factor through the table fewer than r**n
    assert prims["powmod_n_s"] > 20 * prims["mulmod_s"]
    assert prims["djn_factor_s"] < prims["powmod_n_s"]
    assert "half_decrypt_s" not in time_primitives(pk, rounds=1, batch=16)


def test_the_floor_takes_each_primitives_fastest_moment(keys):
    """A primitive timed in a slow moment must not raise the floor: the faster of two timings counts, per
    primitive, and a phase's floor follows it."""
    from dpdpca.bench.floor import fastest

    pk, sk = keys
    now = time_primitives(pk, sk, rounds=1, batch=16)
    slow = {k: 3 * v for k, v in now.items()}
    assert fastest(slow, now) == fastest(now, slow) == now
    mixed = fastest(slow, {"mulmod_s": now["mulmod_s"] / 2}, None)
    assert mixed["mulmod_s"] == now["mulmod_s"] / 2 and mixed["half_decrypt_s"] == slow["half_decrypt_s"]
    model = operation_counts(pk.bits, release="add-remove", d=6, slots=4, v_slots=4, owners=3, workers=1)
    timings = {"parties": {"user": {"decrypt": 1.0}}}
    high, low = (floor_report(timings, model, p, cores=1)["phases"]["user"]["decrypt"]["floor_s"]
                 for p in (slow, fastest(slow, now)))
    assert low == pytest.approx(high / 3)


def test_djn_mulmods_counts_table_and_lookups(keys):
    pk, _ = keys
    a = pk.alpha_bits
    assert djn_mulmods(a, 0) == 0.0
    one, many = djn_mulmods(a, 1), djn_mulmods(a, 10_000)
    assert one >= a // 16  # at least the lookups of one exponent
    assert many / 10_000 < one  # the table is paid once and amortized
    # one table split by rows over two workers: the second part's first row is a lookup without a
    # multiplication too, and one multiplication per factor joins the halves
    w = FixedBaseTable.best_window(a, 10_000)
    assert djn_mulmods(a, 10_000, workers=2) == pytest.approx(many + 10_000 * 2.0 ** -w)
    assert djn_joining_mulmods(a, 10_000, workers=2) == 10_000 and djn_joining_mulmods(a, 10_000) == 0


def test_a_pools_joining_products_count_on_one_core(keys):
    # The products joining the workers' partial products are made in the calling process after the
    # workers' tasks: the floor of a 2-worker precompute is the rest over 2 plus them in full.
    pk, _ = keys
    model = operation_counts(pk.bits, release="add-remove", d=40, slots=4, v_slots=4, owners=3, workers=2)
    spec = model["owner"]["precompute"]
    share = sum(len(c) for c in ADD_REMOVE.share_chunks(40, 4).values())
    assert spec["serial_ops"] == {"mulmod_s": share} and model["proxy"]["precompute"]["serial_ops"]["mulmod_s"] > 0
    assert spec["ops"]["mulmod_s"] + share == pytest.approx(djn_mulmods(pk.alpha_bits, share, 2))
    assert "serial_ops" not in operation_counts(pk.bits, release="add-remove", d=40, slots=4, v_slots=4, owners=3,
                                                workers=1)["owner"]["precompute"]
    timings = {"parties": {"owner:1": {"precompute": 1.0}}}
    rep = floor_report(timings, model, {"mulmod_s": 1e-6}, cores=2, wall_s=1.0)
    phase = rep["phases"]["owner:1"]["precompute"]
    assert phase["floor_s"] == pytest.approx(spec["ops"]["mulmod_s"] * 1e-6 / 2 + share * 1e-6)
    assert phase["work_s"] == pytest.approx((spec["ops"]["mulmod_s"] + share) * 1e-6)
    assert rep["whole_run"]["floor_s"] == pytest.approx(phase["work_s"] / 2)


def test_floor_report_of_a_real_run(keys):
    pk, sk = keys
    from dpdpca.protocol import DataUser, ProtocolParams

    rng = np.random.default_rng(0)
    parts = [0.9 * x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0)
             for x in (rng.normal(size=(20, 6)) for _ in range(3))]
    user = DataUser(sk, ProtocolParams.create(pk, max_owners=3, max_rows_per_owner=20, release="add-remove"))
    run = run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, user=user, insecure_test_key=True,
                       verify=True)
    assert run.verify["max_abs_integer_error"] == 0
    t = run.result.timings.to_dict()
    assert t["online_critical_path_s"] < t["critical_path_s"]  # the owners' and proxy's precompute is offline
    assert t["offline_s"]["owner:1"] > 0 and t["offline_s"]["proxy"] > 0
    p = user.params
    model = operation_counts(pk.bits, release="add-remove", d=6, slots=p.layout.slots, v_slots=p.layout.slots,
                             owners=3, workers=1)
    assert model["user"]["decrypt"]["ops"]["half_decrypt_s"] % 2 == 0
    prims = time_primitives(pk, sk, rounds=1, batch=32)
    rep = floor_report(t, model, prims, cores=1, wall_s=1.0)
    dec = rep["phases"]["user"]["decrypt"]
    assert dec["floor_s"] == pytest.approx(dec["ops"]["half_decrypt_s"] * prims["half_decrypt_s"])
    assert dec["fraction_of_floor"] == pytest.approx(dec["floor_s"] / dec["measured_s"])
    assert "fraction_of_floor_cpu" in dec
    for key in ("critical_path", "whole_run"):
        assert set(rep[key]) == {"floor_s", "measured_s", "fraction_of_floor"} and rep[key]["floor_s"] > 0
    assert rep["parties"]["owner:2"]["offline_floor_s"] > 0 and rep["parties"]["user"]["unmodelled_s"] >= 0
    assert rep["online_over_decrypt_floor"] == pytest.approx(rep["critical_path"]["measured_s"] / dec["floor_s"])


def _spin(n: int) -> int:
    return sum(i * i for i in range(n))


def test_pool_cpu_counts_the_workers():
    import sys

    from dpdpca.bench.protocol import _pool_cpu_s
    from dpdpca.crypto import local_process_pool

    assert _pool_cpu_s(None) == 0.0
    with local_process_pool(2) as pool:
        before = _pool_cpu_s(pool)
        list(pool.map(_spin, [3_000_000] * 4))
        after = _pool_cpu_s(pool)
    if sys.platform.startswith("linux"):
        assert after > before and after > 0.1
