"""One compute engine for every batch of ciphertext work.

Every batched operation of :mod:`dpdpca.crypto.encrypted` is one call to an
engine: ``engine.map(kernel, tasks, out_width)`` runs a module-level *kernel*
over a list of argument tuples and returns the concatenated results, or
``engine.tree_product(modulus, width, groups)`` multiplies, position by
position, the ciphertext runs of each group (the aggregation).  Three engines
implement the interface:

* :class:`SerialEngine` (``executor=None``): in-process, on ``mpz`` values,
  no conversion at all;
* :class:`ExecutorEngine`: any :class:`concurrent.futures.Executor`, usually
  :func:`local_process_pool`;
* :class:`DaskEngine`: a ``distributed.Client`` (optional extra
  ``dpdpca[distributed]``); in the aggregation each worker thread holds one
  group of positions and multiplies its runs in one task.

Engines that ship work elsewhere send only ``bytes``, ``int`` and ``str``
values and lists of them: each run of ciphertexts (an :class:`Ints`
argument) travels as one fixed-width big-endian blob, never as a list of
Python ints and never as a pickled object of ours.  Workers rebuild a key
from its integers and cache it (with its DJN fixed-base table) for the life
of the process.

**The secret key never leaves the key holder's host.**  An engine says
whether it may run on other hosts (:attr:`Engine.remote`); decryption on a
remote engine is refused (:func:`check_local_for_secret`).  Only a process
or thread pool of the standard library counts as local; any other executor
(a Dask ``ClientExecutor`` included) is treated as remote.

Knows nothing of the protocol: kernels are "encrypt these plaintexts",
"decrypt these ciphertexts", "multiply these columns", "raise to these
exponents", "multi-exponentiate this base by these packed vectors",
"pack these one-slot ciphertexts", "rerandomize these ciphertexts".
"""

from __future__ import annotations

import importlib
import itertools
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, TypeVar, Union

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.keys import PrivateKey, PublicKey
from dpdpca.errors import MessageError, ParameterError

__all__ = [
    "Engine",
    "SerialEngine",
    "ExecutorEngine",
    "DaskEngine",
    "Ints",
    "Placed",
    "EngineLike",
    "as_engine",
    "check_local_for_secret",
    "local_process_pool",
    "start_workers",
    "dask_engine",
    "split",
    "equal_spans",
    "task_size",
    "TASK_CIPHERTEXTS",
]

#: Most ciphertexts per task shipped to an executor (64 KiB at 2048 bits).
TASK_CIPHERTEXTS = 128
#: Fewest items per task (keeps per-task overhead small against the work).
MIN_TASK = 8

T = TypeVar("T")


class Ints:
    """A run of non-negative integers of at most ``width`` bytes each.

    A kernel argument that remote engines ship as one packed blob
    (``width`` bytes per value, big-endian) and the worker unpacks to
    ``mpz`` values again; the serial engine passes ``values`` through.
    """

    __slots__ = ("values", "width")

    def __init__(self, values: Sequence[Any], width: int) -> None:
        self.values = values
        self.width = width


#: Tag of a packed :class:`Ints` argument on the wire: ``(_PACKED, blob, width)``.
_PACKED = "dpdpca-packed-ints"


def _pack_arg(a: Any) -> Any:
    return (_PACKED, bk.ints_to_bytes(a.values, a.width), a.width) if isinstance(a, Ints) else a


def _unpack_arg(a: Any) -> Any:
    if isinstance(a, tuple) and len(a) == 3 and a[0] == _PACKED:
        return bk.bytes_to_ints(a[1], a[2])
    return a


def run_packed(kernel: Callable[..., list[Any]], out_width: int, args: tuple[Any, ...]) -> bytes:
    """Worker side: unpack the blobs, run ``kernel``, pack its result."""
    return bk.ints_to_bytes(kernel(*[_unpack_arg(a) for a in args]), out_width)


def product_node(runs: Sequence[bytes | list[bk.mpz]], modulus: int, width: int) -> bytes:
    """Worker side: element-wise product of one group's runs modulo ``modulus``.

    Each run is a packed blob or a list of ``mpz`` already decoded on the
    worker (:meth:`DaskEngine.place`); one flat product (the serial
    engine's loop), and the result leaves as one packed blob.
    """
    rows = [bk.bytes_to_ints(r, width) if isinstance(r, bytes) else r for r in runs]
    return bk.ints_to_bytes(bk.columnwise_prod_mod(rows, modulus), width)


def decode_run(blob: bytes, width: int) -> list[bk.mpz]:
    """Worker side: a packed blob as ``mpz`` values, kept in the worker's memory."""
    return bk.bytes_to_ints(blob, width)


class Placed:
    """Runs of ciphertexts already on the workers of a Dask cluster (:meth:`DaskEngine.place`).

    ``groups[k]`` holds the futures of group ``k``'s runs, all on the
    worker ``homes[k]`` (``None`` if the scheduler did not name its
    workers); ``decoded`` says whether they are ``mpz`` lists or packed
    blobs.  :meth:`release` lets the workers drop them.
    """

    __slots__ = ("groups", "decoded", "homes")

    def __init__(self, groups: list[list[Any]], decoded: bool, homes: list[str | None] | None = None) -> None:
        self.groups = groups
        self.decoded = decoded
        self.homes = list(homes) if homes is not None else [None] * len(groups)

    def release(self) -> None:
        """Forget the futures (the cluster frees the data)."""
        for g in self.groups:
            for f in g:
                f.release()
        self.groups = []


class Engine:
    """The interface every compute engine implements.

    Attributes
    ----------
    name : str
        ``"serial"``, ``"executor"`` or ``"dask"``.
    remote : bool
        True if tasks may run on another host than the caller's; secret-key
        work is refused on such an engine.
    workers : int
        Tasks that can run at once (used to size tasks).
    """

    name = "engine"
    remote = False
    workers = 1

    def map(self, kernel: Callable[..., list[Any]], tasks: Sequence[tuple[Any, ...]], out_width: int) -> list[bk.mpz]:
        """``concat(kernel(*task) for task in tasks)``, in order.

        ``kernel`` is a module-level function returning a list of
        non-negative integers below ``256**out_width``; its :class:`Ints`
        arguments arrive as lists of ``mpz``.
        """
        raise NotImplementedError

    def tree_product(self, modulus: int, width: int, groups: Sequence[Sequence[Ints]]) -> list[bk.mpz]:
        """For each group, the position-wise product of its runs modulo ``modulus``, concatenated.

        Every run of a group has the same length.  Multiplication modulo
        ``modulus`` is exact, associative and commutative, so every engine
        returns the same integers whatever the order of the products.
        """
        return self.map(_product_kernel, [(int(modulus), *g) for g in groups], width)

    def task_items(self, count: int) -> int:
        """Items per task for a batch of ``count`` (:func:`task_size`)."""
        return task_size(count, self.workers)

    def product_items(self, count: int) -> int:
        """Positions per group of :meth:`tree_product` (default :meth:`task_items`)."""
        return self.task_items(count)

    def close(self) -> None:
        """Release what the engine started (nothing for engines wrapping the caller's executor)."""


def _product_kernel(modulus: int, *columns: list[bk.mpz]) -> list[bk.mpz]:
    return bk.columnwise_prod_mod(columns, modulus)


class SerialEngine(Engine):
    """In-process, one task after the other, on ``mpz`` values (no byte conversion)."""

    name = "serial"

    def map(self, kernel: Callable[..., list[Any]], tasks: Sequence[tuple[Any, ...]], out_width: int) -> list[bk.mpz]:
        out: list[bk.mpz] = []
        for args in tasks:
            out.extend(kernel(*[a.values if isinstance(a, Ints) else a for a in args]))
        return out

    def tree_product(self, modulus: int, width: int, groups: Sequence[Sequence[Ints]]) -> list[bk.mpz]:
        out: list[bk.mpz] = []
        for g in groups:
            out.extend(bk.columnwise_prod_mod([run.values for run in g], modulus))
        return out


SERIAL = SerialEngine()


class ExecutorEngine(Engine):
    """A :class:`concurrent.futures.Executor`; arguments travel as packed bytes.

    Parameters
    ----------
    executor : concurrent.futures.Executor
        Not shut down by :meth:`close` (the caller owns it).  Local only if it
        is a standard-library process or thread pool.
    """

    name = "executor"

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.remote = not isinstance(executor, (ProcessPoolExecutor, ThreadPoolExecutor))
        self.workers = int(getattr(executor, "_max_workers", 2) or 2)

    def map(self, kernel: Callable[..., list[Any]], tasks: Sequence[tuple[Any, ...]], out_width: int) -> list[bk.mpz]:
        futures = [self.executor.submit(run_packed, kernel, out_width, tuple(_pack_arg(a) for a in args))
                   for args in tasks]
        return bk.bytes_to_ints(b"".join(f.result() for f in futures), out_width)


class DaskEngine(Engine):
    """A Dask ``distributed.Client``: every task on the cluster, packed bytes in and out.

    The aggregation gives each worker thread one group of positions: the
    group's runs are scattered to (or already on, :meth:`place`) one worker,
    which multiplies them in one task, a flat product as the serial engine
    does, and sends the product back as one packed blob.  Products of
    different groups never meet, so the reduction has no cross-worker step:
    the client only decodes each blob as it arrives and concatenates.

    Parameters
    ----------
    client : distributed.Client
        Not closed by :meth:`close` unless ``owns_client``.
    owns_client : bool
        Close the client (and with it a cluster it started) in :meth:`close`.

    Notes
    -----
    A Dask cluster is remote by definition (workers may live on any host), so
    decryption is refused on it, even on a ``LocalCluster``.
    """

    name = "dask"
    remote = True

    def __init__(self, client: Any, *, owns_client: bool = False) -> None:
        self.client = client
        self.owns_client = bool(owns_client)
        try:
            self.workers = max(1, sum(int(w.get("nthreads", 1))
                                      for w in client.scheduler_info()["workers"].values()))
        except (KeyError, TypeError, OSError):  # a failed info call only costs the task sizing
            self.workers = 2

    def task_items(self, count: int) -> int:
        """About four tasks per worker thread, at least 64 items: a Dask task costs about a millisecond."""
        return max(64, -(-count // (4 * self.workers)))

    def product_items(self, count: int) -> int:
        """One group per worker thread, at least 64 positions: the products all cost the same, so
        equal groups balance, and every further task adds a scheduler round trip to the critical path."""
        return max(64, -(-count // self.workers))

    def _worker_threads(self) -> list[str]:
        """Each worker's address once per thread, sorted (empty if the scheduler does not say)."""
        try:
            info = self.client.scheduler_info()["workers"]
            return [a for a in sorted(info) for _ in range(max(1, int(info[a].get("nthreads", 1))))]
        except (KeyError, TypeError, OSError, ValueError):
            return []

    def _worker_addresses(self) -> list[str]:
        return sorted(set(self._worker_threads()))

    def _direct(self, workers: Sequence[str | None]) -> bool | None:
        """Talk straight to the workers when they all run on the client's host (a third faster
        than through the scheduler); elsewhere Dask's default, which needs no client-to-worker route."""
        hosts = {_host(w) for w in workers}
        return True if hosts and hosts <= {"127.0.0.1", "localhost", "::1"} else None

    def map(self, kernel: Callable[..., list[Any]], tasks: Sequence[tuple[Any, ...]], out_width: int) -> list[bk.mpz]:
        packed = [tuple(_pack_arg(a) for a in args) for args in tasks]
        direct = self._direct(self._worker_addresses())
        # Blobs go to the workers by scatter (not inside the task graph), then one task each,
        # all in one map call (one message to the scheduler).
        blobs = self.client.scatter([p for p in packed], hash=False, direct=direct)
        futures = self.client.map(run_packed, [kernel] * len(blobs), [out_width] * len(blobs), blobs, pure=False)
        return bk.bytes_to_ints(b"".join(self.client.gather(futures, direct=direct)), out_width)

    def place(self, width: int, groups: Sequence[Sequence[Ints]], *, decode: bool = True) -> Placed:
        """Ship each group's runs to one worker (round robin over worker threads) and keep them there.

        One scatter per worker, packed bytes on the wire.  With ``decode``
        the workers turn the blobs into ``mpz`` lists at once (and this call
        waits for it), so later products on them start from values in the
        workers' memory, as a serial product starts from values in ours.
        """
        client = self.client
        threads: list[str | None] = list(self._worker_threads()) or [None]
        homes = [threads[k % len(threads)] for k in range(len(groups))]
        direct = self._direct(threads)
        placed: list[list[Any]] = [[] for _ in groups]
        for address in dict.fromkeys(homes):
            mine = [k for k in range(len(groups)) if homes[k] == address]
            blobs = [bk.ints_to_bytes(run.values, width) for k in mine for run in groups[k]]
            if not blobs:
                continue
            where = None if address is None else [address]
            futures = client.scatter(blobs, hash=False, workers=where, direct=direct)
            if decode:
                futures = client.map(decode_run, futures, width=width, pure=False, workers=where)
            pos = 0
            for k in mine:
                placed[k] = futures[pos:pos + len(groups[k])]
                pos += len(groups[k])
        if decode:
            from distributed import wait
            wait([f for g in placed for f in g])
        return Placed(placed, decode, homes)

    def tree_product(self, modulus: int, width: int, groups: Sequence[Sequence[Ints]] | Placed
                     ) -> list[bk.mpz]:
        """The aggregation on the cluster; ``groups`` may already be on the workers (:meth:`place`).

        One task per group, on the worker that holds the group's runs (no
        transfer between workers): the flat product of the runs, returned
        as one packed blob.  Each blob is fetched (straight from the worker
        when the cluster is on this host) and decoded as soon as its task
        ends, while the other workers are still multiplying.
        """
        from distributed import as_completed

        placed = groups if isinstance(groups, Placed) else self.place(width, groups, decode=False)
        client = self.client
        try:
            # One map call is one message to the scheduler: separate submits leave the client
            # about 10 ms apart (its batched stream), and every worker would wait for its task.
            futures = client.map(product_node, placed.groups, modulus=int(modulus), width=width, pure=False)
            index = {f.key: k for k, f in enumerate(futures)}
            direct = self._direct(placed.homes)  # no scheduler call on the timed path
            parts: list[list[bk.mpz]] = [[] for _ in futures]
            for done in as_completed(futures):
                parts[index[done.key]] = bk.bytes_to_ints(client.gather(done, direct=direct), width)
            return [c for part in parts for c in part]
        finally:
            if not isinstance(groups, Placed):
                placed.release()

    def close(self) -> None:
        if self.owns_client:
            self.client.close()


def _host(address: str | None) -> str:
    """The host of a Dask address such as ``tcp://127.0.0.1:40123`` (``""`` if unknown)."""
    if not address or "://" not in address:
        return ""
    rest = address.split("://", 1)[1]
    return rest[1:rest.index("]")] if rest.startswith("[") else rest.rsplit(":", 1)[0]


#: What an ``executor=`` parameter accepts: None (serial), an Engine, an Executor
#: (or, untyped, a ``distributed.Client``).
EngineLike = Union["Engine", Executor, None]


def as_engine(executor: Any) -> Engine:
    """The engine for an ``executor=`` argument.

    ``None`` -> :class:`SerialEngine`; an :class:`Engine` -> itself; a
    ``distributed.Client`` or its ``get_executor()`` -> :class:`DaskEngine`; any other
    :class:`concurrent.futures.Executor` -> :class:`ExecutorEngine` (remote
    unless a standard-library process or thread pool).

    Raises
    ------
    ParameterError
        Anything else.
    """
    if executor is None:
        return SERIAL
    if isinstance(executor, Engine):
        return executor
    if type(executor).__module__.split(".")[0] == "distributed":
        if hasattr(executor, "scheduler_info"):  # a Client
            return DaskEngine(executor)
        if hasattr(getattr(executor, "_client", None), "scheduler_info"):  # client.get_executor()
            return DaskEngine(executor._client)
    if isinstance(executor, Executor):
        return ExecutorEngine(executor)
    raise param_error("executor", "None, a compute Engine, a concurrent.futures.Executor or a distributed.Client",
                      type(executor).__name__)


def check_local_for_secret(engine: Engine, operation: str) -> None:
    """Refuse secret-key work on an engine that may run on another host.

    Raises
    ------
    ParameterError
        ``engine.remote`` is true.
    """
    if engine.remote:
        raise ParameterError(
            f"executor for {operation} must be local (serial or a local process pool): the secret key never "
            f"leaves the key holder's host, got a remote {engine.name} engine")


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


def _worker_pid(pause_s: float, modules: tuple[str, ...] = ()) -> int:
    for name in modules:
        importlib.import_module(name)
    time.sleep(pause_s)  # holds this worker, so the next task of the round goes to (and starts) another
    return os.getpid()


def start_workers(pool: ProcessPoolExecutor, *, modules: Sequence[str] = (), timeout_s: float = 120.0) -> float:
    """Start every worker process of a local pool now, each with this module and ``modules`` loaded; the seconds it took.

    A ``spawn`` pool starts its processes on demand, so without this the
    first batches pay for starting Python and importing the kernels (about
    half a second per worker): a long-lived service starts its pool once,
    before any request, and a benchmark reports that apart.  ``modules``:
    where the caller's other kernels live, by name (the protocol's intake
    kernels: ``"dpdpca.protocol.intake"``, 0.4 s to import), imported in
    every worker too (each runs at least one of the warm-up tasks).

    Raises
    ------
    TimeoutError
        Not every worker answered within ``timeout_s``.
    """
    workers = int(getattr(pool, "_max_workers", 1))
    start = time.perf_counter()
    seen: set[int] = set()
    while len(seen) < workers:
        if time.perf_counter() - start > timeout_s:
            raise TimeoutError(f"pool workers must start within {timeout_s} s, got {len(seen)} of {workers}")
        seen.update(pool.map(_worker_pid, [0.02] * workers, [tuple(modules)] * workers))
    return time.perf_counter() - start


def dask_engine(address: str) -> DaskEngine:
    """Connect to a Dask scheduler (``tcp://HOST:8786``); the engine closes its client.

    Raises
    ------
    ParameterError
        ``distributed`` is not installed (``pip install 'dpdpca[distributed]'``)
        or the scheduler cannot be reached.
    """
    try:
        from distributed import Client
    except ImportError:
        raise ParameterError("scheduler needs the optional extra: pip install 'dpdpca[distributed]' "
                             f"(dask and distributed), got {address!r} without it") from None
    if not isinstance(address, str) or "://" not in address:
        raise param_error("scheduler", "an address like tcp://HOST:8786", address)
    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise ParameterError(f"scheduler must be reachable, got {address!r} ({type(exc).__name__})") from None
    return DaskEngine(client, owns_client=True)


def task_size(count: int, workers: int = 2) -> int:
    """Items per task: about 16 tasks per worker, clamped to ``[MIN_TASK, TASK_CIPHERTEXTS]``."""
    return max(MIN_TASK, min(TASK_CIPHERTEXTS, -(-count // (16 * max(1, workers)))))


def split(items: Sequence[T], size: int | None = None) -> list[Sequence[T]]:
    """Consecutive pieces of at most ``size`` items (default :func:`task_size`)."""
    size = task_size(len(items)) if size is None else size
    return [items[i:i + size] for i in range(0, len(items), size)]


def spans(count: int, engine: Engine, size: int | None = None) -> list[tuple[int, int]]:
    """``(start, stop)`` of consecutive tasks covering ``range(count)``; one span on the serial engine."""
    if count == 0:
        return []
    if isinstance(engine, SerialEngine):
        return [(0, count)]
    if size is None:
        size = engine.task_items(count)
    step = size
    return [(s, min(s + step, count)) for s in range(0, count, step)]


def equal_spans(count: int, parts: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of ``parts`` consecutive spans covering ``range(count)``, their sizes differing by at most one.

    Examples
    --------
    >>> equal_spans(7, 3)
    [(0, 2), (2, 4), (4, 7)]
    """
    return list(itertools.pairwise(count * k // parts for k in range(parts + 1)))


def guided_spans(count: int, engine: Engine, *, largest: int = TASK_CIPHERTEXTS) -> list[tuple[int, int]]:
    """Like :func:`spans`, but tasks shrink towards the end (guided scheduling): each takes about
    a quarter of what is left per worker, between :data:`MIN_TASK` and ``largest`` items.

    The last tasks are small, so no worker is left with a long task while the others idle (the
    serial tail of equal tasks is up to one whole task); one span on the serial engine.
    """
    if count == 0:
        return []
    if isinstance(engine, SerialEngine):
        return [(0, count)]
    out: list[tuple[int, int]] = []
    start = 0
    workers = max(1, engine.workers)
    while start < count:
        size = max(MIN_TASK, min(largest, (count - start) // (4 * workers)))
        out.append((start, min(count, start + size)))
        start += size
    return out


# ---- kernels: module-level functions on lists of mpz and ints ----------------------

_PUBLIC: dict[tuple[int, int], PublicKey] = {}
_PRIVATE: dict[tuple[int, int], PrivateKey] = {}


def register_public(key: PublicKey) -> None:
    """Let in-process kernels use the caller's key object (and its cached tables)."""
    _remember(key)


def register_private(key: PrivateKey) -> None:
    """Let in-process kernels use the caller's private key object."""
    register_public(key.public_key)
    _PRIVATE.setdefault((int(key.p), int(key.q)), key)


#: Keys (with their fixed-base tables, up to 64 MiB each) a worker keeps; the oldest goes first.
_MAX_KEYS = 4


def _remember(key: PublicKey) -> PublicKey:
    """Make ``key`` the most recently used entry of the bounded key cache."""
    _PUBLIC.pop((int(key.n), int(key.hs)), None)
    _PUBLIC[(int(key.n), int(key.hs))] = key
    while len(_PUBLIC) > _MAX_KEYS:
        del _PUBLIC[next(iter(_PUBLIC))]
    return key


def _public(n: int, hs: int) -> PublicKey:
    # The parent validated the key (size, consent); the worker only recomputes.
    return _remember(_PUBLIC.get((n, hs)) or PublicKey(n, hs, insecure_test_key=True))


def _init_worker(n: int, hs: int) -> None:
    _ = _public(n, hs).hs_table  # build and cache the fixed-base table now


def _private(n: int, hs: int, p: int, q: int) -> PrivateKey:
    key = _PRIVATE.get((p, q))
    if key is None:
        key = PrivateKey(_public(n, hs), p, q)
        _PRIVATE[(p, q)] = key
    return key


def encrypt_kernel(n: int, hs: int, method: str, plaintexts: list[bk.mpz], randomness: list[int] | None,
                   expected: int | None = None) -> list[bk.mpz]:
    """Encrypt plaintexts in ``[0, n)``; ``randomness`` (one per plaintext) for tests only.

    ``expected``: encryptions this worker is likely to run for the whole batch
    (sizes the DJN table, :meth:`PublicKey.djn_table`).
    """
    key = _public(n, hs)
    rand = None if randomness is None else (lambda i, r=randomness: r[i])
    factors = key.random_factors(len(plaintexts), method=method, expected=expected, _test_randomness=rand)
    return key.raw_encrypt_with(plaintexts, factors)


#: Parts of fixed-base tables this worker holds (:func:`djn_rows_kernel`); the oldest goes first.
_ROW_TABLES: dict[tuple[int, ...], bk.FixedBaseTable] = {}
_MAX_ROW_TABLES = 2


def djn_rows_kernel(modulus: int, base: int, exp_bits: int, window: int, first: int, stop: int,
                    digits: bytes) -> list[bk.mpz]:
    """This worker's rows ``first..stop-1`` of one fixed-base table: the partial product of each exponent.

    ``digits``: uint16 little-endian, ``stop - first`` per exponent.  The
    rows are built once per worker and table (cached); the caller multiplies
    the partial products of all row ranges (:func:`shared_table_powers`).
    """
    key = (int(modulus), int(base), int(exp_bits), int(window), int(first), int(stop))
    table = _ROW_TABLES.pop(key, None)
    if table is None:
        table = bk.FixedBaseTable(base, modulus, exp_bits, window, rows=(first, stop))
    _ROW_TABLES[key] = table
    while len(_ROW_TABLES) > _MAX_ROW_TABLES:
        del _ROW_TABLES[next(iter(_ROW_TABLES))]
    cols = stop - first
    d = np.frombuffer(digits, dtype="<u2").reshape(-1, cols) if cols else np.zeros((0, 0), dtype=np.int64)
    return table.partial_products(d)


def shared_table_powers(engine: Engine, base: int, modulus: int, exp_bits: int, count: int,
                        width: int) -> list[bk.mpz]:
    """``count`` powers ``base**alpha mod modulus``, alpha uniform below ``2**exp_bits``, with one table shared by the pool.

    The table (sized for ``count``) is split by rows over the engine's
    workers: each builds its rows once and returns, for every exponent, the
    product of its rows' entries; the caller multiplies those partial
    products (``workers - 1`` multiplications per power).  Every row is built
    once, not once per worker, and no worker sees a whole exponent.  The
    digits are drawn here from ``os.urandom``.
    """
    w = bk.FixedBaseTable.best_window(exp_bits, count)
    shape = bk.FixedBaseTable(1, 3, exp_bits, w, rows=(0, 0))  # digit extraction only
    digits = shape.random_digits(count).astype("<u2")
    n_rows = shape.n_rows
    parts = max(1, min(engine.workers, n_rows))
    tasks = [(int(modulus), int(base), int(exp_bits), w, a, b, np.ascontiguousarray(digits[:, a:b]).tobytes())
             for a, b in equal_spans(n_rows, parts)]
    partial = engine.map(djn_rows_kernel, tasks, width)
    return bk.columnwise_prod_mod([partial[k * count:(k + 1) * count] for k in range(parts)], modulus)


def factors_kernel(n: int, hs: int, method: str, count: int, expected: int) -> list[bk.mpz]:
    """``count`` fresh encryptions of zero (``hs**alpha`` or ``r**n``) drawn in this worker."""
    return _public(n, hs).random_factors(count, method=method, expected=expected)


def rerandomize_kernel(n: int, hs: int, method: str, ciphertexts: list[bk.mpz]) -> list[bk.mpz]:
    """Each ciphertext times a fresh encryption of zero."""
    key = _public(n, hs)
    n2 = key.nsquare
    factors = key.random_factors(len(ciphertexts), method=method)
    return [c * f % n2 for c, f in zip(ciphertexts, factors)]


def decrypt_kernel(n: int, hs: int, p: int, q: int, ciphertexts: list[bk.mpz]) -> list[bk.mpz]:
    """CRT-decrypt to plaintexts in ``[0, n)`` (local engines only)."""
    return _private(n, hs, p, q).raw_decrypt(ciphertexts)


def decrypt_halves_kernel(n: int, hs: int, p: int, q: int, mod_p: list[bk.mpz], mod_q: list[bk.mpz]) -> list[bk.mpz]:
    """The plaintexts of ``mod_p`` modulo p, then those of ``mod_q`` modulo q (CRT halves; local engines only)."""
    key = _private(n, hs, p, q)
    return key.raw_decrypt_half(mod_p, "p") + key.raw_decrypt_half(mod_q, "q")


def half_spans(count: int, engine: Engine) -> list[tuple[int, int]]:
    """Tasks over the ``2 count`` CRT halves of a batch of decryptions (all halves modulo p, then modulo q).

    A half is one exponentiation modulo ``p**2`` or ``q**2``, half a
    decryption, so the batch splits evenly whatever ``count``: a small batch
    (up to :data:`TASK_CIPHERTEXTS` halves a worker) as one equal task per
    worker, with no tail of a last task while the others idle and one task's
    overhead per worker; a larger one in :func:`guided_spans` over the halves.
    """
    halves = 2 * count
    if halves == 0 or isinstance(engine, SerialEngine):
        return guided_spans(halves, engine)
    workers = max(1, engine.workers)
    if halves > workers * TASK_CIPHERTEXTS:
        return guided_spans(halves, engine)
    return equal_spans(halves, min(workers, halves))


def power_kernel(modulus: int, ciphertexts: list[bk.mpz], exponents: list[int]) -> list[bk.mpz]:
    """``c_i ** e_i mod modulus`` (negative ``e_i`` through the inverse)."""
    return powers(ciphertexts, exponents, modulus)


def packed_power_kernel(modulus: int, slot_bits: int, base: list[bk.mpz], vectors: list[list[int]],
                        offset: int) -> list[bk.mpz]:
    """``base[0] ** pack(v)`` for each vector (see :func:`packed_powers`)."""
    return packed_powers(base[0], modulus, slot_bits, vectors, offset)


def repack_kernel(modulus: int, slot_bits: int, singles: list[bk.mpz], counts: list[int]) -> list[bk.mpz]:
    """``prod_j c_j**(2**(slot_bits j))`` over each next ``counts[k]`` one-slot ciphertexts (Horner)."""
    m = bk.mpz(modulus)
    shift = 1 << slot_bits
    out: list[bk.mpz] = []
    pos = 0
    for k in counts:
        acc = singles[pos + k - 1]
        for j in range(pos + k - 2, pos - 1, -1):
            acc = bk.powmod(acc, shift, m) * singles[j] % m
        out.append(acc)
        pos += k
    return out


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
