"""``dpdpca run``, ``keygen``, ``owner``, ``proxy`` and ``user``: the Wang-Chang protocol.

``dpdpca run`` runs all three parties on one machine (in one process, or one
process per party with ``--processes``).  The per-role commands run each
party on its own, exchanging files:

.. code-block:: sh

    dpdpca keygen --out-dir keys                      # public.json, private.json (0600)
    dpdpca owner keygen --owner-id a --out-dir ids    # ids/a.identity.json (0600), ids/a.verify.json
    dpdpca owner share --public keys/public.json --identity ids/a.identity.json --data a.csv --out a.msg
    dpdpca proxy aggregate --public keys/public.json --owner-keys ids/a.verify.json \
                           --owner-keys ids/b.verify.json --out-dir state a.msg b.msg
    dpdpca proxy finish --state state --epsilon 1 --delta 1e-5 --out result.msg
    dpdpca user finish --private keys/private.json --owner-keys ids/a.verify.json \
                       --owner-keys ids/b.verify.json result.msg --components 2 --out pcs.npz

Every error is a :class:`~dpdpca.errors.DpdpcaError` with a one-line message;
outputs are written atomically only after the step succeeded.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np

from dpdpca._io import atomic_write_bytes, atomic_write_json, read_bytes_file, read_json_file
from dpdpca.commands.network import (client_from_options, proxy_client_options, proxy_serve_cmd, result_from_proxy,
                                     share_to_proxy, user_identity_cmd)
from dpdpca.commands.privacy_options import (apply_feature_bounds, bounds_options, ledger_options, open_ledger,
                                             release_options)
from dpdpca.dp.release import NOISE_BY, RELEASES
from dpdpca.errors import FileAccessError, MessageError, ParameterError, ProtocolError
from dpdpca.protocol.add_remove import owner_noise_calibration
from dpdpca.protocol.params import check_release_options, resolve_release


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


NOISE_OPTIONS = [
    click.option("--calibration", type=click.Choice(["analytic", "classic"]), default="analytic", show_default=True,
                 help="analytic: rigorous zCDP calibration of the discrete Gaussian (Canonne, Kamath & Steinke); "
                      "classic: the paper's sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon."),
    click.option("--sensitivity-mode", type=click.Choice(["rigorous", "paper"]), default="rigorous",
                 show_default=True, help="rigorous: our replace-one bound; paper: Wang & Chang's Delta = 1."),
    click.option("--noise-lattice", type=click.Choice(["n-scaled", "integer"]), default="n-scaled",
                 show_default=True,
                 help="n-scaled (rigorous): noise on N*S; integer: the paper's form N*G' (leaks v v^T mod N)."),
]


#: Process-pool size for the crypto batches (1: serial, in this process).
workers_option = click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
                              help="Processes for the crypto batches (local process pool).")


def noise_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(NOISE_OPTIONS):
        fn = opt(fn)
    return fn


def _read_bytes(path: str, what: str) -> bytes:
    return read_bytes_file(path, what)


def _load_public(path: str) -> Any:
    from dpdpca.protocol.params import ProtocolParams

    return ProtocolParams.from_json(read_json_file(path, "public parameters"))


def _load_private(path: str) -> tuple[Any, Any]:
    from dpdpca.crypto import PrivateKey
    from dpdpca.protocol.params import PARAMS_KEY, ProtocolParams

    data = read_json_file(path, "private key")
    if (not isinstance(data, dict) or not isinstance(data.get(PARAMS_KEY), dict)
            or not isinstance(data.get("pub"), dict)):
        raise MessageError(f"private key file {path!r} must be written by dpdpca keygen (objects "
                           f"{PARAMS_KEY!r} and 'pub'), got other JSON")
    params = ProtocolParams.from_json({**data["pub"], PARAMS_KEY: data[PARAMS_KEY]})
    sk = PrivateKey.from_json({k: v for k, v in data.items() if k != PARAMS_KEY},
                              insecure_test_key=bool(data[PARAMS_KEY].get("insecure_test_key", False)))
    return sk, params


def _load_owner_keys(paths: tuple[str, ...]) -> Any:
    from dpdpca.protocol.identity import OwnerKeyring

    return OwnerKeyring.load(paths)


#: ``--max-features``: the largest d accepted from a message, checked before any allocation.
max_features_option = click.option("--max-features", default=4096, show_default=True, type=click.IntRange(min=1),
                                   help="Largest number of features d accepted from a message.")
#: ``--owner-keys``: the owners' verify-key files (repeat the option, one or more files).
owner_keys_option = click.option("--owner-keys", "owner_keys", required=True, multiple=True,
                                 type=click.Path(dir_okay=False),
                                 help="Owners' verify-key file(s) from 'dpdpca owner keygen' (repeatable).")


#: A Dask scheduler for the crypto batches of owners and proxy (optional extra [distributed]).
scheduler_option = click.option("--scheduler", default=None, metavar="tcp://HOST:8786",
                                help="Run the crypto batches on this Dask cluster (pip install "
                                     "'dpdpca[distributed]'); decryption always stays local.")
#: Slot layout of new public parameters.
packing_option = click.option("--packing", type=click.Choice(["wide", "plain"]), default="wide", show_default=True,
                              help="wide: slots sized for the decrypted values (the user subtracts v'v'^T under "
                                   "encryption first); plain: the earlier layout sized for R''.")


class _Pool:
    """Context manager: a Dask engine with ``scheduler``, a process pool with ``workers > 1``, else None."""

    def __init__(self, workers: int, scheduler: str | None = None) -> None:
        self.workers = workers
        self.scheduler = scheduler
        self.pool: Any = None
        self.engine: Any = None

    def __enter__(self) -> Any:
        if self.scheduler:
            from dpdpca.crypto.compute import dask_engine

            self.engine = dask_engine(self.scheduler)
            return self.engine
        if self.workers > 1:
            from dpdpca.crypto import local_process_pool

            self.pool = local_process_pool(self.workers)
        return self.pool

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.pool.shutdown()
        if self.engine is not None:
            self.engine.close()


# ---------------------------------------------------------------------------
# dpdpca run
# ---------------------------------------------------------------------------

@click.command("run")
@click.option("--data", "data_file", type=click.Path(dir_okay=False), default=None,
              help="Data matrix (.csv or .npy), rows are samples. Default: the bundled digits dataset (1797 x 64).")
@click.option("--dataset", default="digits", show_default=True, help="Named offline dataset when --data is absent.")
@click.option("--owners", default=5, show_default=True, type=int, help="Number of data owners L.")
@click.option("--components", default=5, show_default=True, type=int, help="Number of principal components k.")
@click.option("--epsilon", default=1.0, show_default=True, type=float)
@click.option("--delta", default=1e-5, show_default=True, type=float)
@click.option("--key-bits", default=2048, show_default=True, type=int, help="Paillier modulus bits.")
@click.option("--insecure-test-key", is_flag=True, help="Allow keys below 2048 bits (tests only).")
@click.option("--frac-bits", default=16, show_default=True, type=int, help="Fixed-point fraction bits f.")
@click.option("--kappa", default=40, show_default=True, type=int, help="Statistical hiding bits of the mask (>= 40).")
@click.option("--quorum", default=None, type=int, help="Shares the proxy needs (default: all owners).")
@click.option("--max-owners", default=None, type=int, help="Declared maximum owners (slot width); default --owners.")
@click.option("--no-clip", is_flag=True, help="Reject rows of norm > 1 instead of clipping them.")
@noise_options
@release_options
@bounds_options
@ledger_options
@workers_option
@scheduler_option
@packing_option
@click.option("--processes", is_flag=True, help="Run every party as a separate OS process (messages only).")
@click.option("--verify", is_flag=True, help="Check S' - G' == S-bar exactly against a plaintext reference.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the summary.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write components.npz, result.json and (with matplotlib) scree.png, components.png here.")
def run_cmd(data_file: str | None, dataset: str, owners: int, components: int, epsilon: float, delta: float,
            key_bits: int, insecure_test_key: bool, frac_bits: int, kappa: int, quorum: int | None,
            max_owners: int | None, no_clip: bool, calibration: str, sensitivity_mode: str, noise_lattice: str,
            release: str | None, noise_by: str, honest_owners: int | None, feature_bounds: Any,
            feature_bounds_file: str | None, no_feature_bounds: bool, ledger_path: str | None,
            budget_epsilon: float | None, budget_delta: float | None,
            workers: int, scheduler: str | None, packing: str, processes: bool, verify: bool, as_json: bool,
            out_dir: str | None) -> None:
    """Run owners, proxy and data user end to end on one machine."""
    from dpdpca._validation import check_int
    from dpdpca.data import clip_rows, load_dataset, load_file, partition
    from dpdpca.errors import DataError
    from dpdpca.metrics import captured_energy_ratio
    from dpdpca.dp.costs import protocol_release_cost
    from dpdpca.protocol.config import DeclaredBounds, Deployment, KeyOptions, ProtocolOptions, ReleaseOptions
    from dpdpca.protocol.params import check_noise_options, check_release_options
    from dpdpca.protocol.runner import owner_ids, progress_steps, run_protocol

    check_noise_options(epsilon=epsilon, delta=delta, calibration=calibration, sensitivity_mode=sensitivity_mode,
                        noise_lattice=noise_lattice)
    check_int("owners", owners, minimum=1)
    check_int("components", components, minimum=1)
    release_opts = ReleaseOptions(epsilon=epsilon, delta=delta, calibration=calibration,
                                  sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice, release=release,
                                  noise_by=noise_by, honest_owners=honest_owners)
    rel = release_opts.mode
    check_release_options(release=rel, noise_by=noise_by, honest_owners=honest_owners, owners=owners, quorum=quorum)
    ledger = open_ledger(ledger_path, budget_epsilon, budget_delta)
    dataset_bounds = None
    if data_file is not None:
        X, source = load_file(data_file), str(data_file)
    else:
        ds = load_dataset(dataset)
        X, source, dataset_bounds = ds.X, dataset, ds.bounds
    check_int("components", components, minimum=1, maximum=X.shape[1])
    X, bounds_info = apply_feature_bounds(X, dataset_bounds=dataset_bounds, feature_bounds=feature_bounds,
                                          bounds_file=feature_bounds_file, no_feature_bounds=no_feature_bounds)
    # Refuse what cannot be measured before any owner encrypts: the summary's captured-energy
    # ratio needs the non-private PCA of the clipped, centred data to capture some energy.
    X_clipped = clip_rows(X)[0] if not no_clip else X
    if not np.any(np.ptp(X_clipped, axis=0) > 0):  # exact: every row equal (constant, all-zero or one row)
        raise DataError(f"data must vary after clipping and centring (the captured-energy ratio is undefined "
                        f"otherwise), got {X.shape[0]} row(s) that are all equal; nothing was encrypted")
    cost = None
    if ledger is not None:  # refused here, before anyone encrypts or draws noise
        cost = protocol_release_cost(epsilon=epsilon, delta=delta, release=rel, noise_by=noise_by, d=X.shape[1],
                                     frac_bits=frac_bits, calibration=calibration, owners=owners,
                                     honest_owners=honest_owners, quorum=quorum, kappa=kappa,
                                     label=f"dpdpca run {source}")
        ledger.check(cost)
    parts = partition(X, owners)
    show_bar = not as_json and sys.stderr.isatty()
    with _Pool(workers, scheduler) as pool, _progress(show_bar, progress_steps(owners)) as tick:
        options = ProtocolOptions(
            release=release_opts,
            key=KeyOptions(key_bits=key_bits, insecure_test_key=insecure_test_key, frac_bits=frac_bits, kappa=kappa,
                           packing=packing),
            bounds=DeclaredBounds(max_owners=max_owners, clip=not no_clip),
            deployment=Deployment(launcher="processes" if processes else "in-process", executor=pool,
                                  quorum=quorum, verify=verify))
        run = run_protocol(parts, n_components=components, options=options, progress=tick)
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
                   "sensitivity_mode": sensitivity_mode, "clip": not no_clip, "processes": processes},
    }
    if "coalitions" in result.extra:
        summary["coalitions"] = result.extra["coalitions"]
    if ledger is not None and cost is not None:
        summary["ledger"] = {"path": str(ledger.path), **_json_safe(ledger.record(cost))}
    if run.verify is not None:
        summary["verify"] = run.verify
    if out_dir is not None:
        buf = io.BytesIO()
        np.savez(buf, components=result.components, eigenvalues=result.eigenvalues)
        atomic_write_bytes(Path(out_dir) / "components.npz", buf.getvalue())
        atomic_write_json(Path(out_dir) / "result.json", summary)
        from dpdpca.commands._figures import run_figures

        for note in run_figures(out_dir, result=result, X_ref=X_ref, dataset=None if data_file else dataset):
            click.echo(note, err=True)
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
    else:
        click.echo(_human_summary(summary))


class _progress:
    """click.progressbar on stderr when interactive; a no-op tick otherwise."""

    def __init__(self, show: bool, steps: int) -> None:
        self.show, self.steps = show, steps
        self.bar: Any = None

    def __enter__(self) -> Callable[[str], None]:
        if not self.show:
            return lambda label: None
        self.bar = click.progressbar(length=self.steps, label="dpdpca", file=sys.stderr,
                                     item_show_func=lambda x: x)
        self.bar.__enter__()

        def tick(label: str) -> None:
            self.bar.update(1, label)
        return tick

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


def _human_summary(s: dict[str, Any]) -> str:
    p = s["privacy"]
    t = s["timings"]
    lines = [
        f"dpdpca run: {s['data']} ({s['n_rows']} rows x {s['n_features']} features), "
        f"{len(s['owners_present'])}/{s['owners']} owners, k={s['components_shape'][1]}",
        f"captured energy ratio q/q_o vs non-private PCA: {s['captured_energy_ratio']:.4f}",
        f"privacy: ({p['epsilon']:g}, {p['delta']:.3g})-DP, {p['mechanism']} ({p['calibration']}), "
        f"sigma={p['sigma']:.4g}, sensitivity={p['sensitivity']:.4g} ({p['sensitivity_mode']}), "
        f"{p['neighbouring']}, noise added by {p['noise_added_by']}",
        f"  notes: {p['notes']}",
        f"timings: total {t['total_s']:.2f} s, critical path {t['critical_path_s']:.2f} s",
    ]
    for party, phases in t["parties"].items():
        detail = ", ".join(f"{ph} {sec:.2f}" for ph, sec in phases.items())
        lines.append(f"  {party:<10} {sum(phases.values()):8.2f} s  ({detail})")
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


# ---------------------------------------------------------------------------
# dpdpca keygen
# ---------------------------------------------------------------------------

@click.command("keygen")
@click.option("--out-dir", required=True, type=click.Path(file_okay=False), help="Writes public.json, private.json.")
@click.option("--key-bits", default=2048, show_default=True, type=int)
@click.option("--insecure-test-key", is_flag=True, help="Allow keys below 2048 bits (tests only).")
@click.option("--max-owners", default=16, show_default=True, type=int, help="Declared maximum number of owners.")
@click.option("--max-rows-per-owner", default=1 << 20, show_default=True, type=int,
              help="Declared maximum rows per owner.")
@click.option("--frac-bits", default=16, show_default=True, type=int)
@click.option("--kappa", default=40, show_default=True, type=int)
@click.option("--min-epsilon", default=0.01, show_default=True, type=float,
              help="Smallest epsilon the noise allowance is sized for.")
@click.option("--min-delta", default=1e-12, show_default=True, type=float,
              help="Smallest delta the noise allowance is sized for.")
@click.option("--force", is_flag=True, help="Overwrite an existing private.json / public.json.")
@packing_option
def keygen_cmd(out_dir: str, key_bits: int, insecure_test_key: bool, max_owners: int, max_rows_per_owner: int,
               frac_bits: int, kappa: int, min_epsilon: float, min_delta: float, force: bool, packing: str) -> None:
    """Data user: generate the key pair and the public protocol parameters."""
    from dpdpca.crypto import generate_keypair
    from dpdpca.protocol.params import PARAMS_KEY, ProtocolParams

    targets = [Path(out_dir) / "private.json", Path(out_dir) / "public.json"]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:  # checked before the (slow) key generation
        raise FileAccessError(f"keygen output must not exist (pass --force to overwrite), got {existing[0]!r}")
    pk, sk = generate_keypair(key_bits, insecure_test_key=insecure_test_key)
    params = ProtocolParams.create(pk, max_owners=max_owners, max_rows_per_owner=max_rows_per_owner,
                                   frac_bits=frac_bits, kappa=kappa, min_epsilon=min_epsilon, min_delta=min_delta,
                                   packing=packing)
    public = params.to_json()
    private = {**sk.to_json(), PARAMS_KEY: public[PARAMS_KEY]}
    atomic_write_json(targets[0], private, mode=0o600, exclusive=not force)
    atomic_write_json(targets[1], public, exclusive=not force)
    click.echo(f"wrote {Path(out_dir) / 'public.json'} and {Path(out_dir) / 'private.json'} (mode 0600); "
               f"key {params.key_fingerprint[:16]}, {params.layout.slots} slots of {params.layout.slot_bits} bits")


# ---------------------------------------------------------------------------
# dpdpca owner share
# ---------------------------------------------------------------------------

@click.group("owner")
def owner_group() -> None:
    """Data owner: make a signing identity, encrypt and sign a scatter share."""


@owner_group.command("keygen")
@click.option("--owner-id", required=True, help="1-64 characters [A-Za-z0-9_.:-], starting alphanumeric.")
@click.option("--out-dir", required=True, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing identity.")
def owner_keygen_cmd(owner_id: str, out_dir: str, force: bool) -> None:
    """Write <id>.identity.json (Ed25519 signing key, mode 0600) and <id>.verify.json (public)."""
    from dpdpca.commands._identity import write_identity
    from dpdpca.protocol.identity import check_owner_id

    write_identity(out_dir, check_owner_id(owner_id), force=force, what="owner keygen")


@owner_group.command("share")
@click.option("--public", "public_path", required=True, type=click.Path(dir_okay=False))
@click.option("--identity", "identity_path", required=True, type=click.Path(dir_okay=False),
              help="This owner's identity file from 'dpdpca owner keygen'.")
@click.option("--data", "data_file", required=True, type=click.Path(dir_okay=False))
@click.option("--owner-id", default=None, help="Optional check: must be the identity's owner id.")
@click.option("--out", "out_path", default=None, type=click.Path(dir_okay=False),
              help="Write the share to this file; or send it with --proxy.")
@click.option("--no-clip", is_flag=True, help="Reject rows of norm > 1 instead of clipping them.")
@click.option("--insecure-test-key", is_flag=True,
              help="This owner accepts a data-user key below 2048 bits (tests only).")
@release_options
@click.option("--owners", type=int, default=None, help="L, with --noise-by owners (the proxy's --owners).")
@click.option("--quorum", type=int, default=None, help="Q, with --noise-by owners: shares are sized for it.")
@click.option("--epsilon", type=float, default=None, help="With --noise-by owners: the release's epsilon.")
@click.option("--delta", type=float, default=None, help="With --noise-by owners: the release's delta.")
@bounds_options
@workers_option
@scheduler_option
@proxy_client_options
def owner_share_cmd(public_path: str, identity_path: str, data_file: str, owner_id: str | None,
                    out_path: str | None, no_clip: bool, insecure_test_key: bool, release: str | None, noise_by: str,
                    honest_owners: int | None, owners: int | None, quorum: int | None, epsilon: float | None,
                    delta: float | None, feature_bounds: Any, feature_bounds_file: str | None,
                    no_feature_bounds: bool, workers: int, scheduler: str | None, proxy_url: str | None,
                    ca_cert: str | None, token: str | None) -> None:
    """Encrypt this owner's share E[R^l], E[v^l] and sign it (with its count N^l in the centred release); write
    it or POST it to the proxy."""
    from dpdpca.data import load_file
    from dpdpca.protocol.identity import OwnerIdentity
    from dpdpca.protocol.parties import DataOwner

    if (out_path is None) == (proxy_url is None):
        raise ParameterError(f"exactly one of --out and --proxy must be given, got out={out_path!r} "
                             f"proxy={proxy_url!r:.80}")
    params = _load_public(public_path)
    identity = OwnerIdentity.load(identity_path)
    if owner_id is not None and owner_id != identity.owner_id:
        raise ProtocolError(f"--owner-id must be the identity's owner id {identity.owner_id!r}, got {owner_id!r:.80}")
    owner_id = identity.owner_id
    client = None if proxy_url is None else client_from_options(proxy_url, identity, ca_cert, token)
    X = load_file(data_file)
    X, _ = apply_feature_bounds(X, dataset_bounds=None, feature_bounds=feature_bounds, bounds_file=feature_bounds_file,
                                no_feature_bounds=no_feature_bounds)
    rel = resolve_release(release)
    noise = None
    if noise_by == "owners":
        if owners is None or epsilon is None or delta is None:
            raise ParameterError(f"--owners, --epsilon and --delta must be given with --noise-by owners, got "
                                 f"owners={owners}, epsilon={epsilon}, delta={delta}")
        check_release_options(release=rel, noise_by=noise_by, honest_owners=honest_owners, owners=owners,
                              quorum=quorum)
        noise = owner_noise_calibration({"noise_by": "owners", "epsilon": epsilon, "delta": delta,
                                         "honest_owners": honest_owners}, d=X.shape[1], frac_bits=params.frac_bits,
                                        owners=owners, quorum=quorum, present=owners)
    with _Pool(workers, scheduler) as pool:
        owner = DataOwner(params, identity, clip=not no_clip, executor=pool, insecure_test_key=insecure_test_key,
                          release=rel, noise=noise)
        data = owner.share(X)
    if client is not None:
        where = share_to_proxy(client, owner_id, data)
    else:
        atomic_write_bytes(str(out_path), data)
        where = f"wrote {out_path}"
    click.echo(f"owner {owner_id}: {owner.n_rows_} rows, {owner.rows_clipped_} clipped; {where} "
               f"({len(data):,} bytes)")


# ---------------------------------------------------------------------------
# dpdpca proxy aggregate / finish
# ---------------------------------------------------------------------------

@click.group("proxy")
def proxy_group() -> None:
    """Proxy: aggregate shares, then mask and add DP noise."""


@proxy_group.command("aggregate")
@click.option("--public", "public_path", required=True, type=click.Path(dir_okay=False))
@owner_keys_option
@click.option("--out-dir", required=True, type=click.Path(file_okay=False))
@click.option("--quorum", default=None, type=int, help="Minimum shares (default: all given).")
@click.option("--release", type=click.Choice(RELEASES), default=None,
              help="The release the owners' shares are for (default add-remove).")
@max_features_option
@workers_option
@scheduler_option
@click.argument("shares", nargs=-1, required=True, type=click.Path(dir_okay=False))
def proxy_aggregate_cmd(public_path: str, owner_keys: tuple[str, ...], out_dir: str, quorum: int | None,
                        release: str | None, max_features: int, workers: int, scheduler: str | None,
                        shares: tuple[str, ...]) -> None:
    """Check and aggregate signed owner shares; write the proxy state (state.msg, public.json, owner-keys.json)."""
    from dpdpca.protocol.parties import Proxy

    params = _load_public(public_path)
    keyring = _load_owner_keys(owner_keys)
    with _Pool(workers, scheduler) as pool:
        # Default quorum: every share given (more than max_owners fail on receipt, naming the slot width).
        default_quorum = min(len(shares), params.max_owners, len(keyring))
        proxy = Proxy(params, keyring, quorum=quorum if quorum is not None else default_quorum,
                      executor=pool, max_features=max_features, release=resolve_release(release))
        for path in shares:
            proxy.receive_share(_read_bytes(path, "share"))
        n = proxy.close_collection()
        state = proxy.state_bytes()
    out = Path(out_dir)
    atomic_write_json(out / "public.json", params.to_json())
    atomic_write_json(out / "owner-keys.json", keyring.to_json())
    atomic_write_bytes(out / "state.msg", state)
    click.echo(f"aggregated {len(proxy.owners_)} signed shares ({', '.join(proxy.owners_)}), "
               f"N = {n if n is not None else 'private (add/remove release)'}; "
               f"wrote {out / 'state.msg'}")


@proxy_group.command("finish")
@click.option("--state", "state_dir", required=True, type=click.Path(file_okay=False))
@click.option("--epsilon", required=True, type=float)
@click.option("--delta", required=True, type=float)
@noise_options
@click.option("--noise-by", type=click.Choice(NOISE_BY), default="proxy", show_default=True,
              help="owners: the owners' shares already carry the noise (add-remove release).")
@click.option("--honest-owners", type=int, default=None, help="t, with --noise-by owners (default L).")
@click.option("--owners", type=int, default=None, help="L, with --noise-by owners (default: the listed owners).")
@ledger_options
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False))
@max_features_option
@workers_option
@scheduler_option
def proxy_finish_cmd(state_dir: str, epsilon: float, delta: float, calibration: str, sensitivity_mode: str,
                     noise_lattice: str, noise_by: str, honest_owners: int | None, owners: int | None,
                     ledger_path: str | None, budget_epsilon: float | None, budget_delta: float | None,
                     out_path: str, max_features: int, workers: int, scheduler: str | None) -> None:
    """Mask, build G and add the noise under encryption; write E[R''], E[v'] for the user (once per session)."""
    from dpdpca.protocol.identity import OwnerKeyring
    from dpdpca.protocol.ledger import ReleaseLedger
    from dpdpca.protocol.parties import Proxy
    from dpdpca.protocol.params import check_noise_options

    check_noise_options(epsilon=epsilon, delta=delta, calibration=calibration, sensitivity_mode=sensitivity_mode,
                        noise_lattice=noise_lattice)
    state = Path(state_dir)
    params = _load_public(str(state / "public.json"))
    keyring = OwnerKeyring.from_json(read_json_file(state / "owner-keys.json", "proxy owner keys"))
    with _Pool(workers, scheduler) as pool:
        proxy = Proxy.from_state(params, keyring, _read_bytes(str(state / "state.msg"), "proxy state"),
                                 executor=pool, ledger=ReleaseLedger(state / "ledger.json"),
                                 max_features=max_features)
        ledger = open_ledger(ledger_path, budget_epsilon, budget_delta)
        cost = None
        if ledger is not None:  # refused before any noise is drawn
            from dpdpca.dp.costs import protocol_release_cost

            n_owners = owners if owners is not None else len(keyring)
            cost = protocol_release_cost(epsilon=epsilon, delta=delta, release=proxy.release, noise_by=noise_by,
                                         d=int(proxy.d or 1), frac_bits=params.frac_bits, calibration=calibration,
                                         owners=n_owners, honest_owners=honest_owners, quorum=proxy.quorum,
                                         kappa=params.kappa, label=f"proxy finish {state_dir}")
            ledger.check(cost)
        data = proxy.finish(epsilon=epsilon, delta=delta, calibration=calibration,
                            sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice, noise_by=noise_by,
                            honest_owners=honest_owners, owners=owners)
    atomic_write_bytes(out_path, data)
    if ledger is not None and cost is not None:
        spent = ledger.record(cost)
        click.echo(f"privacy ledger {ledger.path}: {spent['releases']} releases, composed "
                   f"({spent['epsilon']:.4g}, {spent['delta']:g})-DP ({spent['method']})")
    p = proxy.privacy_
    click.echo(f"wrote {out_path} ({len(data):,} bytes); ({p.epsilon:g}, {p.delta:.3g})-DP, sigma={p.sigma:.4g}; "
               f"session recorded in {state / 'ledger.json'}")


# ---------------------------------------------------------------------------
# dpdpca user finish
# ---------------------------------------------------------------------------

@click.group("user")
def user_group() -> None:
    """Data user: check the signed counts, decrypt once and run PCA."""


@user_group.command("reveal-count", hidden=True, context_settings={"ignore_unknown_options": True})
@click.argument("ignored", nargs=-1, type=click.UNPROCESSED)
def user_reveal_count_cmd(ignored: tuple[str, ...]) -> None:
    """Retired: protocol version 1's count round (a decryption oracle)."""
    raise ProtocolError("user reveal-count must not be used: the count round no longer exists (owners send "
                        "their row counts in their signed shares, and the data user decrypts nothing for the "
                        "proxy), got a count request")


@user_group.command("finish")
@click.option("--private", "private_path", required=True, type=click.Path(dir_okay=False))
@owner_keys_option
@click.option("--components", required=True, type=int)
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False))
@click.option("--ledger", "ledger_path", default=None, type=click.Path(dir_okay=False),
              help="Release ledger (default: releases.json beside the private key).")
@max_features_option
@workers_option
@proxy_client_options
@click.option("--identity", "identity_path", default=None, type=click.Path(dir_okay=False),
              help="With --proxy: the data user's identity file from 'dpdpca user identity'.")
@click.argument("result", type=click.Path(dir_okay=False), required=False)
def user_finish_cmd(private_path: str, owner_keys: tuple[str, ...], components: int, out_path: str,
                    ledger_path: str | None, max_features: int, workers: int, proxy_url: str | None,
                    ca_cert: str | None, token: str | None, identity_path: str | None, result: str | None) -> None:
    """Check the owners' signed counts, decrypt R'' and v' (once per session), write the components (.npz).

    RESULT is the proxy's result file; or, with ``--proxy``, the user waits
    until the proxy service has released the result and fetches it.
    """
    from dpdpca._validation import check_int
    from dpdpca.protocol.ledger import ReleaseLedger
    from dpdpca.protocol.parties import DataUser

    check_int("components", components, minimum=1)
    if (result is None) == (proxy_url is None):
        raise ParameterError(f"exactly one of RESULT and --proxy must be given, got result={result!r:.80} "
                             f"proxy={proxy_url!r:.80}")
    client = None
    if proxy_url is not None:
        from dpdpca.protocol.identity import OwnerIdentity

        if identity_path is None:
            raise ParameterError("--identity must be given with --proxy (dpdpca user identity), got none")
        client = client_from_options(proxy_url, OwnerIdentity.load(identity_path), ca_cert, token, user=True)
    sk, params = _load_private(private_path)
    keyring = _load_owner_keys(owner_keys)
    ledger = ReleaseLedger(ledger_path if ledger_path is not None else Path(private_path).parent / "releases.json")
    with _Pool(workers) as pool:
        user = DataUser(sk, params, owner_keys=keyring, executor=pool, ledger=ledger, max_features=max_features)
        data = result_from_proxy(client) if client is not None else _read_bytes(str(result), "result")
        res = user.finish(data, n_components=components)
    buf = io.BytesIO()
    np.savez(buf, components=res.components, eigenvalues=res.eigenvalues,
             privacy=np.array(json.dumps(res.privacy.to_dict())))
    atomic_write_bytes(out_path, buf.getvalue())
    n_rows = res.extra["n_rows"] if "n_rows" in res.extra else f"private (noisy {res.extra['n_rows_noisy']:.1f})"
    click.echo(json.dumps({"components_shape": list(res.components.shape), "n_rows": n_rows,
                           "privacy": res.privacy.to_dict(), "out": str(out_path)}, sort_keys=True))


proxy_group.add_command(proxy_serve_cmd)
user_group.add_command(user_identity_cmd)
