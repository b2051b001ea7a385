"""``dpdpca compare``: every registered method on the same partitions and budget.

Example::

    dpdpca compare --dataset digits --sites 10 --components 10 --epsilon 1 \\
        --delta 1e-5 --methods capepca,conv,local --runs 5 --json
"""

from __future__ import annotations

import json
from typing import Any

import click
import numpy as np

from dpdpca._io import atomic_write_json
from dpdpca._validation import check_int, check_open_unit, param_error
from dpdpca.data import SCALINGS, dataset_names, load_dataset, load_file, partition, preprocess
from dpdpca.driver import compare
from dpdpca.errors import ParameterError
from dpdpca.pipelines import get_spec, pipeline_names
from dpdpca.result import SUBSPACE

__all__ = ["compare_cmd", "run_compare"]

def run_compare(*, dataset: str | None, data: str | None, sites: int, components: int, epsilon: float,
                delta: float, methods: str | None = None, runs: int = 1, seed: int | None = None,
                site_size: int | None = None, center: bool = True, scaling: str = "max-norm",
                calibration: str | None = None, sensitivity_mode: str | None = None,
                f1_test_fraction: float | None = None, f1_max_train: int = 5000) -> dict[str, Any]:
    """What ``dpdpca compare`` computes, as a JSON-ready dict (see :func:`dpdpca.driver.compare`).

    Raises
    ------
    ParameterError, DataError
        Bad options or data.
    """
    if dataset is None and data is None:
        raise ParameterError("--dataset or --data must be given (exactly one), got neither")
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
    X = preprocess(X_raw, centre=center, scaling=scaling)
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
    noise_opts = {k: v for k, v in (("calibration", calibration), ("sensitivity_mode", sensitivity_mode))
                  if v is not None}
    method_options = {m: dict(noise_opts) for m in names if get_spec(m).noisy}
    summary = compare(names, parts, n_components=components, epsilon=epsilon, delta=delta, runs=runs, rng=rng,
                      X_eval=np.vstack(parts), method_options=method_options, f1_data=f1_data)
    summary["dataset"] = {"name": name, "source": source, "shape": list(X_raw.shape),
                          "rows_used": int(sum(p.shape[0] for p in parts)), "sites": len(parts),
                          "site_sizes": [int(p.shape[0]) for p in parts]}
    summary["preprocessing"] = {"center": center, "scaling": scaling,
                                "note": "centring and max-norm scaling read the data and are not DP; "
                                        "clip is a public rule"}
    summary["seed"] = seed
    if f1_data is not None:
        summary["f1"] = {"test_rows": int(len(f1_data[3])), "train_rows": int(len(f1_data[1])),
                         "classifier": "sklearn.svm.SVC(kernel='rbf') on X V", "average": "macro"}
    return summary


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


def format_table(summary: dict[str, Any]) -> str:
    """The human-readable table ``dpdpca compare`` prints without ``--json``."""
    ds = summary["dataset"]
    lines = [f"dataset {ds['name']} ({ds['rows_used']} x {ds['shape'][1]}), {ds['sites']} sites, "
             f"K={summary['n_components']}, epsilon={summary['epsilon']:g}, delta={summary['delta']:g}, "
             f"{summary['runs']} run(s); preprocessing: center={summary['preprocessing']['center']}, "
             f"scaling={summary['preprocessing']['scaling']}",
             f"{'method':<19}{'q/q_o':>8}{'std':>9}{'epsilon':>9}{'delta':>10}  {'mechanism':<18}{'time_s':>9}"
             + (f"{'F1':>8}" if "f1" in summary else "")]
    for name, row in summary["methods"].items():
        p = row["privacy"]
        eps = p["epsilon"] if isinstance(p["epsilon"], str) else f"{p['epsilon']:g}"
        lines.append(f"{name:<19}{row['captured_energy_ratio']:>8.4f}{row['std']:>9.4f}{eps:>9}"
                     f"{p['delta']:>10.2g}  {p['mechanism']:<18}{row['time_s']:>9.4f}"
                     + (f"{row['f1']:>8.4f}" if "f1" in row else ""))
    return "\n".join(lines)


@click.command("compare")
@click.option("--dataset", type=click.Choice(dataset_names()), default=None, help="A named offline dataset.")
@click.option("--data", type=click.Path(dir_okay=False), default=None, help="A .csv or .npy data file.")
@click.option("--sites", type=int, required=True, help="Number of sites S.")
@click.option("--components", type=int, required=True, help="Number of components K.")
@click.option("--epsilon", type=float, required=True)
@click.option("--delta", type=float, required=True)
@click.option("--methods", default=None,
              help=f"Comma-separated subset of: {', '.join(pipeline_names(kind=SUBSPACE))} (default: every "
                   f"available one; "
                   f"the encrypted dpdpca is far slower than the plaintext ones).")
@click.option("--runs", type=int, default=1, show_default=True, help="Runs per method (fresh noise each).")
@click.option("--seed", type=int, default=None,
              help="Seed an explicit numpy Generator for shuffling and noise (experiments only; "
                   "default: OS entropy, rows kept in order).")
@click.option("--site-size", type=int, default=None, help="Rows per site N_s (default: all rows, equal split).")
@click.option("--center/--no-center", default=True, show_default=True, help="Subtract the mean (not DP).")
@click.option("--scaling", type=click.Choice(SCALINGS), default="max-norm", show_default=True,
              help="max-norm: divide by the largest row norm (the papers, not DP); clip: public clip to 1.")
@click.option("--calibration", type=click.Choice(["classic", "analytic"]), default=None,
              help="Gaussian calibration for every DP method (default: each method's own).")
@click.option("--sensitivity-mode", type=click.Choice(["paper", "rigorous"]), default=None,
              help="Sensitivity derivation for every DP method (default: each method's own).")
@click.option("--f1-test-fraction", type=float, default=None,
              help="Also report the F1 of an RBF SVM on the projected data (Wang-Chang Fig. 4), holding out "
                   "this fraction of the rows as the test set (labelled datasets only).")
@click.option("--f1-max-train", type=int, default=5000, show_default=True,
              help="Train the SVM on at most this many of the pooled training rows.")
@click.option("--output", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON summary to this file (atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def compare_cmd(dataset: str | None, data: str | None, sites: int, components: int, epsilon: float, delta: float,
                methods: str | None, runs: int, seed: int | None, site_size: int | None, center: bool,
                scaling: str, calibration: str | None, sensitivity_mode: str | None,
                f1_test_fraction: float | None, f1_max_train: int, output: str | None, as_json: bool) -> None:
    """Run several pipelines on the same partitions and budget; report q/q_o, privacy and time."""
    summary = run_compare(dataset=dataset, data=data, sites=sites, components=components, epsilon=epsilon,
                          delta=delta, methods=methods, runs=runs, seed=seed, site_size=site_size, center=center,
                          scaling=scaling, calibration=calibration, sensitivity_mode=sensitivity_mode,
                          f1_test_fraction=f1_test_fraction, f1_max_train=f1_max_train)
    if output is not None:
        atomic_write_json(output, summary)
    click.echo(json.dumps(summary, indent=2, sort_keys=True) if as_json else format_table(summary))
