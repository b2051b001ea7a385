"""Release modes of the scatter statistics, and the add/remove-one split.

Names defined once here (the protocol and the CLI import them):

* :data:`RELEASES` -- what is released with noise:

  - ``"add-remove"`` (the rigorous default): the *uncentred* pieces
    ``R = sum x x^T`` (upper triangle), ``v = sum x`` and ``N``, each with its
    own discrete-Gaussian noise, under **add/remove-one** neighbouring.  The
    data user forms the centred scatter ``R~ - v~ v~^T / N~`` by
    post-processing.  N is not released exactly.
  - ``"centred"``: the centred scatter ``N*S_bar`` with one noise matrix under
    **replace-one** neighbouring (N public), sensitivity ``4(N-1)/N``
    (:func:`dpdpca.dp.sensitivity.centred_scatter_sensitivity`) or the
    paper's 1 in paper mode.  The release of the Wang-Chang protocol.

* :data:`NOISE_BY` -- who draws the noise: ``"proxy"`` (the paper) or
  ``"owners"`` (distributed noise, :mod:`dpdpca.dp.distributed`).

The add/remove split
--------------------
With records ``||x|| <= 1``, adding or removing one record changes the upper
triangle of R by ``u(x x^T)`` with ``||u(x x^T)||_2^2 = (sum_i x_i^4 +
||x||^4)/2 <= ||x||^4 <= 1``, v by ``x`` (``<= 1``) and N by 1.  Noise
``N_Z(0, sigma_j^2)`` on block j (j in R, v, N) gives a mechanism whose
whitened sensitivity is ``D^2 = 1/sigma_R^2 + 1/sigma_v^2 + 1/sigma_N^2``
(all three maxima are reached together, at ``||x|| = 1``): the budget split
is a split of ``D^2`` (equivalently of the zCDP ``rho = D^2/2``, Bun & Steinke
2016, composition).

Which split?  The user computes ``S~ = R~ - v~ v~^T / N~``.  To first order
in the noise, with ``m = v/N``,

``S~ - S = Z_R - (m z_v^T + z_v m^T) + m m^T z_N + O(z^2/N)``,

whose expected squared Frobenius norm is
``a_R sigma_R^2 + a_v sigma_v^2 + a_N sigma_N^2`` with ``a_R = d^2`` (a
symmetric matrix from d(d+1)/2 i.i.d. entries), ``a_v = 2(d+1)||m||^2`` and
``a_N = ||m||^4``.  Minimising ``sum a_j sigma_j^2`` subject to
``sum 1/sigma_j^2 = D^2`` (Lagrange) gives ``1/sigma_j^2 = D^2 sqrt(a_j) /
sum_k sqrt(a_k)``.  The mean m is private, so the weights use a *public*
bound ``||m|| <= mean_norm_bound`` (default 1, always valid: the split only
affects utility, never privacy).  At d = 64 the R block keeps 84% of the
budget, v 15% and N 1%.
(The protocol adds no mask to this release: :mod:`dpdpca.protocol.add_remove`.)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpdpca._validation import check_delta, check_int, check_positive, param_error
from dpdpca.dp.calibration import (
    DISCRETE_GAUSSIAN_CALIBRATIONS,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    discrete_gaussian_blocks_delta,
    smallest_passing_ratio,
    zcdp_rho_for,
)
from dpdpca.dp.report import ADD_REMOVE_ONE, PrivacyReport
from dpdpca.triangle import upper_triangle_size

__all__ = [
    "BLOCKS",
    "DEFAULT_RELEASE",
    "NOISE_BY",
    "RELEASES",
    "AddRemoveCalibration",
    "calibrate_add_remove",
    "check_noise_by",
    "check_release",
    "split_weights",
]

RELEASES = ("add-remove", "centred")
DEFAULT_RELEASE = "add-remove"
NOISE_BY = ("proxy", "owners")
#: The three noisy blocks of the add/remove release, in wire order.
BLOCKS = ("R", "v", "N")


def check_release(release: str) -> str:
    """One of :data:`RELEASES`, else ParameterError."""
    if release not in RELEASES:
        raise param_error("release", "one of " + ", ".join(repr(r) for r in RELEASES), release)
    return release


def check_noise_by(noise_by: str) -> str:
    """One of :data:`NOISE_BY`, else ParameterError."""
    if noise_by not in NOISE_BY:
        raise param_error("noise_by", "one of " + ", ".join(repr(r) for r in NOISE_BY), noise_by)
    return noise_by


def split_weights(d: int, *, mean_norm_bound: float = 1.0) -> dict[str, float]:
    """Shares ``w_j = sqrt(a_j) / sum_k sqrt(a_k)`` of ``D^2`` for R, v, N (module docstring).

    Parameters
    ----------
    d : int >= 1
        Number of features.
    mean_norm_bound : float > 0
        Public bound on ``||v/N||`` (1 is always valid for ``||x|| <= 1``).

    Returns
    -------
    dict
        ``{"R": w_R, "v": w_v, "N": w_N}``, summing to 1.

    Examples
    --------
    >>> w = split_weights(64)
    >>> round(w["R"], 3), round(w["v"], 3), round(w["N"], 3)
    (0.838, 0.149, 0.013)
    """
    d = check_int("d", d, minimum=1)
    m = check_positive("mean_norm_bound", mean_norm_bound)
    a = {"R": float(d * d), "v": 2.0 * (d + 1) * m * m, "N": m ** 4}
    total = math.fsum(math.sqrt(x) for x in a.values())
    return {k: math.sqrt(x) / total for k, x in a.items()}


@dataclass(frozen=True)
class AddRemoveCalibration:
    """The integer noise of the add/remove release, and what it promises.

    Attributes
    ----------
    epsilon, delta : float
        The request; ``delta_bound`` is the provable delta of this noise.
    calibration : str
        ``"analytic"`` (rounding coupling, default), ``"zcdp"`` or ``"classic"``.
    d, frac_bits : int
        Features and fixed-point bits: the integer sensitivities are
        ``2**(2f)`` (R), ``2**f`` (v) and 1 (N).
    weights : dict
        The split of ``D^2`` (:func:`split_weights`).
    sigma_squared_int : dict of Fraction
        Exact discrete-Gaussian parameter of each block, in integer units.
    delta_bound : float
    rho : float
        ``D^2/2``: the zCDP of the release (for the accountant).
    """

    epsilon: float
    delta: float
    calibration: str
    d: int
    frac_bits: int
    weights: dict[str, float]
    sigma_squared_int: dict[str, Fraction]
    delta_bound: float
    rho: float

    @property
    def counts(self) -> dict[str, int]:
        """Noisy coordinates per block: d(d+1)/2, d, 1."""
        return block_counts(self.d)

    @property
    def sensitivities_int(self) -> dict[str, int]:
        """Integer L2 sensitivity of each block (= its scale, :func:`block_scales`)."""
        return block_scales(self.frac_bits)

    @property
    def scales(self) -> dict[str, int]:
        """Integer units per data unit of each block."""
        return self.sensitivities_int

    def sigma(self, block: str) -> float:
        """Noise std. deviation of ``block`` in data units (``||x|| <= 1``)."""
        return math.sqrt(self.sigma_squared_int[block]) / self.scales[block]

    def report(self, noise_added_by: str, *, notes: str = "") -> PrivacyReport:
        """The release's :class:`PrivacyReport`, with one part per block."""
        parts = tuple(
            PrivacyReport(epsilon=self.epsilon, delta=self.delta_bound, mechanism="discrete-gaussian",
                          calibration=self.calibration, sensitivity=1.0, neighbouring=ADD_REMOVE_ONE,
                          noise_added_by=noise_added_by, sigma=self.sigma(b), sensitivity_mode="rigorous",
                          notes=f"block {b}: share {self.weights[b]:.4f} of the budget; integer sigma^2 "
                                f"{float(self.sigma_squared_int[b]):.6g} at scale {self.scales[b]}")
            for b in BLOCKS)
        split = ", ".join(f"{b} {self.weights[b]:.3f}" for b in BLOCKS)
        text = (f"release add-remove: noisy uncentred R (upper triangle), v and N; the user forms "
                f"R - v v^T / N by post-processing; split of D^2 (zCDP) minimising the centred "
                f"result's Frobenius error: {split}; sigma_R={self.sigma('R'):.4g}, "
                f"sigma_v={self.sigma('v'):.4g}, sigma_N={self.sigma('N'):.4g}; rho={self.rho:.5g}; no mask "
                f"(the noisy v is itself DP)")
        return PrivacyReport(epsilon=self.epsilon, delta=max(self.delta, self.delta_bound),
                             mechanism="discrete-gaussian", calibration=self.calibration, sensitivity=1.0,
                             neighbouring=ADD_REMOVE_ONE, noise_added_by=noise_added_by, sigma=self.sigma("R"),
                             sensitivity_mode="rigorous", notes="; ".join(t for t in (text, notes) if t),
                             parts=parts)


def block_counts(d: int) -> dict[str, int]:
    """Noisy coordinates per block for ``d`` features: ``d(d+1)/2`` (R), ``d`` (v), 1 (N)."""
    return {"R": upper_triangle_size(d), "v": d, "N": 1}


def block_scales(frac_bits: int) -> dict[str, int]:
    """Integer units per data unit: ``2**2f`` (R), ``2**f`` (v) and ``2**2f`` (N).

    These are also the integer sensitivities.  N is released as the integer
    ``N * 2**2f`` so that its noise, like the others', has a sigma far above 1
    in integer units (the rounding coupling needs it); the user divides by
    ``2**2f``.
    """
    return {"R": 1 << (2 * frac_bits), "v": 1 << frac_bits, "N": 1 << (2 * frac_bits)}


def _sigmas_int(c2: Fraction, weights: dict[str, float], frac_bits: int) -> dict[str, Fraction]:
    """``sigma_j^2 = c^2 / w_j`` in data units, times the squared integer scale, as exact rationals."""
    scales = block_scales(frac_bits)
    return {b: c2 * scales[b] ** 2 / Fraction(weights[b]) for b in BLOCKS}


def whitened_sensitivity_squared(sigma_squared_int: dict[str, Fraction], frac_bits: int) -> Fraction:
    """``D^2 = sum_j Delta_j^2 / sigma_j^2`` exactly (integer sensitivities 2^2f, 2^f, 1)."""
    sens = block_scales(frac_bits)
    return sum((Fraction(sens[b]) ** 2 / sigma_squared_int[b] for b in BLOCKS), Fraction(0))


def calibrate_add_remove(*, epsilon: float, delta: float, d: int, frac_bits: int,
                         calibration: str = "analytic", mean_norm_bound: float = 1.0) -> AddRemoveCalibration:
    """Calibrate the add/remove release: noise on R, v and N for (epsilon, delta)-DP.

    Parameters
    ----------
    epsilon : float > 0
    delta : float in (0, 1)
    d : int >= 1
    frac_bits : int in [0, 52]
        Rows are integers at scale ``2**frac_bits`` with ``||x_int|| <= 2**f``;
        the blocks are released at the integer scales of :func:`block_scales`.
    calibration : {"analytic", "zcdp", "classic"}
        ``"analytic"`` (default): the smallest common scale whose
        :func:`~dpdpca.dp.calibration.discrete_gaussian_blocks_delta` is <= delta
        (rounding coupling; falls back to zCDP where that is smaller).
        ``"zcdp"``: ``D^2 = 2 rho*`` (CKS Cor. 13).  ``"classic"``:
        ``1/D = sqrt(2 ln(1.25/delta))/epsilon`` (paper-style; the report
        carries the provable delta if larger).
    mean_norm_bound : float > 0
        Public bound on ``||v/N||`` for the split (:func:`split_weights`).

    Returns
    -------
    AddRemoveCalibration

    Examples
    --------
    >>> cal = calibrate_add_remove(epsilon=1.0, delta=1e-5, d=64, frac_bits=16)
    >>> cal.delta_bound <= 1e-5, round(cal.sigma("R"), 2)
    (True, 4.08)
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta("delta", delta)
    d = check_int("d", d, minimum=1)
    frac_bits = check_int("frac_bits", frac_bits, minimum=0, maximum=52)
    if calibration not in DISCRETE_GAUSSIAN_CALIBRATIONS:
        raise param_error("calibration", "one of " + ", ".join(repr(c) for c in DISCRETE_GAUSSIAN_CALIBRATIONS),
                          calibration)
    cal = _calibrated(epsilon, delta, d, frac_bits, calibration, float(mean_norm_bound))
    # each caller gets its own dicts (the calibration is a pure function of its arguments: computed once)
    return dataclasses.replace(cal, weights=dict(cal.weights), sigma_squared_int=dict(cal.sigma_squared_int))


@functools.lru_cache(maxsize=64)
def _calibrated(epsilon: float, delta: float, d: int, frac_bits: int, calibration: str,
                mean_norm_bound: float) -> AddRemoveCalibration:
    """:func:`calibrate_add_remove` of checked arguments (the proxy prices, draws ahead and finishes with one)."""
    weights = split_weights(d, mean_norm_bound=mean_norm_bound)
    counts = block_counts(d)

    def delta_of(c2: Fraction) -> tuple[float, dict[str, Fraction], Fraction]:
        s2 = _sigmas_int(c2, weights, frac_bits)
        d2 = whitened_sensitivity_squared(s2, frac_bits)
        return discrete_gaussian_blocks_delta(epsilon, [(s2[b], counts[b]) for b in BLOCKS], d2), s2, d2

    if calibration == "classic":
        c2 = Fraction(math.nextafter(classic_gaussian_sigma(epsilon, delta) ** 2, math.inf))
    else:
        c2 = Fraction(math.nextafter(1.0 / (2.0 * zcdp_rho_for(epsilon, delta)) * (1 + 1e-12), math.inf))
        while delta_of(c2)[0] > delta:
            c2 *= Fraction(1_000_001, 1_000_000)
        if calibration == "analytic":
            c2 = smallest_passing_ratio(lambda r: delta_of(r)[0] <= delta,
                                        analytic_gaussian_sigma(epsilon, delta) ** 2, c2)
    bound, s2, d2 = delta_of(c2)
    return AddRemoveCalibration(epsilon=epsilon, delta=delta, calibration=calibration, d=d, frac_bits=frac_bits,
                                weights=weights, sigma_squared_int=s2, delta_bound=bound, rho=float(d2) / 2.0)


def noisy_count_floor(n_noisy: Any) -> int:
    """Post-processing of the noisy N: at least 1 (a count below 1 is never true)."""
    return max(1, int(n_noisy))
