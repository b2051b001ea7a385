"""MOD-SuLQ noise levels for FPCA (Grammenos et al. 2020, §3.3).

The noise std omega of the symmetric mask of MOD-SuLQ (eq. (6)), of the
streaming, non-symmetric mask of FPCA (eq. (8), Lemma 2), and the minimum batch
size ``T_{eps,delta,d,n}`` of Lemma 2 item 2.

These are the paper's formulas (their own privacy analysis, not the Gaussian
mechanism calibration): we reproduce them as stated.  The one place where the
printed text is wrong is ``T``, see :func:`modsulq_min_batch`.

:class:`ModSulqMechanism` turns them into a mechanism with a privacy report.
It does not rest on the paper's proof alone: the released matrix
``X X^T / n + N`` has L2 (Frobenius) sensitivity ``sqrt(2)/n`` under
replace-one with ``||x|| <= 1`` (:func:`~dpdpca.dp.second_moment_sensitivity`),
so whenever ``omega`` is at least the analytic-Gaussian sigma for that
sensitivity (Balle & Wang 2018), the release is (epsilon, delta)-DP by the
Gaussian mechanism itself.  The mechanism checks this and, if it ever fails,
reports the larger delta the Gaussian analysis gives.  ``calibration="analytic"``
uses that sigma directly (far less noise than eq. (8), which grows with d).

References
----------
A. Grammenos, R. Mendoza-Smith, J. Crowcroft, C. Mascolo, "Federated Principal
Component Analysis", NeurIPS 2020, §3.3, eqs. (6), (8), Lemma 2.
K. Chaudhuri, A. Sarwate, K. Sinha, "A near-optimal algorithm for
differentially-private principal components", JMLR 2013 (MOD-SuLQ).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpdpca._validation import check_int, check_open_unit, check_positive, param_error
from dpdpca.dp.calibration import calibrate_gaussian, gaussian_delta
from dpdpca.dp.noise import symmetric_gaussian_matrix
from dpdpca.dp.randomness import NoiseSource
from dpdpca.dp.report import REPLACE_ONE, PrivacyReport
from dpdpca.dp.sensitivity import centred_scatter_sensitivity, second_moment_sensitivity

__all__ = ["modsulq_omega", "streaming_modsulq_omega", "modsulq_min_batch", "min_batch", "ModSulqMechanism",
           "MODSULQ_MASKS", "MODSULQ_CALIBRATIONS"]

MODSULQ_MASKS = ("symmetric", "streaming")
MODSULQ_CALIBRATIONS = ("modsulq", "analytic", "classic")


def _check(epsilon: float, delta: float, d: int, n: int) -> tuple[float, float, int, int]:
    return (check_positive("epsilon", epsilon), check_open_unit("delta", delta),
            check_int("d", d, minimum=1), check_int("n", n, minimum=1))


def modsulq_omega(epsilon: float, delta: float, d: int, n: int) -> float:
    """Eq. (6): ``(d+1)/(n eps) sqrt(2 log((d^2+d)/(2 delta sqrt(2 pi)))) + 1/(n sqrt(eps))``.

    Std of each entry ``i >= j`` of the symmetric MOD-SuLQ mask for ``X X^T / n``.
    """
    epsilon, delta, d, n = _check(epsilon, delta, d, n)
    arg = (d * d + d) / (2.0 * delta * math.sqrt(2.0 * math.pi))
    if arg <= 1.0:
        raise param_error("delta", f"< (d^2+d)/(2 sqrt(2 pi)) = {(d * d + d) / (2 * math.sqrt(2 * math.pi)):.4g} "
                                   "for eq. (6) to be defined", delta)
    return (d + 1) / (n * epsilon) * math.sqrt(2.0 * math.log(arg)) + 1.0 / (n * math.sqrt(epsilon))


def _streaming_numerator(epsilon: float, delta: float, d: int) -> float:
    arg = d * d / (delta * math.sqrt(2.0 * math.pi))
    if arg <= 1.0:
        raise param_error("delta", f"< d^2/sqrt(2 pi) = {d * d / math.sqrt(2 * math.pi):.4g} "
                                   "for eq. (8) to be defined", delta)
    return 4.0 * d / epsilon * math.sqrt(2.0 * math.log(arg)) + math.sqrt(2.0) / math.sqrt(epsilon)


def streaming_modsulq_omega(epsilon: float, delta: float, d: int, n: int) -> float:
    """Eq. (8) / Lemma 2: ``4d/(eps n) sqrt(2 log(d^2/(delta sqrt(2 pi)))) + sqrt(2)/(sqrt(eps) n)``.

    Std of each i.i.d. entry of FPCA's non-symmetric streaming mask.
    """
    epsilon, delta, d, n = _check(epsilon, delta, d, n)
    return _streaming_numerator(epsilon, delta, d) / n


def min_batch(epsilon: float, delta: float, d: int, omega0: float, *, calibration: str = "modsulq",
              centred: bool = False) -> int:
    """Lemma 2 item 2 for any calibration: the smallest batch ``n`` whose mask std is at most ``omega0``.

    ``"modsulq"``: :func:`modsulq_min_batch` (eq. (8) is ``K/n``).  ``"analytic"``
    and ``"classic"``: the mask is ``sigma_1 Delta_n`` with ``sigma_1`` the
    calibrated sigma at unit sensitivity and ``Delta_n = sqrt(2)/n`` (or the
    centred ``4 (n - 1)/n^2 <= 4/n``), so ``n >= sqrt(2) sigma_1 / omega0``
    (``4 sigma_1 / omega0`` centred) suffices.

    Examples
    --------
    >>> min_batch(2.0, 0.05, 20, 0.01, calibration="analytic") < min_batch(2.0, 0.05, 20, 0.01)
    True
    """
    calibration = check_modsulq_calibration(calibration)
    if calibration == "modsulq":
        if centred:
            raise param_error("calibration", "'analytic' or 'classic' for a centred second moment", calibration)
        return int(modsulq_min_batch(epsilon, delta, d, omega0))
    omega0 = check_positive("omega0", omega0)
    check_int("d", d, minimum=1)
    sigma_1 = calibrate_gaussian(epsilon=epsilon, delta=delta, sensitivity=1.0, calibration=calibration)
    return max(1, math.ceil((4.0 if centred else math.sqrt(2.0)) * sigma_1 / omega0))


def modsulq_min_batch(epsilon: float, delta: float, d: int, omega0: float, *, mode: str = "rigorous") -> int | float:
    """Lemma 2 item 2: the smallest batch ``n`` for which a mask of std ``omega0`` suffices.

    ``rigorous`` (default): since eq. (8) is ``K/n`` with
    ``K = 4d/eps sqrt(2 log(d^2/(delta sqrt(2 pi)))) + sqrt(2/eps)``, the condition
    ``omega(n) <= omega0`` is ``n >= K/omega0``: returns ``ceil(K / omega0)`` (an int).

    ``paper``: the printed ``omega0^{-1} [K]^{-1}`` (a float), which has the
    wrong dimension (it decreases as the privacy requirement tightens) and is
    reproduced only for comparison.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_open_unit("delta", delta)
    d = check_int("d", d, minimum=1)
    omega0 = check_positive("omega0", omega0)
    k = _streaming_numerator(epsilon, delta, d)
    if mode == "paper":
        return 1.0 / (omega0 * k)
    if mode != "rigorous":
        raise param_error("mode", "'rigorous' or 'paper'", mode)
    return max(1, math.ceil(k / omega0))


class ModSulqMechanism:
    """Gaussian mask for the second moment ``X X^T / n`` of ``n`` records with ``||x|| <= 1``.

    Parameters
    ----------
    epsilon : float, > 0
    delta : float, in (0, 1)
    d : int, >= 1
        Dimension.
    n : int, >= 1
        The number of records the released matrix is normalised by: the
        whole dataset for MOD-SuLQ, **the block** for FPCA's streaming mask
        (Lemma 2 is stated for ``X = B``, the block, with ``n = b``).
    mask : {"streaming", "symmetric"}
        ``"streaming"``: i.i.d. entries on a non-symmetric d x d mask drawn in
        d x c column blocks, ``omega`` of eq. (8).  ``"symmetric"``: i.i.d.
        upper triangle, mirrored, ``omega`` of eq. (6) (MOD-SuLQ).
    calibration : {"modsulq", "analytic", "classic"}
        ``"modsulq"`` (default, the paper's eq. (6)/(8)); ``"analytic"``: the
        analytic-Gaussian sigma for the L2 sensitivity; ``"classic"``:
        ``sqrt(2 ln(1.25/delta))/epsilon`` times that sensitivity.
    centred : bool
        The matrix is the second moment of the rows centred on their own mean:
        L2 sensitivity ``4 (n - 1)/n^2`` (:func:`dpdpca.dp.centred_scatter_sensitivity`
        over ``n``) instead of ``sqrt(2)/n``; analytic or classic only.

    Attributes
    ----------
    sigma : float
        Standard deviation of each mask entry (``omega``).
    sensitivity : float
        ``sqrt(2)/n`` (replace-one), or ``4 (n - 1)/n^2`` when centred.
    analytic_sigma : float
        The analytic-Gaussian sigma for that sensitivity.
    achieved_delta : float
        ``delta``, or the larger delta of the Gaussian analysis if ``sigma`` is
        below ``analytic_sigma`` (never observed for eq. (6)/(8) so far).

    Examples
    --------
    >>> m = ModSulqMechanism(epsilon=1.0, delta=0.01, d=20, n=500)
    >>> m.sigma >= m.analytic_sigma
    True
    """

    def __init__(self, *, epsilon: float, delta: float, d: int, n: int, mask: str = "streaming",
                 calibration: str = "modsulq", centred: bool = False) -> None:
        self.epsilon, self.delta, self.d, self.n = _check(epsilon, delta, d, n)
        if mask not in MODSULQ_MASKS:
            raise param_error("mask", "'streaming' or 'symmetric'", mask)
        self.mask, self.calibration = mask, check_modsulq_calibration(calibration)
        self.centred = bool(centred)
        if self.centred and self.calibration == "modsulq":
            raise param_error("calibration", "'analytic' or 'classic' for a centred second moment (eq. (6)/(8) are "
                                             "derived for the uncentred one)", calibration)
        self.sensitivity = (float(centred_scatter_sensitivity(self.n, neighbouring=REPLACE_ONE)) / self.n
                            if self.centred else second_moment_sensitivity(self.n, neighbouring=REPLACE_ONE))
        self.analytic_sigma = calibrate_gaussian(epsilon=self.epsilon, delta=self.delta,
                                                 sensitivity=self.sensitivity)
        if calibration == "analytic":
            self.sigma = self.analytic_sigma
        elif calibration == "classic":
            self.sigma = calibrate_gaussian(epsilon=self.epsilon, delta=self.delta, sensitivity=self.sensitivity,
                                            calibration="classic")
        elif mask == "streaming":
            self.sigma = streaming_modsulq_omega(self.epsilon, self.delta, self.d, self.n)
        else:
            self.sigma = modsulq_omega(self.epsilon, self.delta, self.d, self.n)
        self.achieved_delta = self.delta
        if self.sigma < self.analytic_sigma:
            self.achieved_delta = min(1.0, gaussian_delta(self.epsilon, self.sigma, self.sensitivity) * (1 + 1e-9))

    def sample_block(self, c: int, source: NoiseSource) -> np.ndarray:
        """A (d, c) block of the non-symmetric mask (i.i.d. ``N(0, sigma^2)``)."""
        return source.standard_normal((self.d, check_int("c", c, minimum=1)), scale=self.sigma)

    def sample_symmetric(self, source: NoiseSource) -> np.ndarray:
        """The (d, d) symmetric mask (i.i.d. upper triangle with diagonal, mirrored)."""
        return symmetric_gaussian_matrix(self.d, self.sigma, source)

    def privacy(self, noise_added_by: str, notes: str = "") -> PrivacyReport:
        """The report of one release of ``X X^T / n + N``."""
        eq = "(8)" if self.mask == "streaming" else "(6)"
        if self.calibration == "analytic":
            why = ("analytic Gaussian (Balle & Wang 2018) at L2 sensitivity "
                   + ("4(n-1)/n^2 (block centred on its own mean)" if self.centred else "sqrt(2)/n"))
        elif self.calibration == "classic":
            why = ("classic Gaussian sigma = Delta sqrt(2 ln(1.25/delta))/epsilon at L2 sensitivity "
                   + ("4(n-1)/n^2 (block centred on its own mean)" if self.centred else "sqrt(2)/n")
                   + ("" if self.achieved_delta == self.delta else
                      f"; below the analytic sigma: delta {self.achieved_delta:.3e} really achieved"))
        elif self.achieved_delta == self.delta:
            why = (f"omega of Grammenos et al. 2020 eq. {eq} with n={self.n}; omega >= the analytic-Gaussian sigma "
                   f"{self.analytic_sigma:.4g} for L2 sensitivity sqrt(2)/n, so (epsilon, delta)-DP also follows "
                   "from the Gaussian mechanism (Balle & Wang 2018, Thm 8)")
        else:
            why = (f"omega of eq. {eq} is below the analytic-Gaussian sigma {self.analytic_sigma:.4g}; the Gaussian "
                   f"analysis gives delta {self.achieved_delta:.3e} at this epsilon")
        text = "; ".join(t for t in (why, notes) if t)
        return PrivacyReport(epsilon=self.epsilon, delta=self.achieved_delta, mechanism=f"mod-sulq-{self.mask}",
                             calibration=self.calibration, sensitivity=float(self.sensitivity),
                             neighbouring=REPLACE_ONE, noise_added_by=noise_added_by, sigma=float(self.sigma),
                             sensitivity_mode="rigorous", notes=text)

    def __repr__(self) -> str:
        return (f"ModSulqMechanism(epsilon={self.epsilon}, delta={self.delta}, d={self.d}, n={self.n}, "
                f"mask={self.mask!r}, calibration={self.calibration!r}, sigma={self.sigma:.4g})")


def check_modsulq_calibration(value: Any) -> str:
    """One of :data:`MODSULQ_CALIBRATIONS`, else ParameterError."""
    if value not in MODSULQ_CALIBRATIONS:
        raise param_error("calibration", "one of " + ", ".join(repr(c) for c in MODSULQ_CALIBRATIONS), value)
    return str(value)
