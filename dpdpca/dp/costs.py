"""What a protocol release costs, computed from the public request before it runs.

The ledger (:mod:`dpdpca.dp.accountant`) must refuse a release *before* the
noise is drawn, so the cost comes from public values only: the budget, the
release mode, the calibration, d and the fixed-point bits, never the data.

* add/remove release, proxy noise: ``rho = D^2/2`` of
  :func:`dpdpca.dp.calibrate_add_remove` (the zCDP of its discrete Gaussians).
* add/remove release, owners' noise: the distributed discrete Gaussian's RDP
  curve with the honest shares the quorum guarantees
  (:meth:`~dpdpca.dp.DistributedCalibration.cost`): the guarantee against the
  largest coalition.
* centred release: ``rho = Delta^2/(2 sigma^2)`` per unit sensitivity,
  replace-one, with sigma the continuous analytic one (never above the
  calibrated discrete sigma, so rho is an upper bound) or the classic one,
  plus the mask's total-variation term as additive delta (at most
  ``sqrt(d) 2^-kappa``).
"""

from __future__ import annotations

import math
from typing import Any

from dpdpca.dp.accountant import ReleaseCost
from dpdpca.dp.calibration import analytic_gaussian_sigma, calibrate_discrete_gaussian
from dpdpca.dp.distributed import calibrate_distributed
from dpdpca.dp.release import calibrate_add_remove, check_noise_by, check_release
from dpdpca.dp.report import ADD_REMOVE_ONE, REPLACE_ONE, PrivacyReport

__all__ = ["protocol_release_cost", "cost_from_report"]


def protocol_release_cost(*, epsilon: float, delta: float, release: str, noise_by: str = "proxy", d: int,
                          frac_bits: int = 16, calibration: str = "analytic", owners: int = 1,
                          honest_owners: int | None = None, quorum: int | None = None, kappa: int = 40,
                          label: str = "") -> ReleaseCost:
    """The :class:`ReleaseCost` of one protocol release (module docstring).

    Parameters
    ----------
    epsilon, delta : float
    release : {"add-remove", "centred"}
    noise_by : {"proxy", "owners"}
    d, frac_bits : int
    calibration : {"analytic", "classic"}
    owners, honest_owners, quorum : int
        L, t and Q of the distributed noise.
    kappa : int
        Mask hiding bits (centred release).
    label : str

    Returns
    -------
    ReleaseCost
    """
    check_release(release)
    check_noise_by(noise_by)
    if release == "add-remove" and noise_by == "owners":
        cal = calibrate_distributed(epsilon=epsilon, delta=delta, d=d, frac_bits=frac_bits, owners=owners,
                                    honest=owners if honest_owners is None else honest_owners, quorum=quorum)
        return cal.cost(cal.n_sized, label=label)
    if release == "add-remove":
        ar = calibrate_add_remove(epsilon=epsilon, delta=delta, d=d, frac_bits=frac_bits, calibration=calibration)
        return ReleaseCost.from_zcdp(ar.rho, epsilon=epsilon, delta=max(delta, ar.delta_bound),
                                     neighbouring=ADD_REMOVE_ONE, mechanism="discrete-gaussian", label=label)
    if calibration == "classic":
        ratio = calibrate_discrete_gaussian(epsilon=epsilon, delta=delta, sensitivity=1, calibration="classic")
        rho = 1.0 / (2.0 * float(ratio))
    else:
        # the rounding-coupling sigma is never below the continuous analytic one: this rho bounds the true one
        rho = 1.0 / (2.0 * analytic_gaussian_sigma(epsilon, delta) ** 2)
    tv = math.sqrt(d) * 2.0 ** -kappa
    return ReleaseCost.from_zcdp(rho, epsilon=epsilon, delta=min(1.0, delta + tv), neighbouring=REPLACE_ONE,
                                 delta_extra=tv, mechanism="discrete-gaussian", label=label)


def cost_from_report(report: PrivacyReport | dict[str, Any], *, label: str = "") -> ReleaseCost:
    """A basic-composition cost from a release's own report (its RDP curve unknown: infinite)."""
    rep = report if isinstance(report, PrivacyReport) else PrivacyReport.from_dict(report)
    return ReleaseCost.from_rdp(lambda a: math.inf, epsilon=rep.epsilon, delta=rep.delta,
                                neighbouring=rep.neighbouring, mechanism=rep.mechanism, label=label)
