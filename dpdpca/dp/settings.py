"""The names of the DP settings every pipeline, command and report uses, defined once.

* Sensitivity modes: :data:`RIGOROUS` (a bound proven for the relation used,
  the default everywhere) and :data:`PAPER` (the value the reproduced paper states,
  for reproduction; see :mod:`dpdpca.dp.sensitivity` for where it falls short).
* Calibrations: :data:`ANALYTIC` (Balle & Wang 2018 for the Gaussian; for the
  discrete Gaussian the zCDP bound of Canonne, Kamath & Steinke 2020, valid in
  any dimension) and :data:`CLASSIC` (``sigma = Delta sqrt(2 ln(1.25/delta)) /
  epsilon``, proven only for epsilon < 1; reports carry the delta it really
  achieves).
* Neighbouring relations, by their option names: :data:`ADD_REMOVE` (the
  default everywhere: one record added or removed, N private) and
  :data:`REPLACE` (one record replaced, N public).  :func:`relation_of` maps
  an option name, or a report's spelling, to the report's spelling
  (:data:`dpdpca.dp.report.ADD_REMOVE_ONE`, :data:`~dpdpca.dp.report.REPLACE_ONE`).

Examples
--------
>>> SENSITIVITY_MODES, CALIBRATIONS, RELATIONS
(('rigorous', 'paper'), ('analytic', 'classic'), ('add-remove', 'replace-one'))
>>> relation_of("add-remove"), relation_of("replace-one")
('add/remove-one', 'replace-one')
"""

from __future__ import annotations

from typing import Any

from dpdpca._validation import param_error
from dpdpca.dp.report import ADD_REMOVE_ONE, REPLACE_ONE

__all__ = ["RIGOROUS", "PAPER", "SENSITIVITY_MODES", "ANALYTIC", "CLASSIC", "CALIBRATIONS",
           "ADD_REMOVE", "REPLACE", "RELATIONS", "relation_of", "relation_option"]

RIGOROUS = "rigorous"
PAPER = "paper"
#: Every sensitivity mode, the default first.
SENSITIVITY_MODES = (RIGOROUS, PAPER)

ANALYTIC = "analytic"
CLASSIC = "classic"
#: Every calibration a user may choose, the default first.
CALIBRATIONS = (ANALYTIC, CLASSIC)

ADD_REMOVE = "add-remove"
REPLACE = "replace-one"
#: Every neighbouring relation a user may choose (``--relation``), the default first.
RELATIONS = (ADD_REMOVE, REPLACE)
_RELATION_OF = {ADD_REMOVE: ADD_REMOVE_ONE, ADD_REMOVE_ONE: ADD_REMOVE_ONE, REPLACE: REPLACE_ONE}


def relation_of(value: Any, name: str = "neighbouring") -> str:
    """The report's spelling of a relation given as an option (``"add-remove"``) or as reported.

    Raises
    ------
    ParameterError
        Not a relation (the message names ``name`` and the choices).
    """
    if not isinstance(value, str) or value not in _RELATION_OF:
        raise param_error(name, "one of " + ", ".join(repr(r) for r in (*RELATIONS, ADD_REMOVE_ONE)), value)
    return _RELATION_OF[value]


def relation_option(value: Any) -> str:
    """The option spelling (``"add-remove"`` or ``"replace-one"``) of a relation in either spelling."""
    return ADD_REMOVE if relation_of(value) == ADD_REMOVE_ONE else REPLACE
