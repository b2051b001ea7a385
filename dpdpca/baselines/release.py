"""The add/remove-one release of the plaintext pipelines: noisy R, v and N, centred afterwards.

Under add/remove-one neighbouring the count N is private, so no party may
divide by its true count or subtract its true mean.  Every plaintext pipeline
that releases a second moment under this relation therefore releases what
the encrypted protocol's add/remove release does (:mod:`dpdpca.dp.release`):

* the *uncentred* pieces of the rows it holds, ``R = sum x x^T`` (its upper
  triangle), ``v = sum x`` and ``N``, each with its own Gaussian noise;
* the noise scales are those of :func:`dpdpca.dp.calibrate_add_remove`, the
  calibration the protocol uses (same split of the budget between R, v and N,
  same calibration rule), computed at the protocol's default fixed-point
  scale (:data:`ADD_REMOVE_FRAC_BITS`), so a plaintext curator carries exactly
  the protocol's noise;
* the party then forms, by post-processing, ``S~ = R~ - v~ v~^T / N~``
  (centred) or ``R~`` (uncentred) and divides by ``N~ = max(N + z, 1)``.

The noise here is continuous (the rows are real numbers: integer noise on a
real statistic would not be DP).  Privacy: with ``sigma_j^2 = c^2 / w_j`` on
block j and per-block sensitivities 1 (``||u(x x^T)|| <= ||x||^2 <= 1``,
``||x|| <= 1``, and 1 for N), the three Gaussians together are one Gaussian
mechanism of whitened sensitivity ``D = 1/c`` and unit noise, whose exact
delta at epsilon is :func:`dpdpca.dp.gaussian_delta` ``(epsilon, 1, D)``
(Balle & Wang 2018, Thm 8).  The protocol's calibration never puts ``c``
below the continuous analytic sigma (it starts its search there), so for
``calibration="analytic"`` that delta is at most the one asked for; for
``"classic"`` the report carries the delta really achieved if larger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdpca.dp import ADD_REMOVE_ONE, AddRemoveCalibration, PrivacyReport, calibrate_add_remove, gaussian_delta
from dpdpca.dp.calibration import check_calibration
from dpdpca.dp.settings import CALIBRATIONS
from dpdpca.linalg import pack_upper, unpack_upper, upper_triangle_size

__all__ = ["ADD_REMOVE_FRAC_BITS", "AddRemoveNoise", "scatter_pieces", "moment_from_pieces"]

#: The protocol's default fixed-point bits: the add/remove calibration is computed at this scale.
ADD_REMOVE_FRAC_BITS = 16
_BLOCKS = ("R", "v", "N")


@dataclass(frozen=True)
class AddRemoveNoise:
    """Gaussian noise for the pieces ``(R, v, N)`` of ``d`` features, and what it promises.

    Build with :meth:`calibrate`.  ``calibration`` is the protocol's
    :class:`~dpdpca.dp.AddRemoveCalibration`.

    Examples
    --------
    >>> noise = AddRemoveNoise.calibrate(epsilon=1.0, delta=1e-5, d=64)
    >>> round(noise.sigma("R"), 2), noise.privacy("curator").neighbouring
    (4.08, 'add/remove-one')
    """

    calibration: AddRemoveCalibration

    @classmethod
    def calibrate(cls, *, epsilon: float, delta: float, d: int, calibration: str = "analytic") -> "AddRemoveNoise":
        """The protocol's add/remove calibration (:func:`dpdpca.dp.calibrate_add_remove`).

        Raises
        ------
        ParameterError
            Bad epsilon, delta, d or a calibration outside ``analytic``, ``classic``.
        """
        check_calibration(calibration, CALIBRATIONS)
        return cls(calibrate_add_remove(epsilon=epsilon, delta=delta, d=d, frac_bits=ADD_REMOVE_FRAC_BITS,
                                        calibration=calibration))

    @property
    def d(self) -> int:
        return self.calibration.d

    def sigma(self, block: str) -> float:
        """Noise std. deviation of ``block`` (``"R"``, ``"v"`` or ``"N"``) in data units."""
        return self.calibration.sigma(block)

    @property
    def whitened_sensitivity(self) -> float:
        """``D = sqrt(sum_j Delta_j^2 / sigma_j^2) = sqrt(2 rho)``."""
        return math.sqrt(2.0 * self.calibration.rho)

    @property
    def achieved_delta(self) -> float:
        """The exact delta of the continuous Gaussian at the requested epsilon (module docstring)."""
        return gaussian_delta(self.calibration.epsilon, 1.0, self.whitened_sensitivity)

    def scales(self) -> np.ndarray:
        """Per-coordinate std. deviations of the piece vector (:func:`scatter_pieces`)."""
        d = self.d
        return np.concatenate([np.full(upper_triangle_size(d), self.sigma("R")), np.full(d, self.sigma("v")),
                               [self.sigma("N")]])

    def draw(self, source: Any) -> np.ndarray:
        """One noise vector for the pieces (independent Gaussians at :meth:`scales`)."""
        scales = self.scales()
        return source.standard_normal(scales.shape[0]) * scales  # type: ignore[no-any-return]

    def privacy(self, noise_added_by: str, *, mechanism: str = "gaussian", notes: str = "",
                joint_factor: float = 1.0) -> PrivacyReport:
        """The report of one release of the pieces with this noise (add/remove-one, rigorous).

        ``joint_factor``: the whitened sensitivity is ``sqrt(joint_factor)`` times
        this noise's (CAPE's releases seen jointly by the aggregator,
        :meth:`dpdpca.dp.CapeNoisePlan.joint_factor`); the delta reported is the
        one really achieved, never below the requested one.
        """
        cal = self.calibration
        achieved = gaussian_delta(cal.epsilon, 1.0, self.whitened_sensitivity * math.sqrt(joint_factor))
        delta = max(cal.delta, achieved)
        split = ", ".join(f"{b} {cal.weights[b]:.3f}" for b in _BLOCKS)
        parts = tuple(PrivacyReport(epsilon=cal.epsilon, delta=delta, mechanism="gaussian",
                                    calibration=cal.calibration, sensitivity=1.0, neighbouring=ADD_REMOVE_ONE,
                                    noise_added_by=noise_added_by, sigma=self.sigma(b), sensitivity_mode="rigorous",
                                    notes=f"block {b}: share {cal.weights[b]:.4f} of the budget")
                      for b in _BLOCKS)
        text = (f"add/remove release: noisy uncentred R (upper triangle), v and N, centred afterwards by "
                f"post-processing, with the protocol's calibration (split {split}; sigma_R={self.sigma('R'):.4g}, "
                f"sigma_v={self.sigma('v'):.4g}, sigma_N={self.sigma('N'):.4g}); continuous Gaussian noise, "
                f"delta of the whitened mechanism {achieved:.3g}")
        return PrivacyReport(epsilon=cal.epsilon, delta=delta, mechanism=mechanism, calibration=cal.calibration,
                             sensitivity=1.0, neighbouring=ADD_REMOVE_ONE, noise_added_by=noise_added_by,
                             sigma=self.sigma("R"), sensitivity_mode="rigorous",
                             notes="; ".join(t for t in (text, notes) if t), parts=parts)


def scatter_pieces(X: np.ndarray) -> np.ndarray:
    """``[u(X^T X), X^T 1, N]``: the upper triangle of R, then v, then the count, as one float vector."""
    return np.concatenate([pack_upper(X.T @ X), X.sum(axis=0), [float(X.shape[0])]])


def moment_from_pieces(pieces: np.ndarray, d: int, *, centred: bool) -> tuple[np.ndarray, float, np.ndarray]:
    """Post-processing of (noisy) pieces: the second moment, the count used and the mean.

    Returns ``(A, n, mean)`` with ``n = max(N~, 1)`` (a true count is never
    below 1), ``mean = v~ / n`` and ``A = (R~ - v~ v~^T / n) / n`` (centred) or
    ``R~ / n``.
    """
    m = upper_triangle_size(d)
    R = unpack_upper(pieces[:m], d)
    v = pieces[m:m + d]
    n = max(1.0, float(pieces[m + d]))
    if centred:
        R = R - np.outer(v, v) / n
    return R / n, n, v / n
