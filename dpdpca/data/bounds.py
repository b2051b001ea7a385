"""Public per-feature bounds, and scaling by them instead of clipping every row.

On raw data (digits 0-16, pixels 0-255) every row has norm far above 1, and
the public clipping rule :func:`dpdpca.data.clip_rows` then projects *every*
row onto the unit sphere: the PCA is of directions, not of the data.  With
public bounds ``lo_i <= x_i <= hi_i`` (known before seeing the data: the
range of the sensor, the pixel depth) we instead map each row by

``y = (x - c) / r``, ``c = (lo + hi)/2``, ``r = ||(hi - lo)/2||_2``,

a translation and one *common* scale factor, so ``||y|| <= 1`` for every row
inside the box and the centred PCA of y is exactly that of x.  Centring on
the box's midpoint (not on zero) halves the bound and keeps the mean small,
which the add/remove release's v-noise term rewards.  Values outside the box
are clipped to it (the rule is public and per row) and counted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpdpca._validation import check_data_matrix, param_error
from dpdpca.errors import DataError, ParameterError

__all__ = ["FeatureBounds", "load_bounds_file", "scale_by_bounds"]


@dataclass(frozen=True)
class FeatureBounds:
    """Public bounds ``lo <= x <= hi`` per feature (scalars broadcast to every feature).

    Parameters
    ----------
    lo, hi : float or array of shape (d,)
        ``lo < hi`` everywhere, finite.
    """

    lo: Any
    hi: Any

    def arrays(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` as float arrays of shape (d,); ParameterError if invalid."""
        lo = np.broadcast_to(np.asarray(self.lo, dtype=np.float64), (d,)).copy() if np.ndim(self.lo) == 0 \
            else np.asarray(self.lo, dtype=np.float64)
        hi = np.broadcast_to(np.asarray(self.hi, dtype=np.float64), (d,)).copy() if np.ndim(self.hi) == 0 \
            else np.asarray(self.hi, dtype=np.float64)
        if lo.shape != (d,) or hi.shape != (d,):
            raise param_error("feature_bounds", f"scalars or {d} values each (one per feature)",
                              f"shapes {lo.shape} and {hi.shape}")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(hi <= lo):
            bad = int(np.argmax(~(hi > lo))) if np.any(~(hi > lo)) else 0
            raise ParameterError(f"feature_bounds must be finite with lo < hi for every feature, got "
                                 f"lo={float(lo[bad])!r}, hi={float(hi[bad])!r} at feature {bad}")
        return lo, hi

    def to_json(self) -> dict[str, Any]:
        return {"lo": np.asarray(self.lo, dtype=float).tolist(), "hi": np.asarray(self.hi, dtype=float).tolist()}


def scale_by_bounds(X: Any, bounds: FeatureBounds) -> tuple[np.ndarray, int]:
    """Map rows into the unit ball by the public bounds (module docstring).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    bounds : FeatureBounds

    Returns
    -------
    Y : ndarray of shape (n_samples, n_features)
        ``(clip(x, lo, hi) - c) / r``, every row of norm <= 1.
    n_clipped : int
        Rows with a value outside the bounds (clipped to the box).

    Examples
    --------
    >>> Y, n = scale_by_bounds([[0.0, 16.0], [8.0, 20.0]], FeatureBounds(0, 16))
    >>> np.round(Y, 4).tolist(), n
    ([[-0.7071, 0.7071], [0.0, 0.7071]], 1)
    """
    arr = check_data_matrix("X", X)
    lo, hi = bounds.arrays(arr.shape[1])
    outside = np.any((arr < lo) | (arr > hi), axis=1)
    np.clip(arr, lo, hi, out=arr)
    centre = (lo + hi) / 2.0
    radius = float(np.linalg.norm((hi - lo) / 2.0))
    arr -= centre
    arr /= radius
    # float rounding may leave a corner row a few ulps above 1: shrink those (never more than 1e-15 relative)
    norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
    over = norms > 1.0
    arr[over] /= norms[over][:, None]
    return arr, int(np.count_nonzero(outside))


def load_bounds_file(path: str | os.PathLike[str]) -> FeatureBounds:
    """Bounds from a file: JSON ``{"lo": [...], "hi": [...]}`` (or scalars), or a CSV of two rows lo, hi.

    Raises
    ------
    DataError
        Missing, unreadable or malformed file.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"feature bounds file {str(path)!r} must exist, got no such file")
    text = p.read_text()
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
            return FeatureBounds(lo=np.asarray(data["lo"], dtype=np.float64), hi=np.asarray(data["hi"], dtype=np.float64))
        rows = [r for r in (line.strip() for line in text.splitlines()) if r and not r.startswith("#")]
        if len(rows) != 2:
            raise ValueError(f"{len(rows)} rows")
        lo, hi = (np.asarray([float(v) for v in r.split(",")], dtype=np.float64) for r in rows)
        return FeatureBounds(lo=lo if lo.size > 1 else float(lo[0]), hi=hi if hi.size > 1 else float(hi[0]))
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        raise DataError(f"feature bounds file {str(path)!r} must be JSON {{\"lo\", \"hi\"}} or a CSV of two rows "
                        f"(lo, hi), got {type(exc).__name__}: {exc}") from None
