"""The proxy as an HTTPS service and its clients (optional extra ``[server]``).

* :mod:`dpdpca.net.auth` -- party identities (Ed25519) and signed requests;
* :mod:`dpdpca.net.config` -- ``proxy.toml``;
* :mod:`dpdpca.net.collection` -- the crash-safe collection state machine
  (persisted shares, quorum or deadline, one release), independent of HTTP;
* :mod:`dpdpca.net.app` -- the Starlette application over it;
* :mod:`dpdpca.net.client` -- the httpx client the owners and the user use;
* :mod:`dpdpca.net.serve` -- uvicorn with TLS.

Composes :mod:`dpdpca.protocol`; nothing in the protocol imports it.  The
modules that need ``starlette``, ``uvicorn`` or ``httpx`` import them lazily
through :func:`require`, so a missing extra is one line naming what to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from dpdpca.errors import MissingDependencyError

__all__ = ["require"]

INSTALL_HINT = "pip install 'dpdpca[server]'"


def require(module: str) -> ModuleType:
    """Import ``module`` or raise a one-line error naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(f"the HTTP transport needs the {module!r} package; install it with: "
                                     f"{INSTALL_HINT}") from None
