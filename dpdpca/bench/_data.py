"""Shared benchmark pieces: data with a same-shape synthetic fallback, a BLAS thread limit, quiet timing."""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Iterator

import numpy as np

from dpdpca.data import load_dataset, make_covariance_data
from dpdpca.data.catalog import install_hint
from dpdpca.errors import DataError

__all__ = ["real_or_synthetic", "blas_threads_limited", "no_gc"]


def real_or_synthetic(name: str, shape: tuple[int, int], *, seed: int = 0,
                      purpose: str = "timing does not depend on the values") -> tuple[np.ndarray, dict[str, Any]]:
    """Rows of dataset ``name``, or a synthetic matrix of ``shape`` when it is not installed.

    Returns
    -------
    X : ndarray of shape (n, d)
        Raw rows (not preprocessed).
    info : dict
        ``name`` (the real name, or ``"synthetic-<n>x<d>"``), ``source``,
        ``synthetic_fallback`` (bool) and ``note`` (one sentence for the
        output, naming the install command when the stand-in was used).
    """
    try:
        ds = load_dataset(name)
    except DataError:
        n, d = shape
        X = make_covariance_data(n, d, rng=np.random.default_rng(seed))
        note = (f"{name} is not installed ({install_hint(name)}); {purpose}, so a synthetic {n} x {d} matrix of "
                f"the same shape stands in (make_covariance_data, seed {seed})")
        return X, {"name": f"synthetic-{n}x{d}", "source": f"make_covariance_data({n}, {d}, seed {seed})",
                   "synthetic_fallback": True, "note": note}
    return ds.X, {"name": ds.name, "source": ds.source, "synthetic_fallback": False,
                  "note": f"real data: {ds.source}"}


@contextlib.contextmanager
def blas_threads_limited(threads: int | None) -> Iterator[int | None]:
    """Limit BLAS to ``threads`` threads inside the block; yields the limit applied (None: library default).

    On a shared 2-core machine threaded BLAS makes small-matrix timings swing;
    one thread makes them a measure of work.  Needs threadpoolctl (installed
    with scikit-learn); without it the default is kept and None is yielded.
    """
    if threads is None:
        yield None
        return
    import scipy.linalg  # noqa: F401  (load scipy's own BLAS first: a library loaded inside the limit is not limited)

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        yield None
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield threads


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Collect garbage, then keep the collector off inside the block (as ``timeit`` does).

    A collection triggered by an earlier run's big integers would otherwise
    land in whichever run happens to be timed next.
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
