"""The one privacy setting every method of a comparison runs under.

``dpdpca compare`` and ``dpdpca bench utility`` both compare methods
like-for-like: every DP method gets the same neighbouring relation, the same
sensitivity derivation, the same Gaussian calibration, the same row scaling
and the same centring rule, and every result says which it used
(:func:`privacy_summary`).  A method that has no sound form under the setting
is refused, never run under another one (:func:`refusal`).  Two settings:

* **rigorous** (default, also the library's): add/remove-one neighbouring,
  rigorous sensitivity, analytic calibration, public clipping of each row to
  norm 1, and centring paid for inside each release (under add/remove a party
  releases noisy ``R``, ``v``, ``N`` and centres afterwards, as the protocol's
  add/remove release does); ``relation="replace-one"`` moves every method to
  replace-one (the protocol to its centred release);
* **paper** (``paper=True``, ``--paper``): replace-one, the papers'
  sensitivity and classic calibration, scaling by the largest row norm (which
  reads the data, so it is not DP), the exact pooled mean subtracted
  before partitioning (free, not DP), as the papers' experiments do, and
  CAPE's variances as the paper prints them (``cape_variances``: each release
  checked alone; the reports carry the delta really achieved against the
  aggregator's joint view, see :mod:`dpdpca.dp.cape`).

Examples
--------
>>> s = settings_for(paper=False)
>>> s["relation"], s["calibration"], s["sensitivity_mode"], s["scaling"], s["exact_mean"]
('add-remove', 'analytic', 'rigorous', 'clip', False)
>>> settings_for(paper=True)["scaling"], settings_for(paper=True)["relation"]
('max-norm', 'replace-one')
"""

from __future__ import annotations

from typing import Any, Mapping

from dpdpca.dp import ANALYTIC, CLASSIC, PAPER, RIGOROUS
from dpdpca.dp.settings import ADD_REMOVE, REPLACE, relation_of, relation_option
from dpdpca.pipelines import PipelineSpec

__all__ = ["centering_for", "method_options", "noisy_parts", "privacy_summary", "protocol_release", "refusal",
           "settings_for"]

#: The protocol's release under each relation.
_RELEASE_OF = {ADD_REMOVE: "add-remove", REPLACE: "centred"}
#: The relation each release is DP under (the release objects, dpdpca.protocol.releases, say the same).
_RELATION_OF_RELEASE = {release: relation for relation, release in _RELEASE_OF.items()}


def settings_for(*, paper: bool, calibration: str | None = None, sensitivity_mode: str | None = None,
                 scaling: str | None = None, center: bool = True, exact_mean: bool | None = None,
                 relation: str | None = None) -> dict[str, Any]:
    """The one setting every DP method runs under: rigorous by default, the papers' with ``paper``.

    An explicit ``relation``, ``calibration``, ``sensitivity_mode``,
    ``scaling`` or ``exact_mean`` overrides one item, for every method alike.

    Returns
    -------
    dict
        ``paper``, ``relation`` (``"add-remove"`` or ``"replace-one"``),
        ``calibration``, ``sensitivity_mode``, ``cape_variances``
        (``"rigorous"`` or ``"paper"``), ``scaling`` (``"clip"`` or
        ``"max-norm"``), ``center`` and ``exact_mean``.

    Raises
    ------
    ParameterError
        An unknown relation.
    """
    exact = paper if exact_mean is None else bool(exact_mean)
    rel = relation_option(relation) if relation is not None else (REPLACE if paper else ADD_REMOVE)
    return {"paper": bool(paper), "relation": rel,
            "calibration": calibration or (CLASSIC if paper else ANALYTIC),
            "sensitivity_mode": sensitivity_mode or (PAPER if paper else RIGOROUS),
            "cape_variances": PAPER if paper else RIGOROUS,
            "scaling": scaling or ("max-norm" if paper else "clip"),
            "center": bool(center), "exact_mean": bool(center and exact)}


def protocol_release(spec: PipelineSpec, settings: Mapping[str, Any]) -> str:
    """The protocol release a crypto pipeline runs under ``settings`` (its fixed one, else the relation's)."""
    return str(dict(spec.fixed).get("release") or _RELEASE_OF[settings.get("relation", ADD_REMOVE)])


def refusal(spec: PipelineSpec, settings: Mapping[str, Any]) -> str | None:
    """Why ``spec`` cannot run under ``settings`` without changing them, or None.

    A pipeline that fixes its release (``dpdpca-centred``, ``dpdpca-paper``,
    ``dpdpca-distributed``) runs under that release's relation only; a
    private pipeline that does not take one of the setting's options would
    run under something else than the table says.
    """
    if not spec.private:
        return None
    relation = settings.get("relation", ADD_REMOVE)
    if spec.crypto:
        release = protocol_release(spec, settings)
        if release != _RELEASE_OF[relation]:
            return (f"{spec.name} fixes the {release} release "
                    f"({relation_of(_RELATION_OF_RELEASE[release])}); "
                    f"this comparison runs {relation}")
        fixed_mode = dict(spec.fixed).get("sensitivity_mode")
        if fixed_mode is not None and fixed_mode != settings.get("sensitivity_mode"):
            return f"{spec.name} fixes sensitivity mode {fixed_mode}; this comparison runs {settings.get('sensitivity_mode')}"
        if dict(spec.fixed).get("noise_by") == "owners" and settings.get("calibration") not in (None, ANALYTIC):
            # its owners' noise is sized by the distributed discrete Gaussian's RDP accountant, the tightest it has
            return (f"{spec.name} sizes its owners' noise with the distributed discrete Gaussian's RDP accountant "
                    f"(ddg-rdp) and has no {settings.get('calibration')} form")
        return None
    for name in ("calibration", "sensitivity_mode", "neighbouring"):
        if name not in spec.options:
            return f"{spec.name} takes no {name} option, so it cannot run under the comparison's setting"
    return None


def centering_for(spec: PipelineSpec, settings: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The centring option a method gets under ``settings``, and how its report describes it."""
    if spec.crypto:  # the protocol's releases are centred, paying for the mean inside
        return {}, "inside the release (DP)"
    takes = "centering" in spec.options
    if not settings["center"]:
        return ({"centering": "none"} if takes else {}), "none"
    if settings["exact_mean"]:
        return ({"centering": "none"} if takes else {}), "exact pooled mean before partitioning (not DP)"
    if not takes:
        return {}, "none (the method does not centre)"
    if not spec.private:
        return {"centering": "pooled"}, "exact pooled mean (not DP)"
    return {"centering": "site"}, "inside the release (DP)"


def method_options(spec: PipelineSpec, settings: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Every setting option the method takes (relation, calibration, sensitivity mode, CAPE variances, centring).

    Returns the options and the centring text.

    The protocol gets its release for the relation (``release``) where it
    chooses one; the plaintext pipelines get ``neighbouring``.
    """
    opts, centring = centering_for(spec, settings)
    if not spec.private:
        return opts, centring
    if spec.crypto:
        if "release" in spec.options:
            opts["release"] = protocol_release(spec, settings)
    elif "neighbouring" in spec.options:
        opts["neighbouring"] = settings.get("relation", ADD_REMOVE)
    for name in ("calibration", "sensitivity_mode", "cape_variances"):
        if name in spec.options and settings.get(name) is not None:
            opts[name] = settings[name]
    return opts, centring


def noisy_parts(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The parts of a report (as a dict) that state a ``sigma``, depth-first through nested compositions.

    A part without a ``sigma`` of its own (e.g. an FPCA client whose blocks
    of two sizes have two sigmas) is replaced by its own noisy parts.

    Examples
    --------
    >>> [p["sigma"] for p in noisy_parts({"parts": [{"sigma": None, "parts": [{"sigma": 0.2}, {"sigma": 0.3}]},
    ...                                             {"sigma": 0.5}]})]
    [0.2, 0.3, 0.5]
    """
    out: list[Mapping[str, Any]] = []
    for part in report.get("parts") or []:
        if not isinstance(part, Mapping):
            continue
        out.extend([part] if isinstance(part.get("sigma"), (int, float)) else noisy_parts(part))
    return out


def privacy_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """``mechanism``, ``neighbouring``, ``sensitivity_mode``, ``calibration``, ``sigma``, ``sensitivity`` of a report.

    A composed report (one part per site) without a single ``sigma`` gives
    the largest sigma of its parts (:func:`noisy_parts`); fields a method
    does not report are None.

    Examples
    --------
    >>> privacy_summary({"mechanism": "gaussian", "sigma": None, "sensitivity": None,
    ...                  "parts": [{"sigma": 0.5, "sensitivity": 0.1}, {"sigma": 0.7, "sensitivity": 0.1}]})["sigma"]
    0.7
    """
    sigma, sens = report.get("sigma"), report.get("sensitivity")
    if not isinstance(sigma, (int, float)):
        noisy = noisy_parts(report)
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
