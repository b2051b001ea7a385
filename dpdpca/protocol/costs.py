"""What a protocol release costs, priced by the calibration that draws its noise.

:func:`protocol_release_cost` builds the frozen setting and asks the release
object for its :class:`~dpdpca.protocol.releases.ReleaseNoise`, the same
calibration :meth:`dpdpca.protocol.proxy.Proxy.finish` draws from, so an
entry point that prices several runs ahead (``dpdpca compare``) records
exactly what the proxy would.  The proxy itself prices, checks, runs and
records in one call (``Proxy.finish(..., ledger=...)``).
"""

from __future__ import annotations

from dpdpca.dp.accountant import ReleaseCost
from dpdpca.protocol.config import ReleaseOptions

__all__ = ["protocol_release_cost"]


def protocol_release_cost(*, epsilon: float, delta: float, release: str | None, d: int, n: int | None = None,
                          noise_by: str = "proxy", frac_bits: int = 16, calibration: str = "analytic",
                          sensitivity_mode: str = "rigorous", noise_lattice: str = "n-scaled", owners: int = 1,
                          honest_owners: int | None = None, quorum: int | None = None, kappa: int = 40,
                          label: str = "") -> ReleaseCost:
    """The ledger cost of one protocol release, from public values only (never the data).

    Parameters
    ----------
    epsilon, delta : float
    release : {"add-remove", "centred"} or None
        None: the default for the options (:func:`dpdpca.protocol.params.resolve_release`).
    d : int
    n : int or None
        N, public under replace-one (the centred release's sensitivity depends on it).
    noise_by, calibration, sensitivity_mode, noise_lattice, honest_owners
        As :class:`~dpdpca.protocol.config.ReleaseOptions`.
    owners, quorum : int
        L and Q of the distributed noise.
    frac_bits, kappa : int
    label : str

    Returns
    -------
    ReleaseCost
    """
    setting = ReleaseOptions(epsilon=epsilon, delta=delta, calibration=calibration, sensitivity_mode=sensitivity_mode,
                             noise_lattice=noise_lattice, release=release, noise_by=noise_by,
                             honest_owners=honest_owners)
    noise = setting.kind.calibrate(setting, d=d, frac_bits=frac_bits, kappa=kappa, n=n, owners=owners, quorum=quorum)
    return noise.cost(label=label)
