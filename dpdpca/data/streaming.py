"""Reading a data file in blocks of rows, for streaming clients that cannot hold it in memory.

* ``.npy``: opened with ``mmap_mode="r"``; each block is a copy of ``rows``
  rows (the file's pages are mapped by the OS, not allocated by us).
* ``.csv``: read ``rows`` lines at a time (a non-numeric first row is a header,
  as in :func:`dpdpca.data.load_file`).

Memory beyond the file's pages: one block, O(rows x d).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dpdpca._validation import check_int
from dpdpca.errors import DataError

__all__ = ["iter_row_blocks"]


def iter_row_blocks(path: str | os.PathLike[str], rows: int) -> Iterator[np.ndarray]:
    """Yield the rows of a ``.npy`` or ``.csv`` data file as float64 blocks of at most ``rows`` rows.

    Raises
    ------
    DataError
        Missing file, unknown extension, not a numeric 2-D array, ragged CSV.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()
    >>> f = os.path.join(tmp.name, "x.npy"); np.save(f, np.arange(10.0).reshape(5, 2))
    >>> [b.shape for b in iter_row_blocks(f, 2)]
    [(2, 2), (2, 2), (1, 2)]
    >>> tmp.cleanup()
    """
    size = check_int("rows", rows, minimum=1)
    p = Path(path)
    if not p.is_file():
        raise DataError(f"data file {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            mm = np.load(p, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise DataError(f"data file {str(p)!r} could not be read: {str(exc).splitlines()[0]}") from None
        if mm.ndim != 2 or mm.dtype.kind not in "biuf":
            raise DataError(f"data file {str(p)!r} must hold a 2-D numeric array, got {mm.dtype} {mm.shape}")
        for i in range(0, mm.shape[0], size):
            yield np.array(mm[i:i + size], dtype=np.float64)
        return
    if suffix != ".csv":
        raise DataError(f"data file {str(p)!r} must end in .csv or .npy, got {suffix or 'no extension'!r}")
    with open(p, "r", encoding="utf-8") as fh:
        first = fh.readline()
        lines = [first]
        try:
            [float(cell) for cell in first.split(",")]
        except ValueError:
            lines = []  # a header row
        while True:
            lines.extend(itertools.islice(fh, size - len(lines)))
            lines = [ln for ln in lines if ln.strip()]
            if not lines:
                return
            try:
                block = np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2)
            except ValueError as exc:
                raise DataError(f"data file {str(p)!r} could not be read: {str(exc).splitlines()[0]}") from None
            yield block
            lines = []
