"""Executors: a local process pool gives the same results as the serial path."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import gmpy2
import pytest

from dpdpca.crypto import (
    EncryptedSymmetricMatrix,
    SlotLayout,
    decrypt,
    encrypt,
    local_process_pool,
    scalar_times_packed,
    scalars_times_packed,
    start_workers,
    sum_arrays,
)
from dpdpca.errors import ParameterError

LAYOUT = SlotLayout(slot_bits=40, slots=12)


@pytest.fixture(scope="module")
def pool(keys512):
    with local_process_pool(2, public_key=keys512[0]) as ex:
        yield ex


def test_start_workers_starts_every_process_before_any_batch():
    with local_process_pool(2) as ex:
        assert start_workers(ex) > 0
        assert len(ex._processes) == 2  # both spawned and answering, not on demand at the first batch


def test_start_workers_loads_the_named_modules_in_every_worker():
    probe = "'dpdpca.protocol.intake' in __import__('sys').modules"
    with local_process_pool(2) as ex:
        start_workers(ex, modules=("dpdpca.protocol.intake",))
        # every worker, each holding one probe (the sleep keeps the first busy while the second answers)
        seen = list(ex.map(eval, [f"(__import__('time').sleep(0.2), {probe}, __import__('os').getpid())[1:]"] * 2))
        assert len({pid for _, pid in seen}) == 2 and all(loaded for loaded, _ in seen)
    with local_process_pool(1) as ex:
        start_workers(ex)
        assert ex.submit(eval, probe).result() is False  # not without being named (the probe is not vacuous)


@pytest.mark.parametrize("kind", ["process", "thread"])
def test_executor_matches_serial(keys512, pool, kind):
    pk, sk = keys512
    ex = pool if kind == "process" else ThreadPoolExecutor(2)
    try:
        values = list(range(-1500, 1500))  # more than one task of 128 ciphertexts
        enc = encrypt(pk, values, layout=LAYOUT, bound=1500, executor=ex)
        assert decrypt(sk, enc, executor=ex) == values
        assert decrypt(sk, sum_arrays([enc, enc, enc], executor=ex)) == [3 * v for v in values]
        ks = [(-1) ** i * i for i in range(len(enc.ciphertexts))]
        out = enc.mul_scalars(ks, executor=ex)
        assert out.ciphertexts == enc.mul_scalars(ks).ciphertexts
        assert decrypt(sk, enc.rerandomize(executor=ex)) == values
        x = encrypt(pk, [-9], layout=LAYOUT, bound=9)
        vecs = [[i, -i, 2 * i] for i in range(100)]
        par = scalar_times_packed(x, vecs, vector_bound=200, executor=ex)
        assert par.ciphertexts == scalar_times_packed(x, vecs, vector_bound=200).ciphertexts
        xs = encrypt(pk, [2, -3], layout=LAYOUT, bound=3, chunks=[1, 1])
        many = scalars_times_packed(xs, [[[1, 2]], [[3], [4, 5]]], vector_bound=5, executor=ex)
        assert decrypt(sk, many) == [2, 4, -9, -12, -15]
    finally:
        if kind == "thread":
            ex.shutdown()


def test_fixed_randomness_is_reproducible_through_the_pool(keys512, pool):
    pk, _ = keys512
    a = encrypt(pk, list(range(300)), layout=LAYOUT, bound=300, executor=pool, _test_randomness=lambda i: i + 1)
    b = encrypt(pk, list(range(300)), layout=LAYOUT, bound=300, _test_randomness=lambda i: i + 1)
    assert a.ciphertexts == b.ciphertexts


def test_symmetric_matrix_through_pool(keys512, pool):
    pk, sk = keys512
    m = [[(i * j) % 7 - 3 for j in range(9)] for i in range(9)]
    m = [[m[min(i, j)][max(i, j)] for j in range(9)] for i in range(9)]
    enc = EncryptedSymmetricMatrix.encrypt_upper_triangle(pk, m, layout=LAYOUT, bound=3, executor=pool)
    assert enc.decrypt(sk, executor=pool).tolist() == m


def test_pool_size_validated():
    with pytest.raises(ParameterError, match="max_workers must be >= 1, got 0"):
        local_process_pool(0)


@pytest.mark.parametrize("method", ["djn", "standard"])
def test_encryptions_of_zero_on_the_pool_are_fresh_and_decrypt_to_zero(pool, keys512, method):
    from dpdpca.crypto import encryptions_of_zero

    pk, sk = keys512
    own = pk.with_own_base()
    zeros = encryptions_of_zero(own, 37, method=method, executor=pool)
    assert len(zeros) == len({int(z) for z in zeros}) == 37
    assert [int(m) for m in sk.raw_decrypt(zeros)] == [0] * 37
    assert encryptions_of_zero(own, 0, executor=pool) == []
    if method == "djn":  # one table split by rows over the two workers: exact powers, uniform exponents
        from dpdpca.crypto.compute import ExecutorEngine, shared_table_powers

        exp_bits = 10
        mod = int(gmpy2.next_prime(1 << (1 << exp_bits)))  # 2**alpha < mod: alpha reads back exactly
        zs = shared_table_powers(ExecutorEngine(pool), 2, mod, exp_bits, 300, (mod.bit_length() + 7) // 8)
        alphas = [int(z).bit_length() - 1 for z in zs]
        assert all(int(z) == 1 << a for z, a in zip(zs, alphas))
        assert all(0 <= a < (1 << exp_bits) for a in alphas) and len(set(alphas)) > 200
        top = sum(a >> (exp_bits - 1) for a in alphas)
        assert 100 < top < 200  # the top bit is set about half the time


def test_decrypt_many_is_one_batch_with_each_arrays_integers(keys512, pool):
    from dpdpca.crypto import decrypt_many
    from dpdpca.crypto.schemes import scheme_named
    from dpdpca.errors import MessageError

    pk, sk = keys512
    r = encrypt(pk, list(range(-700, 700)), layout=LAYOUT, bound=700)  # several tasks of the guided schedule
    v = encrypt(pk, [5, -6, 7], layout=LAYOUT, bound=7)
    one = encrypt(pk, [2**30], layout=LAYOUT, bound=2**30, chunks=[1])
    expected = [decrypt(sk, a) for a in (r, v, one)]
    assert expected == [list(range(-700, 700)), [5, -6, 7], [2**30]]
    for ex in (None, pool):
        assert decrypt_many(sk, [r, v, one], executor=ex) == expected
    sections = scheme_named("paillier").decrypt_sections(sk, {"R2": r, "v2": v, "N2": one}, executor=pool)
    assert sections == {"R2": expected[0], "v2": expected[1], "N2": expected[2]}
    assert all(type(x) is int for x in sections["R2"] + sections["N2"])
    # a section that does not fit its bound is named, whichever position it has in the batch
    lying = encrypt(pk, [9, 9], layout=LAYOUT, bound=9)._derive(3, list(encrypt(pk, [9, 9], layout=LAYOUT,
                                                                                   bound=9).ciphertexts))
    with pytest.raises(MessageError, match=r"^section v2: every ciphertext must decrypt to its declared slots"):
        scheme_named("paillier").decrypt_sections(sk, {"R2": r, "v2": lying}, executor=pool)


@pytest.mark.parametrize("count", [0, 1, 7, 43, 129, 300])
def test_decryption_by_crt_halves_on_a_pool_gives_the_serial_plaintexts(keys512, pool, count):
    # A pool decrypts CRT halves (all modulo p, then all modulo q), spread evenly over its workers, and joins
    # them here: the plaintexts are exactly raw_decrypt's, small batches (one task per worker) and large
    # (the guided schedule over halves) alike.
    from dpdpca.crypto import _gmp as bk
    from dpdpca.crypto.compute import ExecutorEngine, TASK_CIPHERTEXTS, half_spans
    from dpdpca.crypto.encrypted import _decrypt_batch

    pk, sk = keys512
    cts = [bk.random_below(pk.nsquare) for _ in range(count)]
    engine = ExecutorEngine(pool)
    assert _decrypt_batch(sk, cts, engine) == sk.raw_decrypt(cts)
    spans = half_spans(count, engine)
    assert [(a, b) for a, b in spans if a < b] == spans  # contiguous, in order, covering every half
    assert [a for a, _ in spans] == [0, *(b for _, b in spans[:-1])][:len(spans)]
    assert (spans[-1][1] if spans else 0) == 2 * count
    if 0 < 2 * count <= 2 * TASK_CIPHERTEXTS:  # a small batch: one equal task per worker, no tail
        sizes = [b - a for a, b in spans]
        assert len(spans) == min(2, 2 * count) and max(sizes) - min(sizes) <= 1
    assert sk.crt_join(sk.raw_decrypt_half(cts, "p"), sk.raw_decrypt_half(cts, "q")) == sk.raw_decrypt(cts)
    with pytest.raises(ParameterError, match="prime must be 'p' or 'q', got 'r'"):
        sk.raw_decrypt_half(cts, "r")
