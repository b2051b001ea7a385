"""Benchmarks, run as ``dpdpca bench NAME [--quick] --json``.

Each benchmark prints one JSON object of side-by-side ratios measured in one
run (absolute times on shared machines are noisy; ratios are not).
"""

from __future__ import annotations

import click

from dpdpca._lazy import LazyGroup

BENCHMARKS: dict[str, str] = {
    "crypto": "dpdpca.bench.crypto:command",
    "dp": "dpdpca.bench.dp:command",
    "protocol": "dpdpca.bench.protocol:command",
    "baselines": "dpdpca.bench.baselines:command",
    "tensor": "dpdpca.bench.tensor:command",
    "timing": "dpdpca.bench.timing:command",
    "utility": "dpdpca.bench.utility:command",
    "network": "dpdpca.bench.network:command",
    "strangers": "dpdpca.bench.strangers:command",
    "intake": "dpdpca.bench.intake:command",
    "scale": "dpdpca.bench.scale:command",
    "streaming": "dpdpca.bench.streaming:command",
    "proofs": "dpdpca.bench.proofs:command",
}


@click.group(cls=LazyGroup, lazy=BENCHMARKS)
def bench_group() -> None:
    """Benchmarks: crypto, dp, protocol, baselines, tensor, timing, intake, utility, network, strangers, scale, streaming,
    proofs."""
