"""Shared parts of the plaintext pipelines: the estimator shape, eigh, bytes.

Conventions (all Imtiaz-Sarwate pipelines):

* rows are individuals; site ``s`` holds ``X_s`` of shape (N_s, D) with
  ``||x|| <= 1`` (clip with :func:`dpdpca.data.clip_rows` first);
* the statistic is the second-moment matrix ``A_s = X_s^T X_s / N_s`` of
  pre-centred data (the papers' ``(1/N_s) X_s X_s^T`` with samples as columns);
* noisy symmetric matrices are decomposed with ``eigh`` and the top
  eigenpairs are taken by *algebraic* value (a noisy matrix can have negative
  eigenvalues; a partial square root uses ``sqrt(max(lambda, 0))``);
* parties are ``"site:<s>"`` (parallel: only the slowest counts on the critical
  path), ``"aggregator"`` and ``"noise-generator"``; bytes are float64 (8
  bytes per value) and a symmetric matrix is sent as its upper triangle.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_data_matrix, check_int, check_open_unit, check_positive
from dpdpca.data.preprocessing import check_partitions
from dpdpca.errors import DataError
from dpdpca.result import PCAResult

__all__ = ["FLOAT_BYTES", "SiteEstimator", "second_moment", "top_eigenpairs", "partial_square_root",
           "symmetric_bytes", "check_budget", "check_unit_rows"]

FLOAT_BYTES = 8


def symmetric_bytes(d: int) -> int:
    """Bytes of a symmetric d x d float64 matrix sent as its upper triangle."""
    return FLOAT_BYTES * d * (d + 1) // 2


def second_moment(X: np.ndarray) -> np.ndarray:
    """``A = X^T X / N`` (Imtiaz & Sarwate 2018, Alg. 1 step 2)."""
    return (X.T @ X) / X.shape[0]


def top_eigenpairs(M: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` algebraically largest eigenpairs of a symmetric matrix, descending.

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
    eigenvectors : ndarray of shape (d, k), orthonormal columns
    """
    w, U = np.linalg.eigh(M)
    return w[::-1][:k].copy(), U[:, ::-1][:, :k].copy()


def partial_square_root(M: np.ndarray, r: int) -> np.ndarray:
    """``P = U_R Sigma_R^{1/2}`` of a symmetric matrix (DPdisPCA Alg. 1 steps 4-5).

    Negative eigenvalues (possible after noise) are clipped to zero.
    """
    w, U = top_eigenpairs(M, r)
    return U * np.sqrt(np.maximum(w, 0.0))


def check_budget(epsilon: Any, delta: Any) -> tuple[float, float]:
    """epsilon > 0 and delta in (0, 1)."""
    return check_positive("epsilon", epsilon), check_open_unit("delta", delta)


def check_unit_rows(parts: Sequence[np.ndarray], *, tol: float = 1e-9) -> None:
    """Raise unless every row has L2 norm <= 1 (the papers' assumption; sensitivity depends on it)."""
    for i, X in enumerate(parts):
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
        if norms.max() > 1.0 + tol:
            row = int(np.argmax(norms))
            raise DataError(f"partitions[{i}] rows must have L2 norm <= 1 (clip with dpdpca.data.clip_rows), "
                            f"got {norms[row]:.6g} in row {row}")


class SiteEstimator:
    """scikit-learn-shaped base: ``__init__`` stores, ``fit`` validates.

    Learned attributes (after :meth:`fit`): ``components_`` (D, K),
    ``explained_variance_`` (K,) eigenvalues of the matrix decomposed,
    ``privacy_``, ``timings_``, ``bytes_sent_``, ``result_`` (the
    :class:`~dpdpca.result.PCAResult`), ``n_features_in_``.
    """

    method_name = ""

    def __init__(self, n_components: int, epsilon: float, delta: float, *, rng: Any = None) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.rng = rng

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments, as scikit-learn's ``get_params`` (no nesting)."""
        import inspect

        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {n: getattr(self, n) for n in names}

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        parts = check_partitions(partitions)
        k = check_int("n_components", self.n_components, minimum=1, maximum=parts[0].shape[1])
        check_budget(self.epsilon, self.delta)
        check_unit_rows(parts)
        return parts, k

    def fit(self, partitions: Any) -> "SiteEstimator":
        """Run the pipeline on ``partitions`` (list of (N_s, D) arrays); return ``self``."""
        parts, k = self._validate(partitions)
        result = self._fit(parts, k)
        self.result_ = result
        self.components_ = result.components
        self.explained_variance_ = result.eigenvalues
        self.privacy_ = result.privacy
        self.timings_ = result.timings
        self.bytes_sent_ = dict(result.bytes_sent)
        self.n_features_in_ = int(parts[0].shape[1])
        return self

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def transform(self, X: Any) -> np.ndarray:
        """Project ``X`` (n, D) onto the components: ``X V`` of shape (n, K)."""
        if not hasattr(self, "components_"):
            raise DataError(f"{type(self).__name__} must be fitted before transform")
        arr = check_data_matrix("X", X, n_features=self.n_features_in_)
        return arr @ self.components_
