"""``dpdpca bench baselines``: the plaintext pipelines against one pooled covariance + eigh.

All timings come from the same run on the same data (absolute seconds on a
shared machine are noisy; the ratio is what we report).  Two references, both
non-distributed PCA of the pooled data:

* ``pooled_eigh``, the issue's "one pooled numpy covariance + eigh":
  ``numpy.cov(X, rowvar=False)`` and ``numpy.linalg.eigh``;
* ``pooled_second_moment_eigh``, the cheapest possible one: ``X^T X / N`` and
  ``numpy.linalg.eigh``, without ``numpy.cov``'s centring pass (the bench data
  are centred already, and the pipelines do not centre).

Each pipeline runs end to end
through :func:`dpdpca.driver.run` with production noise (OS entropy), every
party simulated in this one process, so its wall time is the *total* work of
all parties; ``critical_path_ratio`` uses the pipeline's own critical path
(sites in parallel) instead.  Each figure is the best of ``repeats``
interleaved runs.

BLAS runs single-threaded by default (``--blas-threads``) for the reference
and the pipelines alike: on a shared 2-core machine threaded BLAS makes the
wall times swing by 2x or more; one thread makes the ratio a stable ratio of
work.

Data: Fashion-MNIST (60000 x 784, Debian ``dataset-fashion-mnist``) when
installed, else the clearly named ``synthetic-d784-n60000`` set
(:func:`~dpdpca.data.make_covariance_data`, seed 0).  Both are centred and
scaled by the maximum row norm.  ``--quick`` uses the first 6000 rows.

JSON keys: ``ratio_to_pooled_eigh`` ({method: ratio} against ``numpy.cov`` +
``eigh``, production noise from OS entropy), ``ratio_to_pooled_second_moment_eigh``
({method: ratio} against ``X^T X / N`` + ``eigh``), ``critical_path_ratio``
({method: ratio}, against ``pooled_eigh``), ``noise_share`` ({method:
fraction of the best run's wall time spent drawing noise}),
``ratio_to_pooled_eigh_seeded_noise`` ({method: ratio} with noise from an
explicit seeded numpy Generator: experiments only, shows what the OS entropy
sampler costs), ``seconds`` ({"pooled_eigh", "pooled_second_moment_eigh",
method...}: best wall times),
``dataset``, ``source``, ``n``, ``d``, ``sites``, ``n_components``,
``repeats``, ``quick``, ``blas_threads`` (null: library default), ``goal``
(1.5), ``stretch_goal`` (1.1).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

import click
import numpy as np

from dpdpca.bench._data import blas_threads_limited
from dpdpca.data import load_dataset, make_covariance_data, partition, preprocess
from dpdpca.driver import run as run_method
from dpdpca._validation import param_error
from dpdpca.errors import DataError
from dpdpca.pipelines import pipeline_names
from dpdpca.progress import Progress, quiet_option

#: The headline methods timed by default; ``--methods`` takes any plaintext pipeline of the registry.
METHODS = ("capepca", "dpdispca")
SITES = 10
N_COMPONENTS = 50
GOAL, STRETCH = 1.5, 1.1


def load_bench_data(quick: bool) -> tuple[np.ndarray, str, str]:
    """Fashion-MNIST if installed, else the named synthetic stand-in; preprocessed."""
    try:
        ds = load_dataset("fashion-mnist")
        X, name, source = ds.X, ds.name, ds.source
    except DataError:
        # quick: the first 6000 rows of the same set (the Generator fills rows in order)
        X = make_covariance_data(6000 if quick else 60000, 784, decay=40.0, rng=np.random.default_rng(0))
        name, source = "synthetic-d784-n60000", "make_covariance_data(60000, 784, decay=40, seed 0)"
    if quick:
        X = X[:6000]
    return preprocess(X), name, source


def _pooled_eigh(X: np.ndarray) -> None:
    np.linalg.eigh(np.cov(X, rowvar=False))


def _pooled_second_moment_eigh(X: np.ndarray) -> None:
    np.linalg.eigh(X.T @ X / X.shape[0])


def _noise_seconds(result: Any) -> float:
    parties = result.timings.to_dict()["parties"]
    return sum(phases.get("noise", 0.0) for phases in parties.values())


def run(quick: bool = False, repeats: int = 5, blas_threads: int | None = 1,
        methods: Sequence[str] = METHODS, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure; return the JSON-ready dict (``progress`` is called after each method of each repeat).

    ``blas_threads`` limits BLAS threads for the reference and the pipelines alike
    (``None``: leave the library default).  One thread makes the ratio a ratio of
    work and keeps it stable on a shared machine; it needs threadpoolctl
    (installed with scikit-learn), else the default is kept and reported.
    """
    with blas_threads_limited(blas_threads) as used_threads:
        out = _measure(quick, repeats, _check_methods(methods), progress=progress)
    out["blas_threads"] = used_threads
    return out


def _check_methods(methods: Sequence[str]) -> tuple[str, ...]:
    """Registered plaintext pipelines only (the encrypted one has its own benchmark, ``bench protocol``)."""
    allowed = pipeline_names(crypto=False)
    names = tuple(methods)
    for m in names:
        if m not in allowed:
            raise param_error("--methods", f"plaintext pipelines among {', '.join(allowed)}", m)
    if not names:
        raise param_error("--methods", "a non-empty list", "")
    return names


def _measure(quick: bool, repeats: int, methods: tuple[str, ...] = METHODS,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    X, name, source = load_bench_data(quick)
    parts = partition(X, SITES)
    references = {"pooled_eigh": _pooled_eigh, "pooled_second_moment_eigh": _pooled_second_moment_eigh}
    best = {key: float("inf") for key in (*references, *methods)}
    seeded = {m: float("inf") for m in methods}
    critical = {m: float("inf") for m in methods}
    noise = {m: float("inf") for m in methods}
    for rep in range(repeats):  # interleaved, so drift on a shared machine hits every figure alike
        for key, reference in references.items():
            t0 = time.perf_counter()
            reference(X)
            best[key] = min(best[key], time.perf_counter() - t0)
        for method in methods:
            t0 = time.perf_counter()
            result = run_method(method, parts, n_components=N_COMPONENTS, epsilon=1.0, delta=1e-5)
            elapsed = time.perf_counter() - t0
            if elapsed < best[method]:
                best[method], noise[method] = elapsed, _noise_seconds(result)
            critical[method] = min(critical[method], result.timings.critical_path_s())
            # experiments only: the same pipeline with noise from an explicit seeded Generator
            t0 = time.perf_counter()
            run_method(method, parts, n_components=N_COMPONENTS, epsilon=1.0, delta=1e-5,
                       rng=np.random.default_rng(rep))
            seeded[method] = min(seeded[method], time.perf_counter() - t0)
            if progress is not None:
                progress(f"{method}, repeat {rep + 1}/{repeats}")
    ref = best["pooled_eigh"]
    return {
        "ratio_to_pooled_eigh": {m: best[m] / ref for m in methods},
        "ratio_to_pooled_second_moment_eigh": {m: best[m] / best["pooled_second_moment_eigh"] for m in methods},
        "critical_path_ratio": {m: critical[m] / ref for m in methods},
        "noise_share": {m: noise[m] / best[m] for m in methods},
        "ratio_to_pooled_eigh_seeded_noise": {m: seeded[m] / ref for m in methods},
        "seconds": best,
        "dataset": name, "source": source, "n": int(X.shape[0]), "d": int(X.shape[1]), "sites": SITES,
        "n_components": N_COMPONENTS, "repeats": repeats, "quick": quick, "goal": GOAL, "stretch_goal": STRETCH,
    }


@click.command("baselines")
@click.option("--quick", is_flag=True, help="First 6000 rows only.")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, help="Best of this many runs.")
@click.option("--blas-threads", type=click.IntRange(min=0), default=1, show_default=True,
              help="BLAS threads for everything measured (0: library default).")
@click.option("--methods", default=",".join(METHODS), show_default=True,
              help="Comma-separated plaintext pipelines of the registry: " + ", ".join(pipeline_names(crypto=False)))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(quick: bool, repeats: int, blas_threads: int, methods: str, as_json: bool, quiet: bool) -> None:
    """Pipeline time / pooled numpy covariance + eigh (d=784, N=60000, S=10); capePCA and DPdisPCA by default."""
    names = [m.strip() for m in methods.split(",") if m.strip()]
    with Progress("bench baselines", total=len(names) * repeats, quiet=quiet) as progress:
        result = run(quick, repeats, blas_threads or None, names, progress=progress)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
        return
    click.echo(f"{result['dataset']} ({result['n']} x {result['d']}), S={result['sites']}, "
               f"K={result['n_components']}, best of {result['repeats']}, BLAS threads: "
               f"{result['blas_threads'] or 'default'}")
    click.echo(f"pooled numpy.cov + eigh: {result['seconds']['pooled_eigh']:.3f} s (reference); "
               f"X^T X / N + eigh: {result['seconds']['pooled_second_moment_eigh']:.3f} s")
    click.echo(f"{'method':<10}{'ratio':>8}{'vs X^T X':>10}{'critical path':>15}{'noise share':>13}"
               f"{'seeded noise':>14}   goal <= {GOAL}, stretch <= {STRETCH}")
    for m in result["ratio_to_pooled_eigh"]:
        click.echo(f"{m:<10}{result['ratio_to_pooled_eigh'][m]:>8.3f}"
                   f"{result['ratio_to_pooled_second_moment_eigh'][m]:>10.3f}{result['critical_path_ratio'][m]:>15.3f}"
                   f"{result['noise_share'][m]:>13.2f}{result['ratio_to_pooled_eigh_seeded_noise'][m]:>14.3f}")
