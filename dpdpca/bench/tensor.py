"""``dpdpca bench tensor --json --out DIR``: capeAGN's q_comp against epsilon and N_s (Imtiaz & Sarwate 2018, Figs. 3-4).

For each model (MOG, STM) and each size (``D = 10, K = 5`` and ``D = 50, K = 10``),
with ``S = 5`` sites and ``delta = 0.01``:

* **q_comp vs epsilon** at two site sizes ``N_s`` (solid: the larger, dashed: the smaller);
* **q_comp vs N_s** at ``epsilon = 1``.

Every method (capeagn, conv, local, nonprivate, random) runs on the same data
in each run (:func:`dpdpca.baselines.tensor.experiment.run_grid`), averaged
over ``--runs`` runs (10 as in the paper) with a fixed experiment ``--seed``
(model, data, noise and starts; experiments only).  MOG uses ``sigma^2 = 0.05``,
STM ``L = 3`` words per document.  The sensitivities, calibration and budget
split are the estimator's defaults unless ``--sensitivity-mode paper
--calibration classic`` asks for the paper's.

Writes ``DIR/tensor_mog.png``, ``DIR/tensor_stm.png`` (2 x 2 panels shaped like
the paper's figures: top row against epsilon, bottom row against N_s; left
``D = 10``, right ``D = 50``) and ``DIR/tensor.json``, and prints the JSON with
``--json``.  Needs matplotlib (``pip install 'dpdpca[bench]'``); checked before
any work, so a missing install writes nothing.

JSON keys: ``panels`` (list of {``model``, ``n_features``, ``n_components``,
``sweep`` ("epsilon" or "samples_per_site"), ``points`` as in ``run_grid``}),
``settings`` (sites, delta, runs, seed, grids, quick, blas_threads), ``figures``
(file names), ``seconds``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import click

from dpdpca._io import atomic_write_bytes, atomic_write_json
from dpdpca.baselines.tensor.experiment import METHODS, run_grid
from dpdpca.bench._data import blas_threads_limited
from dpdpca.errors import DpdpcaError
from dpdpca.progress import Progress, quiet_option

__all__ = ["command", "run", "CONFIGS"]

SITES, DELTA, EPS_FOR_NS = 5, 0.01, 1.0
EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
#: (D, K) -> (N_s values of the epsilon sweep, N_s grid of the N_s sweep)
CONFIGS: dict[tuple[int, int], tuple[tuple[int, int], tuple[int, ...]]] = {
    (10, 5): ((2000, 10000), (500, 1000, 2000, 5000, 10000, 20000, 50000)),
    (50, 10): ((10000, 50000), (2000, 5000, 10000, 20000, 50000)),
}
QUICK_CONFIGS: dict[tuple[int, int], tuple[tuple[int, int], tuple[int, ...]]] = {
    (10, 5): ((1000, 4000), (500, 1000, 2000, 4000)),
    (50, 10): ((2000, 8000), (1000, 2000, 4000, 8000)),
}
QUICK_EPSILONS = (0.2, 1.0, 5.0)
_STYLE = {"capeagn": ("tab:red", "o"), "conv": ("tab:blue", "s"), "local": ("tab:green", "^"),
          "nonprivate": ("black", "x"), "random": ("tab:gray", "d")}
_LABEL = {"capeagn": "capeAGN", "conv": "conv", "local": "local", "nonprivate": "Non-priv.",
          "random": "Rand. vect."}


class MissingDependencyError(DpdpcaError):
    """An optional dependency the command needs is not installed."""


def _require_matplotlib() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError("bench tensor needs matplotlib for its plots: "
                                     "pip install 'dpdpca[bench]'") from exc
    return plt


def _prefixed(progress: Callable[[str], None] | None, prefix: str) -> Callable[[str], None] | None:
    return None if progress is None else (lambda label: progress(prefix + label))


def run(*, quick: bool = False, runs: int = 10, seed: int = 0, models: tuple[str, ...] = ("mog", "stm"),
        sensitivity_mode: str = "rigorous", calibration: str = "analytic",
        blas_threads: int | None = 1, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure every panel; return the JSON-ready dict (no files).  ``progress`` is called after each run of
    each panel (``len(models) * len(configs) * runs`` calls)."""
    configs = QUICK_CONFIGS if quick else CONFIGS
    epsilons = QUICK_EPSILONS if quick else EPSILONS
    panels = []
    start = time.perf_counter()
    with blas_threads_limited(blas_threads) as used_threads:
        for model in models:
            for (d, k), (eps_sizes, ns_grid) in configs.items():
                points = [(n, e) for n in eps_sizes for e in epsilons]
                points += [(n, EPS_FOR_NS) for n in ns_grid if (n, EPS_FOR_NS) not in points]
                grid = run_grid(model=model, n_features=d, n_components=k, n_sites=SITES, points=points,
                                delta=DELTA, runs=runs, seed=seed, sensitivity_mode=sensitivity_mode,
                                calibration=calibration,
                                progress=_prefixed(progress, f"{model} D={d} K={k}, "))
                by_point = {(p["samples_per_site"], p["epsilon"]): p for p in grid["points"]}
                panels.append({"model": model, "n_features": d, "n_components": k, "sweep": "epsilon",
                               "points": [by_point[(n, e)] for n in eps_sizes for e in epsilons]})
                panels.append({"model": model, "n_features": d, "n_components": k, "sweep": "samples_per_site",
                               "points": [by_point[(n, EPS_FOR_NS)] for n in ns_grid]})
    settings = {"sites": SITES, "delta": DELTA, "runs": runs, "seed": seed, "quick": quick,
                "epsilons": list(epsilons), "epsilon_for_samples_sweep": EPS_FOR_NS,
                "configs": {f"D={d},K={k}": {"epsilon_sweep_sizes": list(v[0]), "samples_grid": list(v[1])}
                            for (d, k), v in configs.items()},
                "sensitivity_mode": sensitivity_mode, "calibration": calibration, "blas_threads": used_threads,
                "noise_variance_mog": 0.05, "words_per_document_stm": 3}
    return {"panels": panels, "settings": settings, "seconds": time.perf_counter() - start}


def plot(result: dict[str, Any], model: str) -> bytes:
    """The 2 x 2 figure of one model as PNG bytes."""
    plt = _require_matplotlib()
    import io

    sizes = sorted({(p["n_features"], p["n_components"]) for p in result["panels"] if p["model"] == model})
    fig, axes = plt.subplots(2, len(sizes), figsize=(5.2 * len(sizes), 8.0), squeeze=False)
    for col, (d, _k) in enumerate(sizes):
        for row, sweep in enumerate(("epsilon", "samples_per_site")):
            panel = next(p for p in result["panels"]
                         if (p["model"], p["n_features"], p["sweep"]) == (model, d, sweep))
            _draw_panel(axes[row][col], panel, result["settings"])
    title = "mixture of Gaussians" if model == "mog" else "single topic model"
    fig.suptitle(f"capeAGN, {title}: q_comp (S={SITES}, delta={DELTA}, mean of {result['settings']['runs']} runs)")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=_STYLE[m][0], marker=_STYLE[m][1], markersize=4) for m in METHODS]
    fig.legend(handles, [_LABEL[m] for m in METHODS], loc="lower center", ncol=len(METHODS), fontsize=9)
    fig.tight_layout(rect=(0, 0.035, 1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _draw_panel(ax: Any, panel: dict[str, Any], settings: dict[str, Any]) -> None:
    d, k = panel["n_features"], panel["n_components"]
    if panel["sweep"] == "epsilon":
        sizes = sorted({p["samples_per_site"] for p in panel["points"]}, reverse=True)
        for size, dash in zip(sizes, ("-", "--")):
            pts = [p for p in panel["points"] if p["samples_per_site"] == size]
            xs = [p["epsilon"] for p in pts]
            for name in METHODS:
                color, marker = _STYLE[name]
                ax.plot(xs, [p["methods"][name]["q_comp"] for p in pts], dash, color=color, marker=marker,
                        markersize=4)
        ax.set_xlabel("epsilon")
        styles = ", ".join(f"{name} N_s={size}" for size, name in zip(sizes, ("solid", "dashed")))
        ax.set_title(f"D={d}, K={k}: q_comp vs epsilon\n({styles})", fontsize=10)
    else:
        pts = panel["points"]
        xs = [p["samples_per_site"] for p in pts]
        for name in METHODS:
            color, marker = _STYLE[name]
            ax.plot(xs, [p["methods"][name]["q_comp"] for p in pts], "-", color=color, marker=marker,
                    markersize=4)
        ax.set_xlabel("N_s (samples per site)")
        ax.set_title(f"D={d}, K={k}: q_comp vs N_s\n(epsilon={settings['epsilon_for_samples_sweep']:g})",
                     fontsize=10)
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sorted(set(xs)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelsize=7)
    ax.set_ylabel("q_comp")
    ax.grid(True, which="both", alpha=0.3)


@click.command("tensor")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Directory for tensor_mog.png, tensor_stm.png and tensor.json.")
@click.option("--quick", is_flag=True, help="3 epsilons, smaller N_s grids (for tests and a first look).")
@click.option("--runs", type=click.IntRange(min=1), default=None, help="Runs per point [default: 10, quick: 2].")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Experiment seed.")
@click.option("--sensitivity-mode", type=click.Choice(["rigorous", "paper"]), default="rigorous",
              show_default=True)
@click.option("--calibration", type=click.Choice(["analytic", "classic"]), default="analytic", show_default=True)
@click.option("--blas-threads", type=click.IntRange(min=0), default=1, show_default=True,
              help="BLAS threads (0: library default).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON.")
@quiet_option
def command(out_dir: str, quick: bool, runs: int | None, seed: int, sensitivity_mode: str, calibration: str,
            blas_threads: int, as_json: bool, quiet: bool) -> None:
    """q_comp of capeAGN and its baselines against epsilon and N_s (PNG plots and JSON)."""
    _require_matplotlib()  # before any work: a missing install leaves no partial output
    n_runs = runs if runs is not None else (2 if quick else 10)
    total = 2 * len(QUICK_CONFIGS if quick else CONFIGS) * n_runs
    with Progress("bench tensor", total=total, quiet=quiet) as progress:
        result = run(quick=quick, runs=n_runs, seed=seed, sensitivity_mode=sensitivity_mode,
                     calibration=calibration, blas_threads=blas_threads or None, progress=progress)
    target = Path(out_dir)
    figures = {}
    for model in ("mog", "stm"):
        figures[model] = f"tensor_{model}.png"
        atomic_write_bytes(target / figures[model], plot(result, model))
    result["figures"] = figures
    atomic_write_json(target / "tensor.json", result)
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
    else:
        click.echo(f"wrote {target / 'tensor.json'} and {', '.join(str(target / f) for f in figures.values())} "
                   f"in {result['seconds']:.0f} s")
