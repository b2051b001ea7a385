"""Reals to integers: the fixed-point codec (default) and the paper's min-max discretizer.

Neither class looks at anything but its declared, public parameters: the
scale ``2**frac_bits``, or the declared ``min_value``/``max_value`` of
Wang–Chang eq. (5).  No statistic of the data is computed here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.errors import DataError

__all__ = ["FixedPointCodec", "MinMaxDiscretizer"]

_ROUNDINGS = ("toward_zero", "nearest")


class FixedPointCodec:
    """Signed fixed point with the public scale ``2**frac_bits``.

    ``encode(x) = round(x * 2**frac_bits)`` as exact Python integers (a float
    times a power of two is exact, and so is the rounding); ``decode(k,
    scale_power=p) = k / 2**(frac_bits * p)``, correctly rounded, where ``p``
    is the number of scaled factors multiplied together (2 for a product such
    as ``x x^T``).

    Parameters
    ----------
    frac_bits : int
        Fraction bits ``f`` in ``[0, 1000]``; ``scale == 2**f``.
    rounding : {"toward_zero", "nearest"}
        ``"toward_zero"`` (default) never increases ``|x|``, so a norm bound
        on the reals carries over to the integers; ``"nearest"`` rounds half
        to even.

    Examples
    --------
    >>> codec = FixedPointCodec(frac_bits=4)
    >>> codec.encode(np.array([1.5, -0.03])).tolist()
    [24, 0]
    >>> codec.decode(np.array([24, -8], dtype=object)).tolist()
    [1.5, -0.5]
    """

    def __init__(self, frac_bits: int = 16, rounding: str = "toward_zero") -> None:
        self.frac_bits = check_int("frac_bits", frac_bits, minimum=0, maximum=1000)
        if rounding not in _ROUNDINGS:
            raise param_error("rounding", f"one of {_ROUNDINGS}", rounding)
        self.rounding = rounding

    @property
    def scale(self) -> int:
        return 1 << self.frac_bits

    def __repr__(self) -> str:
        return f"FixedPointCodec(frac_bits={self.frac_bits}, rounding={self.rounding!r})"

    def encode(self, x: Any) -> np.ndarray:
        """Float array (any shape) -> object array of Python ints, same shape.

        Raises
        ------
        DataError
            A NaN or infinite entry.
        """
        arr = np.array(x, dtype=np.float64, copy=True)
        if not np.all(np.isfinite(arr)):
            raise DataError("values to encode must be finite, got NaN or inf")
        rnd = math.trunc if self.rounding == "toward_zero" else round
        f = self.frac_bits
        with np.errstate(over="ignore"):
            scaled = np.ldexp(arr, f)
        out = np.empty(arr.shape, dtype=object)
        flat_in = arr.ravel()
        flat_out = out.reshape(-1)
        if np.all(np.isfinite(scaled)) and (scaled.size == 0 or np.max(np.abs(scaled)) < 2.0 ** 62):
            # Fast path: every product is exact in float64 and its rounding fits int64.
            rounded = np.trunc(scaled) if self.rounding == "toward_zero" else np.rint(scaled)
            flat_out[:] = rounded.astype(np.int64).ravel().tolist()
        else:
            from fractions import Fraction

            scale = self.scale
            flat_out[:] = [rnd(Fraction(v) * scale) for v in flat_in.tolist()]
        return out

    def decode(self, ints: Any, scale_power: int = 1) -> np.ndarray:
        """Integers (any shape) -> float64 ``k / 2**(frac_bits * scale_power)``."""
        scale_power = check_int("scale_power", scale_power, minimum=0)
        arr = np.asarray(ints, dtype=object)
        denom = 1 << (self.frac_bits * scale_power)
        flat = [int(k) / denom for k in arr.ravel().tolist()]
        return np.array(flat, dtype=np.float64).reshape(arr.shape)


class MinMaxDiscretizer:
    r"""Wang–Chang's discretizer (eq. 5), for reproducing the paper only.

    ``Discretize_{e,F}(x) = floor((2**e - 1) * (x - min_F) / (max_F - min_F))``
    in ``[0, 2**e - 1]``.  ``min_F`` and ``max_F`` are *declared public
    parameters* (scalars or one per feature); they are never computed from the
    data here.  The result is an unsigned offset code: sums of products of
    codes are not the scatter matrix of the reals, which is why the default
    pipeline uses :class:`FixedPointCodec` instead.

    Parameters
    ----------
    e_bits : int
        Bits ``e`` in ``[1, 52]``.
    min_value, max_value : float or array of shape (n_features,)
        Declared range with ``max_value > min_value`` element-wise.
    clip : bool
        Clip values outside the declared range (default: raise DataError).

    References
    ----------
    S. Wang, J. M. Chang, "Differentially private principal component analysis
    over horizontally partitioned data", IEEE DSC 2018, eq. (5).
    """

    def __init__(self, e_bits: int, min_value: Any, max_value: Any, *, clip: bool = False) -> None:
        self.e_bits = check_int("e_bits", e_bits, minimum=1, maximum=52)
        lo = np.array(min_value, dtype=np.float64, copy=True)
        hi = np.array(max_value, dtype=np.float64, copy=True)
        if lo.ndim > 1 or hi.ndim > 1 or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise param_error("min_value/max_value", "finite scalars or 1-D arrays", (min_value, max_value))
        if np.any(hi <= lo):
            raise param_error("max_value", "> min_value element-wise", max_value)
        self.min_value, self.max_value, self.clip = lo, hi, bool(clip)

    @property
    def levels(self) -> int:
        return (1 << self.e_bits) - 1

    def discretize(self, x: Any) -> np.ndarray:
        """Array of shape (n, n_features) or (n_features,) -> int64 codes in ``[0, 2**e - 1]``.

        Raises
        ------
        DataError
            Non-finite values, or values outside the declared range (unless ``clip``).
        """
        arr = np.array(x, dtype=np.float64, copy=True)
        if not np.all(np.isfinite(arr)):
            raise DataError("values to discretize must be finite, got NaN or inf")
        if self.clip:
            arr = np.clip(arr, self.min_value, self.max_value)
        elif np.any(arr < self.min_value) or np.any(arr > self.max_value):
            raise DataError("values to discretize must lie in the declared [min_value, max_value], "
                            "got a value outside")
        codes = np.floor(self.levels * (arr - self.min_value) / (self.max_value - self.min_value))
        return np.clip(codes, 0, self.levels).astype(np.int64)

    def undiscretize(self, codes: Any) -> np.ndarray:
        """Codes -> the lower edge of their bin, ``min + k (max - min) / (2**e - 1)``."""
        k = np.asarray(codes, dtype=np.float64)
        return self.min_value + k * (self.max_value - self.min_value) / self.levels
