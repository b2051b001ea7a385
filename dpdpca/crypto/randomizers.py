"""Encryptions of zero computed ahead of use.

A full-randomness rerandomizer ``r**n mod n**2`` (``r`` uniform in Z*_n) costs
one 2048-bit exponentiation modulo a 4096-bit number, about 9 ms, and depends
on no plaintext.  A party that knows it will need ``count`` of them (the proxy,
once it knows d) computes them in a background thread while it waits for
other parties, then takes them when its critical path needs them.  gmpy2
releases the GIL during the exponentiations, so the thread uses a second core.

Every factor is handed out at most once, never logged and never serialized.
"""

from __future__ import annotations

import threading
import time

from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.keys import PublicKey
from dpdpca._validation import check_int, type_error

__all__ = ["RandomizerPool"]


class RandomizerPool:
    """Fresh ``r**n mod n**2`` factors (``r`` uniform in Z*_n) computed in a background thread.

    Parameters
    ----------
    public_key : PublicKey

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

    #: Factors per exponentiation call; the thread checks for a stop request between blocks,
    #: so a stop waits for at most this many exponentiations (about 18 ms at 2048 bits).
    BLOCK = 2

    def __init__(self, public_key: PublicKey) -> None:
        if not isinstance(public_key, PublicKey):
            raise type_error("public_key", "a PublicKey", type(public_key).__name__)
        self.public_key = public_key
        self._ready: list[bk.mpz] = []
        self._wanted = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cpu_s = 0.0

    def __repr__(self) -> str:  # never the factors
        return f"RandomizerPool(ready={len(self._ready)}, wanted={self._wanted})"

    def fill(self, count: int) -> None:
        """Start computing ``count`` more factors in the background (returns at once)."""
        count = check_int("count", count, minimum=0)
        with self._lock:
            self._wanted += count
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="dpdpca-randomizers", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        start = time.thread_time()
        try:
            while not self._stop.is_set():
                with self._lock:
                    k = min(self.BLOCK, self._wanted - len(self._ready))
                if k <= 0:
                    return
                block = self.public_key.random_factors(k, method="standard")
                with self._lock:
                    self._ready.extend(block)
        finally:
            self.cpu_s += time.thread_time() - start

    @property
    def ready(self) -> int:
        """Factors computed so far and not yet taken."""
        with self._lock:
            return len(self._ready)

    def stop(self) -> None:
        """Stop the background thread after its current block (keeps what is ready)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
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
            out.extend(self.public_key.random_factors(count - len(out), method="standard"))
        return out

    def close(self) -> None:
        """Stop the thread and forget every factor not handed out."""
        self.stop()
        with self._lock:
            self._ready = []
            self._wanted = 0

    def __enter__(self) -> "RandomizerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


