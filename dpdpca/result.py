"""What every pipeline returns: a :class:`Result` of one of the result kinds.

Two kinds (``Result.kind``), chosen by what the pipeline releases:

* :data:`SUBSPACE` -> :class:`PCAResult`: principal components and their
  eigenvalues (every PCA pipeline);
* :data:`TENSOR_FACTORS` -> :class:`TensorResult`: the weights and means
  (factors) of a latent-variable model recovered by a tensor decomposition.

Both carry the same bookkeeping: the privacy report, timings, bytes sent,
parameters and diagnostics.  The driver scores each kind with its own metric
(:func:`dpdpca.driver.score`): the captured-energy ratio ``q/q_o`` for a
subspace, the factor error ``q_comp`` for tensor factors.

Orientation: :class:`PCAResult` stores ``components`` as **columns**, shape
(n_features, n_components), the form the linear algebra and the metrics use.
The estimators expose the scikit-learn form ``components_`` of shape
(n_components, n_features), its transpose.  This is the only place the two
meet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from dpdpca.dp.report import PrivacyReport
from dpdpca.timing import Timings

__all__ = ["Result", "PCAResult", "TensorResult", "SUBSPACE", "TENSOR_FACTORS", "RESULT_KINDS"]

#: Result kind of a pipeline that releases a subspace (:class:`PCAResult`).
SUBSPACE = "subspace"
#: Result kind of a pipeline that releases tensor factors (:class:`TensorResult`).
TENSOR_FACTORS = "tensor-factors"
#: Every result kind.
RESULT_KINDS = (SUBSPACE, TENSOR_FACTORS)


def _list(a: Any) -> list[Any]:
    return [float(x) for x in np.ravel(a)]


@dataclass(frozen=True, kw_only=True)
class Result:
    """Bookkeeping shared by every result kind.

    Attributes
    ----------
    method : str
        Registry name of the pipeline (``"dpdpca"``, ``"capepca"``, ...).
    privacy : PrivacyReport
    timings : Timings
    bytes_sent : dict
        Bytes sent per party (``"owner:1"``, ``"proxy"``, ...).
    params : dict
        The method's parameters, for reproduction.
    extra : dict
        Method-specific diagnostics (e.g. rows clipped per owner).
    """

    kind: ClassVar[str] = ""

    method: str
    privacy: PrivacyReport
    timings: Timings = field(default_factory=Timings)
    bytes_sent: Mapping[str, int] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def _common_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "kind": self.kind,
            "privacy": self.privacy.to_dict(),
            "timings": self.timings.to_dict(),
            "bytes_sent": dict(self.bytes_sent),
            "params": dict(self.params),
            "extra": dict(self.extra),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return self._common_dict()


@dataclass(frozen=True, kw_only=True)
class PCAResult(Result):
    """Principal components with the privacy report, timings and traffic.

    Attributes
    ----------
    components : ndarray of shape (n_features, n_components)
        Orthonormal **columns**, in decreasing order of ``eigenvalues``, signs
        fixed by :func:`dpdpca.linalg.flip_signs`.
    eigenvalues : ndarray of shape (n_components,)
        Eigenvalues of the (noisy) matrix the pipeline decomposed, in the units
        that pipeline states (scatter for DPDPCA, second moment for the
        Imtiaz-Sarwate pipelines).
    explained_variance : ndarray of shape (n_components,) or None
        The same eigenvalues as a covariance: squared data units, per sample,
        denominator ``N - 1`` (scikit-learn's ``explained_variance_``).  Every
        registered pipeline sets it.
    mean : ndarray of shape (n_features,) or None
        The mean the pipeline subtracted before decomposing, when it releases
        one; ``None`` when it releases none (the data were taken as given, or
        the mean stayed hidden, as in the protocol).
    """

    kind: ClassVar[str] = SUBSPACE

    components: np.ndarray
    eigenvalues: np.ndarray
    explained_variance: np.ndarray | None = None
    mean: np.ndarray | None = None

    @property
    def n_components(self) -> int:
        return int(self.components.shape[1])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the components themselves are left out)."""
        out = self._common_dict()
        out["components_shape"] = list(self.components.shape)
        out["eigenvalues"] = _list(self.eigenvalues)
        if self.explained_variance is not None:
            out["explained_variance"] = _list(self.explained_variance)
        return out


@dataclass(frozen=True, kw_only=True)
class TensorResult(Result):
    """Weights and means of a latent-variable model (a tensor decomposition's output).

    Attributes
    ----------
    weights : ndarray of shape (n_components,)
        Mixing weights ``w_k`` (mixture of Gaussians) or topic probabilities
        (single-topic model).
    means : ndarray of shape (n_components, n_features)
        One recovered factor ``a_k`` per **row**: component means, or topic
        word distributions.
    """

    kind: ClassVar[str] = TENSOR_FACTORS

    weights: np.ndarray
    means: np.ndarray

    @property
    def n_components(self) -> int:
        return int(self.means.shape[0])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (weights included; the means' shape only)."""
        out = self._common_dict()
        out["weights"] = _list(self.weights)
        out["means_shape"] = list(self.means.shape)
        return out
