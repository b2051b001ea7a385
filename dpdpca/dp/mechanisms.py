"""Small mechanism classes: Gaussian, discrete Gaussian, Laplace, geometric.

Each class validates epsilon, delta and the sensitivity (keyword-only) in
``__init__``, computes its scale once, and offers ``sample`` / ``randomise``
and ``privacy(noise_added_by)``, which returns the :class:`PrivacyReport` of
one release.  The sensitivity is the caller's: it must come from a
data-independent bound (see :mod:`dpdpca.dp.sensitivity`), never from the data.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpdpca._validation import check_delta, check_int, check_positive, param_error
from dpdpca.dp.calibration import (
    DISCRETE_GAUSSIAN_CALIBRATIONS,
    GAUSSIAN_CALIBRATIONS,
    check_calibration,
    calibrate_discrete_gaussian,
    calibrate_gaussian,
    check_integer_sensitivity,
    check_sensitivity,
    discrete_gaussian_blocks_delta,
    discrete_gaussian_delta,
    gaussian_delta,
)
from dpdpca.dp.discrete import sample_discrete_gaussian, sample_discrete_laplace
from dpdpca.dp.randomness import resolve_source
from dpdpca.dp.report import NEIGHBOURING_RELATIONS, REPLACE_ONE, PrivacyReport
from dpdpca.dp.settings import SENSITIVITY_MODES
from dpdpca.triangle import upper_triangle_size

__all__ = [
    "GaussianMechanism",
    "DiscreteGaussianMechanism",
    "LaplaceMechanism",
    "GeometricMechanism",
    "SENSITIVITY_MODES",
    "check_neighbouring",
    "check_sensitivity_mode",
]

# SENSITIVITY_MODES is defined in dpdpca.dp.settings (imported above) and re-exported here.


def check_neighbouring(neighbouring: str) -> str:
    """``"replace-one"`` or ``"add/remove-one"``, else ParameterError."""
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise param_error("neighbouring", "one of " + ", ".join(repr(r) for r in NEIGHBOURING_RELATIONS),
                          neighbouring)
    return neighbouring


def check_sensitivity_mode(mode: str, name: str = "sensitivity_mode") -> str:
    """``"rigorous"`` or ``"paper"``, else ParameterError."""
    if mode not in SENSITIVITY_MODES:
        raise param_error(name, "'rigorous' or 'paper'", mode)
    return mode


class _Mechanism:
    """Shared report and randomise logic; subclasses set the attributes used here."""

    mechanism = ""
    calibration = "pure"
    epsilon: float
    sensitivity: float | int
    neighbouring: str
    sensitivity_mode: str
    achieved_delta: float = 0.0
    sigma: float | None = None
    scale: float | None = None
    _note = ""

    def _set_relation(self, neighbouring: str, sensitivity_mode: str) -> None:
        self.neighbouring = check_neighbouring(neighbouring)
        self.sensitivity_mode = check_sensitivity_mode(sensitivity_mode)

    def sample(self, size: Any, rng: Any = None) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _randomise_ints(self, values: Any, rng: Any) -> list[int]:
        vals = [check_int("values[i]", v) for v in values]
        return [v + z for v, z in zip(vals, self.sample(len(vals), rng))]

    def _randomise_floats(self, value: Any, rng: Any) -> np.ndarray:
        arr = np.array(value, dtype=np.float64, copy=True)
        return arr + self.sample(arr.shape, rng)

    def privacy(self, noise_added_by: str, notes: str = "") -> PrivacyReport:
        """The :class:`PrivacyReport` of one release with this mechanism (sensitivity in release units)."""
        text = "; ".join(t for t in (self._note, notes) if t)
        return PrivacyReport(epsilon=self.epsilon, delta=self.achieved_delta, mechanism=self.mechanism,
                             calibration=self.calibration, sensitivity=float(self.sensitivity),
                             neighbouring=self.neighbouring, noise_added_by=noise_added_by,
                             sigma=None if self.sigma is None else float(self.sigma),
                             scale=None if self.scale is None else float(self.scale),
                             sensitivity_mode=self.sensitivity_mode, notes=text)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(epsilon={self.epsilon}, delta={self.achieved_delta}, "
                f"sensitivity={self.sensitivity}, calibration={self.calibration!r}, "
                f"sigma={self.sigma}, scale={self.scale})")


class GaussianMechanism(_Mechanism):
    """Float Gaussian noise N(0, sigma^2) calibrated to (epsilon, delta) and an L2 sensitivity.

    Parameters
    ----------
    epsilon : float, > 0
    delta : float, in (0, 1)
    sensitivity : float, >= 0
        L2 sensitivity of the released statistic under ``neighbouring``.
    calibration : {"analytic", "classic"}
        ``"analytic"`` (default, Balle & Wang 2018) or ``"classic"``
        (``sqrt(2 ln(1.25/delta))/epsilon``, the papers' choice, proven only for
        epsilon < 1: for epsilon >= 1 the report carries the larger delta it really
        achieves, with a note).
    neighbouring : {"replace-one", "add/remove-one"}
    sensitivity_mode : {"rigorous", "paper"}
        Recorded in the report: which derivation the sensitivity came from.

    Attributes
    ----------
    sigma : float
        Standard deviation of each noise entry.
    achieved_delta : float
        The delta the report promises (= ``delta`` except classic at epsilon >= 1).

    Notes
    -----
    Float noise is the reproduced papers' mechanism.  Textbook float samplers are not
    exactly DP (Mironov 2012); where integers are released, use
    :class:`DiscreteGaussianMechanism`.

    References
    ----------
    Balle & Wang (2018), Theorem 8; Dwork & Roth (2014), Theorem A.1.

    Examples
    --------
    >>> import numpy as np
    >>> m = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    >>> m.sample(3, rng=np.random.default_rng(0)).shape
    (3,)
    """

    mechanism = "gaussian"
    sigma: float

    def __init__(self, *, epsilon: float, delta: float, sensitivity: float, calibration: str = "analytic",
                 neighbouring: str = REPLACE_ONE, sensitivity_mode: str = "rigorous") -> None:
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_delta("delta", delta)
        self.sensitivity = check_sensitivity(sensitivity)
        self.calibration = check_calibration(calibration, GAUSSIAN_CALIBRATIONS)
        self._set_relation(neighbouring, sensitivity_mode)
        self.sigma = calibrate_gaussian(epsilon=self.epsilon, delta=self.delta, sensitivity=self.sensitivity,
                                        calibration=calibration)
        self.achieved_delta = self.delta
        self._note = ""
        if calibration == "classic" and self.sensitivity > 0 and self.epsilon >= 1.0:
            true_delta = gaussian_delta(self.epsilon, self.sigma, self.sensitivity)
            if true_delta > self.delta:
                self.achieved_delta = min(1.0, true_delta * (1 + 1e-9))
                self._note = (f"classic calibration is proven only for epsilon < 1; at epsilon={self.epsilon} "
                              f"its true delta is {self.achieved_delta:.3e} > requested {self.delta:.3e}")

    @property
    def variance(self) -> float:
        """sigma^2."""
        return self.sigma ** 2

    def sample(self, size: Any, rng: Any = None) -> np.ndarray:
        """Noise array of shape ``size`` (float64)."""
        return resolve_source(rng).standard_normal(size, scale=self.sigma)

    def randomise(self, value: Any, rng: Any = None) -> np.ndarray:
        """``value + noise`` as a new float64 array (the input is not modified)."""
        return self._randomise_floats(value, rng)



class DiscreteGaussianMechanism(_Mechanism):
    """Exact integer noise N_Z(0, sigma^2) for integer statistics (the proxy's noise in Paillier).

    Parameters
    ----------
    epsilon : float, > 0
    delta : float, in (0, 1)
    sensitivity : int, >= 0
        Integer L2 sensitivity, a Python int of any size (e.g. ~60 bits).  A
        float is refused even if integral.
    calibration : {"zcdp", "analytic", "classic"}
        ``"zcdp"`` (default, rigorous for vectors of any length: the
        discrete Gaussian's concentrated-DP bound, additive over coordinates, and CKS
        Corollary 13) or ``"classic"`` (paper-faithful
        ``sigma = D sqrt(2 ln(1.25/delta))/epsilon``; the report then carries the
        provable delta bound if it is larger than the requested one).
        ``"analytic"`` with a ``dimension``: the tighter rounding-coupling bound
        (:func:`dpdpca.dp.calibration.discrete_gaussian_blocks_delta`), 7-8% less
        sigma than zCDP at the protocol's scales; without a ``dimension`` it is a
        synonym of ``"zcdp"`` (the report then says ``"zcdp"``).
    dimension : int or None
        Number of coordinates one release adds noise to (needed by ``"analytic"``).
    neighbouring : {"replace-one", "add/remove-one"}
    sensitivity_mode : {"rigorous", "paper"}

    Attributes
    ----------
    sigma_squared : fractions.Fraction
        Exact parameter of the discrete Gaussian.
    sigma : float
        ``sqrt(sigma_squared)``.
    delta_bound : float
        Provable upper bound on the delta of a release at this sigma (any dimension).
    achieved_delta : float
        The delta the report promises: ``delta`` if ``delta_bound <= delta``.

    References
    ----------
    Canonne, Kamath & Steinke (2020), Algorithm 3, concentrated DP of the discrete
    Gaussian, Corollary 13.

    Examples
    --------
    >>> import numpy as np
    >>> m = DiscreteGaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=2**40)
    >>> all(isinstance(v, int) for v in m.sample(3, rng=np.random.default_rng(0)))
    True
    """

    mechanism = "discrete-gaussian"
    sigma: float

    def __init__(self, *, epsilon: float, delta: float, sensitivity: int, calibration: str = "zcdp",
                 neighbouring: str = REPLACE_ONE, sensitivity_mode: str = "rigorous",
                 dimension: int | None = None) -> None:
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_delta("delta", delta)
        self.sensitivity = check_integer_sensitivity(sensitivity)
        self.dimension = None if dimension is None else check_int("dimension", dimension, minimum=1)
        if calibration == "analytic" and self.dimension is None:
            calibration = "zcdp"
        self.calibration = check_calibration(calibration, DISCRETE_GAUSSIAN_CALIBRATIONS)
        self._set_relation(neighbouring, sensitivity_mode)
        if self.sensitivity == 0:
            raise param_error("sensitivity", "> 0 for the discrete Gaussian (add no noise instead)", sensitivity)
        # huge epsilon: the optimiser's floats overflow (every alpha gives a valid bound, so it only loosens)
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                self.sigma_squared = calibrate_discrete_gaussian(epsilon=self.epsilon, delta=self.delta,
                                                                 sensitivity=self.sensitivity,
                                                                 calibration=self.calibration,
                                                                 dimension=self.dimension)
                self.sigma = math.sqrt(self.sigma_squared) if self.sigma_squared < 2 ** 1000 else float(
                    math.isqrt(int(self.sigma_squared)))
                if self.dimension is None:
                    self.delta_bound = discrete_gaussian_delta(self.epsilon, self.sigma_squared, self.sensitivity)
                else:
                    self.delta_bound = discrete_gaussian_blocks_delta(
                        self.epsilon, [(self.sigma_squared, self.dimension)],
                        Fraction(self.sensitivity) ** 2 / self.sigma_squared)
        except (OverflowError, ZeroDivisionError):
            # e.g. epsilon = 1e155: rho ~ epsilon**2 leaves double precision
            raise param_error("epsilon", "small enough for the calibration to stay in double precision",
                              epsilon) from None
        self.achieved_delta = max(self.delta, self.delta_bound)
        self._note = ""
        if self.achieved_delta > self.delta:
            self._note = (f"classic calibration: provable delta bound {self.achieved_delta:.3e} "
                          f"exceeds requested {self.delta:.3e}")

    @property
    def variance(self) -> Fraction:
        """The parameter sigma^2 (the true variance is below it by < 3e-7 relative for sigma >= 1)."""
        return self.sigma_squared

    def sample(self, size: int, rng: Any = None) -> list[int]:
        """``size`` exact integer noise values (Python ints)."""
        return sample_discrete_gaussian(self.sigma_squared, size, rng)

    def sample_symmetric_upper(self, d: int, rng: Any = None) -> list[int]:
        """Noise for the upper triangle (diagonal included) of a symmetric d x d matrix.

        Row-major order ``(0,0), (0,1), ..., (0,d-1), (1,1), ...``, ``d(d+1)/2`` values.
        The sensitivity must then be the L2 norm of the upper-triangle difference
        vector (never more than the Frobenius norm of the matrix difference).
        """
        d = check_int("d", d, minimum=1)
        return self.sample(upper_triangle_size(d), rng)

    def randomise(self, values: Any, rng: Any = None) -> list[int]:
        """``values + noise`` for a sequence of Python ints (new list)."""
        return self._randomise_ints(values, rng)



class LaplaceMechanism(_Mechanism):
    """Float Laplace noise with scale ``b = sensitivity / epsilon`` (pure epsilon-DP, L1 sensitivity).

    Parameters
    ----------
    epsilon : float, > 0
    sensitivity : float, >= 0
        L1 sensitivity under ``neighbouring``.
    neighbouring, sensitivity_mode : see :class:`GaussianMechanism`.

    References
    ----------
    Dwork, McSherry, Nissim & Smith (2006); Dwork & Roth (2014), Theorem 3.6.
    """

    mechanism = "laplace"
    scale: float

    def __init__(self, *, epsilon: float, sensitivity: float, neighbouring: str = REPLACE_ONE,
                 sensitivity_mode: str = "rigorous") -> None:
        self.epsilon = check_positive("epsilon", epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        self._set_relation(neighbouring, sensitivity_mode)
        self.scale = self.sensitivity / self.epsilon

    @property
    def variance(self) -> float:
        """2 b^2."""
        return 2.0 * self.scale ** 2

    def sample(self, size: Any, rng: Any = None) -> np.ndarray:
        """Noise array of shape ``size``."""
        return resolve_source(rng).laplace(size) * self.scale

    def randomise(self, value: Any, rng: Any = None) -> np.ndarray:
        """``value + noise`` as a new float64 array."""
        return self._randomise_floats(value, rng)



class GeometricMechanism(_Mechanism):
    """Exact integer Laplace (two-sided geometric) noise for integer statistics, pure epsilon-DP.

    ``P[z] proportional to exp(-epsilon |z| / sensitivity)``.  epsilon is a float,
    hence an exact dyadic rational, so the scale ``sensitivity / epsilon`` is an
    exact rational and the sampler (CKS Algorithm 2) is exact.

    Parameters
    ----------
    epsilon : float, > 0
    sensitivity : int, >= 1
        Integer L1 sensitivity.
    neighbouring, sensitivity_mode : see :class:`GaussianMechanism`.

    References
    ----------
    Ghosh, Roughgarden & Sundararajan (2009); Canonne, Kamath & Steinke (2020), Algorithm 2.
    """

    mechanism = "geometric"
    scale: float

    def __init__(self, *, epsilon: float, sensitivity: int, neighbouring: str = REPLACE_ONE,
                 sensitivity_mode: str = "rigorous") -> None:
        self.epsilon = check_positive("epsilon", epsilon)
        self.sensitivity = check_integer_sensitivity(sensitivity)
        if self.sensitivity == 0:
            raise param_error("sensitivity", "> 0 for the geometric mechanism (add no noise instead)", sensitivity)
        self._set_relation(neighbouring, sensitivity_mode)
        self.scale_fraction = Fraction(self.sensitivity) / Fraction(self.epsilon)
        self.scale = float(self.scale_fraction)

    @property
    def variance(self) -> float:
        """``2 e^{-1/b} / (1 - e^{-1/b})^2``."""
        a = math.exp(-1.0 / self.scale)
        return 2.0 * a / (1.0 - a) ** 2

    def sample(self, size: int, rng: Any = None) -> list[int]:
        """``size`` exact integer noise values."""
        return sample_discrete_laplace(self.scale_fraction, size, rng)

    def randomise(self, values: Any, rng: Any = None) -> list[int]:
        """``values + noise`` for a sequence of Python ints."""
        return self._randomise_ints(values, rng)

