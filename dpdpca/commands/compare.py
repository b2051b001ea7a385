"""``dpdpca compare``: every registered method on the same partitions and budget.

Example::

    dpdpca compare --dataset digits --sites 10 --components 10 --epsilon 1 \\
        --delta 1e-5 --methods capepca,conv,local --runs 5 --json

With no options it takes ``run``'s defaults (digits, 5 sites, K = 5,
epsilon = 1, delta = 1e-5) and every available method under the rigorous
setting: add/remove-one, rigorous sensitivity, analytic calibration
(:func:`dpdpca.settings.settings_for`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable, Mapping

import click
import numpy as np

from dpdpca._io import ReservedOutput
from dpdpca._validation import (MAX_EPSILON, MAX_RUNS, MIN_EPSILON, check_delta, check_epsilon, check_int,
                                check_open_unit, param_error)
from dpdpca.data import SCALINGS, dataset_names, load_dataset, load_file, partition, preprocess
from dpdpca.commands.privacy_options import apply_feature_bounds, ledger_options, open_ledger
from dpdpca.dp.accountant import BudgetExceededError
from dpdpca.driver import compare
from dpdpca.errors import ParameterError
from dpdpca.dp import CALIBRATIONS, SENSITIVITY_MODES
from dpdpca.dp.settings import RELATIONS
from dpdpca.pipelines import PIPELINES, get_spec, pipeline_names
from dpdpca.progress import Progress, quiet_option
from dpdpca.result import SUBSPACE
from dpdpca.settings import method_options as setting_options, noisy_parts, protocol_release, refusal, settings_for

__all__ = ["compare_cmd", "run_compare", "settings_for", "format_table"]


#: ``run``'s defaults, which ``compare`` shares.
DEFAULT_DATASET, DEFAULT_SITES, DEFAULT_COMPONENTS, DEFAULT_EPSILON, DEFAULT_DELTA = "digits", 5, 5, 1.0, 1e-5


def run_compare(*, dataset: str | None = None, data: str | None = None, sites: int = DEFAULT_SITES,
                components: int = DEFAULT_COMPONENTS, epsilon: float = DEFAULT_EPSILON,
                delta: float = DEFAULT_DELTA, methods: str | None = None, runs: int = 1, seed: int | None = None,
                site_size: int | None = None, center: bool = True, scaling: str | None = None,
                calibration: str | None = None, sensitivity_mode: str | None = None, paper: bool = False,
                exact_mean: bool | None = None, f1_test_fraction: float | None = None, f1_max_train: int = 5000,
                method_options: dict[str, dict[str, Any]] | None = None, feature_bounds: Any = None,
                feature_bounds_file: str | None = None, ledger: Any = None,
                relation: str | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """What ``dpdpca compare`` computes, as a JSON-ready dict (see :func:`dpdpca.driver.compare`).

    Every DP method runs under one setting (:func:`settings_for`; ``relation``
    ``"add-remove"`` by default, ``"replace-one"`` moves every method); each
    row says which (``privacy``: relation, sensitivity mode, calibration,
    sigma; ``centering``).  A method with no sound form under the setting is
    a row ``{"skipped": reason}``.  Without ``dataset`` and ``data``: digits.
    ``method_options`` adds library-level options per method (e.g. a small
    test key for ``dpdpca``).  With ``feature_bounds`` (``(lo, hi)``) or
    ``feature_bounds_file`` the rows are mapped into the unit ball by those
    public bounds (:func:`dpdpca.data.scale_by_bounds`) instead of the
    scaling.  With a ``ledger`` (:class:`dpdpca.dp.PrivacyLedger`) every run
    of every private method is priced first (:func:`_price`; refused past the
    budget before anything runs; each plaintext method then runs once more,
    on rows of zeros, for its price) and recorded afterwards.  ``progress`` is called after
    each run of each method.

    Raises
    ------
    ParameterError, DataError
        Bad options or data.
    """
    # the budget every method shares and the repetitions first, before any data are read or any method priced
    # (delta < 1/N once N is known, below)
    check_epsilon("--epsilon", epsilon)
    check_delta("--delta", delta)
    runs = check_int("--runs", runs, minimum=1, maximum=MAX_RUNS)
    if dataset is None and data is None:
        dataset = DEFAULT_DATASET
    if dataset is not None and data is not None:
        raise ParameterError(f"--dataset and --data are exclusive, got both ({dataset!r} and {data!r})")
    labels = None
    if dataset is not None:
        ds = load_dataset(dataset)
        X_raw, name, source, labels = ds.X, ds.name, ds.source, ds.y
    else:
        assert data is not None
        X_raw, name, source = load_file(data), "file", str(data)
    names = (pipeline_names(kind=SUBSPACE, available=True) if methods is None
             else [m.strip() for m in methods.split(",") if m.strip()])
    if not names:
        raise param_error("--methods", "a comma-separated list of methods", methods)
    for m in names:
        if get_spec(m).kind != SUBSPACE:
            raise param_error("--methods", "subspace pipelines (tensor pipelines run with 'dpdpca tensor')", m)
    specs = {m: get_spec(m) for m in names}
    settings = settings_for(paper=paper, calibration=calibration, sensitivity_mode=sensitivity_mode,
                            scaling=scaling, center=center, exact_mean=exact_mean, relation=relation)
    X, bounds_info = apply_feature_bounds(X_raw, dataset_bounds=None, feature_bounds=feature_bounds,
                                          bounds_file=feature_bounds_file, no_feature_bounds=False)
    if bounds_info is None:
        X = preprocess(X_raw, centre=settings["exact_mean"], scaling=settings["scaling"])
    rng = None if seed is None else np.random.default_rng(seed)
    f1_data = None
    if f1_test_fraction is None:
        parts = partition(X, sites, sizes=site_size, rng=rng)
    else:
        # hold out test rows (never seen by any pipeline); the rows stay aligned with their labels
        X, y_train, X_test, y_test = _f1_split(X, labels, f1_test_fraction, rng)
        parts = partition(X, sites, sizes=site_size)
        cap = min(sum(p.shape[0] for p in parts), check_int("f1_max_train", f1_max_train, minimum=1))
        f1_data = (np.vstack(parts)[:cap], y_train[:cap], X_test, y_test)
    options: dict[str, dict[str, Any]] = {}
    centring: dict[str, str] = {}
    skip: dict[str, str] = {}
    for m, spec in specs.items():
        opts, centring[m] = setting_options(spec, settings)
        options[m] = {**opts, **dict((method_options or {}).get(m, {}))}
        reason = refusal(spec, settings)
        if reason is not None:
            skip[m] = reason
    run_names = [m for m in names if m not in skip]
    n_rows = sum(p.shape[0] for p in parts)
    check_delta("--delta", delta, n_rows=n_rows)  # as dpdpca run: N is known here, delta must be < 1/N
    costs: list[Any] = []
    if ledger is not None:
        costs = _price(run_names, runs, epsilon=epsilon, delta=delta, d=X.shape[1], n=n_rows, sites=sites,
                       settings=settings, label=name, shapes=[p.shape for p in parts], n_components=components,
                       options=options)
        ledger.check_all(costs)  # refused before any method runs
    summary = compare(names, parts, n_components=components, epsilon=epsilon, delta=delta, runs=runs, rng=rng,
                      X_eval=np.vstack(parts), center=settings["center"], method_options=options,
                      f1_data=f1_data, skip=skip, progress=progress)
    for m, row in summary["methods"].items():
        row["centering"] = centring[m]
    if ledger is not None and any("skipped" in summary["methods"][m] for m in run_names):
        ran = {m for m in run_names if "skipped" not in summary["methods"][m]}
        costs = [c for c in costs if c.label.rsplit(" ", 1)[-1] in ran]
    summary["settings"] = settings
    summary["dataset"] = {"name": name, "source": source, "shape": list(X_raw.shape),
                          "rows_used": int(sum(p.shape[0] for p in parts)), "sites": len(parts),
                          "site_sizes": [int(p.shape[0]) for p in parts]}
    notes = [f"{settings['scaling']} scaling " + ("reads the data and is not DP" if settings["scaling"] == "max-norm"
                                                  else "is a public rule" if settings["scaling"] == "clip"
                                                  else "leaves norms unbounded (DP needs norms <= 1)")]
    if settings["exact_mean"]:
        notes.append("the exact pooled mean was subtracted before partitioning (not DP)")
    summary["preprocessing"] = {"center": settings["center"], "scaling": settings["scaling"],
                                "exact_mean": settings["exact_mean"], "note": "; ".join(notes)}
    summary["seed"] = seed
    if bounds_info is not None:
        summary["preprocessing"]["feature_bounds"] = bounds_info
        summary["preprocessing"]["note"] = ("public feature bounds: rows mapped into the unit ball (instead of the "
                                            "scaling); " + summary["preprocessing"]["note"])
    if ledger is not None:
        spent: dict[str, Any] = {}
        exceeded: BudgetExceededError | None = None
        for cost in _as_ran(costs, summary["methods"]):  # the methods ran: each is recorded, past the budget too
            try:
                spent = ledger.record(cost, ran=True)
            except BudgetExceededError as exc:
                exceeded = exc
        if exceeded is not None:  # a method ran at more than its price (e.g. the papers' delta): recorded, refused
            raise BudgetExceededError(f"{exceeded} (recorded: the methods had run, some at a larger delta than "
                                      f"priced before they ran)")
        summary["ledger"] = {"path": str(ledger.path), **spent}
    if f1_data is not None:
        summary["f1"] = {"test_rows": int(len(f1_data[3])), "train_rows": int(len(f1_data[1])),
                         "classifier": "sklearn.svm.SVC(kernel='rbf') on X V", "average": "macro"}
    return summary


def _price(names: list[str], runs: int, *, epsilon: float, delta: float, d: int, n: int, sites: int,
           settings: dict[str, Any], label: str, shapes: list[tuple[int, ...]], n_components: int,
           options: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """The ledger cost of every run of every private method, from the public request only.

    Protocol methods are priced by :func:`dpdpca.protocol.costs.protocol_release_cost`
    (the calibration their proxy draws from; N public for the centred
    release).  A plaintext pipeline is priced by what its own calibration
    states: :func:`_planned_cost`, its report for these partition shapes
    and ``options``, so a release whose report carries more than the
    requested delta (the papers' sensitivity, CAPE's paper variances against
    the joint view, classic calibration at epsilon >= 1) is refused before
    it runs, not recorded past the budget after.  Basic composition over
    the runs.
    """
    from dpdpca.protocol.costs import protocol_release_cost

    calibration = settings.get("calibration") or "analytic"
    costs = []
    for name in names:
        spec = get_spec(name)
        if not spec.private:
            continue
        if spec.crypto:
            fixed = dict(spec.fixed)
            cost = protocol_release_cost(epsilon=epsilon, delta=delta, release=protocol_release(spec, settings),
                                         sensitivity_mode=fixed.get("sensitivity_mode",
                                                                    settings.get("sensitivity_mode") or "rigorous"),
                                         noise_by=fixed.get("noise_by", "proxy"), d=d, n=n,
                                         calibration="classic" if calibration == "classic" else "analytic",
                                         owners=sites, label=f"compare {label} {name}")
        else:
            cost = _planned_cost(name, shapes, n_components=n_components, epsilon=epsilon, delta=delta,
                                 options=options.get(name, {}), label=f"compare {label} {name}")
            if cost is None:  # no sound form under this setting: it will not run (a skipped row)
                continue
        costs.extend([cost] * runs)
    return costs


def _planned_cost(name: str, shapes: list[tuple[int, ...]], *, n_components: int, epsilon: float, delta: float,
                  options: Mapping[str, Any], label: str) -> Any:
    """A plaintext pipeline's cost as its own report will state it, before any private row is read; None if the
    pipeline refuses the setting.

    The report of one run on rows of zeros of the partitions' shapes: a
    report is a function of the public parameters (epsilon, delta, the
    calibration, the relation, d and, under replace-one, the public site
    sizes), never of the rows' values, so this is the report the real runs
    will carry, made by the calibration that draws their noise.  Its noise
    comes from OS entropy, never from the comparison's seeded generator (the
    experiment's draws stay those of a run without a ledger).
    """
    from dpdpca.dp.costs import cost_from_report
    from dpdpca.driver import run
    from dpdpca.errors import UnsupportedSettingError

    zeros = [np.zeros(shape) for shape in shapes]
    try:
        result = run(name, zeros, n_components=n_components, epsilon=epsilon, delta=delta, rng=None, **options)
    except UnsupportedSettingError:
        return None
    return cost_from_report(result.privacy, label=label)


def _as_ran(costs: list[Any], methods: dict[str, dict[str, Any]]) -> list[Any]:
    """``costs`` with each plaintext method's raised to what its own privacy report says ran, where that is more.

    A plaintext pipeline's report is its calibration's own statement; the
    price made before the run (:func:`_planned_cost`, the same report for
    the same public parameters) must never be recorded below it, so this is
    the safety net behind that price.  Protocol releases keep their
    calibration's cost (an RDP curve).
    """
    from dpdpca.dp.costs import cost_from_report

    out = []
    for cost in costs:
        report = methods.get(cost.label.rsplit(" ", 1)[-1], {}).get("privacy")
        if report is not None and not all(math.isfinite(r) for r in cost.rdp):
            ran = cost_from_report(report, label=cost.label)
            if ran.neighbouring == cost.neighbouring and (ran.epsilon > cost.epsilon or ran.delta > cost.delta):
                cost = dataclasses.replace(cost, epsilon=max(ran.epsilon, cost.epsilon),
                                           delta=max(ran.delta, cost.delta))
        out.append(cost)
    return out


def _f1_split(X: np.ndarray, labels: Any, fraction: float, rng: np.random.Generator | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows and labels for training (first part) and a held-out test set (last part)."""
    if labels is None:
        raise ParameterError("--f1-test-fraction needs a labelled --dataset (digits, fashion-mnist, mnist, "
                             "spambase, sylva), got unlabelled data")
    frac = check_open_unit("--f1-test-fraction", fraction)
    y = np.asarray(labels)
    if rng is not None:
        order = rng.permutation(len(y))
        X, y = X[order], y[order]
    n_test = max(1, int(round(frac * len(y))))
    if n_test >= len(y):
        raise param_error("--f1-test-fraction", f"small enough to leave training rows ({len(y)} rows)", fraction)
    return X[:-n_test], y[:-n_test], X[-n_test:], y[-n_test:]


def _sigma_columns(p: Mapping[str, Any]) -> tuple[str, str]:
    """``sigma`` (the largest site's when sites differ) and ``sigma / Delta``, the unit-free noise multiplier.

    The multiplier lets methods that release different statistics (scatter,
    second moment) be compared; it is the same at every site of one method.
    """
    parts = noisy_parts(p)
    if p.get("sigma") is None and parts:
        sigma_text = f"{max(float(q['sigma']) for q in parts):.3g}"  # every noisy part states one
        p = parts[0]
    else:
        sigma_text = f"{p['sigma']:.3g}" if isinstance(p.get("sigma"), (int, float)) else "-"
    sigma, sens = p.get("sigma"), p.get("sensitivity")
    if not isinstance(sigma, (int, float)) or not isinstance(sens, (int, float)) or not sens:
        return sigma_text, "-"
    return sigma_text, f"{sigma / sens:.3g}"


def _off_marks(budgets: Mapping[str, Any], name: str) -> tuple[str, str]:
    """``"*"`` on the epsilon and/or delta cell of a method whose report is not the requested value."""
    got, asked = budgets["reported"][name], budgets["requested"]
    eps_off = not math.isclose(got["epsilon"], asked["epsilon"], rel_tol=1e-6)
    delta_off = not math.isclose(got["delta"], asked["delta"], rel_tol=1e-6)
    return "*" if eps_off else "", "*" if delta_off else ""


def _aligned(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """Columns padded to their widest cell and separated by two spaces (numbers right-aligned)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in
                      enumerate(zip(r, widths))).rstrip() for r in [header, *rows]]


def format_table(summary: dict[str, Any]) -> str:
    """The human-readable table ``dpdpca compare`` prints without ``--json``: one aligned row per method.

    Every row names the relation, sensitivity mode and calibration its
    method really ran (from its privacy report); a skipped method shows its
    reason instead.  A method whose report is not the requested
    (epsilon, delta) has the cell that differs marked ``*`` and a line below the table
    says so, as a warning when the private methods' reports differ
    (``summary["budgets"]``, :func:`dpdpca.driver.budget_check`).
    """
    ds = summary["dataset"]
    st = summary.get("settings", {})
    pre = summary["preprocessing"]
    mode = "papers' settings (--paper)" if st.get("paper") else "rigorous"
    lines = [f"dataset {ds['name']} ({ds['rows_used']} x {ds['shape'][1]}), {ds['sites']} sites, "
             f"K={summary['n_components']}, epsilon={summary['epsilon']:g}, delta={summary['delta']:g}, "
             f"{summary['runs']} run(s); preprocessing: center={pre['center']}, scaling={pre['scaling']}, "
             f"exact_mean={pre.get('exact_mean', False)}",
             f"setting: {mode}: relation {st.get('relation', '-')}, sensitivity {st.get('sensitivity_mode', '-')}, "
             f"calibration {st.get('calibration', '-')}; {pre['note']}"]
    with_f1 = "f1" in summary
    header = ["method", "q/q_o", "std", "epsilon", "delta", "relation", "mechanism", "sens.mode", "calib.",
              "sigma", "sigma/D", "centring", "time_s"] + (["F1"] if with_f1 else [])
    right = {1, 2, 3, 4, 9, 10, 12, 13}
    rows, skipped = [], []
    budgets = summary.get("budgets") or {}
    off = set(budgets.get("off_request") or ())
    for name, row in summary["methods"].items():
        if "skipped" in row:
            skipped.append(f"  {name}: skipped: {row['skipped']}")
            rows.append([name, "skipped"] + ["-"] * (len(header) - 2))
            continue
        p = row["privacy"]
        eps = p["epsilon"] if isinstance(p["epsilon"], str) else f"{p['epsilon']:g}"
        value = row.get("captured_energy_ratio", row.get("q_comp", float("nan")))
        centring = row.get("centering", "-")
        short = ("DP" if "(DP)" in centring else "not DP" if "not DP" in centring
                 else "none" if centring.startswith("none") else centring)
        dp = p["mechanism"] != "none"
        sigma, multiplier = _sigma_columns(p)
        eps_mark, delta_mark = _off_marks(budgets, name) if name in off else ("", "")
        rows.append([name, f"{value:.4f}", f"{row['std']:.4f}", eps + eps_mark, f"{p['delta']:.2g}" + delta_mark,
                     str(dp and p.get("neighbouring") or "-"), p["mechanism"],
                     str(dp and p.get("sensitivity_mode") or "-"), str(dp and p.get("calibration") or "-"),
                     sigma, multiplier, short, f"{row['time_s']:.4f}"]
                    + ([f"{row['f1']:.4f}" if "f1" in row else "-"] if with_f1 else []))
    lines += _aligned(header, rows, right)
    if off:
        lines.append(("warning: " if not budgets.get("equal", True) else "* ") + str(budgets.get("note", "")))
    if skipped:
        lines.append("skipped (no sound form under this setting; never run under another):")
        lines += skipped
    if "ledger" in summary:
        led = summary["ledger"]
        lines.append(f"ledger {led['path']}: {led['releases']} releases, composed ({led['epsilon']:.4g}, "
                     f"{led['delta']:g})-DP ({led['method']})")
    return "\n".join(lines)


@click.command("compare")
@click.option("--dataset", type=click.Choice(dataset_names()), default=None,
              help="A named offline dataset (default: digits, unless --data is given).")
@click.option("--data", type=click.Path(dir_okay=False), default=None, help="A .csv or .npy data file.")
@click.option("--sites", type=int, default=DEFAULT_SITES, show_default=True, help="Number of sites S.")
@click.option("--components", type=int, default=DEFAULT_COMPONENTS, show_default=True,
              help="Number of components K.")
@click.option("--epsilon", type=float, default=DEFAULT_EPSILON, show_default=True,
              help=f"In [{MIN_EPSILON:g}, {MAX_EPSILON:g}].")
@click.option("--delta", type=float, default=DEFAULT_DELTA, show_default=True,
              help="In [1e-300, 0.5] and < 1/N (N: the rows used).")
@click.option("--relation", type=click.Choice(RELATIONS), default=None,
              help="Neighbouring relation for every method (default: add-remove; replace-one with --paper). "
                   "replace-one moves every method, the protocol to its centred release; a method with no "
                   "sound form under it is shown as skipped, with the reason.")
@click.option("--methods", default=None,
              help="Comma-separated subset of: " + "; ".join(f"{n} ({sp.summary})" for n, sp in PIPELINES.items()
                                                               if sp.kind == SUBSPACE)
                   + " (default: every available one; the encrypted dpdpca is far slower than the others).")
@click.option("--runs", type=int, default=1, show_default=True,
              help=f"Runs per method (fresh noise each), at most {MAX_RUNS}.")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Seed an explicit numpy Generator for shuffling and noise (experiments only; "
                   "default: OS entropy, rows kept in order).")
@click.option("--site-size", type=int, default=None, help="Rows per site N_s (default: all rows, equal split).")
@click.option("--paper", is_flag=True,
              help="Every method under the papers' settings, for reproduction: replace-one, paper sensitivity, "
                   "classic calibration, max-norm scaling and the exact pooled mean subtracted first (not DP). "
                   "Default: add/remove-one, rigorous sensitivity, analytic calibration, public clipping, centring "
                   "paid in DP.")
@click.option("--center/--no-center", default=True, show_default=True,
              help="PCA of centred data. Each DP method pays for its centring inside its release (the exact "
                   "pooled mean, free and not DP, only with --paper or --exact-mean).")
@click.option("--exact-mean/--no-exact-mean", default=None,
              help="Subtract the exact pooled mean before partitioning (free, not DP; the --paper default).")
@click.option("--scaling", type=click.Choice(SCALINGS), default=None,
              help="clip (default): public clip to norm 1; max-norm (--paper default): divide by the largest "
                   "row norm (not DP); none.")
@click.option("--calibration", type=click.Choice(CALIBRATIONS), default=None,
              help="Gaussian calibration for every DP method (default: analytic; classic with --paper).")
@click.option("--sensitivity-mode", type=click.Choice(SENSITIVITY_MODES), default=None,
              help="Sensitivity derivation for every DP method (default: rigorous; paper with --paper).")
@click.option("--f1-test-fraction", type=float, default=None,
              help="Also report the F1 of an RBF SVM on the projected data (Wang-Chang Fig. 4), holding out "
                   "this fraction of the rows as the test set (labelled datasets only).")
@click.option("--f1-max-train", type=int, default=5000, show_default=True,
              help="Train the SVM on at most this many of the pooled training rows.")
@click.option("--output", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON summary to this file (atomically), and with matplotlib a bar chart of "
                   "q/q_o beside it (FILE with the suffix .png).")
@click.option("--feature-bounds", type=(float, float), default=None, metavar="LO HI",
              help="Public bounds of every feature: rows mapped into the unit ball by them (instead of --scaling).")
@click.option("--feature-bounds-file", type=click.Path(dir_okay=False), default=None,
              help="Per-feature public bounds (JSON {\"lo\", \"hi\"} or a CSV of two rows).")
@ledger_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@quiet_option
def compare_cmd(dataset: str | None, data: str | None, sites: int, components: int, epsilon: float, delta: float,
                methods: str | None, runs: int, seed: int | None, site_size: int | None, paper: bool, center: bool,
                exact_mean: bool | None, scaling: str | None, calibration: str | None, sensitivity_mode: str | None,
                f1_test_fraction: float | None, f1_max_train: int, output: str | None, feature_bounds: Any,
                feature_bounds_file: str | None, ledger_path: str | None, budget_epsilon: float | None,
                budget_delta: float | None, as_json: bool, relation: str | None, quiet: bool) -> None:
    """Run several pipelines on the same partitions and budget; report q/q_o, privacy and time."""
    from pathlib import Path

    from dpdpca.commands._figures import compare_figure, compare_figure_path

    # --output is reserved (its temporary file made) before any method runs, whose costs a --ledger records: an
    # --output it cannot write is refused first; the click context removes it when the command ends unwritten.
    # The bar chart beside it (FILE.png, with matplotlib) too: where either cannot be written, neither is.
    png_path = None if output is None else compare_figure_path(output)
    if png_path is not None and png_path == Path(str(output)):
        raise ParameterError(f"--output must not end in .png (the bar chart goes beside it, FILE.png), got "
                             f"{output!r}")
    ctx = click.get_current_context()
    reserved = None if output is None else ctx.with_resource(ReservedOutput(output, what="--output"))
    png = None if png_path is None else ctx.with_resource(ReservedOutput(png_path, what="--output's .png"))
    n_methods = (len(pipeline_names(kind=SUBSPACE, available=True)) if methods is None
                 else len([m for m in methods.split(",") if m.strip()]))
    with Progress("compare", total=n_methods * max(runs, 1), quiet=quiet) as progress:
        summary = run_compare(dataset=dataset, data=data, sites=sites, components=components, epsilon=epsilon,
                              delta=delta, methods=methods, runs=runs, seed=seed, site_size=site_size, center=center,
                              scaling=scaling, calibration=calibration, sensitivity_mode=sensitivity_mode,
                              paper=paper, exact_mean=exact_mean,
                              f1_test_fraction=f1_test_fraction, f1_max_train=f1_max_train,
                              feature_bounds=feature_bounds, feature_bounds_file=feature_bounds_file,
                              ledger=open_ledger(ledger_path, budget_epsilon, budget_delta), relation=relation,
                              progress=progress)
    if reserved is not None:
        reserved.write_json(summary)
        for note in compare_figure(png, summary):
            click.echo(note, err=True)
    click.echo(json.dumps(summary, indent=2, sort_keys=True) if as_json else format_table(summary))
