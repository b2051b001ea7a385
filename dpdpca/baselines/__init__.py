"""Plaintext DP pipelines (Imtiaz-Sarwate) and the sequential baseline.

All are scikit-learn-shaped estimators and are registered in
:data:`dpdpca.pipelines.PIPELINES`:

* :class:`DPDisPCA` (``dpdispca``, ``dpdispca-full``, ``pooled``, ``local``);
* :class:`CapePCA` (``capepca``, ``conv``);
* :class:`PrivateLocalPCA` (``private-local-pca``);
* :class:`NonPrivatePCA` (``nonprivate``).

This package uses :mod:`dpdpca.dp` for all noise and never imports
:mod:`dpdpca.protocol`.
"""

from dpdpca.baselines.capepca import CapePCA
from dpdpca.baselines.dpdispca import DPDisPCA
from dpdpca.baselines.nonprivate import NonPrivatePCA
from dpdpca.baselines.private_local_pca import PrivateLocalPCA

__all__ = ["DPDisPCA", "CapePCA", "PrivateLocalPCA", "NonPrivatePCA"]
