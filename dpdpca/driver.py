"""One driver for every pipeline, encrypted or plaintext.

Every pipeline is a callable with the common signature::

    fn(partitions: list[ndarray], *, n_components: int, epsilon: float,
       delta: float, rng=None, **options) -> dpdpca.result.PCAResult

registered by name in :data:`METHODS` as ``"module:callable"`` and imported
only when first used (so the plaintext pipelines never import the crypto
stack, and a method whose module is not there yet gives a clear error).

``rng=None`` means noise from OS entropy (production).  Experiments pass an
explicit ``numpy.random.Generator``; nothing switches to a seeded source on its
own.

Examples
--------
>>> import numpy as np
>>> from dpdpca.data import partition
>>> X = np.random.default_rng(0).normal(size=(200, 5)) / 5
>>> res = run("nonprivate", partition(X, 2), n_components=2, epsilon=1.0, delta=1e-5)
>>> res.components.shape
(5, 2)
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.data.preprocessing import check_partitions
from dpdpca.errors import ParameterError, ProtocolError
from dpdpca.metrics import captured_energy_ratio, optimal_energy, svm_f1
from dpdpca.result import PCAResult

__all__ = ["METHODS", "available_methods", "get_method", "run", "compare"]

#: Method name -> ``"module:callable"`` (the pipeline), imported lazily.
METHODS: dict[str, str] = {
    "dpdpca": "dpdpca.protocol.runner:run_pipeline",
    "dpdispca": "dpdpca.baselines.dpdispca:run_dpdispca",
    "dpdispca-full": "dpdpca.baselines.dpdispca:run_dpdispca_full",
    "capepca": "dpdpca.baselines.capepca:run_capepca",
    "conv": "dpdpca.baselines.capepca:run_conv",
    "local": "dpdpca.baselines.dpdispca:run_local",
    "pooled": "dpdpca.baselines.dpdispca:run_pooled",
    "private-local-pca": "dpdpca.baselines.private_local_pca:run_private_local_pca",
    "nonprivate": "dpdpca.baselines.nonprivate:run_nonprivate",
}

Pipeline = Callable[..., PCAResult]


def get_method(method: str) -> Pipeline:
    """The pipeline callable registered under ``method``.

    Raises
    ------
    ParameterError
        Unknown name, or its module cannot be imported yet (the message names
        the module and the import error).
    """
    if method not in METHODS:
        raise param_error("method", f"one of {', '.join(METHODS)}", method)
    module_name, attr = METHODS[method].split(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ParameterError(f"method {method!r} is not available: {METHODS[method]} could not be loaded "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    return fn  # type: ignore[no-any-return]


def available_methods() -> list[str]:
    """Registered methods whose pipeline can be imported right now."""
    names = []
    for name in METHODS:
        try:
            get_method(name)
        except ParameterError:
            continue
        names.append(name)
    return names


def run(method: str, partitions: Sequence[Any], *, n_components: int, epsilon: float, delta: float,
        rng: np.random.Generator | None = None, **options: Any) -> PCAResult:
    """Run one pipeline on ``partitions`` with one privacy budget.

    Parameters
    ----------
    method : str
        A key of :data:`METHODS`.
    partitions : list of array-like, each of shape (n_s, d)
        One matrix per site (rows are individuals).
    n_components : int, 1 <= k <= d
    epsilon : float > 0
    delta : float in (0, 1)
    rng : numpy.random.Generator or None
        ``None``: noise from OS entropy.  A Generator: reproducible
        experiments only.  (Pipelines resolve it with
        :func:`dpdpca.dp.resolve_source`, which refuses integer seeds.)
    **options
        Method-specific options, passed through.

    Returns
    -------
    PCAResult
        With ``method`` set to the registry name.

    Raises
    ------
    ParameterError
        Unknown or unavailable method, bad ``n_components``/budget/options.
    DataError
        Bad partitions (empty site, NaN, mismatched features).
    ProtocolError
        The pipeline returned something that is not a PCAResult.
    """
    fn = get_method(method)
    # Each pipeline validates its inputs itself (one pass each for NaN and norms);
    # here only the container is checked, so the data are not scanned twice.
    if isinstance(partitions, np.ndarray) or not isinstance(partitions, Sequence):
        check_partitions(partitions)  # raises the one-line DataError
    result = fn(list(partitions), n_components=n_components, epsilon=epsilon, delta=delta, rng=rng, **options)
    if not isinstance(result, PCAResult):
        raise ProtocolError(f"method {method!r} must return a PCAResult, got {type(result).__name__}")
    return result


def compare(methods: Sequence[str], partitions: Sequence[Any], *, n_components: int, epsilon: float,
            delta: float, runs: int = 1, rng: np.random.Generator | None = None,
            X_eval: Any = None, center: bool = False,
            method_options: dict[str, dict[str, Any]] | None = None,
            f1_data: tuple[Any, Any, Any, Any] | None = None) -> dict[str, Any]:
    """Run several methods on the same partitions and budget; summarise utility.

    Each method runs ``runs`` times (fresh noise each time).  Utility is
    ``q / q_o`` (:func:`~dpdpca.metrics.captured_energy_ratio`) on ``X_eval``
    (default: the pooled partitions).  With ``f1_data = (X_train, y_train,
    X_test, y_test)`` each run also reports the F1 of an RBF SVM trained on the
    projected training rows and scored on the projected test rows
    (:func:`~dpdpca.metrics.svm_f1`, Wang & Chang Fig. 4), as ``"f1"`` (mean)
    and ``"f1_std"``.

    Returns
    -------
    dict
        ``{"methods": {name: {"captured_energy_ratio": mean, "std": sample std
        (0 for one run), "ratios": [...], "privacy": PrivacyReport dict,
        "time_s": mean critical-path seconds, "total_s": mean summed seconds,
        "bytes_sent": bytes of the last run}}, "q_optimal": q_o,
        "n_components": k, "epsilon": ..., "delta": ..., "runs": R}``
    """
    names = list(methods)
    if not names:
        raise param_error("methods", "a non-empty list", names)
    for name in names:
        get_method(name)  # fail before any work if a name is wrong
    n_runs = check_int("runs", runs, minimum=1)
    parts = check_partitions(partitions)
    X = np.vstack(parts) if X_eval is None else X_eval
    k = check_int("n_components", n_components, minimum=1, maximum=parts[0].shape[1])
    q_o = optimal_energy(X, k, center=center)
    opts = dict(method_options or {})
    out: dict[str, Any] = {}
    for name in names:
        ratios, crit, total, f1s = [], [], [], []
        result = None
        for _ in range(n_runs):
            result = run(name, parts, n_components=k, epsilon=epsilon, delta=delta, rng=rng,
                         **opts.get(name, {}))
            ratios.append(captured_energy_ratio(result, X, center=center, q_optimal=q_o))
            if f1_data is not None:
                f1s.append(svm_f1(result, *f1_data))
            crit.append(result.timings.critical_path_s())
            total.append(result.timings.total_s())
        assert result is not None
        out[name] = {
            "captured_energy_ratio": float(np.mean(ratios)),
            "std": float(np.std(ratios, ddof=1)) if n_runs > 1 else 0.0,
            "ratios": [float(r) for r in ratios],
            "privacy": _json_safe(result.privacy.to_dict()),
            "time_s": float(np.mean(crit)),
            "total_s": float(np.mean(total)),
            "bytes_sent": dict(result.bytes_sent),
        }
        if f1s:
            out[name]["f1"] = float(np.mean(f1s))
            out[name]["f1_std"] = float(np.std(f1s, ddof=1)) if n_runs > 1 else 0.0
    return {"methods": out, "q_optimal": q_o, "n_components": k, "epsilon": float(epsilon),
            "delta": float(delta), "runs": n_runs}


def _json_safe(obj: Any) -> Any:
    """Replace infinite floats (a non-private report's epsilon) by strings so JSON stays strict."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "inf" if obj > 0 else ("-inf" if obj < 0 else "nan")
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj
