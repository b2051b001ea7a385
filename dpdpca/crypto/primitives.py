"""The machine's cost of each big-integer operation the crypto layer performs, timed now.

A benchmark multiplies these by the operations a phase performs to get the
phase's *floor*: the time the arithmetic alone takes on this machine, with
no conversion, packing, scheduling or Python overhead around it.  Each
figure is the fastest of several batches in the thread's CPU time (which
other load on a shared machine does not stretch), per operation, in the
form the code runs it (``a * b % m`` in a Python loop, ``powmod_base_list``
for a batch of exponentiations).  ``from_bytes_s`` is timed beside them but
enters no floor: it is what reading a received ciphertext costs before any
arithmetic, the part of an intake's distance to its floor that no code
which receives bytes avoids (``dpdpca bench intake`` reports it so).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from typing import Any

from dpdpca._validation import check_int
from dpdpca.crypto import _gmp as bk
from dpdpca.crypto.compute import equal_spans
from dpdpca.crypto.keys import PrivateKey, PublicKey

__all__ = ["PRIMITIVES", "djn_joining_mulmods", "djn_mulmods", "time_primitives"]

#: What :func:`time_primitives` returns (seconds per operation).
PRIMITIVES = {
    "mulmod_s": "one a * b % n**2 (4096-bit modulus at a 2048-bit key): aggregation, rerandomization, "
                "fixed-base table lookups and builds",
    "plain_mul_s": "one (1 + m n) * f mod n**2 computed as f + n (m f mod n): encryption with a factor made "
                   "ahead, or adding a packed plaintext",
    "half_decrypt_s": "one c**(p-1) mod p**2 (a CRT half of a decryption)",
    "powmod_n_s": "one r**n mod n**2 (a full-randomness rerandomizer)",
    "djn_factor_s": "one hs**alpha through a fixed-base table sized for 4096 exponentiations",
    "sha256_byte_s": "SHA-256 per byte",
    "unit_check_s": "one step of the batched unit test of a received ciphertext: acc * (c mod n) mod n",
    "from_bytes_s": "one ciphertext read from its fixed-width wire bytes as an integer: what any intake of "
                    "received bytes pays before its first operation on it, which no floor counts",
}


def _best(fn: Callable[[], Any], count: int, rounds: int) -> float:
    """Fastest of ``rounds`` calls of ``fn`` (each doing ``count`` operations) in this thread's CPU time,
    per operation: other load on a shared machine stretches wall time, not this."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best / count


def time_primitives(public_key: PublicKey, private_key: PrivateKey | None = None, *, rounds: int = 7,
                    batch: int = 400) -> dict[str, float]:
    """Seconds per operation of :data:`PRIMITIVES` on this machine, now (``half_decrypt_s`` needs the private key).

    Parameters
    ----------
    public_key : PublicKey
    private_key : PrivateKey or None
    rounds : int >= 1
        Timed batches per operation; the fastest counts.
    batch : int >= 8
        Operations per batch (half-decryptions ``batch // 8``, ``r**n`` ``batch // 40``).
    """
    rounds = check_int("rounds", rounds, minimum=1)
    batch = check_int("batch", batch, minimum=8)
    n, n2 = public_key.n, public_key.nsquare
    xs = [bk.random_below(n2) for _ in range(batch)]
    ys = [bk.random_below(n2) for _ in range(batch)]
    ms = [bk.random_below(n) for _ in range(batch)]

    def chain() -> None:  # the table lookups' and products' loop shape
        acc = xs[0]
        for y in ys:
            acc = acc * y % n2

    out = {
        "mulmod_s": _best(chain, batch, rounds),
        "plain_mul_s": _best(lambda: [(f + n * (m * f % n)) % n2 for m, f in zip(ms, xs)], batch, rounds),
    }
    few = max(2, batch // 8)
    rs = [bk.random_unit(n) for _ in range(max(2, batch // 40))]
    out["powmod_n_s"] = _best(lambda: bk.powmod_base_list(rs, n, n2), len(rs), rounds)
    table = bk.FixedBaseTable(public_key.hs, n2, public_key.alpha_bits,
                              window=bk.FixedBaseTable.best_window(public_key.alpha_bits, 4096))
    out["djn_factor_s"] = _best(lambda: table.pow_random(batch // 4), batch // 4, rounds)
    if private_key is not None:
        p, p2 = private_key.p, private_key.psquare
        cs = [x % p2 for x in xs[:few]]
        out["half_decrypt_s"] = _best(lambda: bk.powmod_base_list(cs, p - 1, p2), few, rounds)
    def units() -> None:  # first_non_unit's loop shape
        acc = xs[0] % n
        for c in ys:
            acc = acc * (c % n) % n

    out["unit_check_s"] = _best(units, batch, rounds)
    blob = os.urandom(1 << 20)
    out["sha256_byte_s"] = _best(lambda: hashlib.sha256(blob).digest(), len(blob), rounds)
    wire = bk.ints_to_bytes(xs, public_key.ciphertext_bytes)
    out["from_bytes_s"] = _best(lambda: bk.bytes_to_ints(wire, public_key.ciphertext_bytes), batch, rounds)
    return out


def djn_mulmods(alpha_bits: int, count: int, workers: int = 1) -> float:
    """4096-bit multiplications to make ``count`` DJN factors on ``workers`` (:func:`~dpdpca.crypto.encryptions_of_zero`).

    ``alpha_bits``: the exponents' size (:attr:`PublicKey.alpha_bits`).  One
    table sized for ``count`` (:meth:`FixedBaseTable.best_window`; build:
    ``rows (2**w - 1)``), split by rows over the workers when there are
    several; each factor costs one multiplication per non-zero ``w``-bit digit
    of its exponent but the first row's of each worker's part, whose entry is
    taken as it is (:meth:`FixedBaseTable.lookup_mulmods`: ``(rows - parts)
    (1 - 2**-w)`` on average), plus ``parts - 1`` to multiply the parts'
    partial products together.
    """
    split = _djn_split(alpha_bits, count, workers)
    if split is None:
        return 0.0
    w, rows, parts = split
    lookups = sum(bk.FixedBaseTable.lookup_mulmods(b - a, w) for a, b in equal_spans(rows, parts))
    return float(rows * ((1 << w) - 1) + count * lookups + count * (parts - 1))


def djn_joining_mulmods(alpha_bits: int, count: int, workers: int = 1) -> float:
    """Of :func:`djn_mulmods`, the multiplications that join the workers' partial products, ``count (parts - 1)``.

    They are made in the calling process, one core, after the workers' tasks
    (:func:`~dpdpca.crypto.compute.shared_table_powers`), so a floor divides the
    rest of :func:`djn_mulmods` by the workers and not these.
    """
    split = _djn_split(alpha_bits, count, workers)
    return 0.0 if split is None else float(count * (split[2] - 1))


def _djn_split(alpha_bits: int, count: int, workers: int) -> tuple[int, int, int] | None:
    """``(window, rows, parts)`` of the one table for ``count`` DJN factors split over ``workers`` (None: no factors).

    :func:`compute.shared_table_powers` splits the table's rows over at most ``workers`` parts.
    """
    bits = check_int("alpha_bits", alpha_bits, minimum=1)
    count = check_int("count", count, minimum=0)
    workers = check_int("workers", workers, minimum=1)
    if count == 0:
        return None
    w = bk.FixedBaseTable.best_window(bits, count)
    rows = -(-bits // w)
    return w, rows, max(1, min(workers, rows))
