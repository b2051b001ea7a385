"""Where DP noise gets its randomness.

Production noise comes from the operating system's entropy source
(``os.urandom``, the same source as :mod:`secrets`).  Experiments may pass a
seeded :class:`numpy.random.Generator` *explicitly*; nothing here ever switches
to a seeded source on its own, and an integer seed is refused (diffprivlib's
``random_state=int`` silently swaps a secure source for a reproducible one; we
do not).

Every sampler in :mod:`dpdpca.dp` takes ``rng=None`` and calls
:func:`resolve_source` once.  A :class:`NoiseSource` exposes the few primitives
the samplers need, each in a bulk (vectorized) form:

* ``words(n)``: ``n`` uniform 64-bit words (``numpy.uint64``),
* ``random_bits(k)`` / ``randbelow(n)``: exact uniform Python integers of any size,
* ``uniform_ints(low, high, size)``: exact uniform integers in ``[low, high]``,
* ``standard_normal(size)``, ``laplace(size)``: float64 noise.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from dpdpca._validation import check_int, check_nonnegative, param_error

__all__ = ["NoiseSource", "OsNoiseSource", "GeneratorNoiseSource", "resolve_source", "RandomSource"]

_TWO_PI = 2.0 * math.pi
_U64 = np.uint64


def _size_to_count(size: Any) -> tuple[int, tuple[int, ...]]:
    if isinstance(size, (tuple, list)):
        shape = tuple(check_int("size", s, minimum=0) for s in size)
    else:
        shape = (check_int("size", size, minimum=0),)
    return int(np.prod(shape, dtype=np.int64)) if shape else 1, shape


class NoiseSource:
    """Uniform random words, and the exact and float samplers built on them.

    Subclasses implement :meth:`_bytes` only.  ``is_secure`` is True only for the
    OS entropy source.
    """

    is_secure: bool = False

    def _bytes(self, n: int) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- uniform integers ---------------------------------------------------
    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit words, as ``uint64`` array of shape (n,)."""
        n = check_int("n", n, minimum=0)
        return np.frombuffer(self._bytes(8 * n), dtype=_U64).copy()

    def random_bits(self, k: int) -> int:
        """A uniform Python integer in ``[0, 2**k)``."""
        k = check_int("k", k, minimum=0)
        if k == 0:
            return 0
        nbytes = (k + 7) // 8
        return int.from_bytes(self._bytes(nbytes), "little") >> (8 * nbytes - k)

    def randbelow(self, n: int) -> int:
        """A uniform Python integer in ``[0, n)`` (exact, by rejection), ``n >= 1``."""
        n = check_int("n", n, minimum=1)
        k = n.bit_length()
        while True:
            r = self.random_bits(k)
            if r < n:
                return r

    def uniform_ints(self, low: int, high: int, size: int) -> list[int]:
        """``size`` exact uniform Python integers in ``[low, high]`` (inclusive)."""
        low = check_int("low", low)
        high = check_int("high", high)
        size = check_int("size", size, minimum=0)
        if high < low:
            raise param_error("high", f">= low ({low})", high)
        span = high - low + 1
        if span < 1 << 63:
            return [low + int(v) for v in self.uniform_below_array(span, size)]
        return [low + self.randbelow(span) for _ in range(size)]

    def uniform_below_array(self, n: int, size: int) -> np.ndarray:
        """``size`` exact uniform integers in ``[0, n)`` as int64, for ``1 <= n < 2**63``."""
        n = check_int("n", n, minimum=1, maximum=(1 << 63) - 1)
        if n == 1:
            return np.zeros(size, dtype=np.int64)
        mask = _U64((1 << (n - 1).bit_length()) - 1)
        out = np.empty(size, dtype=np.int64)
        filled = 0
        while filled < size:
            need = size - filled
            w = self.words(need + need // 2 + 8) & mask  # acceptance >= 1/2
            w = w[w < _U64(n)][:need]
            out[filled:filled + w.size] = w.astype(np.int64)
            filled += w.size
        return out

    def uniform_below_each(self, bounds: np.ndarray) -> np.ndarray:
        """One exact uniform integer in ``[0, bounds[i])`` per entry (``1 <= bounds < 2**63``)."""
        b = np.asarray(bounds, dtype=_U64)
        out = np.empty(b.shape, dtype=_U64)
        todo = np.arange(b.size)
        # Accept w < floor((2**64 - 1) / b) * b, a multiple of b: then w % b is uniform.
        limit = (np.iinfo(np.uint64).max // b) * b
        while todo.size:
            w = self.words(todo.size)
            ok = w < limit[todo]
            out[todo[ok]] = w[ok] % b[todo[ok]]
            todo = todo[~ok]
        return out.astype(np.int64)

    # -- float noise --------------------------------------------------------
    def uniform(self, n: int) -> np.ndarray:
        """``n`` floats uniform on the open interval (0, 1): ``k 2**-52 + 2**-53``, ``k < 2**52``.

        The top 52 bits of each word become the mantissa of a float in [1, 2)
        (bit operations, no uint64 -> float64 conversion, which numpy does
        slowly); subtracting ``1 - 2**-53`` is exact (Sterbenz) and lands on the
        midpoints of the 52-bit grid, so 0 and 1 never occur.
        """
        n = check_int("n", n, minimum=0)
        w = np.frombuffer(self._bytes(8 * n), dtype=_U64) >> _U64(12)  # one new array, no extra copy
        w |= _U64(0x3FF0000000000000)
        f = w.view(np.float64)
        f -= 1.0 - 2.0 ** -53
        return f

    def standard_normal(self, size: Any, *, scale: float = 1.0) -> np.ndarray:
        """Normal float64 noise ``N(0, scale**2)`` of shape ``size`` (Box-Muller).

        Each pair ``(r cos t, r sin t)`` takes a 52-bit uniform for the radius
        ``r = sqrt(-2 ln u)`` (open interval, so ``r`` is finite and the tail
        reaches 8.5) and a 32-bit uniform for the angle ``t = 2 pi (k + 1/2) /
        2**32``: 10.5 bytes of entropy per pair instead of 16, since reading
        the OS entropy source is most of the cost.  So each pair lies on one of
        2**32 rays, ``1.5e-9 r`` apart at radius ``r``: coarser than float64's
        own grid, far finer than anything a statistical test or the float
        Gaussian mechanism's (real-valued, as in the papers) analysis can see.
        Float noise is for the plaintext pipelines; noise that must be exact
        (inside Paillier) is the discrete Gaussian of :mod:`dpdpca.dp.discrete`.
        Every pass runs in place on one output array.
        """
        scale = check_nonnegative("scale", scale)
        count, shape = _size_to_count(size)
        half = (count + 1) // 2
        r = self.uniform(half)
        np.log(r, out=r)
        r *= -2.0
        np.sqrt(r, out=r)
        if scale != 1.0:
            r *= float(scale)
        angle = np.frombuffer(self._bytes(4 * half), dtype=np.uint32).astype(np.float64)
        angle += 0.5
        angle *= _TWO_PI / 2.0 ** 32
        out = np.empty(2 * half)
        np.cos(angle, out=out[:half])
        np.sin(angle, out=out[half:])
        out[:half] *= r
        out[half:] *= r
        return out[:count].reshape(shape)

    def laplace(self, size: Any) -> np.ndarray:
        """Standard Laplace (scale 1) float64 noise of shape ``size`` (inverse CDF)."""
        count, shape = _size_to_count(size)
        u = self.uniform(count) - 0.5
        return (-np.sign(u) * np.log1p(-2.0 * np.abs(u))).reshape(shape)


class OsNoiseSource(NoiseSource):
    """The production source: bytes from ``os.urandom`` (the kernel CSPRNG).

    Small requests are served from a private 64 KiB buffer refilled from
    ``os.urandom`` (one system call per refill instead of one per draw); every
    byte is used once.  The buffer is dropped when the process id changes, so a
    source inherited through ``fork`` never hands the same bytes to parent and
    child.
    """

    is_secure = True
    _BUFFER = 1 << 16

    def __init__(self) -> None:
        self._buf = b""
        self._pos = 0
        self._pid = os.getpid()

    def _bytes(self, n: int) -> bytes:
        if n >= self._BUFFER // 4:
            return os.urandom(n)
        pid = os.getpid()
        if self._pos + n > len(self._buf) or pid != self._pid:
            self._buf = os.urandom(self._BUFFER)
            self._pos = 0
            self._pid = pid
        out = self._buf[self._pos:self._pos + n]
        self._pos += n
        return out

    def __repr__(self) -> str:
        return "OsNoiseSource()"


class GeneratorNoiseSource(NoiseSource):
    """An experiment source wrapping an explicitly passed numpy ``Generator``.

    Not secure: results are reproducible from the seed.  Only ever built from a
    ``Generator`` the caller passed on purpose.
    """

    is_secure = False

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def _bytes(self, n: int) -> bytes:
        return self.generator.bytes(n)

    def __repr__(self) -> str:
        return f"GeneratorNoiseSource({self.generator!r})"


RandomSource = "np.random.Generator | NoiseSource | None"


def resolve_source(rng: Any = None) -> NoiseSource:
    """Turn the ``rng`` argument of any sampler into a :class:`NoiseSource`.

    Parameters
    ----------
    rng : None, numpy.random.Generator or NoiseSource
        ``None`` (the default) means the OS entropy source (``is_secure`` True).
        A ``Generator`` is wrapped as an explicit, non-secure experiment source.
        A ``NoiseSource`` is returned as is.

    Raises
    ------
    ParameterError
        For anything else, in particular an integer seed or a legacy
        ``numpy.random.RandomState``: never seed silently.

    Examples
    --------
    >>> resolve_source(None).is_secure
    True
    >>> import numpy as np
    >>> resolve_source(np.random.default_rng(0)).is_secure
    False
    """
    if rng is None:
        return OsNoiseSource()
    if isinstance(rng, NoiseSource):
        return rng
    if isinstance(rng, np.random.Generator):
        return GeneratorNoiseSource(rng)
    raise param_error("rng", "None (OS entropy) or an explicit numpy.random.Generator", rng)
