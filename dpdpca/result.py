"""The value every pipeline returns: :class:`PCAResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from dpdpca.dp.report import PrivacyReport
from dpdpca.timing import Timings

__all__ = ["PCAResult"]


@dataclass(frozen=True)
class PCAResult:
    """Principal components with the privacy report, timings and traffic.

    Attributes
    ----------
    method : str
        Registry name of the pipeline (``"dpdpca"``, ``"capepca"``, ...).
    components : ndarray of shape (n_features, n_components)
        Orthonormal columns, in decreasing order of ``eigenvalues``.
    eigenvalues : ndarray of shape (n_components,)
        Eigenvalues of the (noisy) matrix the pipeline decomposed, in the units
        that pipeline states (scatter for DPDPCA, second moment for the
        Imtiaz-Sarwate pipelines).
    privacy : PrivacyReport
    timings : Timings
    bytes_sent : dict
        Bytes sent per party (``"owner:1"``, ``"proxy"``, ...).
    params : dict
        The method's parameters, for reproduction.
    extra : dict
        Method-specific diagnostics (e.g. rows clipped per owner).
    """

    method: str
    components: np.ndarray
    eigenvalues: np.ndarray
    privacy: PrivacyReport
    timings: Timings = field(default_factory=Timings)
    bytes_sent: Mapping[str, int] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def n_components(self) -> int:
        return int(self.components.shape[1])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the components themselves are left out)."""
        return {
            "method": self.method,
            "components_shape": list(self.components.shape),
            "eigenvalues": [float(x) for x in self.eigenvalues],
            "privacy": self.privacy.to_dict(),
            "timings": self.timings.to_dict(),
            "bytes_sent": dict(self.bytes_sent),
            "params": dict(self.params),
            "extra": dict(self.extra),
        }
