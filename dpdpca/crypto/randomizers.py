"""Encryptions of zero computed ahead of use.

A full-randomness rerandomizer ``r**n mod n**2`` (``r`` uniform in Z*_n) costs
one 2048-bit exponentiation modulo a 4096-bit number, about 9 ms, and a DJN
factor ``hs**alpha`` about a hundred 4096-bit multiplications through the
fixed-base table; neither depends on a plaintext.  A party that knows it will
need ``count`` of them (an owner once it knows d and the release, the proxy
once it knows d) computes them ahead -- in a background thread while it waits
for other parties, or at once (``wait=True``) as offline work -- then takes
them when its critical path needs them.  gmpy2 releases the GIL during the
``r**n`` exponentiations, so that thread uses a second core; the DJN table
lookups hold the GIL, so a DJN pool fills best at once or in an idle process.

Every factor is handed out at most once, never logged and never serialized
by this class (:mod:`dpdpca.protocol.offline` stores an owner's, 0600, used
once and deleted).
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.compute import EngineLike
from dpdpca.crypto.encrypted import encryptions_of_zero
from dpdpca.crypto.keys import PublicKey
from dpdpca._validation import check_int, param_error, type_error

__all__ = ["RandomizerPool"]


class RandomizerPool:
    """Fresh ``r**n mod n**2`` factors (``r`` uniform in Z*_n) computed in a background thread.

    Parameters
    ----------
    public_key : PublicKey
        With ``method="djn"``, the key whose ``hs`` is the base (e.g.
        :meth:`PublicKey.with_own_base`).
    method : {"standard", "djn"}
        ``r**n`` (full randomness, the default) or ``hs**alpha``.

    Attributes
    ----------
    cpu_s : float
        Thread CPU seconds the background computation has used so far.

    Examples
    --------
    >>> from dpdpca.crypto import generate_keypair
    >>> pk, sk = generate_keypair(512, insecure_test_key=True)
    >>> pool = RandomizerPool(pk)
    >>> pool.fill(4)
    >>> factors = pool.take(6)   # the 4 made ahead (once ready) and 2 more made now
    >>> len(factors), len({int(f) for f in factors})
    (6, 6)
    >>> pool.close()
    """

    #: Factors per call by method; the thread checks for a stop request between blocks,
    #: so a stop waits for at most one block (about 18 ms at 2048 bits).
    BLOCKS: ClassVar[dict[str, int]] = {"standard": 2, "djn": 32}
    #: Factors per call when filling at once (``wait``: no stop request to answer between blocks). DJN
    #: factors made together take their table lookups row by row, so a large block keeps one table row
    #: in cache for many factors (:meth:`FixedBaseTable._lookup`); 32 at a time miss it.
    WAIT_BLOCKS: ClassVar[dict[str, int]] = {"standard": 2, "djn": bk.FixedBaseTable.BLOCK}

    def __init__(self, public_key: PublicKey, *, method: str = "standard") -> None:
        if not isinstance(public_key, PublicKey):
            raise type_error("public_key", "a PublicKey", type(public_key).__name__)
        if method not in self.BLOCKS:
            raise param_error("method", f"one of {tuple(self.BLOCKS)}", method)
        self.public_key = public_key
        self.method = method
        self._ready: list[bk.mpz] = []
        self._wanted = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cpu_s = 0.0

    def __repr__(self) -> str:  # never the factors
        return f"RandomizerPool(method={self.method!r}, ready={len(self._ready)}, wanted={self._wanted})"

    def fill(self, count: int, *, wait: bool = False, executor: EngineLike = None) -> None:
        """Compute ``count`` more factors: in the background (returns at once), or now with ``wait``.

        ``executor`` (with ``wait``): make them on that engine
        (:func:`~dpdpca.crypto.encryptions_of_zero`; :attr:`cpu_s` then counts
        the wall time, as the work runs in other processes).
        """
        count = check_int("count", count, minimum=0)
        if wait and executor is not None and count:
            start = time.perf_counter()
            made = encryptions_of_zero(self.public_key, count, method=self.method, executor=executor)
            with self._lock:
                self._ready.extend(made)
                self._wanted = len(self._ready)
            self.cpu_s += time.perf_counter() - start
            return
        with self._lock:
            self._wanted += count
        if wait:
            self.stop_thread()
            self._stop.clear()
            self._run(self.WAIT_BLOCKS[self.method])
            return
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="dpdpca-randomizers", daemon=True)
            self._thread.start()

    def _run(self, per_call: int | None = None) -> None:
        start = time.thread_time()
        per_call = self.BLOCKS[self.method] if per_call is None else per_call
        try:
            while not self._stop.is_set():
                with self._lock:
                    left = self._wanted - len(self._ready)
                    k = min(per_call, left)
                if k <= 0:
                    return
                block = self.public_key.random_factors(k, method=self.method, expected=left)
                with self._lock:
                    self._ready.extend(block)
        finally:
            self.cpu_s += time.thread_time() - start

    @property
    def ready(self) -> int:
        """Factors computed so far and not yet taken."""
        with self._lock:
            return len(self._ready)

    def stop_thread(self) -> None:
        """Wait for the background thread to stop after its current block (keeps what is ready and wanted)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def stop(self) -> None:
        """Stop the background thread after its current block (keeps what is ready, wants no more)."""
        self.stop_thread()
        with self._lock:
            self._wanted = len(self._ready)

    def take_ready(self, count: int) -> list[bk.mpz]:
        """Stop the background work and hand out up to ``count`` ready factors (each only once)."""
        count = check_int("count", count, minimum=0)
        self.stop()
        with self._lock:
            out, self._ready = self._ready[:count], self._ready[count:]
            self._wanted = len(self._ready)
        return out

    def take(self, count: int) -> list[bk.mpz]:
        """Exactly ``count`` factors: the ready ones first, the rest computed now."""
        out = self.take_ready(count)
        if len(out) < count:
            out.extend(self.public_key.random_factors(count - len(out), method=self.method))
        return out

    def close(self) -> None:
        """Stop the thread and forget every factor not handed out (and a DJN key's table)."""
        self.stop()
        with self._lock:
            self._ready = []
            self._wanted = 0
        if self.method == "djn":
            self.public_key.drop_table()

    def __enter__(self) -> "RandomizerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


