"""The one privacy setting every method of a comparison runs under.

``dpdpca compare`` and ``dpdpca bench utility`` both compare methods
like-for-like: every DP method gets the same sensitivity derivation, the same
Gaussian calibration, the same row scaling and the same centring rule, and
every result says which it used (:func:`privacy_summary`).  Two settings:

* **rigorous** (default): rigorous sensitivity, analytic calibration, public
  clipping of each row to norm 1, and centring paid for inside each release
  (a site centres its own rows and its noise covers that; DPDPCA releases the
  centred scatter under encryption);
* **paper** (``paper=True``, ``--paper``): the papers' sensitivity and
  classic calibration, scaling by the largest row norm (which reads the data,
  so it is not DP), and the exact pooled mean subtracted before partitioning
  (free, not DP), as the papers' experiments do.

Examples
--------
>>> s = settings_for(paper=False)
>>> s["calibration"], s["sensitivity_mode"], s["scaling"], s["exact_mean"]
('analytic', 'rigorous', 'clip', False)
>>> settings_for(paper=True)["scaling"]
'max-norm'
"""

from __future__ import annotations

from typing import Any, Mapping

from dpdpca.dp import ANALYTIC, CLASSIC, PAPER, RIGOROUS
from dpdpca.pipelines import PipelineSpec

__all__ = ["settings_for", "centering_for", "method_options", "privacy_summary"]


def settings_for(*, paper: bool, calibration: str | None = None, sensitivity_mode: str | None = None,
                 scaling: str | None = None, center: bool = True, exact_mean: bool | None = None) -> dict[str, Any]:
    """The one setting every DP method runs under: rigorous by default, the papers' with ``paper``.

    An explicit ``calibration``, ``sensitivity_mode``, ``scaling`` or
    ``exact_mean`` overrides one item, for every method alike.

    Returns
    -------
    dict
        ``paper``, ``calibration``, ``sensitivity_mode``, ``scaling``
        (``"clip"`` or ``"max-norm"``), ``center`` and ``exact_mean``.
    """
    exact = paper if exact_mean is None else bool(exact_mean)
    return {"paper": bool(paper),
            "calibration": calibration or (CLASSIC if paper else ANALYTIC),
            "sensitivity_mode": sensitivity_mode or (PAPER if paper else RIGOROUS),
            "scaling": scaling or ("max-norm" if paper else "clip"),
            "center": bool(center), "exact_mean": bool(center and exact)}


def centering_for(spec: PipelineSpec, settings: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The centring option a method gets under ``settings``, and how its report describes it."""
    if spec.crypto:  # the protocol always releases the centred scatter, paying for the mean inside
        return {}, "inside the release (DP)"
    takes = "centering" in spec.options
    if not settings["center"]:
        return ({"centering": "none"} if takes else {}), "none"
    if settings["exact_mean"]:
        return ({"centering": "none"} if takes else {}), "exact pooled mean before partitioning (not DP)"
    if not spec.private:
        return ({"centering": "pooled"} if takes else {}), "exact pooled mean (not DP)"
    return ({"centering": "site"} if takes else {}), "inside the release (DP)"


def method_options(spec: PipelineSpec, settings: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Noise options (for noisy methods that take them) and the centring option; plus the centring text."""
    opts, centring = centering_for(spec, settings)
    if spec.noisy:
        for name in ("calibration", "sensitivity_mode"):
            if name in spec.options and settings.get(name) is not None:
                opts[name] = settings[name]
    return opts, centring


def privacy_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """``mechanism``, ``neighbouring``, ``sensitivity_mode``, ``calibration``, ``sigma``, ``sensitivity`` of a report.

    A composed report (one part per site) without a single ``sigma`` gives
    the largest site's sigma; fields a method does not report are None.

    Examples
    --------
    >>> privacy_summary({"mechanism": "gaussian", "sigma": None, "sensitivity": None,
    ...                  "parts": [{"sigma": 0.5, "sensitivity": 0.1}, {"sigma": 0.7, "sensitivity": 0.1}]})["sigma"]
    0.7
    """
    sigma, sens = report.get("sigma"), report.get("sensitivity")
    parts = [p for p in report.get("parts") or [] if isinstance(p, Mapping)]
    if not isinstance(sigma, (int, float)) and parts:
        noisy = [p for p in parts if isinstance(p.get("sigma"), (int, float))]
        if noisy:
            largest = max(noisy, key=lambda p: p["sigma"])
            sigma = largest["sigma"]
            sens = sens if isinstance(sens, (int, float)) else largest.get("sensitivity")
    if report.get("mechanism") in (None, "none"):  # not DP: no noise, so no calibration or sensitivity to state
        return {"mechanism": report.get("mechanism"), "neighbouring": None, "sensitivity_mode": None,
                "calibration": None, "sigma": None, "sensitivity": None}
    return {"mechanism": report.get("mechanism"), "neighbouring": report.get("neighbouring"),
            "sensitivity_mode": report.get("sensitivity_mode"),
            "calibration": report.get("calibration"),
            "sigma": float(sigma) if isinstance(sigma, (int, float)) else None,
            "sensitivity": float(sens) if isinstance(sens, (int, float)) else None}
