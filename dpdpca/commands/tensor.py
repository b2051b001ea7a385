"""``dpdpca tensor``: capeAGN and its baselines on synthetic MOG / STM data, scored by ``q_comp``.

Example::

    dpdpca tensor --model mog --dim 10 --components 5 --sites 5 --samples-per-site 10000 \\
        --epsilon 1 --delta 0.01 --runs 10 --seed 0 --json

prints ``{"methods": {"capeagn": {"q_comp": ...}, "conv": ..., "local": ...,
"nonprivate": ..., "random": ...}, "privacy": ..., "settings": ...}``.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import click

from dpdpca._validation import MAX_EPSILON, MAX_RUNS, MIN_EPSILON
from dpdpca.baselines.tensor.experiment import METHODS, run_experiment
from dpdpca.progress import Progress, quiet_option

__all__ = ["tensor_cmd", "run_tensor", "format_table"]


def run_tensor(*, model: str, dim: int, components: int, sites: int, samples_per_site: int, epsilon: float,
               delta: float, runs: int, seed: int | None = None, noise_variance: float = 0.05,
               words_per_document: int = 3, budget_split: float = 0.5, sensitivity_mode: str = "rigorous",
               calibration: str = "analytic", cape_variances: str = "rigorous",
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """What ``dpdpca tensor`` computes, as a JSON-ready dict (one epsilon); ``progress`` is called after each run."""
    out = run_experiment(model=model, n_features=dim, n_components=components, n_sites=sites,
                         samples_per_site=samples_per_site, epsilons=[epsilon], delta=delta, runs=runs, seed=seed,
                         noise_variance=noise_variance, words_per_document=words_per_document,
                         budget_split=budget_split, sensitivity_mode=sensitivity_mode, calibration=calibration,
                         cape_variances=cape_variances, progress=progress)
    methods = {name: {"q_comp": v["q_comp"][0], "q_comp_std": v["q_comp_std"][0],
                      "q_comp_runs": v["q_comp_runs"][0]} for name, v in out["methods"].items()}
    settings = dict(out["settings"], epsilon=float(epsilon),
                    stage_budgets={"m2": [budget_split * epsilon, budget_split * delta],
                                   "m3": [(1 - budget_split) * epsilon, (1 - budget_split) * delta]})
    return {"methods": methods, "privacy": out["privacy"], "settings": settings}


def format_table(summary: dict[str, Any]) -> str:
    """A short human-readable table of mean q_comp per method."""
    s = summary["settings"]
    lines = [f"capeAGN on {s['model'].upper()}: D={s['n_features']} K={s['n_components']} S={s['n_sites']} "
             f"N_s={s['samples_per_site']} epsilon={s['epsilon']:g} delta={s['delta']:g} runs={s['runs']}",
             f"{'method':<12}{'q_comp':>10}{'std':>10}"]
    for name in METHODS:
        v = summary["methods"][name]
        lines.append(f"{name:<12}{v['q_comp']:>10.4f}{v['q_comp_std']:>10.4f}")
    return "\n".join(lines)


@click.command("tensor")
@click.option("--model", type=click.Choice(["mog", "stm"]), required=True,
              help="Mixture of spherical Gaussians or single topic model.")
@click.option("--dim", type=int, required=True,
              help="D: dimension (MOG) or vocabulary size (STM); each site's third moment holds D^3 floats.")
@click.option("--components", type=int, required=True, help="K <= D: mixture components or topics.")
@click.option("--sites", type=int, default=5, show_default=True, help="S >= 2 sites.")
@click.option("--samples-per-site", type=int, required=True,
              help="N_s records (documents) per site. A setting whose run would not fit in this machine's memory "
                   "is refused before it starts.")
@click.option("--epsilon", type=float, required=True,
              help=f"Total epsilon (split between M2 and M3), in [{MIN_EPSILON:g}, {MAX_EPSILON:g}].")
@click.option("--delta", type=float, default=0.01, show_default=True, help="Total delta in (0, 1).")
@click.option("--runs", type=int, default=10, show_default=True,
              help=f"Independent runs averaged, at most {MAX_RUNS}.")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Experiment seed (model, data, noise). Without it the privacy noise uses OS entropy.")
@click.option("--noise-variance", type=float, default=0.05, show_default=True, help="MOG sigma^2.")
@click.option("--words-per-document", type=int, default=3, show_default=True, help="STM L >= 3.")
@click.option("--budget-split", type=float, default=0.5, show_default=True,
              help="Share of epsilon and delta for the M2 (whitening) stage.")
@click.option("--sensitivity-mode", type=click.Choice(["rigorous", "paper"]), default="rigorous",
              show_default=True, help="Rigorous sensitivities or the paper's appendix-C values.")
@click.option("--calibration", type=click.Choice(["analytic", "classic"]), default="analytic",
              show_default=True, help="Gaussian calibration (classic = the paper's formula).")
@click.option("--cape-variances", type=click.Choice(["rigorous", "paper"]), default="rigorous", show_default=True,
              help="capeAGN's CAPE variances: DP against the aggregator's joint view, or the paper's (reproduction; "
                   "the report carries the delta they really give).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@quiet_option
def tensor_cmd(model: str, dim: int, components: int, sites: int, samples_per_site: int, epsilon: float,
               delta: float, runs: int, seed: int | None, noise_variance: float, words_per_document: int,
               budget_split: float, sensitivity_mode: str, calibration: str, cape_variances: str, as_json: bool,
               quiet: bool) -> None:
    """capeAGN (distributed DP tensor decomposition) against conv, local, nonprivate and random."""
    with Progress("tensor", total=runs, quiet=quiet) as progress:
        summary = run_tensor(model=model, dim=dim, components=components, sites=sites,
                             samples_per_site=samples_per_site, epsilon=epsilon, delta=delta, runs=runs, seed=seed,
                             noise_variance=noise_variance, words_per_document=words_per_document,
                             budget_split=budget_split, sensitivity_mode=sensitivity_mode, calibration=calibration,
                             cape_variances=cape_variances, progress=progress)
    click.echo(json.dumps(summary, indent=2, sort_keys=True) if as_json else format_table(summary))
