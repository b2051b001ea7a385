"""Frequent Directions (Liberty 2013; Ghashami, Liberty, Phillips & Woodruff 2016): a non-private streaming comparator.

The sketch ``B`` has ``ell`` rows (buffer of ``2 ell``).  Rows are appended; when
the buffer is full, ``B = diag(sqrt(max(s_i^2 - s_{ell+1}^2, 0))) V^T`` (top ``ell``
rows) from the SVD of the buffer.  Shrinking by the (ell+1)-th squared singular
value (Liberty's original shrinks by the ell-th) keeps ``ell`` rows and loses
nothing when the data have rank <= ell; the guarantees are those of FD with
``ell + 1`` rows: ``0 <= X^T X - B^T B`` and ``||X^T X - B^T B||_2 <=
||X - X_k||_F^2 / (ell + 1 - k)``.  Sketches of disjoint sites merge by stacking
and shrinking again (mergeable summaries), so it runs as a distributed pipeline:
each site sends its ``ell x d`` sketch.  Memory O(ell d).  Not DP.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from dpdpca._validation import check_data_matrix, check_int
from dpdpca.baselines._common import FLOAT_BYTES, SiteEstimator
from dpdpca.data.preprocessing import check_partitions
from dpdpca.dp.report import PrivacyReport
from dpdpca.linalg import flip_signs
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["FrequentDirections", "FrequentDirectionsPCA"]


class FrequentDirections:
    """A Frequent Directions sketch of ``ell`` rows in dimension ``d``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(100, 8))
    >>> fd = FrequentDirections(8, 4).update(X)
    >>> fd.sketch.shape
    (4, 8)
    """

    def __init__(self, n_features: int, ell: int) -> None:
        self.d = check_int("n_features", n_features, minimum=1)
        self.ell = check_int("ell", ell, minimum=1)
        self._buf = np.zeros((2 * self.ell, self.d))
        self._fill = 0

    def update(self, rows: Any) -> "FrequentDirections":
        """Append rows (array (m, d))."""
        X = check_data_matrix("rows", rows, n_features=self.d, copy=False)
        start = 0
        while start < X.shape[0]:
            take = min(self._buf.shape[0] - self._fill, X.shape[0] - start)
            self._buf[self._fill:self._fill + take] = X[start:start + take]
            self._fill += take
            start += take
            if self._fill == self._buf.shape[0]:
                self._shrink()
        return self

    def _shrink(self) -> None:
        _, s, Vt = scipy.linalg.svd(self._buf[:self._fill], full_matrices=False, check_finite=False)
        cut = s[self.ell] ** 2 if s.size > self.ell else 0.0
        keep = min(self.ell, s.size)
        shrunk = np.sqrt(np.maximum(s[:keep] ** 2 - cut, 0.0))
        self._buf[:] = 0.0
        self._buf[:keep] = shrunk[:, None] * Vt[:keep]
        self._fill = keep

    def merge(self, other: "FrequentDirections") -> "FrequentDirections":
        """Fold another sketch (same d) into this one."""
        return self.update(other.sketch)

    @property
    def sketch(self) -> np.ndarray:
        """The ``ell x d`` sketch ``B`` (shrunk if more than ``ell`` rows are buffered)."""
        if self._fill > self.ell:
            self._shrink()
        out = np.zeros((self.ell, self.d))
        out[:self._fill] = self._buf[:self._fill]
        return out

    def components(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` right singular vectors of the sketch (d, k) and squared singular values."""
        _, s, Vt = scipy.linalg.svd(self.sketch, full_matrices=False, check_finite=False)
        return Vt[:k].T, s[:k] ** 2


class FrequentDirectionsPCA(SiteEstimator):
    """Distributed Frequent Directions: one sketch per site, merged by the aggregator (not DP).

    Parameters
    ----------
    n_components : int
    epsilon, delta : ignored (common signature)
    ell : int or None
        Sketch rows, ``n_components <= ell <= d`` (default ``min(d, 2 n_components + 10)``).
    """

    method_name = "frequent-directions"

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 ell: int | None = None,
                 rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, rng=rng)
        self.ell = ell

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        parts = check_partitions(partitions)
        return parts, self._check_components(parts)

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        d = parts[0].shape[1]
        ell = min(d, 2 * k + 10) if self.ell is None else check_int("ell", self.ell, minimum=k, maximum=d)
        timings = Timings(parallel_roles=("site",))
        sketches = []
        for i, X in enumerate(parts, start=1):
            with timings.measure(f"site:{i}", "sketch"):
                sketches.append(FrequentDirections(d, ell).update(X))
        with timings.measure("aggregator", "merge"):
            root = FrequentDirections(d, ell)
            for sk in sketches:
                root.merge(sk)
            V, w = root.components(k)
        n = sum(X.shape[0] for X in parts)
        return PCAResult(method=self.method_name, components=flip_signs(V), eigenvalues=w / n,
                         privacy=PrivacyReport.non_private(), timings=timings,
                         bytes_sent={f"site:{i}": FLOAT_BYTES * ell * d for i in range(1, len(parts) + 1)},
                         params={"n_components": k, "ell": ell, "n_sites": len(parts)}, extra={"n_samples": n})
