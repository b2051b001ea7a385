"""The only module of dpdpca that talks to gmpy2.

Everything here works on plain integers (``gmpy2.mpz`` in memory) and knows
nothing of keys, slots or bounds: modular exponentiation, inversion, prime
generation, a fixed-base windowed table, multi-exponentiation and the tight
modular-product loops that aggregation runs.  Randomness comes from
:mod:`secrets` (the operating system's CSPRNG) only.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Sequence
from operator import methodcaller

import gmpy2
import numpy as np
from gmpy2 import mpz, xmpz

__all__ = [
    "mpz",
    "powmod",
    "powmod_base_list",
    "invert",
    "gcd",
    "is_probable_prime",
    "random_prime_3mod4",
    "random_below",
    "random_unit",
    "FixedBaseTable",
    "StrausTable",
    "columnwise_prod_mod",
    "first_non_unit",
    "ints_to_bytes",
    "bytes_to_ints",
    "int_to_bytes",
    "jacobi",
    "is_perfect_power",
    "smallest_factor_below",
]

#: Miller-Rabin rounds for key primes (error < 4**-64 per candidate).
_MR_ROUNDS = 64


def powmod(base: int, exp: int, mod: int) -> mpz:
    """``base**exp mod mod``; a negative ``exp`` uses the modular inverse."""
    return gmpy2.powmod(base, exp, mod)


def powmod_base_list(bases: Sequence[int], exp: int, mod: int) -> list[mpz]:
    """``[powmod(b, exp, mod) for b in bases]`` in one C call (releases the GIL)."""
    return list(gmpy2.powmod_base_list(list(bases), exp, mod))


def invert(a: int, mod: int) -> mpz:
    """Inverse of ``a`` modulo ``mod`` (ZeroDivisionError if not a unit)."""
    return gmpy2.invert(a, mod)


def gcd(a: int, b: int) -> mpz:
    """Greatest common divisor."""
    return gmpy2.gcd(a, b)


def is_probable_prime(n: int) -> bool:
    """Miller-Rabin with trial division, 64 rounds."""
    return bool(gmpy2.is_prime(n, _MR_ROUNDS))


def random_prime_3mod4(bits: int) -> mpz:
    """A uniformly drawn prime p with exactly ``bits`` bits, top two bits set, p = 3 (mod 4).

    Setting the two top bits makes the product of two such primes have exactly
    ``2*bits`` bits.  Candidates are fresh random draws (no ``next_prime``
    walk, which would favour primes after long gaps).
    """
    top = mpz(3) << (bits - 2)
    while True:
        cand = mpz(secrets.randbits(bits)) | top | 3
        if gmpy2.is_prime(cand, 1) and gmpy2.is_prime(cand, _MR_ROUNDS):
            return cand


def random_below(upper: int) -> mpz:
    """Uniform integer in ``[0, upper)`` from :mod:`secrets`."""
    return mpz(secrets.randbelow(int(upper)))


def random_unit(n: int) -> mpz:
    """Uniform element of Z*_n from :mod:`secrets`."""
    while True:
        r = mpz(secrets.randbelow(int(n) - 1) + 1)
        if gmpy2.gcd(r, n) == 1:
            return r


class FixedBaseTable:
    """Windowed fixed-base table for ``base**e mod mod`` with ``e < 2**exp_bits``.

    Stores ``base**(u * 2**(w k)) mod mod`` for every window position ``k`` and
    digit ``u < 2**w``, so one exponentiation costs at most
    ``ceil(exp_bits / w)`` modular multiplications and no squarings.  Building
    it costs about ``ceil(exp_bits / w) * 2**w`` multiplications, so the best
    ``w`` depends on how many exponentiations the table will serve
    (:meth:`best_window`): about 5 for a hundred, 10 for ten thousand.

    Parameters
    ----------
    base, mod : int
    exp_bits : int
        Exponents are below ``2**exp_bits``.
    window : int in [1, 16]
        Digit width w (default 8: byte digits).
    """

    WINDOW = 8
    #: Largest table :meth:`best_window` picks (entries): 2**17 entries of 4096 bits = 64 MiB.
    MAX_ENTRIES = 1 << 17

    def __init__(self, base: int, mod: int, exp_bits: int, window: int = WINDOW,
                 rows: tuple[int, int] | None = None) -> None:
        if not 1 <= int(window) <= 16:
            raise ValueError(f"window must be in [1, 16], got {window}")
        self.mod = mpz(mod)
        self.exp_bits = int(exp_bits)
        self.window = w = int(window)
        self.n_rows = -(-self.exp_bits // w)
        self.n_bytes = (self.exp_bits + 7) // 8
        # rows=(a, b): only rows a..b-1 (one worker's part of a table shared by a pool, partial_products)
        self.row_range = (0, self.n_rows) if rows is None else (int(rows[0]), int(rows[1]))
        first, stop = self.row_range
        if not 0 <= first <= stop <= self.n_rows:
            raise ValueError(f"rows must be within [0, {self.n_rows}], got {rows}")
        table: list[list[mpz]] = []
        m = self.mod
        g = gmpy2.powmod(mpz(base) % m, mpz(1) << (w * first), m)  # base**(2**(w first))
        for _ in range(stop - first):
            row = [mpz(1), g]
            acc = g
            for _u in range(2, 1 << w):
                acc = acc * g % m
                row.append(acc)
            table.append(row)
            g = acc * g % m  # g**(2**w): the base of the next window
        self.rows = table

    @classmethod
    def cost(cls, exp_bits: int, count: int, window: int) -> int:
        """Multiplications to build a ``window`` table and serve ``count`` exponentiations."""
        rows = -(-int(exp_bits) // window)
        return rows * ((1 << window) - 1) + int(count) * rows

    @classmethod
    def best_window(cls, exp_bits: int, count: int) -> int:
        """The ``w`` of least :meth:`cost` for ``count`` exponentiations within :attr:`MAX_ENTRIES`."""
        fits = [w for w in range(1, 17) if -(-int(exp_bits) // w) << w <= cls.MAX_ENTRIES] or [1]
        return min(fits, key=lambda w: (cls.cost(exp_bits, count, w), w))

    #: Exponents whose digits are extracted at once (bounds the bit matrix to a few MiB).
    BLOCK = 2048

    def _digit_matrix(self, raw: np.ndarray) -> np.ndarray:
        """Digits of exponents given as little-endian bytes, shape (count, n_bytes) -> (count, n_rows).

        Row ``k`` of the result holds the ``w``-bit digits, least significant
        first, in numpy (no Python loop per exponent or digit).

        Raises
        ------
        ValueError
            An exponent of ``exp_bits`` bits or more.
        """
        w, rows = self.window, self.n_rows
        if w == 8:
            digits = raw
        else:  # each exponent as little-endian 64-bit words; digit k is bits k w .. k w + w - 1 (two words at most)
            count, nbytes = raw.shape
            nwords = -(-max(nbytes, rows * w) // 64) + 1
            buf = np.zeros((count, 8 * nwords), dtype=np.uint8)
            buf[:, :nbytes] = raw
            words = buf.view("<u8")
            mask = np.uint64((1 << w) - 1)
            digits = np.empty((count, rows), dtype=np.int64)
            for k in range(rows):
                q, r = divmod(k * w, 64)
                col = words[:, q] >> np.uint64(r)
                if r + w > 64:
                    col |= words[:, q + 1] << np.uint64(64 - r)
                digits[:, k] = col & mask
        # bits from exp_bits on (those past the rows' width included) must be zero
        top = self.exp_bits - 8 * (self.n_bytes - 1)
        if top < 8 and raw.shape[0] and (raw[:, -1] >> top).any():
            raise ValueError(f"exponents must be below 2**{self.exp_bits}, got a larger one")
        return digits

    def partial_products(self, digits: np.ndarray) -> list[mpz]:
        """``prod_k rows[k][digits[i, k]] mod mod`` over this table's rows only.

        ``digits`` has one column per row of :attr:`row_range`.  The products
        of the parts of a table split by rows, multiplied together, are the
        powers (``base**e = prod_k base**(u_k 2**(w k))``).
        """
        first, stop = self.row_range
        if digits.ndim != 2 or digits.shape[1] != stop - first:
            raise ValueError(f"digits must have {stop - first} columns (rows {first}..{stop - 1}), "
                             f"got shape {digits.shape}")
        return self._lookup(digits)

    def _whole(self) -> None:
        if self.row_range != (0, self.n_rows):
            raise ValueError(f"a table of rows {self.row_range} gives partial products, not powers")

    def _lookup(self, digits: np.ndarray) -> list[mpz]:
        """``prod_k rows[k][digits[i, k]] mod mod`` for each row ``i`` of a digit matrix.

        Row-major: every exponent's product takes its factor from table row
        ``k`` before any takes one from row ``k + 1``, so the entries in use
        are one row's ``2**w`` (a few hundred KiB at most), which stay in the
        core's cache, and the accumulators are read in order; walking each
        exponent through all rows instead hits the whole table (up to 64 MiB)
        at random, one cache miss per multiplication.  The first row's entry
        is taken as it is (no multiplication), and a zero digit multiplies by
        nothing: :meth:`lookup_mulmods` counts what this performs.
        """
        count = digits.shape[0]
        if not self.rows or not count:
            return [mpz(1)] * count
        m = self.mod
        cols = digits.T.tolist()
        if len(self.rows) == 1:
            return list(map(self.rows[0].__getitem__, cols[0]))
        # Mutable accumulators, multiplied and reduced in place: each product lands in memory this
        # accumulator already holds (in cache, just read as an operand), where a new value per step
        # would be written to fresh memory -- about 5% of each multiplication at d = 784's 7714 powers.
        acc = [xmpz(x) for x in map(self.rows[0].__getitem__, cols[0])]
        for row, col in zip(self.rows[1:], cols[1:]):
            for a, u in zip(acc, col):
                if u:
                    a *= row[u]
                    a %= m
        return [mpz(a) for a in acc]

    @staticmethod
    def lookup_mulmods(rows: int, window: int) -> float:
        """Mean multiplications per exponent of :meth:`_lookup` over ``rows`` table rows (uniform digits).

        One per non-zero digit after the first row's (``(rows - 1) (1 - 2**-w)``).
        """
        return max(0, int(rows) - 1) * (1 - 2.0 ** -int(window))

    def pow(self, e: int) -> mpz:
        """``base**e mod mod`` for ``0 <= e < 2**exp_bits``."""
        return self.pow_many([e])[0]

    def pow_many(self, exps: Iterable[int]) -> list[mpz]:
        """:meth:`pow` for each exponent (``ValueError`` for one outside ``[0, 2**exp_bits)``)."""
        self._whole()
        exps = exps if isinstance(exps, (list, tuple)) else list(exps)
        nb = self.n_bytes
        out: list[mpz] = []
        for start in range(0, len(exps), self.BLOCK):
            block = exps[start:start + self.BLOCK]
            try:
                blob = b"".join(map(methodcaller("to_bytes", nb, "little"), block))
            except (AttributeError, OverflowError):  # numpy integers, or negative / too large
                if any(int(e) < 0 or int(e) >> self.exp_bits for e in block):
                    raise ValueError(f"exponents must be in [0, 2**{self.exp_bits}), got one outside") from None
                blob = b"".join(int(e).to_bytes(nb, "little") for e in block)
            raw = np.frombuffer(blob, dtype=np.uint8).reshape(len(block), nb)
            out.extend(self._lookup(self._digit_matrix(raw)))
        return out

    def random_digits(self, count: int) -> np.ndarray:
        """Digits (count, n_rows) of ``count`` exponents uniform in ``[0, 2**exp_bits)`` (``os.urandom``)."""
        nb = self.n_bytes
        top = self.exp_bits - 8 * (nb - 1)
        raw = np.frombuffer(os.urandom(int(count) * nb), dtype=np.uint8).reshape(int(count), nb).copy()
        raw[:, -1] &= np.uint8((1 << top) - 1)
        return self._digit_matrix(raw)

    def pow_random(self, count: int) -> list[mpz]:
        """``base**e mod mod`` for ``count`` exponents ``e`` uniform in ``[0, 2**exp_bits)``.

        The exponents are ``os.urandom`` bytes with the bits above
        ``exp_bits`` cleared (uniform, as ``secrets.randbits``), turned into
        digits in numpy and never into Python integers; they are not kept.
        """
        self._whole()
        out: list[mpz] = []
        for start in range(0, int(count), self.BLOCK):
            out.extend(self._lookup(self.random_digits(min(self.BLOCK, int(count) - start))))
        return out


class StrausTable:
    """Interleaved (Straus) multi-exponentiation ``prod_t bases[t]**e_t mod mod``.

    Bases are taken in groups of ``group``; each group gets one table of all
    products ``prod_j bases[j]**u_j`` with digits ``u_j < 2**window`` (Shamir's
    trick), so a product of ``len(bases)`` powers with exponents below
    ``2**exp_bits`` shares one chain of ``exp_bits`` squarings and needs one
    multiplication per group and window.  Exponents must be non-negative.
    """

    #: Largest table per group (entries); 4096 entries of 4096 bits = 2 MiB.
    MAX_TABLE = 1 << 12

    def __init__(self, bases: Sequence[int], mod: int, exp_bits: int, window: int, group: int = 1) -> None:
        self.mod = m = mpz(mod)
        self.window = w = int(window)
        self.group = g = max(1, int(group))
        self.n_bases = len(bases)
        self.n_windows = max(1, -(-int(exp_bits) // w))
        self.tables: list[list[mpz]] = []
        for start in range(0, len(bases), g):
            table = [mpz(1)]
            for b in bases[start:start + g]:
                b = mpz(b) % m
                powers = [mpz(1), b]
                for _u in range(2, 1 << w):
                    powers.append(powers[-1] * b % m)
                # index = sum_j u_j << (w j): the new digit goes above the existing ones.
                table = table + [t * p % m for p in powers[1:] for t in table]
            self.tables.append(table)

    @classmethod
    def best_params(cls, n_bases: int, exp_bits: int, n_products: int) -> tuple[int, int]:
        """``(window, group)`` minimising precomputation plus ``n_products`` evaluations."""
        best: tuple[float, int, int] | None = None
        for g in range(1, max(1, n_bases) + 1):
            n_groups = -(-n_bases // g)
            for w in range(1, 11):
                if (1 << (g * w)) > cls.MAX_TABLE:
                    break
                windows = -(-exp_bits // w)
                cost = n_groups * (1 << (g * w)) + n_products * (windows * w + windows * n_groups)
                if best is None or cost < best[0]:
                    best = (cost, w, g)
        assert best is not None
        return best[1], best[2]

    def multi_pow(self, exps: Sequence[int]) -> mpz:
        """``prod_t bases[t]**exps[t] mod mod`` (``len(exps) <= len(bases)``, missing = 0)."""
        m = self.mod
        w = self.window
        g = self.group
        mask = (1 << w) - 1
        padded = [int(e) for e in exps] + [0] * (self.n_bases - len(exps))
        groups = [(table, padded[i * g:(i + 1) * g]) for i, table in enumerate(self.tables)]
        acc = mpz(1)
        first = True
        for k in range(self.n_windows - 1, -1, -1):
            if not first:
                for _s in range(w):
                    acc = acc * acc % m
            shift = k * w
            for table, es in groups:
                idx = 0
                for j, e in enumerate(es):
                    idx |= ((e >> shift) & mask) << (w * j)
                if idx:
                    acc = acc * table[idx] % m
                    first = False
        return acc


def first_non_unit(values: Sequence[mpz], n: int) -> int | None:
    """Index of the first value sharing a factor with ``n``, or ``None``.

    One gcd per block of 256 (on the block's product mod ``n``) instead of one
    per value; a block that fails is scanned (a product is a unit modulo
    ``n`` iff every factor is, so no non-unit is missed).  Each factor is
    reduced mod ``n`` before the multiplication (a ciphertext is < n**2):
    two half-size steps are faster than one product of twice the size.
    """
    m = mpz(n)
    for start in range(0, len(values), 256):
        block = values[start:start + 256]
        acc = mpz(1)
        for v in block:
            acc = acc * (v % m) % m
        if gmpy2.gcd(acc, m) != 1:
            for k, v in enumerate(block):
                if gmpy2.gcd(v, m) != 1:
                    return start + k
    return None


def columnwise_prod_mod(rows: Sequence[Sequence[mpz]], mod: int) -> list[mpz]:
    """Element-wise product of equally long lists of ``mpz`` modulo ``mod``.

    The aggregation kernel: one ``a * b % mod`` per multiplication (in place on
    mutable accumulators) and nothing else in the loop.
    """
    m = mpz(mod)
    if len(rows) < 2:
        return list(rows[0])
    acc = [xmpz(a) for a in rows[0]]  # in place, as FixedBaseTable._lookup
    for row in rows[1:]:
        for a, b in zip(acc, row):
            a *= b
            a %= m
    return [mpz(a) for a in acc]


def int_to_bytes(value: int) -> bytes:
    """Minimal big-endian bytes of a non-negative integer (``b'\\x00'`` for 0)."""
    value = int(value)
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def ints_to_bytes(values: Iterable[mpz], width: int) -> bytes:
    """Concatenate non-negative integers as fixed-width big-endian fields.

    ``mpz`` and ``int`` values convert through their own ``to_bytes`` (half
    the cost of wrapping each in ``mpz`` first); anything else integral
    goes through ``mpz``.  A negative or too wide value raises ``OverflowError``.
    """
    values = values if isinstance(values, (list, tuple)) else list(values)
    try:
        return b"".join(map(methodcaller("to_bytes", width, "big"), values))
    except AttributeError:  # e.g. numpy integers
        return b"".join(mpz(v).to_bytes(width, "big") for v in values)


def bytes_to_ints(blob: bytes, width: int) -> list[mpz]:
    """Inverse of :func:`ints_to_bytes` (``len(blob)`` must be a multiple of ``width``)."""
    fb = mpz.from_bytes
    return [fb(blob[i:i + width], "big") for i in range(0, len(blob), width)]


def jacobi(a: int, n: int) -> int:
    """Jacobi symbol ``(a / n)`` for odd ``n > 0`` (-1, 0 or 1)."""
    return int(gmpy2.jacobi(a, n))


def is_perfect_power(n: int) -> bool:
    """True if ``n = b**k`` for integers ``b`` and ``k >= 2``."""
    return bool(gmpy2.is_power(n))


_SMALL_PRIMES: dict[int, mpz] = {}


def smallest_factor_below(n: int, bound: int) -> int | None:
    """The smallest prime factor of ``n`` below ``bound``, or ``None``.

    One gcd with the product of all primes below ``bound`` (cached per
    bound), then trial division only if that gcd is not 1.
    """
    prod = _SMALL_PRIMES.get(bound)
    if prod is None:
        prod, p = mpz(1), mpz(2)
        while p < bound:
            prod *= p
            p = gmpy2.next_prime(p)
        _SMALL_PRIMES[bound] = prod
    g = gmpy2.gcd(n, prod)
    if g == 1:
        return None
    p = mpz(2)
    while g % p:
        p = gmpy2.next_prime(p)
    return int(p)
