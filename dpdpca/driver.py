"""One driver for every pipeline, encrypted or plaintext.

Every pipeline is registered once, as a :class:`~dpdpca.pipelines.PipelineSpec`
in :data:`dpdpca.pipelines.PIPELINES`; :func:`run` builds its estimator, fits
it on the partitions and returns its :class:`~dpdpca.result.Result`:

    run(name, partitions, *, n_components, epsilon, delta, rng=None, **options) -> Result

:func:`compare` runs several on the same partitions and budget, and scores
each result by its kind (:func:`score`).  Estimator classes are imported only
when first used (the plaintext pipelines never import the crypto stack, and a
pipeline whose module is not there gives a clear error).

``rng=None`` means noise from OS entropy (production).  Experiments pass an
explicit ``numpy.random.Generator``; nothing switches to a seeded source on its
own.

Examples
--------
>>> import numpy as np
>>> from dpdpca.data import partition
>>> X = np.random.default_rng(0).normal(size=(200, 5)) / 5
>>> res = run("nonprivate", partition(X, 2), n_components=2, epsilon=1.0, delta=1e-5)
>>> res.kind, res.components.shape
('subspace', (5, 2))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from dpdpca._validation import check_int, param_error, type_error
from dpdpca.data.preprocessing import check_partitions
from dpdpca.errors import ParameterError, ProtocolError, UnsupportedSettingError
from dpdpca.metrics import captured_energy_ratio, optimal_energy, q_comp, svm_f1
from dpdpca.pipelines import PIPELINES, get_spec, pipeline_names
from dpdpca.result import SUBSPACE, TENSOR_FACTORS, PCAResult, Result, TensorResult

__all__ = ["METHODS", "available_methods", "run", "score", "compare", "budget_check"]

#: The registry itself (name -> :class:`~dpdpca.pipelines.PipelineSpec`), under its older name.
METHODS = PIPELINES

#: Result kind -> the name of the utility :func:`score` reports for it.
SCORES = {SUBSPACE: "captured_energy_ratio", TENSOR_FACTORS: "q_comp"}


def available_methods() -> list[str]:
    """Registered methods whose estimator can be imported right now."""
    return pipeline_names(available=True)


def run(method: str, partitions: Sequence[Any], *, n_components: int | None, epsilon: float, delta: float,
        rng: np.random.Generator | None = None, **options: Any) -> Result:
    """Run one pipeline on ``partitions`` with one privacy budget.

    Parameters
    ----------
    method : str
        A key of :data:`dpdpca.pipelines.PIPELINES`.
    partitions : list of array-like, each of shape (n_s, d)
        One matrix per site (rows are individuals).
    n_components : int, 1 <= k <= d
    epsilon : float > 0
    delta : float in (0, 1)
    rng : numpy.random.Generator or None
        ``None``: noise from OS entropy.  A Generator: reproducible
        experiments only (passed to pipelines that take one; the protocol's
        noise and masks always come from OS entropy).
    **options
        Options the pipeline's spec lists (``PipelineSpec.options``).

    Returns
    -------
    Result
        Of the spec's kind (a :class:`~dpdpca.result.PCAResult` for a
        subspace), with ``method`` set to the registry name.

    Raises
    ------
    ParameterError
        Unknown or unavailable method, an option it does not take, bad
        ``n_components``/budget/options.
    DataError
        Bad partitions (empty site, NaN, mismatched features).
    ProtocolError
        The pipeline produced a result of another kind.
    """
    spec = get_spec(method)
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise type_error("rng", "None or a numpy.random.Generator", type(rng).__name__)
    # Each pipeline validates its inputs itself (one pass each for NaN and norms);
    # here only the container is checked, so the data are not scanned twice.
    if isinstance(partitions, np.ndarray) or not isinstance(partitions, Sequence):
        check_partitions(partitions)  # raises the one-line DataError
    estimator = spec.make(n_components=n_components, epsilon=epsilon, delta=delta, rng=rng, **options)
    result = estimator.fit(list(partitions)).result_
    if not isinstance(result, Result) or result.kind != spec.kind:
        raise ProtocolError(f"method {method!r} must produce a {spec.kind} result, got {type(result).__name__}")
    return result  # type: ignore[no-any-return]


def score(result: Result, *, X: Any = None, center: bool = False, q_optimal: float | None = None,
          truth: Any = None) -> tuple[str, float]:
    """The utility of ``result``, by its kind: ``(name, value)``.

    * subspace: ``("captured_energy_ratio", q/q_o)`` on the rows ``X``
      (:func:`~dpdpca.metrics.captured_energy_ratio`; higher is better);
    * tensor factors: ``("q_comp", error)`` against the true factors
      ``truth`` of shape (k, d) (:func:`~dpdpca.metrics.q_comp`; lower is better).

    Raises
    ------
    ParameterError
        The reference the kind needs (``X`` or ``truth``) is missing.
    """
    if isinstance(result, PCAResult):
        if X is None:
            raise param_error("X", "the evaluation rows for a subspace result", X)
        return SCORES[SUBSPACE], captured_energy_ratio(result, X, center=center, q_optimal=q_optimal)
    if isinstance(result, TensorResult):
        if truth is None:
            raise param_error("truth", "the true factors (k, d) for a tensor-factors result", truth)
        return SCORES[TENSOR_FACTORS], q_comp(result.means, truth)
    raise type_error("result", "a PCAResult or TensorResult", type(result).__name__)


def compare(methods: Sequence[str], partitions: Sequence[Any], *, n_components: int, epsilon: float,
            delta: float, runs: int = 1, rng: np.random.Generator | None = None,
            X_eval: Any = None, center: bool = False,
            method_options: dict[str, dict[str, Any]] | None = None,
            f1_data: tuple[Any, Any, Any, Any] | None = None, truth: Any = None,
            skip: dict[str, str] | None = None,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run several methods on the same partitions and budget; summarise utility.

    Each method runs ``runs`` times (fresh noise each time) and each result is
    scored by its kind (:func:`score`): a subspace by ``q / q_o``
    (:func:`~dpdpca.metrics.captured_energy_ratio`) on ``X_eval`` (default:
    the pooled partitions), tensor factors by ``q_comp`` against ``truth``.
    With ``f1_data = (X_train, y_train, X_test, y_test)`` each subspace run
    also reports the F1 of an RBF SVM trained on the projected training rows
    and scored on the projected test rows (:func:`~dpdpca.metrics.svm_f1`,
    Wang & Chang Fig. 4), as ``"f1"`` (mean) and ``"f1_std"``.
    ``progress``, if given, is called with a label after each run of each
    method (``len(methods) * runs`` calls).

    A method that refuses the setting (:class:`~dpdpca.errors.UnsupportedSettingError`),
    or is named in ``skip`` (name -> reason), gets the row ``{"kind": ...,
    "skipped": reason}`` and is not run under anything else.

    Every private method must release under one neighbouring relation: the
    same (epsilon, delta) under add/remove-one and under replace-one are
    different guarantees.  Pipelines' defaults differ (FPCA has only a
    replace-one form), so a comparison that would mix them is refused after
    the first run that differs; pass ``neighbouring`` in ``method_options``
    (``dpdpca compare --relation`` does it for every method).  The
    (epsilon, delta) each private method really reports may still exceed the
    request (e.g. the papers' calibrations, kept for reproduction): the
    ``"budgets"`` entry (:func:`budget_check`) lists them and flags any that
    differ, and ``dpdpca compare``'s table marks them.

    Returns
    -------
    dict
        ``{"methods": {name: {"kind": result kind, "captured_energy_ratio"
        (subspace) or "q_comp" (tensor factors): mean, "std": sample std (0
        for one run), "ratios" or "values": per run, "privacy": PrivacyReport
        dict, "time_s": mean critical-path seconds, "total_s": mean summed
        seconds, "bytes_sent": bytes of the last run}}, "q_optimal": q_o,
        "n_components": k, "epsilon": ..., "delta": ..., "runs": R,
        "budgets": budget_check(...)}``
    """
    names = list(methods)
    if not names:
        raise param_error("methods", "a non-empty list", names)
    specs = [get_spec(name) for name in names]  # fail before any work if a name is wrong
    for spec in specs:
        spec.load()
    n_runs = check_int("runs", runs, minimum=1)
    parts = check_partitions(partitions)
    X = np.vstack(parts) if X_eval is None else X_eval
    k = check_int("n_components", n_components, minimum=1, maximum=parts[0].shape[1])
    q_o = optimal_energy(X, k, center=center) if any(sp.kind == SUBSPACE for sp in specs) else None
    opts = dict(method_options or {})
    refused = dict(skip or {})
    out: dict[str, Any] = {}
    relation: tuple[str, str] | None = None  # (method, neighbouring) of the first private release
    for spec in specs:
        name = spec.name
        values, crit, total, f1s = [], [], [], []
        result = None
        metric = SCORES[spec.kind]
        if name in refused:
            out[name] = {"kind": spec.kind, "skipped": str(refused[name])}
            continue
        for i in range(n_runs):
            try:
                result = run(name, parts, n_components=k, epsilon=epsilon, delta=delta, rng=rng,
                             **opts.get(name, {}))
            except UnsupportedSettingError as exc:  # no sound form under this setting: shown, never run otherwise
                if i:
                    raise
                out[name] = {"kind": spec.kind, "skipped": str(exc)}
                break
            if math.isfinite(result.privacy.epsilon):
                if relation is None:
                    relation = (name, result.privacy.neighbouring)
                elif result.privacy.neighbouring != relation[1]:
                    raise ParameterError(f"methods of one comparison must release under one neighbouring relation "
                                         f"({relation[0]}: {relation[1]}), got {result.privacy.neighbouring} from "
                                         f"{name}; pass neighbouring in method_options")
            if progress is not None:
                progress(f"{name} run {i + 1}/{n_runs}")
            values.append(score(result, X=X, center=center, q_optimal=q_o, truth=truth)[1])
            if f1_data is not None and isinstance(result, PCAResult):
                f1s.append(svm_f1(result, *f1_data))
            crit.append(result.timings.critical_path_s())
            total.append(result.timings.total_s())
        if name in out:  # skipped on its first run
            continue
        assert result is not None
        out[name] = {
            "kind": spec.kind,
            metric: float(np.mean(values)),
            "std": float(np.std(values, ddof=1)) if n_runs > 1 else 0.0,
            "ratios" if spec.kind == SUBSPACE else "values": [float(r) for r in values],
            "privacy": _json_safe(result.privacy.to_dict()),
            "time_s": float(np.mean(crit)),
            "total_s": float(np.mean(total)),
            "bytes_sent": dict(result.bytes_sent),
        }
        if f1s:
            out[name]["f1"] = float(np.mean(f1s))
            out[name]["f1_std"] = float(np.std(f1s, ddof=1)) if n_runs > 1 else 0.0
    return {"methods": out, "q_optimal": q_o, "n_components": k, "epsilon": float(epsilon),
            "delta": float(delta), "runs": n_runs, "budgets": budget_check(out, epsilon, delta)}


def budget_check(methods: dict[str, Any], epsilon: float, delta: float) -> dict[str, Any]:
    """What (epsilon, delta) each private method of a comparison really reports, against the request.

    A method's report states the guarantee it really has, which can exceed
    the request (a paper-faithful calibration, classic calibration at
    epsilon >= 1, CAPE's paper variances against the aggregator's joint
    view): utilities are then not at one guarantee, and the comparison says
    so rather than mixing them silently.

    Returns
    -------
    dict
        ``{"requested": {"epsilon", "delta"}, "reported": {name: {"epsilon",
        "delta"}}`` (every private method that ran), ``"equal"`` (they all
        report one (epsilon, delta)), ``"off_request"`` (the methods whose
        report is not the request, to a relative 1e-6), ``"note"``.
    """
    def same(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0)

    reported = {}
    for name, row in methods.items():
        p = row.get("privacy") or {}
        if isinstance(p.get("epsilon"), (int, float)) and math.isfinite(p["epsilon"]):
            reported[name] = {"epsilon": float(p["epsilon"]), "delta": float(p["delta"])}
    values = list(reported.values())
    equal = all(same(v["epsilon"], values[0]["epsilon"]) and same(v["delta"], values[0]["delta"]) for v in values)
    off = [name for name, v in reported.items() if not (same(v["epsilon"], epsilon) and same(v["delta"], delta))]
    if not off:
        note = "every private method reports the requested (epsilon, delta)"
    else:
        note = ("reported (epsilon, delta) " + ("differ among the private methods" if not equal else
                                                "differ from the request")
                + ": " + ", ".join(f"{n} ({reported[n]['epsilon']:g}, {reported[n]['delta']:.3g})" for n in off)
                + f" against the requested ({epsilon:g}, {delta:.3g}); each report's notes say why (e.g. a "
                  "paper-faithful calibration); the utilities are "
                + ("not at one guarantee" if not equal else "at one guarantee, not the requested one"))
    return {"requested": {"epsilon": float(epsilon), "delta": float(delta)}, "reported": reported, "equal": equal,
            "off_request": off, "note": note}


def _json_safe(obj: Any) -> Any:
    """Replace infinite floats (a non-private report's epsilon) by strings so JSON stays strict."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "inf" if obj > 0 else ("-inf" if obj < 0 else "nan")
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj
