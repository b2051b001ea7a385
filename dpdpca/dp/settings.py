"""The names of the DP settings every pipeline, command and report uses, defined once.

* Sensitivity modes: :data:`RIGOROUS` (a bound proven for the relation used,
  the default everywhere) and :data:`PAPER` (the value the reproduced paper states,
  for reproduction; see :mod:`dpdpca.dp.sensitivity` for where it falls short).
* Calibrations: :data:`ANALYTIC` (Balle & Wang 2018 for the Gaussian; for the
  discrete Gaussian the zCDP bound of Canonne, Kamath & Steinke 2020, valid in
  any dimension) and :data:`CLASSIC` (``sigma = Delta sqrt(2 ln(1.25/delta)) /
  epsilon``, proven only for epsilon < 1; reports carry the delta it really
  achieves).

Examples
--------
>>> SENSITIVITY_MODES, CALIBRATIONS
(('rigorous', 'paper'), ('analytic', 'classic'))
"""

from __future__ import annotations

__all__ = ["RIGOROUS", "PAPER", "SENSITIVITY_MODES", "ANALYTIC", "CLASSIC", "CALIBRATIONS"]

RIGOROUS = "rigorous"
PAPER = "paper"
#: Every sensitivity mode, the default first.
SENSITIVITY_MODES = (RIGOROUS, PAPER)

ANALYTIC = "analytic"
CLASSIC = "classic"
#: Every calibration a user may choose, the default first.
CALIBRATIONS = (ANALYTIC, CLASSIC)
