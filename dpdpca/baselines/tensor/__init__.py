"""capeAGN: distributed DP orthogonal tensor decomposition (Imtiaz & Sarwate 2018, Alg. 3).

* :mod:`~dpdpca.baselines.tensor.models`: MOG and STM generators (App. B);
* :mod:`~dpdpca.baselines.tensor.moments`: per-site ``M_2``, ``M_3`` and the projection ``M_3(W, W, W)``;
* :mod:`~dpdpca.baselines.tensor.power`: whitening and the tensor power method with deflation;
* :mod:`~dpdpca.baselines.tensor.capeagn`: :class:`CapeAGN` (``capeagn``, ``conv``, ``local``)
  and :class:`NonPrivateTensorDecomposition` (``nonprivate``);
* :mod:`~dpdpca.baselines.tensor.experiment`: all methods on the same data, scored by
  :func:`dpdpca.metrics.q_comp`.

All noise comes from :mod:`dpdpca.dp`; see ``docs/tensor.md``.
"""

from dpdpca.baselines.tensor.capeagn import CapeAGN, NonPrivateTensorDecomposition, site_moments
from dpdpca.baselines.tensor.models import (LatentModel, make_mog, make_stm, random_components,
                                            sample_partitions, sample_records)
from dpdpca.baselines.tensor.moments import SiteMoments, mog_moments, project, stm_moments
from dpdpca.baselines.tensor.power import tensor_power_method, whiten

__all__ = ["CapeAGN", "NonPrivateTensorDecomposition", "site_moments", "LatentModel", "make_mog", "make_stm",
           "random_components", "sample_partitions", "sample_records", "SiteMoments", "mog_moments",
           "stm_moments", "project", "tensor_power_method", "whiten"]
