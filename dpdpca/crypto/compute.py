"""Compute backends for batches of ciphertext work.

A backend is any :class:`concurrent.futures.Executor` (the interface a
distributed engine would implement too).  ``executor=None`` runs in-process
and serially, on ``mpz`` values directly.  With an executor, work is cut into
chunks and each task receives and returns only ``bytes`` and ``int`` values:
fixed-width big-endian ciphertexts, never pickled objects of ours.  Workers
rebuild a key from its integers and cache it (with its DJN fixed-base table)
for the life of the process.

Knows nothing of the protocol: tasks are "encrypt these plaintexts", "decrypt
these ciphertexts", "multiply these columns", "raise to these exponents",
"multi-exponentiate this base by these packed vectors".
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, TypeVar

from dpdpca._validation import check_int
from dpdpca.crypto import _backend as bk
from dpdpca.crypto.keys import PrivateKey, PublicKey
from dpdpca.errors import MessageError

__all__ = ["local_process_pool", "run_tasks", "split", "task_size", "TASK_CIPHERTEXTS"]

#: Most ciphertexts per task shipped to an executor (64 KiB at 2048 bits).
TASK_CIPHERTEXTS = 128
#: Fewest items per task (keeps per-task overhead small against the work).
MIN_TASK = 8

T = TypeVar("T")


def local_process_pool(max_workers: int | None = None, *,
                       public_key: PublicKey | None = None) -> ProcessPoolExecutor:
    """A local process pool for the ``executor=`` parameter of batch operations.

    Uses the ``spawn`` start method (no fork of a threaded parent).  Close it
    with ``shutdown()`` or use it as a context manager.

    Parameters
    ----------
    max_workers : int or None
        Number of processes, >= 1; ``None`` = ``os.cpu_count()``.
    public_key : PublicKey or None
        If given, every worker builds this key's DJN fixed-base table when it
        starts, so the first batches do not pay for it.
    """
    if max_workers is not None:
        check_int("max_workers", max_workers, minimum=1)
    init: tuple[Callable[..., Any] | None, tuple[Any, ...]] = (None, ())
    if public_key is not None:
        init = (_init_worker, (int(public_key.n), int(public_key.hs)))
    return ProcessPoolExecutor(max_workers=max_workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=init[0], initargs=init[1])


def task_size(count: int) -> int:
    """Items per task: about 32 tasks for a batch, clamped to ``[MIN_TASK, TASK_CIPHERTEXTS]``."""
    return max(MIN_TASK, min(TASK_CIPHERTEXTS, -(-count // 32)))


def split(items: Sequence[T], size: int | None = None) -> list[Sequence[T]]:
    """Consecutive pieces of at most ``size`` items (default :func:`task_size`)."""
    size = task_size(len(items)) if size is None else size
    return [items[i:i + size] for i in range(0, len(items), size)]


def run_tasks(executor: Executor | None, fn: Callable[..., Any], arg_tuples: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``[fn(*args) for args in arg_tuples]``, on ``executor`` if given, in order."""
    if executor is None:
        return [fn(*args) for args in arg_tuples]
    futures = [executor.submit(fn, *args) for args in arg_tuples]
    return [f.result() for f in futures]


# ---- worker side: module-level functions taking bytes and ints ---------------------

_PUBLIC: dict[tuple[int, int], PublicKey] = {}
_PRIVATE: dict[tuple[int, int], PrivateKey] = {}


def _public(n: int, hs: int) -> PublicKey:
    key = _PUBLIC.get((n, hs))
    if key is None:
        # The parent validated the key (size, consent); the worker only recomputes.
        key = PublicKey(n, hs, insecure_test_key=True)
        _PUBLIC[(n, hs)] = key
    return key


def _init_worker(n: int, hs: int) -> None:
    _public(n, hs).hs_table  # build and cache the fixed-base table now


def _private(n: int, hs: int, p: int, q: int) -> PrivateKey:
    key = _PRIVATE.get((p, q))
    if key is None:
        key = PrivateKey(_public(n, hs), p, q)
        _PRIVATE[(p, q)] = key
    return key


def encrypt_task(n: int, hs: int, method: str, plaintexts: bytes, randomness: list[int] | None) -> bytes:
    """Encrypt fixed-width plaintexts (``[0, n)``); ``randomness`` for tests only."""
    key = _public(n, hs)
    pts = bk.bytes_to_ints(plaintexts, (key.bits + 7) // 8)
    rand = None if randomness is None else (lambda i, r=randomness: r[i])
    factors = key.random_factors(len(pts), method=method, _test_randomness=rand)
    return bk.ints_to_bytes(key.raw_encrypt_with(pts, factors), key.ciphertext_bytes)


def randomizers_task(n: int, hs: int, method: str, count: int) -> bytes:
    """``count`` fresh encryptions of zero (re-randomization factors)."""
    key = _public(n, hs)
    return bk.ints_to_bytes(key.random_factors(count, method=method), key.ciphertext_bytes)


def decrypt_task(n: int, hs: int, p: int, q: int, ciphertexts: bytes) -> bytes:
    """CRT-decrypt fixed-width ciphertexts to fixed-width plaintexts in ``[0, n)``."""
    key = _private(n, hs, p, q)
    cs = bk.bytes_to_ints(ciphertexts, key.public_key.ciphertext_bytes)
    return bk.ints_to_bytes(key.raw_decrypt(cs), (key.public_key.bits + 7) // 8)


def product_task(modulus: int, width: int, columns: list[bytes]) -> bytes:
    """Element-wise product modulo ``modulus`` of equally long ciphertext blobs."""
    rows = [bk.bytes_to_ints(blob, width) for blob in columns]
    return bk.ints_to_bytes(bk.columnwise_prod_mod(rows, modulus), width)


def power_task(modulus: int, width: int, ciphertexts: bytes, exponents: list[int]) -> bytes:
    """``c_i ** e_i mod modulus`` (negative ``e_i`` through the inverse)."""
    cs = bk.bytes_to_ints(ciphertexts, width)
    return bk.ints_to_bytes(powers(cs, exponents, modulus), width)


def powers(cs: Sequence[bk.mpz], exponents: Sequence[int], modulus: int) -> list[bk.mpz]:
    """``c_i ** e_i mod modulus``; each run of equal exponents goes through one C call."""
    out: list[bk.mpz] = []
    start = 0
    while start < len(cs):
        stop = start + 1
        while stop < len(cs) and exponents[stop] == exponents[start]:
            stop += 1
        out.extend(bk.powmod_base_list(cs[start:stop], exponents[start], modulus))
        start = stop
    return out


def packed_power_task(modulus: int, width: int, base: bytes, slot_bits: int,
                      vectors: list[list[int]], offset: int) -> bytes:
    """``base ** pack(v)`` for each vector (see :func:`packed_powers`)."""
    c = bk.bytes_to_ints(base, width)[0]
    return bk.ints_to_bytes(packed_powers(c, modulus, slot_bits, vectors, offset), width)


def packed_powers(c: bk.mpz, modulus: int, slot_bits: int, vectors: Sequence[Sequence[int]],
                  offset: int) -> list[bk.mpz]:
    """``c ** (sum_t v_t 2**(slot_bits t)) mod modulus`` for many signed vectors ``v``.

    Precomputes ``P_t = c**(2**(slot_bits t))`` once, then each vector is a
    Straus multi-exponentiation ``prod_t P_t**(v_t + offset)`` with short
    non-negative exponents (``|v_t| <= offset``), times the cached inverse of
    ``prod_{t<len(v)} P_t**offset``.
    """
    m = bk.mpz(modulus)
    width = max((len(v) for v in vectors), default=0)
    if width == 0:
        return []
    bases = [bk.mpz(c) % m]
    shift = 1 << slot_bits
    for _t in range(1, width):
        bases.append(bk.powmod(bases[-1], shift, m))
    exp_bits = (2 * offset).bit_length()
    window, group = bk.StrausTable.best_params(width, exp_bits, len(vectors))
    table = bk.StrausTable(bases, m, exp_bits, window, group)
    # (prod_{t<k} P_t**offset)**-1 for each vector length k used, through the same table.
    inverse_by_length: dict[int, bk.mpz] = {}
    out = []
    for v in vectors:
        k = len(v)
        inv = inverse_by_length.get(k)
        if inv is None:
            try:
                inv = bk.invert(table.multi_pow([offset] * k), m)
            except ZeroDivisionError:
                raise MessageError("enc_scalar ciphertext must be a unit modulo n**2, got a non-unit") from None
            inverse_by_length[k] = inv
        out.append(table.multi_pow([int(x) + offset for x in v]) * inv % m)
    return out
