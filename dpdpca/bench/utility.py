"""``dpdpca bench utility [--quick] [--dataset ...] --json --out DIR``: the papers' utility sweeps.

Every registered pipeline whose result is a subspace runs through the common
driver (:func:`dpdpca.driver.run`) on the same partitions and budget; methods
of another result kind are listed under ``skipped_methods`` with the reason.
A pipeline registered later joins without changes here.

Sweeps (the other parameters fixed at :data:`DEFAULTS`), each a panel shaped
like the papers' (Imtiaz & Sarwate, ICASSP 2018, Figs. 1-2; Imtiaz & Sarwate,
JSTSP 2018, Fig. 2):

* ``epsilon``: q/q_o against epsilon;
* ``n_s``: against the samples per site N_s (S fixed);
* ``sites``: against the number of sites S with N = S * N_s fixed;
* ``r_over_k``: against R/K, for the methods that take an intermediate rank
  (``n_intermediate``: DPdisPCA, PrivateLocalPCA);
* ``delta``: against delta.

Also, as in Wang & Chang (DPDPCA, Figs. 4-5): ``f1`` (macro F1 of an RBF SVM
trained on the projected training rows, against samples per owner, K = min(K,
N_s), epsilon = 0.5; labelled datasets only) and ``captured_variance`` (the
fraction of the total variance the released components capture, against
epsilon, from the same runs as the epsilon sweep).  And, as in Grammenos et
al. (Federated PCA, 2020, Fig. 3): ``q_A = |<v_1, v_1_hat>|`` against epsilon
on Synth(alpha), d = 20, N = 5000, delta = 0.05, for several alpha, for every
subspace method (``fpca`` and ``mod-sulq`` among them when registered).

**Like-for-like**, as ``dpdpca compare`` (:mod:`dpdpca.settings`): every DP
method runs under one setting.  Default (rigorous): rigorous sensitivity,
analytic calibration, rows clipped to norm 1 (a public rule), centring paid
for inside each release.  ``--paper``: the papers' sensitivity and classic
calibration, rows scaled by the largest row norm and the exact pooled mean
subtracted before partitioning (neither is DP), as the papers' experiments.
``--calibration`` / ``--sensitivity-mode`` override one item for every
method.  Each method's mechanism, neighbouring relation, calibration,
sensitivity mode, centring and sigma at every point are in the JSON and CSV.

Metric: q/q_o (:func:`dpdpca.metrics.captured_energy_ratio`, second moment
of the rows used, centred), mean and sample std over ``--runs`` runs (10 by
default, as the papers; 3 with ``--quick``).  Encrypted pipelines (DPDPCA) run the real
protocol, which is far slower than the plaintext ones, so they run
``--crypto-runs`` times (default 3; 1 with ``--quick``) with a
``--key-bits`` (default 768, insecure-test) key: the released matrix is the
exact integer ``N*S + G''`` whatever the key size, so utility does not depend
on it.  Each result records the runs it used.

Datasets (``--dataset``, repeatable): ``synthetic`` (D = 200, K = 50, the
papers' zero-mean set; always available; ``--quick``: D = 50, K = 10),
``fashion-mnist`` or ``mnist`` (D = 784, K = 50), ``spambase`` (D = 57, K =
10, the D ~ 54 set) and ``digits`` (bundled, D = 64, K = 10, labelled: the
quick and always-available real set).  A real set that is not installed is
skipped and listed with its install command (``dpdpca datasets`` lists them
all); its utility depends on the values, so no synthetic stand-in is used.

Outputs in ``--out DIR``: ``utility.json`` (every number), ``utility.csv``
(one row per dataset, sweep, x, method), ``results.md`` (tables), and one PNG
per sweep and dataset when matplotlib is installed.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import io
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import click
import numpy as np

from dpdpca import driver, plotting
from dpdpca._io import atomic_write_bytes, atomic_write_json
from dpdpca._validation import param_error
from dpdpca.bench._data import blas_threads_limited
from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.data import load_dataset, make_covariance_data, make_synth_power_law, partition, preprocess
from dpdpca.data.catalog import install_hint
from dpdpca.errors import DataError, DpdpcaError
from dpdpca.metrics import captured_energy_ratio, captured_variance_ratio, optimal_energy, svm_f1
from dpdpca.dp.settings import RELATIONS
from dpdpca.pipelines import PIPELINES, get_spec
from dpdpca.result import PCAResult
from dpdpca.runinfo import run_record
from dpdpca.progress import Progress, quiet_option
from dpdpca.settings import method_options, privacy_summary, refusal, settings_for

__all__ = ["DEFAULTS", "MethodInfo", "registered_methods", "run_utility", "write_outputs", "command"]

#: Fixed parameters of every sweep (the papers do not print all of theirs; these are ours, stated in the output).
DEFAULTS: dict[str, Any] = {"epsilon": 1.0, "delta": 0.01, "sites": 10, "n_s": 1000, "r_over_k": 2.0}

GRIDS: dict[str, list[float]] = {
    "epsilon": [0.1, 0.25, 0.5, 1.0, 2.0, 4.0],
    "n_s": [100, 250, 500, 1000, 2000, 4000],
    "sites": [2, 5, 10, 20, 50],
    "r_over_k": [1.0, 1.5, 2.0, 3.0, 4.0],
    "delta": [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1],
}
GRIDS_QUICK: dict[str, list[float]] = {
    "epsilon": [0.25, 1.0, 4.0],
    "n_s": [50, 150, 450],
    "sites": [2, 5, 10],
    "r_over_k": [1.0, 2.0, 4.0],
    "delta": [1e-5, 1e-3, 1e-1],
}
F1_SAMPLES = [5, 10, 20, 50, 100]
F1_SAMPLES_QUICK = [10, 50]
F1_EPSILON = 0.5
#: Rows of the one training set the F1 panel splits among the owners (the total stays fixed as N_s varies).
F1_TOTAL = 1000
#: Components of the F1 panel: small, so that a random subspace falls well below the principal one.
F1_COMPONENTS = 10
FPCA = {"alphas": [0.5, 1.0, 2.0], "epsilons": [0.1, 0.5, 1.0, 2.0, 4.0], "d": 20, "n": 5000, "delta": 0.05,
        "sites": 10}
FPCA_QUICK = {"alphas": [1.0], "epsilons": [0.5, 2.0], "d": 20, "n": 5000, "delta": 0.05, "sites": 10}

#: Left out of ``--quick`` unless named: the protocol's three other releases (each a full encrypted run per point),
#: the sketch and the non-DP Frequent Directions comparator.  Measured on the quick synthetic set (D = 50, 10
#: sites), CPU seconds per run: sketch 4.7, frequent-directions 1.6, every other plaintext method <= 0.04; with the
#: sketch at one run per point the quick run still took 157 s of CPU, too close to its 3 minutes.
QUICK_LEAVES_OUT = ("dpdpca-centred", "dpdpca-paper", "dpdpca-distributed", "frequent-directions", "sketch")
#: Runs per point of slow methods in ``--quick`` (unless ``--method-runs`` says otherwise).
QUICK_METHOD_RUNS = {"sketch": 1}

_LABELS = {"epsilon": "privacy parameter epsilon", "n_s": "samples per site N_s", "sites": "sites S (N fixed)",
           "r_over_k": "R / K", "delta": "privacy parameter delta"}


@dataclass(frozen=True)
class MethodInfo:
    """What the sweeps need to know about one registered pipeline."""

    name: str
    kind: str = "subspace"
    crypto: bool = False
    options: tuple[str, ...] = ()
    noisy: bool = True


def registered_methods() -> list[MethodInfo]:
    """Every pipeline in the registry (:data:`dpdpca.pipelines.PIPELINES`), with kind, crypto flag and options."""
    return [MethodInfo(name, kind=spec.kind, crypto=spec.crypto, options=tuple(spec.options), noisy=spec.noisy)
            for name, spec in PIPELINES.items()]


@dataclass
class Setup:
    """One dataset prepared for the sweeps."""

    key: str
    X: np.ndarray
    y: np.ndarray | None
    k: int
    info: dict[str, Any]
    defaults: dict[str, Any] = field(default_factory=dict)


def _load_setup(key: str, quick: bool, seed: int, settings: dict[str, Any]) -> Setup:
    """Preprocessed rows (shuffled with ``seed``, scaled and centred by ``settings``) and the papers' K."""
    rng = np.random.default_rng(seed)
    defaults = dict(DEFAULTS)
    if key == "synthetic":
        d, k = (50, 10) if quick else (200, 50)
        grid = GRIDS_QUICK if quick else GRIDS
        n = int(max(max(grid["n_s"]) * defaults["sites"], defaults["n_s"] * defaults["sites"]))
        X = make_covariance_data(n, d, rng=np.random.default_rng(seed))
        info: dict[str, Any] = {"name": "synthetic", "source": f"make_covariance_data({n}, {d}, seed {seed})",
                "note": "the papers' zero-mean synthetic set" + (" at D = 50, K = 10 (--quick)" if quick else "")}
        y = None
    else:
        ds = load_dataset(key)
        X, y = ds.X, ds.y
        k = 50 if X.shape[1] >= 700 else 10
        info = {"name": ds.name, "source": ds.source, "note": "real data"}
    order = rng.permutation(X.shape[0])
    X = preprocess(X[order], centre=settings["exact_mean"], scaling=settings["scaling"])
    y = None if y is None else np.asarray(y)[order]
    n_total = X.shape[0]
    defaults["n_s"] = int(min(defaults["n_s"], n_total // defaults["sites"]))
    if quick:
        defaults["n_s"] = int(min(defaults["n_s"], 300))
    info.update(shape=[int(n_total), int(X.shape[1])], n_components=k)
    return Setup(key, X, y, k, info, defaults)


def _options(m: MethodInfo, args: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The options this method takes: the crypto key, the shared setting (noise, centring), the swept one."""
    opts: dict[str, Any] = {"key_bits": args["key_bits"], "insecure_test_key": args["key_bits"] < 2048} \
        if m.crypto else {}
    opts.update(method_options(get_spec(m.name), args["settings"])[0])
    opts.update(extra)
    return {k: v for k, v in opts.items() if k in m.options}


def _new_row(m: MethodInfo, args: dict[str, Any]) -> dict[str, Any]:
    """One method's entry in a panel: means, stds, and what it ran under (filled point by point)."""
    return {"mean": [], "std": [], "runs": _runs(m, args), "errors": {}, "sigma": [], "mechanism": None,
            "neighbouring": None, "calibration": None, "sensitivity_mode": None,
            "centering": method_options(get_spec(m.name), args["settings"])[1]}


def _append(row: dict[str, Any], values: list[float], error: str | None, x: Any,
            privacy: dict[str, Any] | None) -> None:
    mean, std = _stats(values)
    row["mean"].append(mean)
    row["std"].append(std)
    row["sigma"].append(None if privacy is None else privacy["sigma"])
    if privacy is not None:
        for name in ("mechanism", "neighbouring", "calibration", "sensitivity_mode"):
            row[name] = row[name] or privacy[name]
    if error:
        row["errors"][str(x)] = error


def _runs(m: MethodInfo, args: dict[str, Any]) -> int:
    default = int(args["crypto_runs"] if m.crypto else args["runs"])
    return min(default, int(args["method_runs"].get(m.name, default)))


def _stats(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample std; None where undefined (no run: the method could not run; one run: no std)."""
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else None


def _point(m: MethodInfo, parts: list[np.ndarray], k: int, epsilon: float, delta: float, args: dict[str, Any],
           rng: np.random.Generator, metrics: dict[str, Callable[[Any], float]],
           extra: dict[str, Any] | None = None) -> tuple[dict[str, list[float]], str | None, dict[str, Any] | None]:
    """``runs`` runs of one method at one point: metric name -> values, the error if it could not run, and
    what the last run reported of its privacy (:func:`dpdpca.settings.privacy_summary`)."""
    values: dict[str, list[float]] = {name: [] for name in metrics}
    privacy: dict[str, Any] | None = None
    reason = refusal(get_spec(m.name), args["settings"])
    if reason is not None:
        return values, f"skipped: {reason}", privacy
    for _ in range(_runs(m, args)):
        try:
            result = driver.run(m.name, parts, n_components=k, epsilon=epsilon, delta=delta, rng=rng,
                                **_options(m, args, extra or {}))
        except DpdpcaError as exc:
            return values, str(exc).splitlines()[0], privacy
        if not isinstance(result, PCAResult):  # pragma: no cover - only subspace kinds are chosen
            return values, f"returned a {type(result).__name__}, not a subspace", privacy
        privacy = privacy_summary(result.privacy.to_dict())
        try:
            for name, fn in metrics.items():
                values[name].append(float(fn(result.components)))
        except DpdpcaError as exc:
            return values, str(exc).splitlines()[0], privacy
    return values, None, privacy


def _q(V: Any, *, X: np.ndarray, q_o: float) -> float:
    return captured_energy_ratio(V, X, q_optimal=q_o, center=True)


def _captured_variance(V: Any, *, X: np.ndarray) -> float:
    return captured_variance_ratio(V, X, center=True)


def _f1(V: Any, *, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray) -> float:
    return svm_f1(V, X_train, y_train, X_test, y_test)


def _sweep(setup: Setup, sweep: str, xs: Sequence[float], methods: list[MethodInfo], args: dict[str, Any],
           rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    """One sweep over ``xs``: {"q": {...}, and "captured_variance" for epsilon}."""
    d = setup.X.shape[1]
    k = setup.k
    base = setup.defaults
    q_out: dict[str, Any] = {"x": [], "methods": {}}
    var_out: dict[str, Any] = {"x": [], "methods": {}}
    for x in xs:
        eps, delta, sites, n_s = base["epsilon"], base["delta"], base["sites"], base["n_s"]
        extra: dict[str, Any] = {}
        if sweep == "epsilon":
            eps = float(x)
        elif sweep == "delta":
            delta = float(x)
        elif sweep == "n_s":
            n_s = int(x)
        elif sweep == "sites":
            sites = int(x)
            n_s = base["sites"] * base["n_s"] // sites
        elif sweep == "r_over_k":
            r = int(round(float(x) * k))
            if r > d:
                continue
            extra = {"n_intermediate": r}
        if sites * n_s > setup.X.shape[0] or n_s < 1:
            continue
        X = setup.X[: sites * n_s]
        parts = partition(X, sites)
        q_o = optimal_energy(X, k, center=True)
        metrics: dict[str, Callable[[Any], float]] = {"q": functools.partial(_q, X=X, q_o=q_o)}
        if sweep == "epsilon":
            metrics["captured_variance"] = functools.partial(_captured_variance, X=X)
        q_out["x"].append(float(x))
        var_out["x"].append(float(x))
        for m in methods:
            if sweep == "r_over_k" and "n_intermediate" not in m.options:
                continue
            vals, error, privacy = _point(m, parts, k, eps, delta, args, rng, metrics, extra)
            for out, name in ((q_out, "q"), (var_out, "captured_variance")):
                if name in metrics:
                    _append(out["methods"].setdefault(m.name, _new_row(m, args)), vals[name], error, x, privacy)
    out = {"q": q_out}
    if sweep == "epsilon":
        out["captured_variance"] = var_out
    if sweep == "r_over_k":
        q_out["note"] = "only methods with an intermediate rank R (option n_intermediate)"
    return out


def _f1_sweep(setup: Setup, samples: Sequence[int], methods: list[MethodInfo], args: dict[str, Any],
              rng: np.random.Generator, total: int = F1_TOTAL) -> dict[str, Any]:
    """Wang-Chang Fig. 4 as the paper ran it: one training set of ``total`` rows split among ``L = total / N_s``
    owners, F1 of an RBF SVM on the projected data against the samples per owner ``N_s``.

    ``k`` is fixed and small (:data:`F1_COMPONENTS`) rather than the paper's
    "rank of the data held by each data owner" (``k = N_s``): at ``k = N_s`` up
    to 100 on 784 features a random subspace keeps as much class structure as
    the principal one, and the panel cannot tell methods apart.  A random
    k-dimensional subspace (row ``random-subspace``) and non-private PCA are in
    the same panel, so every method is read between the two.
    """
    assert setup.y is not None
    X, y = setup.X, setup.y
    n_test = min(2000, X.shape[0] // 3)
    X_test, y_test = X[-n_test:], y[-n_test:]
    X_pool, y_pool = X[:-n_test], y[:-n_test]
    n = int(min(total, X_pool.shape[0]))
    X_train, y_train = X_pool[:n], y_pool[:n]
    k = int(min(F1_COMPONENTS, X.shape[1]))
    out: dict[str, Any] = {"x": [], "owners": [], "methods": {}, "epsilon": F1_EPSILON,
                           "delta": setup.defaults["delta"], "train_rows": n, "test_rows": int(n_test),
                           "n_components": k,
                           "design": "one training set of train_rows rows split among L = train_rows / N_s owners "
                                     "(Wang-Chang Fig. 4); k fixed and small so that the subspace matters",
                           "classifier": "sklearn.svm.SVC(kernel='rbf'), macro F1"}
    metrics: dict[str, Callable[[Any], float]] = {
        "f1": functools.partial(_f1, X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test)}
    random_row = {"mean": [], "std": [], "runs": int(args["runs"]), "errors": {}, "sigma": [], "mechanism": "none",
                  "neighbouring": None, "calibration": None, "sensitivity_mode": None,
                  "centering": "a uniformly random k-dimensional subspace (the floor)"}
    for n_s in samples:
        owners = n // int(n_s)
        if owners < 1:
            continue
        parts = partition(X_train[: owners * int(n_s)], owners)
        out["x"].append(int(n_s))
        out["owners"].append(int(owners))
        rand = [metrics["f1"](np.linalg.qr(rng.standard_normal((X.shape[1], k)))[0])
                for _ in range(int(args["runs"]))]
        _append(random_row, rand, None, n_s, None)
        for m in methods:
            vals, error, privacy = _point(m, parts, k, F1_EPSILON, setup.defaults["delta"], args, rng, metrics)
            _append(out["methods"].setdefault(m.name, _new_row(m, args)), vals["f1"], error, n_s, privacy)
    out["methods"]["random-subspace"] = random_row
    return out


def _fpca_sweep(cfg: dict[str, Any], methods: list[MethodInfo], args: dict[str, Any], seed: int,
                rng: np.random.Generator) -> dict[str, Any]:
    """FPCA Fig. 3: q_A = |<v_1, v_1_hat>| against epsilon on Synth(alpha), one panel per alpha.

    FPCA has no sound add/remove form (its blocks shift when a row is added),
    so this panel runs every method under replace-one, whatever the run's
    relation, and says so (``relation``).
    """
    args = dict(args, settings=dict(args["settings"], relation="replace-one"))
    out: dict[str, Any] = {"d": cfg["d"], "n": cfg["n"], "delta": cfg["delta"], "sites": cfg["sites"],
                           "relation": "replace-one",
                           "relation_note": "FPCA has no add/remove-one form: every method of this panel runs "
                                            "under replace-one",
                           "fpca_registered": any(m.name == "fpca" for m in methods), "alphas": {},
                           "scaling": "rows divided by the largest row norm (the FPCA paper's Synth set), the same "
                                      "rows for every method"}
    for alpha in cfg["alphas"]:
        Y = make_synth_power_law(cfg["n"], cfg["d"], alpha, rng=np.random.default_rng(seed))
        Y = Y / float(np.sqrt((Y ** 2).sum(axis=1)).max())  # the papers' scaling by the largest row norm
        v1 = np.linalg.eigh(Y.T @ Y)[1][:, -1]
        parts = partition(Y, cfg["sites"])
        panel: dict[str, Any] = {"x": [float(e) for e in cfg["epsilons"]], "methods": {}}
        def q_a(V: Any, v1: np.ndarray = v1) -> float:  # this alpha's leading direction, bound now
            return abs(float(V[:, 0] @ v1))

        metrics: dict[str, Callable[[Any], float]] = {"q_A": q_a}
        for m in methods:
            row = panel["methods"].setdefault(m.name, _new_row(m, args))
            for eps in cfg["epsilons"]:
                vals, error, privacy = _point(m, parts, 1, float(eps), cfg["delta"], args, rng, metrics)
                _append(row, vals["q_A"], error, eps, privacy)
        out["alphas"][str(alpha)] = panel
    return out


def _select_methods(names: str | None) -> tuple[list[MethodInfo], dict[str, str]]:
    known = registered_methods()
    by_name = {m.name: m for m in known}
    wanted = list(by_name) if names is None else [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown or not wanted:
        raise param_error("--methods", f"a comma-separated subset of {', '.join(by_name)}", names)
    skipped: dict[str, str] = {}
    chosen = []
    available = set(driver.available_methods())
    for name in wanted:
        m = by_name[name]
        if m.kind != "subspace":
            skipped[name] = f"result kind {m.kind!r} has no subspace, so q/q_o does not apply"
            continue
        if name not in available:
            skipped[name] = "its module cannot be imported here"
            continue
        chosen.append(m)
    return chosen, skipped


def _default_datasets(quick: bool) -> list[str]:
    return ["synthetic", "digits"] if quick else ["synthetic", "fashion-mnist", "mnist", "spambase", "digits"]


def run_utility(*, quick: bool = False, datasets: Sequence[str] | None = None, methods: str | None = None,
                runs: int | None = None, crypto_runs: int | None = None, key_bits: int = 768,
                calibration: str | None = None, sensitivity_mode: str | None = None, paper: bool = False,
                method_runs: dict[str, int] | None = None, blas_threads: int | None = None, seed: int = 0,
                sweeps: Sequence[str] | None = None, fpca: bool = True,
                progress: Callable[[str], None] | None = None, relation: str | None = None) -> dict[str, Any]:
    """Run the sweeps; return the JSON-ready dict (see the module docstring).

    ``paper`` selects the papers' setting instead of the rigorous one
    (:func:`dpdpca.settings.settings_for`); ``relation`` (default
    add-remove), ``calibration`` and ``sensitivity_mode`` override one item
    of it, for every method alike.  A method with no sound form under the
    setting records the reason as its error at every point.  ``method_runs`` caps the
    runs per point of named methods (the slow ones, to fit a time budget);
    every panel row records the runs it used.  ``blas_threads`` limits BLAS
    threads (1 suits several sweeps sharing a small machine).
    """
    with blas_threads_limited(blas_threads) as threads:
        out = _run_utility(quick=quick, datasets=datasets, methods=methods, runs=runs, crypto_runs=crypto_runs,
                           key_bits=key_bits, calibration=calibration, sensitivity_mode=sensitivity_mode,
                           paper=paper, method_runs=method_runs, seed=seed, sweeps=sweeps, fpca=fpca,
                           progress=progress, relation=relation)
    out["blas_threads"] = threads
    return out


def _run_utility(*, quick: bool, datasets: Sequence[str] | None, methods: str | None, runs: int | None,
                 crypto_runs: int | None, key_bits: int, calibration: str | None, sensitivity_mode: str | None,
                 paper: bool, method_runs: dict[str, int] | None, seed: int, sweeps: Sequence[str] | None,
                 fpca: bool, progress: Callable[[str], None] | None, relation: str | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    tick = progress or (lambda label: None)
    chosen, skipped = _select_methods(methods)
    settings = settings_for(paper=paper, calibration=calibration, sensitivity_mode=sensitivity_mode,
                            relation=relation)
    caps = dict(method_runs or {})
    if quick and methods is None:  # quick means quick: the slow extras only when named
        for m in [m for m in chosen if m.name in QUICK_LEAVES_OUT]:
            chosen.remove(m)
            skipped[m.name] = "left out of --quick unless named in --methods (slow; see QUICK_LEAVES_OUT)"
    if quick:
        for name, n_runs in QUICK_METHOD_RUNS.items():
            caps.setdefault(name, n_runs)
    args: dict[str, Any] = {"runs": runs if runs is not None else (3 if quick else 10),
            "crypto_runs": crypto_runs if crypto_runs is not None else (1 if quick else 3),
            "key_bits": key_bits, "settings": settings, "method_runs": caps}
    for name in ("runs", "crypto_runs"):
        if not isinstance(args[name], int) or args[name] < 1:
            raise param_error(f"--{name.replace('_', '-')}", ">= 1", args[name])
    known = {m.name for m in registered_methods()}
    for name, value in caps.items():
        if name not in known or not isinstance(value, int) or value < 1:
            raise param_error("--method-runs", "NAME=RUNS with a registered method and RUNS >= 1",
                              f"{name}={value}")
    grids = GRIDS_QUICK if quick else GRIDS
    todo = list(sweeps) if sweeps is not None else list(grids)
    bad = [s for s in todo if s not in grids]
    if bad:
        raise param_error("--sweeps", f"a subset of {', '.join(grids)}", ",".join(bad))
    rng = np.random.default_rng(seed)
    requested = list(datasets) if datasets else _default_datasets(quick)
    out: dict[str, Any] = {"quick": quick, "methods": [m.name for m in chosen], "skipped_methods": skipped,
                           "runs": args["runs"], "crypto_runs": args["crypto_runs"],
                           "method_runs": caps, "crypto_key_bits": key_bits, "settings": settings,
                           "calibration": settings["calibration"], "sensitivity_mode": settings["sensitivity_mode"],
                           "defaults": dict(DEFAULTS),
                           "datasets": {}, "skipped_datasets": {}}
    have_784 = False
    for key in requested:
        if key == "mnist" and have_784 and not datasets:
            continue  # one 784-feature image set is enough by default
        try:
            setup = _load_setup(key, quick, seed, settings)
        except DataError:
            out["skipped_datasets"][key] = f"not installed; install it with: {install_hint(key)}"
            continue
        have_784 = have_784 or setup.X.shape[1] == 784
        entry: dict[str, Any] = {"info": setup.info, "defaults": setup.defaults, "sweeps": {}}
        for sweep in todo:
            tick(f"{key}: {sweep}")
            result = _sweep(setup, sweep, grids[sweep], chosen, args, rng)
            entry["sweeps"][sweep] = result["q"]
            if "captured_variance" in result:
                entry["captured_variance"] = result["captured_variance"]
        if setup.y is not None and importlib.util.find_spec("sklearn") is None:
            entry["f1_skipped"] = "scikit-learn is not installed; install it with: pip install 'dpdpca[bench]'"
        elif setup.y is not None:
            tick(f"{key}: f1")
            entry["f1"] = _f1_sweep(setup, F1_SAMPLES_QUICK if quick else F1_SAMPLES, chosen, args, rng,
                                    total=F1_TOTAL // 2 if quick else F1_TOTAL)
        else:
            entry["f1_skipped"] = "no class labels"
        out["datasets"][key] = entry
    if fpca:
        tick("synth-power-law: q_A")
        out["fpca_q_a"] = _fpca_sweep(FPCA_QUICK if quick else FPCA, chosen, args, seed, rng)
    out["run"] = run_record(seed=seed, started=started)
    return out


def _fmt(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "—"
    return f"{mean:.3f}" if std is None else f"{mean:.3f} ± {std:.3f}"


def _table(title: str, panel: dict[str, Any], xname: str) -> list[str]:
    xs = panel["x"]
    if not panel["methods"]:  # e.g. R/K when no method of the run has an intermediate rank
        return [f"#### {title}", "", f"No method of this run: {panel.get('note', 'none applies')}.", ""]
    lines = [f"#### {title}", "", "| method (runs) | " + " | ".join(f"{xname}={x:g}" for x in xs) + " |",
             "|---|" + "---|" * len(xs)]
    for name, row in panel["methods"].items():
        cells = [_fmt(m, s) for m, s in zip(row["mean"], row["std"])]
        lines.append(f"| {name} ({row['runs']}) | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _f1_separation(panel: dict[str, Any]) -> str:
    """One sentence: where the F1 panel separates non-private PCA from a random subspace (by 0.05), and where not."""
    if "random-subspace" not in panel["methods"] or "nonprivate" not in panel["methods"]:
        return "The panel has no non-private or random-subspace row to read the methods against."
    ref, rand = panel["methods"]["nonprivate"]["mean"], panel["methods"]["random-subspace"]["mean"]
    head = (f"One training set of {panel.get('train_rows', '?')} rows split among L = {panel.get('train_rows', '?')}"
            f" / N_s owners, k = {panel.get('n_components', '?')} components. ")
    not_sep = [x for x, a, b in zip(panel["x"], ref, rand) if a is None or b is None or a - b < 0.05]
    if not not_sep:
        return head + ("Non-private PCA is above the random subspace by at least 0.05 at every N_s, so the panel "
                       "can tell a good subspace from a random one.")
    return head + ("The panel does NOT separate non-private PCA from a random subspace (by 0.05 F1) at N_s = "
                   + ", ".join(str(x) for x in not_sep) + ": there it cannot tell the methods apart.")


def _setting_line(st: dict[str, Any]) -> str:
    mode = "the papers' setting (--paper)" if st["paper"] else "rigorous (the default)"
    return (f"Every DP method under one setting, {mode}: relation {st.get('relation', '-')}, "
            f"sensitivity {st['sensitivity_mode']}, calibration "
            f"{st['calibration']}, scaling {st['scaling']}, "
            + ("exact pooled mean subtracted before partitioning (not DP)." if st["exact_mean"]
               else "centring inside each release (DP)."))


def _methods_table(panel: dict[str, Any]) -> list[str]:
    """What each method ran under, from one panel: mechanism, calibration, sensitivity mode, centring, sigma."""
    lines = ["| method | mechanism | neighbouring | calibration | sensitivity mode | centring | σ over the panel |",
             "|---|---|---|---|---|---|---|"]
    for name, row in panel["methods"].items():
        sig = [v for v in row.get("sigma", []) if v is not None]
        sig_text = "—" if not sig else f"{min(sig):.3g}" if min(sig) == max(sig) else f"{min(sig):.3g} – {max(sig):.3g}"
        dp = row.get("mechanism") not in (None, "none")  # a non-DP method has no calibration or sensitivity
        lines.append(f"| {name} | {row.get('mechanism') or '—'} | {dp and row.get('neighbouring') or '—'} | "
                     f"{dp and row.get('calibration') or '—'} | "
                     f"{dp and row.get('sensitivity_mode') or '—'} | {row.get('centering', '—')} | {sig_text} |")
    return lines + [""]


def results_markdown(result: dict[str, Any]) -> str:
    """The generated ``results.md``: one table per sweep and dataset, mean ± std."""
    run = result["run"]
    lines = ["# Utility sweeps", "",
             f"Generated by `{run['command']}` on {run['finished_utc']} ({run['machine']['cpu_count']} cores, "
             f"{run['wall_s']:.0f} s, seed {run['seed']}, dpdpca {run['versions']['dpdpca']}).", "",
             f"Defaults: {', '.join(f'{k}={v}' for k, v in result['defaults'].items())}; runs per point "
             f"{result['runs']} (encrypted pipelines {result['crypto_runs']}, {result['crypto_key_bits']}-bit key"
             + "".join(f"; {n} {r}" for n, r in result.get("method_runs", {}).items()) + ").", "",
             _setting_line(result["settings"]), ""]
    for name, reason in result["skipped_methods"].items():
        lines.append(f"* method `{name}` skipped: {reason}")
    for name, reason in result["skipped_datasets"].items():
        lines.append(f"* dataset `{name}` skipped: {reason}")
    lines.append("")
    for key, entry in result["datasets"].items():
        info = entry["info"]
        lines += [f"## {key} ({info['shape'][0]} x {info['shape'][1]}, K = {info['n_components']})", "",
                  f"{info['note']}; {info['source']}.", ""]
        if "epsilon" in entry["sweeps"]:
            lines += ["#### methods as run (epsilon sweep)", ""] + _methods_table(entry["sweeps"]["epsilon"])
        for sweep, panel in entry["sweeps"].items():
            lines += _table(f"q/q_o against {_LABELS[sweep]}", panel, {"epsilon": "ε", "delta": "δ", "n_s": "N_s",
                                                                        "sites": "S", "r_over_k": "R/K"}[sweep])
        if "captured_variance" in entry:
            lines += _table("captured variance against epsilon (Wang–Chang Fig. 5)", entry["captured_variance"], "ε")
        if "f1" in entry:
            lines += _table(f"F1 against samples per owner, ε = {entry['f1']['epsilon']} (Wang–Chang Fig. 4)",
                            entry["f1"], "N_s")
            lines += [_f1_separation(entry["f1"]), ""]
    if "fpca_q_a" in result:
        f = result["fpca_q_a"]
        lines += [f"## FPCA q_A on Synth(α) (d = {f['d']}, N = {f['n']}, δ = {f['delta']})", ""]
        if f.get("relation_note"):
            lines += [f["relation_note"] + ".", ""]
        for alpha, panel in f["alphas"].items():
            lines += _table(f"q_A against ε, α = {alpha}", panel, "ε")
    return "\n".join(lines) + "\n"


def _csv(result: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["dataset", "panel", "x", "method", "mean", "std", "runs", "mechanism", "neighbouring", "calibration",
                "sensitivity_mode", "centering", "sigma"])

    def rows(dataset: str, panel_name: str, panel: dict[str, Any]) -> None:
        for name, row in panel["methods"].items():
            sigmas = row.get("sigma") or [None] * len(panel["x"])
            for x, m, s, sig in zip(panel["x"], row["mean"], row["std"], sigmas):
                w.writerow([dataset, panel_name, x, name, m, s, row["runs"], row.get("mechanism"),
                            row.get("neighbouring"), row.get("calibration"), row.get("sensitivity_mode"), row.get("centering"), sig])

    for key, entry in result["datasets"].items():
        for sweep, panel in entry["sweeps"].items():
            rows(key, f"q/q_o vs {sweep}", panel)
        if "captured_variance" in entry:
            rows(key, "captured_variance vs epsilon", entry["captured_variance"])
        if "f1" in entry:
            rows(key, "f1 vs n_s", entry["f1"])
    for alpha, panel in result.get("fpca_q_a", {}).get("alphas", {}).items():
        rows(f"synth-power-law alpha={alpha}", "q_A vs epsilon", panel)
    return buf.getvalue()


def _series(panel: dict[str, Any]) -> dict[str, tuple[list[float], list[float]]]:
    """Means and stds with None (not run / one run) as NaN: no point, or no error bar."""
    def nan(v: list[float | None]) -> list[float]:
        return [math.nan if x is None else float(x) for x in v]

    return {name: (nan(row["mean"]), nan(row["std"])) for name, row in panel["methods"].items()}


def write_outputs(result: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[str]:
    """``utility.json``, ``utility.csv``, ``results.md`` and the PNGs in ``out_dir``; returns notes."""
    out = Path(out_dir)
    atomic_write_json(out / "utility.json", result)
    atomic_write_bytes(out / "utility.csv", _csv(result).encode())
    atomic_write_bytes(out / "results.md", results_markdown(result).encode())
    notes = [f"wrote {out / n}" for n in ("utility.json", "utility.csv", "results.md")]
    if not plotting.available():
        return notes + [plotting.NO_MATPLOTLIB]
    for key, entry in result["datasets"].items():
        info = entry["info"]
        head = f"{key} ({info['shape'][0]} x {info['shape'][1]}, K={info['n_components']})"
        for sweep, panel in entry["sweeps"].items():
            if not panel["x"] or not panel["methods"]:  # nothing to draw: no empty axes
                continue
            path = plotting.line_plot(out / f"{key}_{sweep}.png", panel["x"], _series(panel), xlabel=_LABELS[sweep],
                                      ylabel="q / q_o", title=f"{head}: q/q_o vs {_LABELS[sweep]}",
                                      logx=sweep in ("epsilon", "delta", "n_s", "sites"))
            notes.append(f"wrote {path}")
        if "captured_variance" in entry and entry["captured_variance"]["x"]:
            path = plotting.line_plot(out / f"{key}_captured_variance.png", entry["captured_variance"]["x"],
                                      _series(entry["captured_variance"]), xlabel=_LABELS["epsilon"],
                                      ylabel="captured variance ratio", title=f"{head}: captured variance vs epsilon",
                                      logx=True)
            notes.append(f"wrote {path}")
        if "f1" in entry and entry["f1"]["x"]:
            path = plotting.line_plot(out / f"{key}_f1.png", entry["f1"]["x"], _series(entry["f1"]),
                                      xlabel="samples per owner N_s", ylabel="F1 score (macro)", logx=True,
                                      title=f"{head}: SVM F1 vs samples per owner, eps={entry['f1']['epsilon']}")
            notes.append(f"wrote {path}")
    f = result.get("fpca_q_a")
    if f:
        for alpha, panel in f["alphas"].items():
            path = plotting.line_plot(out / f"synth_alpha{alpha}_q_a.png", panel["x"], _series(panel),
                                      xlabel=_LABELS["epsilon"], ylabel="q_A = |<v1, v1_hat>|", ylim=(0, 1.05),
                                      title=f"Synth(alpha={alpha}), d={f['d']}, N={f['n']}, delta={f['delta']}: q_A")
            notes.append(f"wrote {path}")
    return notes


def _parse_method_runs(text: str | None) -> dict[str, int]:
    """``"sketch=2,fpca=3"`` -> ``{"sketch": 2, "fpca": 3}``."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = int(value)
        except ValueError:
            raise param_error("--method-runs", "NAME=RUNS,... with integer RUNS", text) from None
        if not sep:  # pragma: no cover - int("") already failed
            raise param_error("--method-runs", "NAME=RUNS,...", text)
    return out


@click.command("utility")
@click.option("--quick", is_flag=True,
              help="Fewer points and runs, synthetic D=50 and digits, without the protocol's three other releases, "
                   "the sketch and frequent-directions unless named in --methods (the sketch then at 1 run).")
@click.option("--dataset", "datasets", multiple=True,
              type=click.Choice(["synthetic", "fashion-mnist", "mnist", "spambase", "digits", "sylva"]),
              help="Repeatable (default: synthetic, an image set, spambase, digits; --quick: synthetic, digits).")
@click.option("--methods", default=None, help="Comma-separated subset of the registered methods (default: all).")
@click.option("--sweeps", default=None, help="Comma-separated subset of epsilon,n_s,sites,r_over_k,delta.")
@click.option("--runs", type=int, default=None, help="Runs per point (default 10; --quick 3).")
@click.option("--crypto-runs", type=int, default=None, help="Runs per point of encrypted pipelines (default 3; "
              "--quick 1).")
@click.option("--key-bits", type=click.IntRange(max=MAX_KEY_BITS), default=768, show_default=True,
              help=f"Paillier key of encrypted pipelines (utility does not depend on it; at most {MAX_KEY_BITS}).")
@click.option("--paper", is_flag=True,
              help="Every method under the papers' settings, for reproduction: replace-one, paper sensitivity, "
                   "classic calibration, max-norm scaling, exact pooled mean (not DP). Default: add/remove-one, "
                   "rigorous sensitivity, analytic calibration, public clipping, centring paid in DP (as 'dpdpca "
                   "compare').")
@click.option("--calibration", type=click.Choice(["classic", "analytic"]), default=None,
              help="For every DP method (default: analytic; classic with --paper).")
@click.option("--relation", type=click.Choice(RELATIONS), default=None,
              help="Neighbouring relation for every method (default: add-remove; replace-one with --paper). A method "
                   "with no sound form under it is recorded as skipped, with the reason.")
@click.option("--sensitivity-mode", type=click.Choice(["paper", "rigorous"]), default=None,
              help="For every DP method (default: rigorous; paper with --paper).")
@click.option("--method-runs", default=None, metavar="NAME=RUNS,...",
              help="Cap the runs per point of named (slow) methods, e.g. sketch=2,fpca=2.")
@click.option("--blas-threads", type=click.IntRange(min=1), default=None,
              help="Limit BLAS threads (default: the library's own; 1 when several runs share a machine).")
@click.option("--no-fpca", is_flag=True, help="Skip the Synth(alpha) q_A panel.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Shuffling, generators and noise (experiments).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write utility.json, utility.csv, results.md and PNGs here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(quick: bool, datasets: tuple[str, ...], methods: str | None, sweeps: str | None, runs: int | None,
            crypto_runs: int | None, key_bits: int, paper: bool, calibration: str | None,
            sensitivity_mode: str | None, method_runs: str | None, blas_threads: int | None, no_fpca: bool, seed: int,
            out_dir: str | None, as_json: bool, relation: str | None, quiet: bool) -> None:
    """q/q_o of every registered method against epsilon, N_s, S, R/K, delta; F1; captured variance; FPCA q_A."""
    with Progress("bench utility", quiet=quiet) as progress:
        result = run_utility(quick=quick, datasets=list(datasets) or None, methods=methods, runs=runs,
                             crypto_runs=crypto_runs, key_bits=key_bits, calibration=calibration,
                             sensitivity_mode=sensitivity_mode, paper=paper,
                             method_runs=_parse_method_runs(method_runs), blas_threads=blas_threads, seed=seed,
                             sweeps=None if sweeps is None else [s.strip() for s in sweeps.split(",") if s.strip()],
                             fpca=not no_fpca, progress=progress, relation=relation)
    notes = write_outputs(result, out_dir) if out_dir is not None else []
    click.echo(json.dumps(result, sort_keys=True) if as_json else results_markdown(result))
    for note in notes:
        click.echo(note, err=True)
