"""The estimator contract every pipeline follows (scikit-learn conventions).

* :class:`BaseEstimator`: ``__init__`` only stores its arguments;
  :meth:`~BaseEstimator.get_params` / :meth:`~BaseEstimator.set_params`
  read them from the ``__init__`` signature (scikit-learn is optional, so this
  is a small stand-in for ``sklearn.base.BaseEstimator``).
* :class:`PCAEstimator`: the base of every pipeline that releases a subspace
  (result kind :data:`~dpdpca.result.SUBSPACE`).  A subclass implements
  ``_fit_result(partitions) -> PCAResult``; ``fit`` stores the learned
  attributes and ``transform`` centres with ``mean_`` and projects.
* :class:`TensorEstimator`: the base of every pipeline that releases tensor
  factors (result kind :data:`~dpdpca.result.TENSOR_FACTORS`); a subclass
  implements ``_fit_result(partitions) -> TensorResult``.
* :func:`check_is_fitted` raises the one :class:`~dpdpca.errors.NotFittedError`
  every estimator uses.

``fit`` takes the site partitions (a list of (n_s, n_features) arrays, one per
site) or, as scikit-learn, one 2-D array, which is then one site.

Learned attributes of a :class:`PCAEstimator`
---------------------------------------------
components_ : ndarray of shape (n_components, n_features)
    Orthonormal rows in decreasing order of ``explained_variance_``, signs
    fixed by :func:`dpdpca.linalg.flip_signs` (as scikit-learn's ``svd_flip``).
explained_variance_ : ndarray of shape (n_components,)
    Eigenvalues of the (noisy) matrix the pipeline decomposed, expressed as a
    covariance: squared data units, per sample, denominator ``N - 1``, as in
    scikit-learn.  With DP noise they are noisy too, and may be negative.
explained_variance_ratio_ : ndarray of shape (n_components,)
    ``explained_variance_`` over the total variance (the trace of the matrix
    decomposed, as a covariance), as in scikit-learn; NaN where the release
    carries no total (e.g. the sketch).
singular_values_ : ndarray of shape (n_components,)
    ``sqrt(explained_variance_ (N - 1))`` with ``N`` the count behind the
    release (its noisy value when the count is private), as in scikit-learn.
mean_ : ndarray of shape (n_features,)
    The mean ``transform`` subtracts: the mean the pipeline released, or zeros
    when it releases none (the data are taken as centred).
n_components_, n_features_in_ : int
privacy_ : PrivacyReport
timings_ : Timings
bytes_sent_ : dict
result_ : PCAResult

Examples
--------
>>> import numpy as np
>>> from dpdpca.baselines import NonPrivatePCA
>>> X = np.random.default_rng(0).normal(size=(100, 4)) / 4
>>> est = NonPrivatePCA(n_components=2).fit(X)
>>> est.components_.shape, est.transform(X).shape
((2, 4), (100, 2))
>>> est.set_params(n_components=3).get_params()["n_components"]
3
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any, Sequence, TypeVar

import numpy as np

from dpdpca._validation import check_data_matrix
from dpdpca.errors import NotFittedError, ParameterError, ProtocolError
from dpdpca.result import SUBSPACE, TENSOR_FACTORS, PCAResult, Result, TensorResult

_R = TypeVar("_R", bound=Result)

__all__ = ["BaseEstimator", "PCAEstimator", "TensorEstimator", "check_is_fitted", "as_partitions"]


def as_partitions(X: Any) -> list[Any]:
    """The site partitions of ``X``: a single 2-D array (or pandas DataFrame) is one site; a sequence is kept
    (not validated)."""
    if isinstance(X, np.ndarray) and X.ndim == 2:
        return [X]
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # a DataFrame: one site (iterating it gives column names)
        return [X]
    if isinstance(X, Sequence) and not isinstance(X, (str, bytes)):
        return list(X)
    return X  # type: ignore[no-any-return]  # the pipeline's validation names what is wrong


def check_is_fitted(estimator: Any, attribute: str = "result_") -> None:
    """Raise :class:`~dpdpca.errors.NotFittedError` unless ``estimator`` has been fitted."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(f"{type(estimator).__name__} must be fitted before use: call fit first")


class BaseEstimator:
    """``get_params`` / ``set_params`` from the ``__init__`` signature, and a readable ``repr``.

    Subclasses store every ``__init__`` argument under its own name and do
    nothing else in ``__init__`` (validation happens in ``fit``).
    """

    @classmethod
    def _get_param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor arguments, by name (``deep`` is accepted for scikit-learn; nothing nests)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params: Any) -> "BaseEstimator":
        """Set constructor arguments by name; return ``self``.

        Raises
        ------
        ParameterError
            A name that is not a constructor argument.
        """
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ParameterError(f"parameter must be one of {', '.join(valid)} for "
                                     f"{type(self).__name__}, got {name!r}")
            setattr(self, name, value)
        return self

    def _noted(self, result: _R) -> _R:
        """``result`` with its privacy report saying so when a seeded ``rng`` drew its DP noise.

        A numpy Generator passed as ``rng`` makes the noise reproducible: an
        experiment, not a production release.  The report states what ran, so
        it gains a note (the estimators without an ``rng``, like the protocol's,
        whose noise always comes from OS entropy, are unchanged).
        """
        from dpdpca.dp.randomness import resolve_source

        rng = getattr(self, "rng", None)
        if rng is None or not math.isfinite(result.privacy.epsilon) or resolve_source(rng).is_secure:
            return result
        note = ("noise drawn from a seeded numpy Generator (rng): a reproducible experiment, not a production "
                "release")
        notes = f"{result.privacy.notes}; {note}" if result.privacy.notes else note
        return dataclasses.replace(result, privacy=dataclasses.replace(result.privacy, notes=notes))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class PCAEstimator(BaseEstimator):
    """Base of the subspace pipelines: ``fit`` -> ``components_`` (k, d), ``mean_``, ``transform``.

    Subclasses implement ``_fit_result(partitions) -> PCAResult``, given the
    partitions as :func:`as_partitions` returns them (validation is theirs).
    See the module docstring for the learned attributes.
    """

    kind = SUBSPACE

    def _fit_result(self, partitions: list[Any]) -> PCAResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit(self, X: Any, y: Any = None) -> "PCAEstimator":
        """Fit on the site partitions (list of (n_s, d) arrays) or one (n, d) array; return ``self``."""
        self._set_result(self._fit_result(as_partitions(X)))
        return self

    def _set_result(self, result: Result) -> None:
        if not isinstance(result, PCAResult):
            raise ProtocolError(f"{type(self).__name__} must produce a PCAResult, got {type(result).__name__}")
        if result.explained_variance is None:
            raise ProtocolError(f"{type(self).__name__} must set PCAResult.explained_variance")
        d, k = result.components.shape
        result = self._noted(result)
        self.result_ = result
        self.components_ = np.ascontiguousarray(result.components.T)
        self.explained_variance_ = np.asarray(result.explained_variance, dtype=np.float64)
        self.mean_ = np.zeros(d) if result.mean is None else np.asarray(result.mean, dtype=np.float64)
        self.n_components_ = int(k)
        self.n_features_in_ = int(d)
        # scikit-learn's derived attributes, from what the release carries (NaN where it carries nothing)
        extra = result.extra or {}
        n = extra.get("n_released", extra.get("n_samples"))
        ev = np.maximum(self.explained_variance_, 0.0)
        self.singular_values_ = (np.sqrt(ev * max(float(n) - 1.0, 1.0)) if isinstance(n, (int, float))
                                 else np.full(k, np.nan))
        total = extra.get("total_variance")
        self.explained_variance_ratio_ = (self.explained_variance_ / float(total)
                                          if isinstance(total, (int, float)) and total > 0 else np.full(k, np.nan))
        self.privacy_ = result.privacy
        self.timings_ = result.timings
        self.bytes_sent_ = dict(result.bytes_sent)

    def transform(self, X: Any) -> np.ndarray:
        """Project ``X`` (n, d) onto the components: ``(X - mean_) @ components_.T``, shape (n, k).

        Raises
        ------
        NotFittedError
            Called before :meth:`fit`.
        DataError
            ``X`` not finite 2-D with ``n_features_in_`` columns.
        """
        check_is_fitted(self)
        arr = check_data_matrix("X", X, n_features=self.n_features_in_)
        return (arr - self.mean_) @ self.components_.T

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X)`` then ``transform`` of the pooled rows of ``X``."""
        parts = as_partitions(X)
        self.fit(parts)
        return self.transform(np.vstack([np.asarray(p, dtype=np.float64) for p in parts]))

    def inverse_transform(self, Z: Any) -> np.ndarray:
        """Back to feature space: ``Z @ components_ + mean_``, shape (n, d)."""
        check_is_fitted(self)
        arr = check_data_matrix("Z", Z, n_features=self.n_components_)
        return arr @ self.components_ + self.mean_


class TensorEstimator(BaseEstimator):
    """Base of the tensor-factor pipelines: ``fit`` -> ``weights_`` (k,), ``means_`` (k, d).

    Subclasses implement ``_fit_result(partitions) -> TensorResult``.  Learned
    attributes: ``weights_``, ``means_``, ``n_components_``,
    ``n_features_in_``, ``privacy_``, ``timings_``, ``bytes_sent_``,
    ``result_``.
    """

    kind = TENSOR_FACTORS

    def _fit_result(self, partitions: list[Any]) -> TensorResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit(self, X: Any, y: Any = None) -> "TensorEstimator":
        """Fit on the site partitions (list of (n_s, d) arrays) or one (n, d) array; return ``self``."""
        return self._store_result(self._fit_result(as_partitions(X)))

    def _store_result(self, result: TensorResult) -> "TensorEstimator":
        """Set the learned attributes from ``result``; return ``self`` (for fits that do not start from data)."""
        if not isinstance(result, TensorResult):
            raise ProtocolError(f"{type(self).__name__} must produce a TensorResult, got {type(result).__name__}")
        result = self._noted(result)
        self.result_ = result
        self.weights_ = np.asarray(result.weights, dtype=np.float64)
        self.means_ = np.asarray(result.means, dtype=np.float64)
        self.n_components_ = int(self.means_.shape[0])
        self.n_features_in_ = int(self.means_.shape[1])
        self.privacy_ = result.privacy
        self.timings_ = result.timings
        self.bytes_sent_ = dict(result.bytes_sent)
        return self
