"""Plaintext DP pipelines (Imtiaz-Sarwate) and the sequential baseline.

All are scikit-learn-shaped estimators and are registered in
:data:`dpdpca.pipelines.PIPELINES`:

* :class:`DPDisPCA` (``dpdispca``, ``dpdispca-full``, ``pooled``, ``local``);
* :class:`CapePCA` (``capepca``, ``conv``);
* :class:`PrivateLocalPCA` (``private-local-pca``);
* :class:`NonPrivatePCA` (``nonprivate``);
* :class:`FederatedPCA` (``fpca``, Grammenos et al. 2020) and its comparators
  :class:`ModSulqPCA` (``mod-sulq``) and :class:`FrequentDirectionsPCA`
  (``frequent-directions``, not DP);
* :class:`SketchPCA` (``sketch``, DP compressive PCA, Chatalic et al. 2022).

This package uses :mod:`dpdpca.dp` for all noise and never imports
:mod:`dpdpca.protocol`.
"""

from dpdpca.baselines.capepca import CapePCA
from dpdpca.baselines.dpdispca import DPDisPCA
from dpdpca.baselines.nonprivate import NonPrivatePCA
from dpdpca.baselines.fpca import FederatedPCA
from dpdpca.baselines.frequent_directions import FrequentDirectionsPCA
from dpdpca.baselines.modsulq import ModSulqPCA
from dpdpca.baselines.private_local_pca import PrivateLocalPCA
from dpdpca.baselines.sketch import SketchPCA

__all__ = ["DPDisPCA", "CapePCA", "PrivateLocalPCA", "NonPrivatePCA", "FederatedPCA", "ModSulqPCA",
           "FrequentDirectionsPCA", "SketchPCA"]
