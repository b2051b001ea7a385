"""dpdpca: privacy-preserving distributed PCA.

Layers (imports point down only): ``cli``/``bench`` -> ``driver`` ->
``protocol`` (composes ``crypto`` and ``dp``) and ``baselines`` (uses ``dp``)
-> ``data``, ``metrics``.  ``crypto`` knows nothing of PCA or DP; ``dp`` knows
nothing of encryption; ``baselines`` never imports ``protocol``.
"""

from dpdpca.errors import DpdpcaError

__version__ = "0.1.0"
__all__ = ["DpdpcaError", "__version__"]
