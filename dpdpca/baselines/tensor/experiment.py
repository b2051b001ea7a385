"""All capeAGN methods on the same synthetic data, scored by ``q_comp`` (Imtiaz & Sarwate 2018, §VI-B).

Methods (:data:`METHODS`):

* ``capeagn``: :class:`~dpdpca.baselines.tensor.CapeAGN` on all sites (CAPE noise);
* ``conv``: the same without correlated noise (each site at the local level);
* ``local``: ``conv`` on site 0 alone;
* ``nonprivate``: the tensor power method on the pooled moments;

(registry names ``capeagn``, ``capeagn-conv``, ``capeagn-local``, ``capeagn-nonprivate``,
built through :func:`dpdpca.pipelines.get_spec`);
* ``random``: random vectors from the generator's prior (the no-information error).

One latent model is drawn per experiment (the paper's "pre-determined ``w`` and
``a_k``"); each run draws fresh data, and every method at every epsilon sees
the same per-site moments of that run.  With a ``seed`` everything (model,
data, privacy noise, power-method starts) is reproducible: experiments only.
Without one, the privacy noise comes from OS entropy.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from dpdpca._validation import MAX_RUNS, check_epsilon, check_int, check_open_unit, check_positive, param_error
from dpdpca.baselines.tensor.capeagn import check_budget_split, site_moments
from dpdpca.baselines.tensor.models import (check_components, check_model_kind, check_words_per_document,
                                            make_mog, make_stm, random_components, sample_partitions)
from dpdpca.dp.cape import check_cape_variances
from dpdpca.dp.mechanisms import check_sensitivity_mode
from dpdpca.dp.settings import RIGOROUS
from dpdpca.baselines.tensor.moments import SiteMoments, exact_symmetric2, exact_symmetric3
from dpdpca.metrics import q_comp
from dpdpca.pipelines import get_spec

__all__ = ["METHODS", "PRIVATE_METHODS", "run_experiment", "run_grid", "check_settings", "check_memory",
           "memory_estimate"]

METHODS = ("capeagn", "conv", "local", "nonprivate", "random")
PRIVATE_METHODS = ("capeagn", "conv", "local")
#: Method name in the output -> registry name (:mod:`dpdpca.pipelines`); ``random`` needs no estimator.
REGISTRY_NAMES = {"capeagn": "capeagn", "conv": "capeagn-conv", "local": "capeagn-local",
                  "nonprivate": "capeagn-nonprivate"}


def check_settings(*, model: str, n_features: int, n_components: int, n_sites: int, samples_per_site: int,
                   epsilons: Sequence[float], delta: float, runs: int, noise_variance: float,
                   words_per_document: int, budget_split: float, sensitivity_mode: str,
                   calibration: str, cape_variances: str = RIGOROUS) -> None:
    """Validate every setting before any work (one-line :class:`~dpdpca.errors.ParameterError`)."""
    kind = check_model_kind(model)
    check_components(n_components, n_features)
    check_int("n_sites", n_sites, minimum=2)
    check_int("samples_per_site", samples_per_site, minimum=1)
    if not epsilons:
        raise param_error("epsilons", "non-empty", list(epsilons))
    for eps in epsilons:
        check_epsilon("epsilon", eps)
    check_open_unit("delta", delta)
    check_int("runs", runs, minimum=1, maximum=MAX_RUNS)
    if kind == "mog":
        check_positive("noise_variance", noise_variance)
    else:
        check_words_per_document(words_per_document)
    check_memory(model=kind, n_features=n_features, n_sites=n_sites, samples_per_site=samples_per_site,
                 words_per_document=words_per_document)
    check_budget_split(budget_split)
    check_sensitivity_mode(sensitivity_mode)
    if calibration not in ("analytic", "classic"):
        raise param_error("calibration", "'analytic' or 'classic'", calibration)
    check_cape_variances(cape_variances)


#: Memory assumed where the OS does not say (:func:`check_memory`).
_DEFAULT_RAM_BYTES = 64 << 30


def _ram_bytes() -> int:
    """This machine's physical memory (``os.sysconf``), or 64 GiB where the OS does not say."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return _DEFAULT_RAM_BYTES


def memory_estimate(*, model: str, n_features: int, n_sites: int, samples_per_site: int,
                    words_per_document: int = 3) -> dict[str, int]:
    """Bytes one run holds at its peak, by the setting that drives them (a lower estimate, float64 / int64).

    ``n_features``: every site's third moment (D^3) and the symmetrisation's index arrays (about 12 D^3
    more); ``records``: the S sites' records (MOG: D floats each; STM: L word ids), plus one site's draw
    being made; ``words_per_document`` (STM): the L(L - 1)(L - 2) ordered triples of one site's documents
    when L < D, else its N_s x D word counts.
    """
    d, s, n, length = n_features, n_sites, samples_per_site, words_per_document
    out = {"n_features": 8 * (s + 12) * d ** 3}
    if model == "mog":
        out["records"] = 8 * (s + 3) * n * d
    else:
        out["records"] = 8 * (s + 2) * n * length
        out["words_per_document"] = 8 * n * (length * (length - 1) * (length - 2) if length < d else d)
    return out


def check_memory(*, model: str, n_features: int, n_sites: int, samples_per_site: int,
                 words_per_document: int = 3) -> None:
    """Refuse, before allocating anything, a setting whose run would not fit in this machine's memory.

    Raises
    ------
    ParameterError
        Naming the setting that drives the estimate (:func:`memory_estimate`):
        the one whose smallest value would cut it most, with the estimate and
        this machine's memory.
    """
    setting = {"n_features": n_features, "n_sites": n_sites, "samples_per_site": samples_per_site,
               "words_per_document": words_per_document}

    def need(**at_least: int) -> int:
        return sum(memory_estimate(model=model, **{**setting, **at_least}).values())

    ram = _ram_bytes()
    total = need()
    if total <= ram:
        return
    smallest = {"n_features": 1, "n_sites": 2, "samples_per_site": 1}
    if model == "stm":
        smallest["words_per_document"] = 3
    worst = min(smallest, key=lambda name: need(**{name: smallest[name]}))
    raise param_error(worst, f"small enough that one run fits in memory (about {total / 2 ** 30:.3g} GiB for "
                      f"D={n_features}, S={n_sites}, N_s={samples_per_site}"
                      + (f", L={words_per_document}" if model == "stm" else "")
                      + f"; this machine has {ram / 2 ** 30:.3g} GiB)", setting[worst])


def run_experiment(*, model: str, n_features: int, n_components: int, n_sites: int, samples_per_site: int,
                   epsilons: Sequence[float], delta: float, runs: int, seed: int | None = None,
                   noise_variance: float = 0.05, words_per_document: int = 3, budget_split: float = 0.5,
                   sensitivity_mode: str = "rigorous", calibration: str = "analytic",
                   words: str = "all", cape_variances: str = RIGOROUS,
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every method ``runs`` times at each epsilon, at one site size (``progress``: as :func:`run_grid`).

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
    cape_variances : {"rigorous", "paper"}
        capeAGN's CAPE variances (:class:`~dpdpca.baselines.tensor.CapeAGN`):
        DP against the aggregator's joint view (default), or the paper's, for
        reproducing its figures (their report carries the delta they give).

    Returns
    -------
    dict
        ``{"epsilons": [...], "methods": {name: {"q_comp": [mean per epsilon],
        "q_comp_std": [...], "q_comp_runs": [[per run] per epsilon]}},
        "privacy": {name: report dict at the last epsilon}, "settings": {...}}``.
    """
    grid = run_grid(model=model, n_features=n_features, n_components=n_components, n_sites=n_sites,
                    points=[(samples_per_site, e) for e in epsilons], delta=delta, runs=runs, seed=seed,
                    noise_variance=noise_variance, words_per_document=words_per_document,
                    budget_split=budget_split, sensitivity_mode=sensitivity_mode, calibration=calibration,
                    words=words, cape_variances=cape_variances, progress=progress)
    methods = {name: {key: [pt["methods"][name][key] for pt in grid["points"]]
                      for key in ("q_comp", "q_comp_std", "q_comp_runs")} for name in METHODS}
    settings = dict(grid["settings"], samples_per_site=samples_per_site)
    return {"epsilons": [float(e) for e in epsilons], "methods": methods, "privacy": grid["privacy"],
            "settings": settings}


def run_grid(*, model: str, n_features: int, n_components: int, n_sites: int,
             points: Sequence[tuple[int, float]], delta: float, runs: int, seed: int | None = None,
             noise_variance: float = 0.05, words_per_document: int = 3, budget_split: float = 0.5,
             sensitivity_mode: str = "rigorous", calibration: str = "analytic",
             words: str = "all", cape_variances: str = RIGOROUS,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every method at each ``(N_s, epsilon)`` point, ``runs`` times (``cape_variances``: as :func:`run_experiment`).

    ``progress``, if given, is called with a label after each run.

    Each run draws ``max N_s`` records per site once; a smaller ``N_s`` uses the
    first ``N_s`` of them (nested samples, as when a study grows), and its
    moments are combined from segment moments (both moments are averages of
    per-record terms, and the MOG correction is linear in the mean).

    Returns
    -------
    dict
        ``{"points": [{"samples_per_site", "epsilon", "methods": {name: {"q_comp",
        "q_comp_std", "q_comp_runs"}}}], "privacy": {...}, "settings": {...}}``.
    """
    if not points:
        raise param_error("points", "non-empty", list(points))
    sizes = sorted({check_int("samples_per_site", n, minimum=1) for n, _ in points})
    check_settings(model=model, n_features=n_features, n_components=n_components, n_sites=n_sites,
                   samples_per_site=sizes[-1], epsilons=[e for _, e in points], delta=delta, runs=runs,
                   noise_variance=noise_variance, words_per_document=words_per_document,
                   budget_split=budget_split, sensitivity_mode=sensitivity_mode, calibration=calibration,
                   cape_variances=cape_variances)
    seq = np.random.SeedSequence(seed)
    model_seq, *run_seqs = seq.spawn(runs + 1)
    model_rng = np.random.default_rng(model_seq)
    truth = (make_mog(n_features, n_components, noise_variance=noise_variance, rng=model_rng) if model == "mog"
             else make_stm(n_features, n_components, words_per_document=words_per_document, rng=model_rng))
    scores: dict[tuple[int, float, str], list[float]] = {}
    privacy: dict[str, Any] = {}
    common = dict(model=model, n_features=n_features, noise_variance=noise_variance, words=words)
    scale = 1.0
    for run_index, run_seq in enumerate(run_seqs, 1):
        data_seq, noise_seq, start_seq = run_seq.spawn(3)
        data_rng = np.random.default_rng(data_seq)
        noise_rng = np.random.default_rng(noise_seq) if seed is not None else None
        starts = np.random.default_rng(start_seq)
        parts = sample_partitions(truth, n_sites, sizes[-1], data_rng)
        nested, scale, scaled_s2 = _nested_moments(parts, sizes, model=model, n_components=n_components,
                                                   n_features=n_features, noise_variance=noise_variance,
                                                   words=words)
        fit_kw = dict(scale=scale, scaled_noise_variance=scaled_s2)
        q_rand = q_comp(random_components(truth, data_rng), truth.means)
        for size in sizes:
            nonpriv = get_spec(REGISTRY_NAMES["nonprivate"]).make(n_components=n_components, epsilon=1.0,
                                                                  delta=0.5, random_state=starts, **common)
            q_np = q_comp(nonpriv.fit_moments(nested[size], **fit_kw).means_, truth.means)
            for n, eps in points:
                if n != size:
                    continue
                scores.setdefault((n, eps, "nonprivate"), []).append(q_np)
                scores.setdefault((n, eps, "random"), []).append(q_rand)
                for name in PRIVATE_METHODS:
                    cape = {"cape_variances": cape_variances} if name == "capeagn" else {}
                    est = get_spec(REGISTRY_NAMES[name]).make(
                        n_components=n_components, epsilon=eps, delta=delta, rng=noise_rng,
                        budget_split=budget_split, sensitivity_mode=sensitivity_mode, calibration=calibration,
                        random_state=starts, **common, **cape)
                    est.fit_moments(nested[size], **fit_kw)
                    scores.setdefault((n, eps, name), []).append(q_comp(est.means_, truth.means))
                    privacy[name] = est.privacy_.to_dict()
        privacy["nonprivate"] = nonpriv.privacy_.to_dict()
        if progress is not None:
            progress(f"run {run_index}/{runs}")
    out_points = [{"samples_per_site": int(n), "epsilon": float(eps),
                   "methods": {name: {"q_comp": _mean(scores[(n, eps, name)]),
                                      "q_comp_std": _std(scores[(n, eps, name)]),
                                      "q_comp_runs": scores[(n, eps, name)]} for name in METHODS}}
                  for n, eps in points]
    settings = {"model": model, "n_features": n_features, "n_components": n_components, "n_sites": n_sites,
                "delta": delta, "runs": runs, "seed": seed,
                "noise_variance": noise_variance if model == "mog" else None,
                "words_per_document": words_per_document if model == "stm" else None,
                "budget_split": budget_split, "sensitivity_mode": sensitivity_mode, "calibration": calibration,
                "cape_variances": cape_variances, "words": words if model == "stm" else None,
                "sample_scale": scale if model == "mog" else None,
                "noise": "seeded numpy Generator (experiment)" if seed is not None else "OS entropy"}
    return {"points": out_points, "privacy": privacy, "settings": settings}


def _nested_moments(parts: list[np.ndarray], sizes: list[int], **kw: Any) -> tuple[dict[int, list[SiteMoments]],
                                                                                     float, float]:
    """Site moments of the first ``n`` records for each ``n`` in ``sizes`` (ascending), from segments."""
    nested: dict[int, list[SiteMoments]] = {}
    running: list[SiteMoments] | None = None
    start, scale, scaled_s2 = 0, 1.0, 0.0
    for size in sizes:
        segment, scale, scaled_s2 = site_moments([p[start:size] for p in parts], **kw)
        if running is None:
            running = segment
        else:
            running = [_combine(a, b) for a, b in zip(running, segment)]
        nested[size] = running
        start = size
    return nested, scale, scaled_s2


def _combine(a: SiteMoments, b: SiteMoments) -> SiteMoments:
    """Moments of the union of two disjoint record sets (size-weighted averages)."""
    n = a.n_samples + b.n_samples
    wa, wb = a.n_samples / n, b.n_samples / n
    m2 = wa * a.m2 + wb * b.m2
    m3 = wa * a.m3 + wb * b.m3
    return SiteMoments(exact_symmetric2(m2), exact_symmetric3(m3), n)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _std(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
