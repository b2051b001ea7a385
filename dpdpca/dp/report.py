"""The privacy report every result carries.

A :class:`PrivacyReport` is a frozen value that states exactly what was
promised: ``(epsilon, delta)``, the mechanism and its calibration, the noise
scale, the sensitivity it was calibrated to, the neighbouring relation that
sensitivity holds under, and which party added the noise.  It is computed
separately from the data (OpenDP's separation of the privacy map from the
computation) and asserted in the tests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Mapping

__all__ = ["PrivacyReport", "REPLACE_ONE", "ADD_REMOVE_ONE", "NEIGHBOURING_RELATIONS", "compose_basic", "raise_delta"]

#: Two datasets are neighbours if they have the same size and differ in one row
#: (bounded DP).  The dataset size N is public under this relation.
REPLACE_ONE = "replace-one"
#: Two datasets are neighbours if one is the other with one row added or removed
#: (unbounded DP).  Releasing N exactly is *not* private under this relation.
ADD_REMOVE_ONE = "add/remove-one"
NEIGHBOURING_RELATIONS = (REPLACE_ONE, ADD_REMOVE_ONE)


@dataclass(frozen=True)
class PrivacyReport:
    """What a release promises, as a value.

    Parameters
    ----------
    epsilon, delta : float
        The (epsilon, delta)-DP guarantee of the whole release.  ``delta`` is 0
        for pure DP.
    mechanism : str
        E.g. ``"discrete-gaussian"``, ``"gaussian"``, ``"laplace"``, ``"cape"``,
        ``"composition"`` or ``"none"``.
    calibration : str
        How the scale was chosen, e.g. ``"analytic"`` (Balle & Wang 2018) or
        ``"classic"`` (Dwork & Roth, valid only for epsilon < 1).
    sensitivity : float
        The L2 (or L1 for Laplace) sensitivity the scale was calibrated to.
    neighbouring : str
        ``"replace-one"`` or ``"add/remove-one"``.
    noise_added_by : str
        The party that drew the noise (``"proxy"``, ``"site"``, ...).
    sigma : float or None
        Standard deviation of Gaussian noise, in the units of the released
        statistic.
    scale : float or None
        Scale of Laplace/geometric noise.
    sensitivity_mode : str
        ``"rigorous"`` (our derivation) or ``"paper"`` (the paper's choice).
    notes : str
        Anything else a reader must know (e.g. an extra delta term).
    parts : tuple of PrivacyReport
        The reports composed into this one, if any.
    """

    epsilon: float
    delta: float
    mechanism: str
    calibration: str
    sensitivity: float
    neighbouring: str
    noise_added_by: str
    sigma: float | None = None
    scale: float | None = None
    sensitivity_mode: str = "rigorous"
    notes: str = ""
    parts: tuple["PrivacyReport", ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``parts`` become a list of dicts."""
        out = asdict(self)
        out["parts"] = [p.to_dict() for p in self.parts]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PrivacyReport":
        """Inverse of :meth:`to_dict`."""
        kw = dict(data)
        kw["parts"] = tuple(cls.from_dict(p) for p in kw.get("parts", ()))
        return cls(**kw)

    @classmethod
    def non_private(cls, *, notes: str = "no noise: not differentially private") -> "PrivacyReport":
        """The report of a release with no privacy guarantee (epsilon = inf)."""
        return cls(epsilon=float("inf"), delta=1.0, mechanism="none", calibration="none",
                   sensitivity=0.0, neighbouring=REPLACE_ONE, noise_added_by="nobody", notes=notes)


def compose_basic(reports: Iterable[PrivacyReport], *, notes: str = "") -> PrivacyReport:
    """Basic sequential composition: epsilons and deltas add.

    All parts must share one neighbouring relation; the result lists them in
    ``parts``.
    """
    parts = tuple(reports)
    if not parts:
        raise ValueError("reports must be non-empty, got 0 reports")
    relations = {p.neighbouring for p in parts}
    if len(relations) != 1:
        raise ValueError(f"reports must share one neighbouring relation, got {sorted(relations)}")
    return PrivacyReport(
        epsilon=sum(p.epsilon for p in parts),
        delta=min(1.0, sum(p.delta for p in parts)),
        mechanism="composition",
        calibration="basic",
        sensitivity=max(p.sensitivity for p in parts),
        neighbouring=parts[0].neighbouring,
        noise_added_by=",".join(sorted({p.noise_added_by for p in parts})),
        notes=notes,
        parts=parts,
    )


def raise_delta(report: PrivacyReport, delta: float, *, why: str, claim: str) -> PrivacyReport:
    """``report`` with the larger ``delta`` its release really has, and a note naming the claim it replaces.

    Used where a paper's calibration is kept for reproduction but its claim
    is too small (CAPE's per-release check against the aggregator's joint
    view, the papers' sensitivity ``1/N_s``): the report keeps epsilon, the
    mechanism and the sensitivity the scale was calibrated to, and states the
    delta really achieved.  The note reads ``delta <delta> <why> (<claim>:
    <report.delta>)``.  A ``delta`` not above the report's (to a relative
    1e-6) leaves it unchanged.
    """
    if delta <= report.delta * (1 + 1e-6):
        return report
    note = f"delta {delta:.3e} {why} ({claim}: {report.delta:.3e})"
    return replace(report, delta=min(1.0, delta * (1 + 1e-9)), notes="; ".join(t for t in (report.notes, note) if t))
