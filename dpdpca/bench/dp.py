"""``dpdpca bench dp``: speed of the exact discrete Gaussian, and what the calibrations cost.

One run, one process, one core.  JSON keys:

``discrete_gaussian_samples_per_s``
    Object keyed by sigma as ``f"{sigma:g}"`` (``"10"``, ``"1e+06"``, ``"1e+09"``,
    ``"1e+12"``, plus ``"1e+18"``, the protocol's scale): exact samples per second
    from the OS entropy source, drawing ``samples`` values at once.
``discrete_gaussian_goal_ratio``
    Same keys: samples/s divided by the goal 30,700/s (307,720 = d(d+1)/2 for
    d = 784 in 10 s); >= 1 meets the goal.
``protocol_triangle_s``
    Seconds to draw the d(d+1)/2 = 307,720 entries for d = 784 at the protocol's
    sigma (DiscreteGaussianMechanism at epsilon = 1, delta = 1e-5, a 60-bit
    sensitivity); only without ``--quick``.
``discrete_over_float_gaussian_time``
    Time per exact discrete sample / time per float64 Gaussian sample (OS source).
``os_over_generator_time``
    Discrete sampling time from OS entropy / from an explicit numpy Generator.
``sigma_analytic_over_classic``
    Object keyed by epsilon (``"0.1"``, ``"1"``, ``"4"``) at delta = 1e-5: analytic
    (Balle-Wang) sigma / classic sigma.  Below 1 means less noise.
``sigma_discrete_over_analytic``
    Same keys: the rigorous discrete-Gaussian sigma (zCDP, any dimension) /
    the analytic continuous sigma.  The price of a provable bound for vectors.
``samples``, ``quick``
"""

from __future__ import annotations

import json
import time
from fractions import Fraction
from typing import Any, Callable

import click
import numpy as np

from dpdpca.dp import (
    DiscreteGaussianMechanism,
    calibrate_discrete_gaussian,
    calibrate_gaussian,
    resolve_source,
    sample_discrete_gaussian,
)
from dpdpca.progress import Progress, quiet_option

SIGMAS = (10, 10**6, 10**9, 10**12, 10**18)
EPSILONS = (0.1, 1.0, 4.0)
DELTA = 1e-5
GOAL_PER_S = 30_700
TRIANGLE = 784 * 785 // 2


def _rate(fn: Any, n: int) -> float:
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def run(quick: bool = False, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure everything; return the JSON-ready dict.  ``progress`` is called after each phase
    (:func:`phases` of them)."""
    tick = progress or (lambda label: None)
    n = 20_000 if quick else TRIANGLE
    rates = {}
    for s in SIGMAS:
        rates[f"{s:g}"] = _rate(lambda s=s: sample_discrete_gaussian(s * s, n), n)
        tick(f"discrete Gaussian at sigma {s:g}")
    out: dict[str, Any] = {
        "samples": n,
        "quick": quick,
        "discrete_gaussian_samples_per_s": rates,
        "discrete_gaussian_goal_ratio": {k: v / GOAL_PER_S for k, v in rates.items()},
    }
    src = resolve_source(None)
    m = 200_000 if quick else 2_000_000
    float_rate = _rate(lambda: src.standard_normal(m), m)
    out["discrete_over_float_gaussian_time"] = float_rate / rates["1e+06"]
    gen_rate = _rate(lambda: sample_discrete_gaussian(10**12, n, rng=np.random.default_rng(0)), n)
    out["os_over_generator_time"] = gen_rate / rates["1e+12"]
    tick("float Gaussian and seeded generator")
    if not quick:
        mech = DiscreteGaussianMechanism(epsilon=1.0, delta=DELTA, sensitivity=2**60 + 1)
        t0 = time.perf_counter()
        mech.sample_symmetric_upper(784)
        out["protocol_triangle_s"] = time.perf_counter() - t0
        out["protocol_sigma"] = mech.sigma
        tick("d=784 upper triangle")
    out["sigma_analytic_over_classic"] = {
        f"{e:g}": calibrate_gaussian(epsilon=e, delta=DELTA, sensitivity=1.0)
        / calibrate_gaussian(epsilon=e, delta=DELTA, sensitivity=1.0, calibration="classic")
        for e in EPSILONS
    }
    out["sigma_discrete_over_analytic"] = {
        f"{e:g}": float(calibrate_discrete_gaussian(epsilon=e, delta=DELTA, sensitivity=1) / Fraction(1)) ** 0.5
        / calibrate_gaussian(epsilon=e, delta=DELTA, sensitivity=1.0)
        for e in EPSILONS
    }
    return out


def phases(quick: bool = False) -> int:
    """The number of ``progress`` calls :func:`run` makes."""
    return len(SIGMAS) + 1 + (not quick)


@click.command("dp")
@click.option("--quick", is_flag=True, help="20,000 samples per sigma instead of 307,720 (d = 784).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(quick: bool, as_json: bool, quiet: bool) -> None:
    """Exact discrete-Gaussian throughput and calibration ratios (in-run)."""
    with Progress("bench dp", total=phases(quick), quiet=quiet) as progress:
        result = run(quick, progress=progress)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
        return
    click.echo(f"discrete Gaussian, {result['samples']} exact samples per sigma (OS entropy, one core)")
    click.echo(f"{'sigma':>8} {'samples/s':>12} {'x goal 30.7k/s':>15}")
    for k, v in result["discrete_gaussian_samples_per_s"].items():
        click.echo(f"{k:>8} {v:>12,.0f} {result['discrete_gaussian_goal_ratio'][k]:>15.2f}")
    if "protocol_triangle_s" in result:
        click.echo(f"d=784 upper triangle at sigma={result['protocol_sigma']:.3g}: {result['protocol_triangle_s']:.2f} s")
    click.echo(f"discrete / float Gaussian time per sample: {result['discrete_over_float_gaussian_time']:.1f}")
    click.echo(f"OS entropy / numpy Generator time: {result['os_over_generator_time']:.2f}")
    click.echo(f"{'epsilon':>8} {'analytic/classic':>17} {'discrete/analytic':>18}   (delta = 1e-5)")
    for k, v in result["sigma_analytic_over_classic"].items():
        click.echo(f"{k:>8} {v:>17.4f} {result['sigma_discrete_over_analytic'][k]:>18.4f}")
