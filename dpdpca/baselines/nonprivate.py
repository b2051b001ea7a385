"""Non-private PCA of the pooled data, run as a distributed pipeline.

Each site sends ``N_s`` and its second moment ``A_s``; the aggregator forms
``A = sum_s N_s A_s / N`` (exactly the pooled ``X^T X / N``) and takes its
top-K eigenvectors.  This is the ``q_o`` reference: its ``q/q_o`` is 1 up to
float rounding.  No privacy (``PrivacyReport.non_private()``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdpca.baselines._common import FLOAT_BYTES, SiteEstimator, symmetric_bytes
from dpdpca.linalg import second_moment, top_eigenpairs
from dpdpca._validation import param_error
from dpdpca.data.preprocessing import check_partitions
from dpdpca.dp.report import PrivacyReport
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["NonPrivatePCA"]


class NonPrivatePCA(SiteEstimator):
    """Exact PCA of the pooled second moment (no noise, not DP).

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon, delta : float
        Accepted for the common signature and ignored.
    centering : {"pooled", "none"}
        ``"pooled"`` (default, as scikit-learn): sites also send their sums
        and the aggregator subtracts the exact pooled mean, which becomes
        ``mean_``; then this is exactly scikit-learn's ``PCA`` of the pooled
        rows.  ``"none"``: the second moment of the rows as given.
    rng : ignored
    """

    method_name = "nonprivate"

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 centering: str = "pooled", rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, rng=rng)
        self.centering = centering

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        parts = check_partitions(partitions)  # no norm bound needed: nothing is calibrated
        if self.centering not in ("none", "pooled"):
            raise param_error("centering", "one of none, pooled", self.centering)
        return parts, self._check_components(parts)

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        d = parts[0].shape[1]
        timings = Timings(parallel_roles=("site",))
        n_total = sum(X.shape[0] for X in parts)
        A = np.zeros((d, d))
        bytes_sent = {}
        shares = []
        for s, X in enumerate(parts, start=1):
            with timings.measure(f"site:{s}", "second-moment"):
                shares.append(second_moment(X))
            bytes_sent[f"site:{s}"] = symmetric_bytes(d) + FLOAT_BYTES * (1 + d * (self.centering == "pooled"))
        mean = None
        with timings.measure("aggregator", "aggregate"):
            for X, A_s in zip(parts, shares):
                A += (X.shape[0] / n_total) * A_s
            if self.centering == "pooled":
                mean = sum(X.sum(axis=0) for X in parts) / n_total
                A -= np.outer(mean, mean)
        with timings.measure("aggregator", "eigh"):
            w, V = top_eigenpairs(A, k)
        bytes_sent["aggregator"] = FLOAT_BYTES * d * k
        return PCAResult(method=self.method_name, components=V, eigenvalues=w, mean=mean,
                         privacy=PrivacyReport.non_private(), timings=timings, bytes_sent=bytes_sent,
                         params={"n_components": k, "n_sites": len(parts), "centering": self.centering},
                         extra={"n_samples": n_total, "trace": float(np.trace(A))})
