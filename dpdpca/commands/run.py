"""``dpdpca run``: owners, proxy and data user end to end on one machine.

In one process, or one OS process per party with ``--processes``; the
options become the protocol's option groups (:mod:`dpdpca.protocol.config`)
and go unchanged to :func:`dpdpca.protocol.runner.run_protocol`.  The
per-role commands are :mod:`dpdpca.commands.roles`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from dpdpca._io import ReservedOutput
from dpdpca.commands.privacy_options import apply_feature_bounds, bounds_options, ledger_options, open_ledger, \
    release_options
from dpdpca.commands.protocol_options import (Pool, noise_options, packing_option, range_proofs_option, scheduler_option,
                                              scheme_option, workers_option)
from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.protocol.params import MAX_KAPPA
from dpdpca.progress import Progress, quiet_option

__all__ = ["run_cmd"]


def _json_safe(obj: Any) -> Any:
    """Infinite or NaN floats as strings, so that the JSON stays strict."""
    import math

    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj



@click.command("run")
@click.option("--data", "data_file", type=click.Path(dir_okay=False), default=None,
              help="Data matrix (.csv, .npy or .parquet), rows are samples. Default: the bundled digits dataset "
                   "(1797 x 64).")
@click.option("--dataset", default="digits", show_default=True, help="Named offline dataset when --data is absent.")
@click.option("--owners", default=5, show_default=True, type=int, help="Number of data owners L.")
@click.option("--components", default=5, show_default=True, type=int, help="Number of principal components k.")
@click.option("--epsilon", default=1.0, show_default=True, type=float)
@click.option("--delta", default=1e-5, show_default=True, type=float)
@click.option("--key-bits", default=2048, show_default=True, type=click.IntRange(max=MAX_KEY_BITS),
              help=f"Paillier modulus bits (at most {MAX_KEY_BITS}).")
@click.option("--insecure-test-key", is_flag=True, help="Allow keys below 2048 bits (tests only).")
@click.option("--frac-bits", default=16, show_default=True, type=int, help="Fixed-point fraction bits f.")
@click.option("--kappa", default=40, show_default=True, type=int,
              help=f"Statistical hiding bits of the mask, in [40, {MAX_KAPPA}].")
@click.option("--quorum", default=None, type=int, help="Shares the proxy needs (default: all owners).")
@click.option("--max-owners", default=None, type=int, help="Declared maximum owners (slot width); default --owners.")
@click.option("--no-clip", is_flag=True, help="Reject rows of norm > 1 instead of clipping them.")
@range_proofs_option
@noise_options
@release_options
@bounds_options
@ledger_options
@workers_option
@scheduler_option
@packing_option
@scheme_option
@click.option("--processes", is_flag=True, help="Run every party as a separate OS process (messages only).")
@click.option("--verify", is_flag=True, help="Check S' - G' == S-bar exactly against a plaintext reference.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the summary.")
@quiet_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write components.npz, result.json and (with matplotlib) scree.png, components.png here.")
def run_cmd(data_file: str | None, dataset: str, owners: int, components: int, epsilon: float, delta: float,
            key_bits: int, insecure_test_key: bool, frac_bits: int, kappa: int, quorum: int | None,
            max_owners: int | None, no_clip: bool, range_proofs: bool, range_proof_mode: str, calibration: str, sensitivity_mode: str, noise_lattice: str,
            release: str | None, noise_by: str, honest_owners: int | None, feature_bounds: Any,
            feature_bounds_file: str | None, no_feature_bounds: bool, ledger_path: str | None,
            budget_epsilon: float | None, budget_delta: float | None,
            workers: int, scheduler: str | None, packing: str, scheme: str, processes: bool, verify: bool,
            as_json: bool, quiet: bool, out_dir: str | None) -> None:
    """Run owners, proxy and data user end to end on one machine."""
    from dpdpca._validation import check_delta, check_int
    from dpdpca.data import clip_rows, clipping_note, load_dataset, load_file, partition
    from dpdpca.errors import DataError
    from dpdpca.metrics import captured_energy_ratio
    from dpdpca.protocol.config import DeclaredBounds, Deployment, KeyOptions, ProtocolOptions, ReleaseOptions
    from dpdpca.protocol.runner import owner_ids, progress_steps, run_protocol

    # The privacy setting, validated once into the frozen value everything below takes.
    release_opts = ReleaseOptions(epsilon=epsilon, delta=delta, calibration=calibration,
                                  sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice, release=release,
                                  noise_by=noise_by, honest_owners=honest_owners)
    check_int("owners", owners, minimum=1)
    check_int("components", components, minimum=1)
    rel = release_opts.mode
    release_opts.check_owners(owners=owners, quorum=quorum)
    # --out is reserved (its files' temporary files made) before the run, whose cost a --ledger records: an --out
    # it cannot write is refused first; the click context removes what was not written when the command ends
    ctx = click.get_current_context()
    outputs = {} if out_dir is None else {
        name: ctx.with_resource(ReservedOutput(Path(out_dir) / name, what="--out"))
        for name in ("components.npz", "result.json")}
    ledger = open_ledger(ledger_path, budget_epsilon, budget_delta)
    dataset_bounds = None
    if data_file is not None:
        X, source = load_file(data_file), str(data_file)
    else:
        ds = load_dataset(dataset)
        X, source, dataset_bounds = ds.X, dataset, ds.bounds
    check_int("components", components, minimum=1, maximum=X.shape[1])
    if out_dir is not None:  # the figures too are reserved before any owner encrypts (d is known now)
        from dpdpca.commands._figures import run_figure_names

        figures = {name: ctx.with_resource(ReservedOutput(Path(out_dir) / name, what="--out"))
                   for name in run_figure_names(None if data_file else dataset, X.shape[1])}
    check_delta("delta", delta, n_rows=X.shape[0])  # N is known here: delta < 1/N
    X, bounds_info = apply_feature_bounds(X, dataset_bounds=dataset_bounds, feature_bounds=feature_bounds,
                                          bounds_file=feature_bounds_file, no_feature_bounds=no_feature_bounds)
    # Refuse what cannot be measured before any owner encrypts: the summary's captured-energy
    # ratio needs the non-private PCA of the clipped, centred data to capture some energy.
    X_clipped = clip_rows(X)[0] if not no_clip else X
    if not np.any(np.ptp(X_clipped, axis=0) > 0):  # exact: every row equal (constant, all-zero or one row)
        raise DataError(f"data must vary after clipping and centring (the captured-energy ratio is undefined "
                        f"otherwise), got {X.shape[0]} row(s) that are all equal; nothing was encrypted")
    parts = partition(X, owners)
    with Pool(workers, scheduler) as pool, Progress("run", total=progress_steps(owners), quiet=quiet) as tick:
        options = ProtocolOptions(
            release=release_opts,
            key=KeyOptions(key_bits=key_bits, insecure_test_key=insecure_test_key, frac_bits=frac_bits, kappa=kappa,
                           packing=packing, scheme=scheme),
            bounds=DeclaredBounds(max_owners=max_owners, clip=not no_clip, range_proofs=range_proofs,
                                  range_proof_mode=range_proof_mode),
            deployment=Deployment(launcher="processes" if processes else "in-process", executor=pool,
                                  quorum=quorum, verify=verify))
        # the proxy prices its release with the calibration that draws the noise, refuses it past the
        # ledger's budget before drawing (nothing is decrypted), and records it
        run = run_protocol(parts, n_components=components, options=options, progress=tick, ledger=ledger,
                           ledger_label=f"dpdpca run {source}")
    result = run.result
    by_id = dict(zip(owner_ids(len(parts)), parts))  # the runner names owners "1".."L"; look them up by id
    X_ref = np.vstack([by_id[o] for o in run.owners_present])
    X_ref = clip_rows(X_ref)[0] if not no_clip else X_ref
    ratio = captured_energy_ratio(result.components, X_ref, center=True)
    summary: dict[str, Any] = {
        "data": source,
        "n_rows": int(result.extra["n_rows"]),
        "n_features": int(X.shape[1]),
        "owners": owners,
        "owners_present": run.owners_present,
        "components_shape": list(result.components.shape),
        "captured_energy_ratio": float(ratio),
        "eigenvalues": [float(x) for x in result.eigenvalues],
        "privacy": result.privacy.to_dict(),
        "timings": result.timings.to_dict(),
        "bytes_sent": dict(result.bytes_sent),
        "rows_clipped": run.rows_clipped,
        "feature_bounds": bounds_info,
        "release": rel,
        "noise_by": noise_by,
        "params": {**dict(result.params), "epsilon": epsilon, "delta": delta, "calibration": calibration,
                   "sensitivity_mode": sensitivity_mode, "clip": not no_clip, "processes": processes,
                   "range_proofs": range_proofs, "range_proof_mode": range_proof_mode},
    }
    if "coalitions" in result.extra:
        summary["coalitions"] = result.extra["coalitions"]
    if ledger is not None:
        from dpdpca.dp import PrivacyLedger

        summary["ledger"] = {"path": str(ledger.path), **_json_safe(PrivacyLedger(ledger.path).spent())}
    if run.verify is not None:
        summary["verify"] = run.verify
    if out_dir is not None:
        buf = io.BytesIO()
        np.savez(buf, components=result.components, eigenvalues=result.eigenvalues)
        outputs["components.npz"].write(buf.getvalue())
        outputs["result.json"].write_json(summary)
        from dpdpca.commands._figures import run_figures

        for note in run_figures(figures, result=result, X_ref=X_ref, dataset=None if data_file else dataset):
            click.echo(note, err=True)
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
    else:
        click.echo(_human_summary(summary))
    clip_note = clipping_note(sum(run.rows_clipped.values()), int(X_ref.shape[0]))
    if clip_note is not None:
        click.echo(f"dpdpca run: {clip_note}", err=True)


def privacy_lines(p: dict[str, Any]) -> list[str]:
    """The privacy report (``PrivacyReport.to_dict()``) as the human summaries print it."""
    return [f"privacy: ({p['epsilon']:g}, {p['delta']:.3g})-DP, {p['mechanism']} ({p['calibration']}), "
            f"sigma={p['sigma']:.4g}, sensitivity={p['sensitivity']:.4g} ({p['sensitivity_mode']}), "
            f"{p['neighbouring']}, noise added by {p['noise_added_by']}",
            f"  notes: {p['notes']}"]


def party_timing_lines(parties: dict[str, dict[str, float]]) -> list[str]:
    """One line per party: its total seconds and each phase's (``Timings.to_dict()["parties"]``)."""
    return [f"  {party:<10} {sum(phases.values()):8.2f} s  ("
            + ", ".join(f"{ph} {sec:.2f}" for ph, sec in phases.items()) + ")" for party, phases in parties.items()]


def _human_summary(s: dict[str, Any]) -> str:
    t = s["timings"]
    lines = [
        f"dpdpca run: {s['data']} ({s['n_rows']} rows x {s['n_features']} features), "
        f"{len(s['owners_present'])}/{s['owners']} owners, k={s['components_shape'][1]}",
        f"captured energy ratio q/q_o vs non-private PCA: {s['captured_energy_ratio']:.4f}",
        *privacy_lines(s["privacy"]),
        f"timings: total {t['total_s']:.2f} s, critical path {t['critical_path_s']:.2f} s",
    ]
    lines += party_timing_lines(t["parties"])
    lines.append("bytes sent: " + ", ".join(f"{k} {v:,}" for k, v in s["bytes_sent"].items()))
    lines.append("rows clipped to norm 1: " + (", ".join(f"owner {k}: {v}" for k, v in s["rows_clipped"].items())
                                               or "none"))
    if s.get("feature_bounds"):
        fb = s["feature_bounds"]
        lines.append(f"feature bounds [{fb['lo']:g}, {fb['hi']:g}] ({fb['source']}): rows scaled into the unit ball, "
                     f"{fb['rows_out_of_bounds']} outside the bounds clipped to them")
    for who, g in (s.get("coalitions") or {}).items():
        eps = g["epsilon"] if isinstance(g["epsilon"], str) else f"{g['epsilon']:.4g}"
        lines.append(f"  against {who}: epsilon {eps}, delta {g['delta']:g} ({g['what']})")
    if "ledger" in s:
        led = s["ledger"]
        eps = led["epsilon"] if isinstance(led["epsilon"], str) else f"{led['epsilon']:.4g}"
        lines.append(f"ledger {led['path']}: {led['releases']} releases, composed ({eps}, {led['delta']:g})-DP "
                     f"({led['method']})")
    if "verify" in s:
        lines.append(f"verify: max |S' - G' - S-bar| in the integer domain = {s['verify']['max_abs_integer_error']}")
    return "\n".join(lines)
