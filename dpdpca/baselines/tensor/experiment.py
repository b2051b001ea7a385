"""All capeAGN methods on the same synthetic data, scored by ``q_comp`` (Imtiaz & Sarwate 2018, §VI-B).

Methods (:data:`METHODS`):

* ``capeagn``: :class:`~dpdpca.baselines.tensor.CapeAGN` on all sites (CAPE noise);
* ``conv``: the same without correlated noise (each site at the local level);
* ``local``: ``conv`` on site 0 alone;
* ``nonprivate``: the tensor power method on the pooled moments;
* ``random``: random vectors from the generator's prior (the no-information error).

One latent model is drawn per experiment (the paper's "pre-determined ``w`` and
``a_k``"); each run draws fresh data, and every method at every epsilon sees
the same per-site moments of that run.  With a ``seed`` everything (model,
data, privacy noise, power-method starts) is reproducible: experiments only.
Without one, the privacy noise comes from OS entropy.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_int, check_open_unit, check_positive, param_error
from dpdpca.baselines.tensor.capeagn import CapeAGN, NonPrivateTensorDecomposition, check_budget_split, site_moments
from dpdpca.baselines.tensor.models import (check_components, check_model_kind, check_words_per_document,
                                            make_mog, make_stm, random_components, sample_partitions)
from dpdpca.dp.mechanisms import check_sensitivity_mode
from dpdpca.metrics import q_comp

__all__ = ["METHODS", "PRIVATE_METHODS", "run_experiment", "check_settings"]

METHODS = ("capeagn", "conv", "local", "nonprivate", "random")
PRIVATE_METHODS = ("capeagn", "conv", "local")


def check_settings(*, model: str, n_features: int, n_components: int, n_sites: int, samples_per_site: int,
                   epsilons: Sequence[float], delta: float, runs: int, noise_variance: float,
                   words_per_document: int, budget_split: float, sensitivity_mode: str,
                   calibration: str) -> None:
    """Validate every setting before any work (one-line :class:`~dpdpca.errors.ParameterError`)."""
    kind = check_model_kind(model)
    check_components(n_components, n_features)
    check_int("n_sites", n_sites, minimum=2)
    check_int("samples_per_site", samples_per_site, minimum=1)
    if not epsilons:
        raise param_error("epsilons", "non-empty", list(epsilons))
    for eps in epsilons:
        check_positive("epsilon", eps)
    check_open_unit("delta", delta)
    check_int("runs", runs, minimum=1)
    if kind == "mog":
        check_positive("noise_variance", noise_variance)
    else:
        check_words_per_document(words_per_document)
    check_budget_split(budget_split)
    check_sensitivity_mode(sensitivity_mode)
    if calibration not in ("analytic", "classic"):
        raise param_error("calibration", "'analytic' or 'classic'", calibration)


def run_experiment(*, model: str, n_features: int, n_components: int, n_sites: int, samples_per_site: int,
                   epsilons: Sequence[float], delta: float, runs: int, seed: int | None = None,
                   noise_variance: float = 0.05, words_per_document: int = 3, budget_split: float = 0.5,
                   sensitivity_mode: str = "rigorous", calibration: str = "analytic",
                   words: str = "all") -> dict[str, Any]:
    """Run every method ``runs`` times at each epsilon.

    Parameters
    ----------
    model : {"mog", "stm"}
    n_features, n_components : int
        ``D`` and ``K`` (``K <= D``).
    n_sites : int, >= 2
    samples_per_site : int
        ``N_s`` (records or documents per site).
    epsilons : sequence of float, > 0
        Total epsilon per run (split between the stages by ``budget_split``).
    delta : float, in (0, 1)
    runs : int, >= 1
    seed : int, optional
        Experiment seed (model, data, noise, starts).  ``None``: fresh data and
        OS-entropy privacy noise.
    noise_variance : float
        MOG ``sigma^2`` (0.05 as in the paper).
    words_per_document : int, >= 3
        STM ``L``.
    budget_split, sensitivity_mode, calibration, words
        As in :class:`~dpdpca.baselines.tensor.CapeAGN`.

    Returns
    -------
    dict
        ``{"epsilons": [...], "methods": {name: {"q_comp": [mean per epsilon],
        "q_comp_std": [...], "q_comp_runs": [[per run] per epsilon]}},
        "privacy": {name: report dict at the last epsilon}, "settings": {...}}``.
    """
    check_settings(model=model, n_features=n_features, n_components=n_components, n_sites=n_sites,
                   samples_per_site=samples_per_site, epsilons=epsilons, delta=delta, runs=runs,
                   noise_variance=noise_variance, words_per_document=words_per_document,
                   budget_split=budget_split, sensitivity_mode=sensitivity_mode, calibration=calibration)
    seq = np.random.SeedSequence(seed)
    model_seq, *run_seqs = seq.spawn(runs + 1)
    model_rng = np.random.default_rng(model_seq)
    truth = (make_mog(n_features, n_components, noise_variance=noise_variance, rng=model_rng) if model == "mog"
             else make_stm(n_features, n_components, words_per_document=words_per_document, rng=model_rng))
    eps_list = [float(e) for e in epsilons]
    scores: dict[str, list[list[float]]] = {m: [[] for _ in eps_list] for m in METHODS}
    privacy: dict[str, Any] = {}
    common = dict(model=model, n_features=n_features, noise_variance=noise_variance, words=words)
    for run_seq in run_seqs:
        data_seq, noise_seq, start_seq = run_seq.spawn(3)
        data_rng = np.random.default_rng(data_seq)
        noise_rng = np.random.default_rng(noise_seq) if seed is not None else None
        starts = np.random.default_rng(start_seq)
        parts = sample_partitions(truth, n_sites, samples_per_site, data_rng)
        moments, scale, scaled_s2 = site_moments(parts, model=model, n_components=n_components,
                                                 n_features=n_features, noise_variance=noise_variance,
                                                 words=words)
        fit_kw = dict(scale=scale, scaled_noise_variance=scaled_s2)
        nonpriv = NonPrivateTensorDecomposition(n_components, random_state=starts, **common)  # type: ignore[arg-type]
        q_np = q_comp(nonpriv.fit_moments(moments, **fit_kw).means_, truth.means)
        q_rand = q_comp(random_components(truth, data_rng), truth.means)
        for i, eps in enumerate(eps_list):
            scores["nonprivate"][i].append(q_np)
            scores["random"][i].append(q_rand)
            for name in PRIVATE_METHODS:
                est = CapeAGN(n_components, epsilon=eps, delta=delta, correlated=name == "capeagn",
                              budget_split=budget_split, sensitivity_mode=sensitivity_mode,
                              calibration=calibration, rng=noise_rng, random_state=starts,
                              **common)  # type: ignore[arg-type]
                est.fit_moments(moments[:1] if name == "local" else moments, **fit_kw)
                scores[name][i].append(q_comp(est.means_, truth.means))
                privacy[name] = est.privacy_.to_dict()
    privacy["nonprivate"] = nonpriv.privacy_.to_dict()
    methods = {name: {"q_comp": [_mean(v) for v in per_eps], "q_comp_std": [_std(v) for v in per_eps],
                      "q_comp_runs": per_eps} for name, per_eps in scores.items()}
    settings = {"model": model, "n_features": n_features, "n_components": n_components, "n_sites": n_sites,
                "samples_per_site": samples_per_site, "delta": delta, "runs": runs, "seed": seed,
                "noise_variance": noise_variance if model == "mog" else None,
                "words_per_document": words_per_document if model == "stm" else None,
                "budget_split": budget_split, "sensitivity_mode": sensitivity_mode, "calibration": calibration,
                "words": words if model == "stm" else None,
                "sample_scale": scale if model == "mog" else None,
                "noise": "seeded numpy Generator (experiment)" if seed is not None else "OS entropy"}
    return {"epsilons": eps_list, "methods": methods, "privacy": privacy, "settings": settings}


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _std(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
