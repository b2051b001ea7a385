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

__all__ = ["FeatureBounds", "load_bounds_file", "scale_by_bounds", "bounds_template", "clipping_note",
           "CLIPPED_SHARE_NOTED"]

#: Above this share of clipped rows, the commands say that public bounds would avoid it.
CLIPPED_SHARE_NOTED = 0.05

#: The header of the per-feature bounds CSV (one row per feature) that ``dpdpca bounds template`` writes.
TEMPLATE_HEADER = "feature,lo,hi"


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
    """Bounds from a file: JSON ``{"lo": [...], "hi": [...]}`` (or scalars), a CSV of two rows lo, hi, or the
    CSV of :func:`bounds_template` (a ``feature,lo,hi`` header, then one row per feature, every cell filled).

    Raises
    ------
    DataError
        Missing, unreadable or malformed file.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"feature bounds file {str(path)!r} must exist, got no such file")
    text = p.read_text()
    if p.suffix.lower() != ".json":
        rows = [r for r in (line.strip() for line in text.splitlines()) if r and not r.startswith("#")]
        if rows and rows[0].replace(" ", "").lower() == TEMPLATE_HEADER:
            return _per_feature_rows(path, rows[1:])
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
        raise DataError(f"feature bounds file {str(path)!r} must be JSON {{\"lo\", \"hi\"}}, a CSV of two rows "
                        f"(lo, hi) or one row per feature under '{TEMPLATE_HEADER}', got {type(exc).__name__}: "
                        f"{exc}") from None


def _per_feature_rows(path: str | os.PathLike[str], rows: list[str]) -> FeatureBounds:
    if not rows:
        raise DataError(f"feature bounds file {str(path)!r} must have one row per feature under "
                        f"'{TEMPLATE_HEADER}', got none")
    lo, hi = [], []
    for line in rows:
        parts = line.split(",")
        name, cells = ",".join(parts[:-2]), [c.strip() for c in parts[-2:]]
        if len(parts) < 3 or not all(cells):
            raise DataError(f"feature bounds file {str(path)!r} must give lo and hi for every feature (from public "
                            f"knowledge, never from the data), got {line!r:.80}")
        try:
            lo.append(float(cells[0]))
            hi.append(float(cells[1]))
        except ValueError:
            raise DataError(f"feature bounds file {str(path)!r} must give numbers for lo and hi, got "
                            f"{line!r:.80} for feature {name!r:.40}") from None
    return FeatureBounds(lo=np.asarray(lo), hi=np.asarray(hi))


def bounds_template(names: list[str], *, data_name: str = "the data") -> str:
    """The text of a per-feature bounds file to fill in: a comment, a header, one empty row per feature.

    Only the features' names go in: the template is written from the data
    file's header (:func:`dpdpca.data.column_names`), never from its values;
    a bound read off the data would leak it.

    Examples
    --------
    >>> print(bounds_template(["age", "income"], data_name="people.csv").splitlines()[-3:])
    ['feature,lo,hi', 'age,,', 'income,,']
    """
    lines = [f"# Public bounds of each feature of {data_name}: fill in lo and hi on every row from public",
             "# knowledge (a sensor's range, a questionnaire's scale, a pixel depth), NEVER from the data itself:",
             "# bounds read off the data leak it.  lo < hi; a value outside its bounds is clipped to them.",
             f"# Then: dpdpca run --data {data_name} --feature-bounds-file THIS_FILE",
             TEMPLATE_HEADER]
    for name in names:
        clean = name.replace(",", " ").replace("\n", " ").strip() or "unnamed"
        lines.append(f"{clean},,")
    return "\n".join(lines) + "\n"


def clipping_note(n_clipped: int, n_rows: int) -> str | None:
    """One line when more than 5% of the rows were clipped to norm 1, saying that public bounds would avoid it.

    Examples
    --------
    >>> clipping_note(3, 100) is None
    True
    >>> clipping_note(300, 300).split(";")[0]
    'note: 300 of 300 rows (100%) were clipped to norm 1, which changes the PCA'
    """
    if n_rows <= 0 or n_clipped <= CLIPPED_SHARE_NOTED * n_rows:
        return None
    return (f"note: {n_clipped} of {n_rows} rows ({100 * n_clipped / n_rows:.0f}%) were clipped to norm 1, which "
            f"changes the PCA; if public bounds of the features are known, pass them instead: --feature-bounds LO HI "
            f"(e.g. --feature-bounds 0 255 for 8-bit pixels) or --feature-bounds-file FILE "
            f"('dpdpca bounds template --data DATA' writes one to fill in)")
