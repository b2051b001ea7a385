"""dpdpca: privacy-preserving distributed PCA.

Layers (imports point down only): ``cli``/``bench`` -> ``driver``/``pipelines``
-> ``protocol`` (composes ``crypto`` and ``dp``) and ``baselines`` (uses ``dp``)
-> ``estimator``/``result`` -> ``data``, ``metrics``, ``dp`` -> ``linalg``.
``crypto`` knows nothing of PCA or DP; ``dp`` knows nothing of encryption;
``baselines`` never imports ``protocol``; nothing imports ``cli``.  See
``docs/architecture.md``.
"""

from dpdpca.errors import DpdpcaError

__version__ = "0.1.0"
__all__ = ["DpdpcaError", "__version__"]
