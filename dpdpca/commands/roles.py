"""``dpdpca keygen``, ``owner``, ``proxy`` and ``user``: each party of the protocol on its own.

Each command runs one party's steps (:mod:`dpdpca.protocol.roles`) over a
transport: named files (:class:`~dpdpca.protocol.transport.PathTransport`),
or, with ``--proxy``, the HTTPS proxy service
(:class:`~dpdpca.net.client.ServiceTransport`, :mod:`dpdpca.commands.network`):

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

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from dpdpca._io import ReservedOutput, read_bytes_file, read_json_file
from dpdpca._validation import MAX_EPSILON, MIN_EPSILON, check_int, param_error
from dpdpca.commands.network import proxy_client_options, proxy_serve_cmd, transport_from_options, user_identity_cmd
from dpdpca.commands.proxy_admin import proxy_init_cmd, proxy_status_cmd
from dpdpca.commands.privacy_options import apply_feature_bounds, bounds_options, ledger_options, open_ledger, \
    release_options
from dpdpca.commands.protocol_options import (Pool, insecure_test_key_option, load_owner_keys, load_private,
                                              load_public, max_features_option, noise_options, owner_keys_option,
                                              packing_option, range_proof_mode_check_option, range_proofs_option,
                                              scheduler_option, scheme_option, workers_option)
from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.dp.release import NOISE_BY, RELEASES
from dpdpca.errors import FileAccessError, ParameterError, ProtocolError
from dpdpca.progress import Progress, quiet_option
from dpdpca.protocol.bounds import MAX_FEATURES, check_features
from dpdpca.protocol.params import MAX_KAPPA, PARAM_RELEASES, resolve_release

__all__ = ["keygen_cmd", "owner_group", "proxy_group", "user_group"]


# ---------------------------------------------------------------------------
# dpdpca keygen
# ---------------------------------------------------------------------------

@click.command("keygen")
@click.option("--out-dir", required=True, type=click.Path(file_okay=False), help="Writes public.json, private.json.")
@click.option("--key-bits", default=2048, show_default=True, type=click.IntRange(max=MAX_KEY_BITS),
              help=f"Paillier modulus bits (at most {MAX_KEY_BITS}).")
@click.option("--insecure-test-key", is_flag=True, help="Allow keys below 2048 bits (tests only).")
@click.option("--max-owners", default=16, show_default=True, type=int,
              help="Declared maximum number of owners (at most 2^20).")
@click.option("--max-rows-per-owner", default=1 << 20, show_default=True, type=int,
              help="Declared maximum rows per owner (at most 2^40).")
@click.option("--frac-bits", default=16, show_default=True, type=int)
@click.option("--kappa", default=40, show_default=True, type=int,
              help=f"Statistical hiding bits of the centred release's mask, in [40, {MAX_KAPPA}].")
@click.option("--min-epsilon", default=0.01, show_default=True, type=float,
              help=f"Smallest epsilon the noise allowance is sized for, in [{MIN_EPSILON:g}, {MAX_EPSILON:g}].")
@click.option("--min-delta", default=1e-12, show_default=True, type=float,
              help="Smallest delta the noise allowance is sized for.")
@click.option("--force", is_flag=True, help="Overwrite an existing private.json / public.json.")
@packing_option
@scheme_option
@click.option("--release", "declared_release", type=click.Choice(list(PARAM_RELEASES)), default="add-remove",
              show_default=True,
              help="The release the parameters serve: add-remove (the default of every command; about 30% more "
                   "slots per ciphertext), centred, or any (both); the owners and the proxy refuse another.")
@click.option("--features", "features", type=int, default=None,
              help=f"d, the number of features every owner's share must have, at most {MAX_FEATURES} (written to "
                   "public.json; every party refuses another d, and 'proxy serve' needs it so that no uploader fixes "
                   "d for the others).")
def keygen_cmd(out_dir: str, key_bits: int, insecure_test_key: bool, max_owners: int, max_rows_per_owner: int,
               frac_bits: int, kappa: int, min_epsilon: float, min_delta: float, force: bool, packing: str,
               declared_release: str, features: int | None, scheme: str) -> None:
    """Data user: generate the key pair and the public protocol parameters."""
    from dpdpca.protocol.params import PARAMS_KEY
    from dpdpca.protocol.user import DataUser

    targets = [Path(out_dir) / "private.json", Path(out_dir) / "public.json"]
    existing = [str(t) for t in targets if t.exists()]
    if features is not None:
        check_int("features", features, minimum=1, maximum=MAX_FEATURES)
    if existing and not force:  # checked before the (slow) key generation
        raise FileAccessError(f"keygen output must not exist (pass --force to overwrite), got {existing[0]!r}")
    # both reserved before the key generation: an --out-dir where either cannot be written leaves neither
    ctx = click.get_current_context()
    private_out, public_out = (ctx.with_resource(ReservedOutput(t, mode=mode, exclusive=not force, what="--out-dir"))
                               for t, mode in zip(targets, (0o600, 0o644)))
    user = DataUser.generate(key_bits=key_bits, insecure_test_key=insecure_test_key, scheme=scheme,
                             max_owners=max_owners, max_rows_per_owner=max_rows_per_owner, frac_bits=frac_bits,
                             kappa=kappa, min_epsilon=min_epsilon, min_delta=min_delta, packing=packing,
                             release=declared_release, d=features)
    params = user.params
    public = params.to_json()
    private = {**user.private_key.to_json(), PARAMS_KEY: public[PARAMS_KEY]}
    private_out.write_json(private)
    public_out.write_json(public)
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


def _randomness_path(identity_path: str, owner_id: str, given: str | None) -> Path:
    """``--randomness``, or ``<owner_id>.randomness.bin`` beside the owner's identity file (its own directory)."""
    return Path(given) if given is not None else Path(identity_path).resolve().parent / f"{owner_id}.randomness.bin"


@owner_group.command("prepare")
@click.option("--public", "public_path", required=True, type=click.Path(dir_okay=False))
@click.option("--identity", "identity_path", required=True, type=click.Path(dir_okay=False),
              help="This owner's identity file; the randomness goes beside it (the owner's own directory).")
@click.option("--d", "d", default=None, type=int,
              help="Features of the share to come: public.json's d when it declares one (the default then), else "
                   "required and at most --max-features.")
@click.option("--release", type=click.Choice(RELEASES), default=None,
              help="The release the share is for (default: the rigorous default, add-remove).")
@click.option("--randomness", "randomness_path", default=None, type=click.Path(dir_okay=False),
              help="Where to write it (mode 0600; default <owner_id>.randomness.bin beside --identity).")
@insecure_test_key_option("owner")
@max_features_option
def owner_prepare_cmd(public_path: str, identity_path: str, d: int | None, release: str | None,
                      randomness_path: str | None, insecure_test_key: bool, max_features: int) -> None:
    """Offline: make the encryptions of zero of one share before the data exist (the next 'owner share' uses them
    once and deletes the file)."""
    import time

    from dpdpca.protocol.identity import OwnerIdentity
    from dpdpca.protocol.owner import DataOwner

    params = load_public(public_path, insecure_test_key=insecure_test_key)
    # the share's d, checked before any encryption is made for it: public.json's, when it declares one
    if d is not None:
        d = params.check_d(check_int("--d", d, minimum=1), who="--d")
    elif params.d is not None:
        d = params.d
    else:
        raise ParameterError("--d must be given when public.json declares no d (keygen --features), got none")
    check_features(d, max_features)
    identity = OwnerIdentity.load(identity_path)
    owner = DataOwner(params, identity, insecure_test_key=insecure_test_key, release=resolve_release(release))
    path = _randomness_path(identity_path, identity.owner_id, randomness_path)
    if path.exists():
        raise FileAccessError(f"--randomness must not exist yet (each set is used once), got existing {str(path)!r}")
    # reserved before the work: a --randomness that cannot be written is refused before a factor is made
    out = click.get_current_context().with_resource(ReservedOutput(path, mode=0o600, exclusive=True,
                                                                   what="--randomness"))
    start = time.perf_counter()
    made = owner.precompute(d)
    if made is None:
        raise ParameterError(f"owner prepare needs a scheme whose offline randomness goes to a file (Paillier), got "
                             f"scheme {params.scheme.name!r}: its owners make their encryptions of zero in memory "
                             f"(dpdpca run, --processes), never in a file")
    out.write(made.to_bytes(params.public_key))
    count = sum(len(v) for v in made.sections.values())
    click.echo(f"owner {identity.owner_id}: {count} encryptions of zero for d={d} ({owner.release}) in "
               f"{time.perf_counter() - start:.2f} s; wrote {path} (mode 0600, used once by 'owner share')")


@owner_group.command("share")
@click.option("--public", "public_path", required=True, type=click.Path(dir_okay=False))
@click.option("--identity", "identity_path", required=True, type=click.Path(dir_okay=False),
              help="This owner's identity file from 'dpdpca owner keygen'.")
@click.option("--data", "data_file", required=True, type=click.Path(dir_okay=False))
@click.option("--owner-id", default=None, help="Optional check: must be the identity's owner id.")
@click.option("--out", "out_path", default=None, type=click.Path(dir_okay=False),
              help="Write the share to this file; or send it with --proxy.")
@click.option("--no-clip", is_flag=True, help="Reject rows of norm > 1 instead of clipping them.")
@insecure_test_key_option("owner")
@click.option("--randomness", "randomness_path", default=None, type=click.Path(dir_okay=False),
              help="Encryptions of zero from 'owner prepare' (default <owner_id>.randomness.bin beside --identity, "
                   "if present); read once and deleted.")
@release_options
@click.option("--owners", type=int, default=None, help="L, with --noise-by owners (the proxy's --owners).")
@click.option("--quorum", type=int, default=None, help="Q, with --noise-by owners: shares are sized for it.")
@click.option("--epsilon", type=float, default=None,
              help="The release's epsilon: with --noise-by owners (sizes the noise) or --ledger (prices it).")
@click.option("--delta", type=float, default=None,
              help="The release's delta: with --noise-by owners or --ledger.")
@ledger_options
@bounds_options
@range_proofs_option
@workers_option
@scheduler_option
@proxy_client_options
@max_features_option
@quiet_option
def owner_share_cmd(ledger_path: str | None, budget_epsilon: float | None, budget_delta: float | None, public_path: str, identity_path: str, data_file: str, owner_id: str | None,
                    out_path: str | None, no_clip: bool, insecure_test_key: bool, release: str | None, noise_by: str,
                    honest_owners: int | None, owners: int | None, quorum: int | None, epsilon: float | None,
                    delta: float | None, feature_bounds: Any, feature_bounds_file: str | None,
                    no_feature_bounds: bool, range_proofs: bool, range_proof_mode: str, workers: int,
                    scheduler: str | None,
                    proxy_url: str | None, ca_cert: str | None, token: str | None, max_features: int, quiet: bool,
                    randomness_path: str | None = None) -> None:
    """Encrypt this owner's share E[R^l], E[v^l] and sign it (with its count N^l in the centred release); write
    it or POST it to the proxy."""
    from dpdpca.data import clipping_note, load_file
    from dpdpca.protocol.config import ReleaseOptions
    from dpdpca.protocol.identity import OwnerIdentity
    from dpdpca.protocol.owner import DataOwner
    from dpdpca.protocol.roles import owner_round
    from dpdpca.protocol.transport import PathTransport

    if (out_path is None) == (proxy_url is None):
        raise ParameterError(f"exactly one of --out and --proxy must be given, got out={out_path!r} "
                             f"proxy={proxy_url!r:.80}")
    params = load_public(public_path, insecure_test_key=insecure_test_key)
    # what the public parameters bound is checked before any work starts (the randomness made in the background
    # below is sized by public.json's d): a declared d above --max-features, --owners above max_owners
    if params.d is not None:
        check_features(params.d, max_features)
    if owners is not None:
        _check_owners(owners, params)
    identity = OwnerIdentity.load(identity_path)
    if owner_id is not None and owner_id != identity.owner_id:
        raise ProtocolError(f"--owner-id must be the identity's owner id {identity.owner_id!r}, got {owner_id!r:.80}")
    owner_id = identity.owner_id
    service = None if proxy_url is None else transport_from_options(proxy_url, identity, ca_cert, token)
    # --out is reserved before the prepared randomness is consumed and the share encrypted: an --out it cannot
    # write is refused while both are intact (the click context removes the reservation if never written)
    sink = service if service is not None else PathTransport(outbox=[click.get_current_context().with_resource(
        ReservedOutput(str(out_path), mode=0o600, what="--out"))])
    ready = _randomness_path(identity_path, owner_id, randomness_path)
    ahead = _randomness_while_loading(params, resolve_release(release), d=params.d,
                                      wanted=randomness_path is None and not ready.exists() and not range_proofs)
    X = load_file(data_file, max_features=max_features)  # d checked on the first line, before parsing
    params.check_d(X.shape[1], who=f"--data {data_file!r:.80}")
    X, bounds_report = apply_feature_bounds(X, dataset_bounds=None, feature_bounds=feature_bounds,
                                            bounds_file=feature_bounds_file, no_feature_bounds=no_feature_bounds)
    rel = resolve_release(release)
    ledger = open_ledger(ledger_path, budget_epsilon, budget_delta)
    # the release's privacy setting, validated once (its budget is needed for owners' noise and the ledger)
    setting = None if epsilon is None or delta is None else ReleaseOptions(
        epsilon=epsilon, delta=delta, release=rel, noise_by=noise_by, honest_owners=honest_owners)
    cost = None
    spent = None
    locked = contextlib.ExitStack()  # the owner's ledger stays locked from its check to its record
    try:
        if ledger is not None:  # this owner's own budget: refused before anything is encrypted or written
            locked.enter_context(ledger.transaction())
            if setting is None:
                raise ParameterError(f"--epsilon and --delta (the release's budget) must be given with --ledger, got "
                                     f"epsilon={epsilon}, delta={delta}")
            # priced by the release's own calibration (N at its declared maximum: public)
            cost = setting.kind.calibrate(setting, d=X.shape[1], frac_bits=params.frac_bits, kappa=params.kappa,
                                          n=params.n_max, owners=owners or 1, quorum=quorum).cost(
                label=f"owner {owner_id} share, session {params.session_id}")
            ledger.check(cost)
        noise = None
        if noise_by == "owners":
            if owners is None or setting is None:
                raise ParameterError(f"--owners, --epsilon and --delta must be given with --noise-by owners, got "
                                     f"owners={owners}, epsilon={epsilon}, delta={delta}")
            setting.check_owners(owners=owners, quorum=quorum)
            noise = setting.owner_noise(d=X.shape[1], frac_bits=params.frac_bits, owners=owners, quorum=quorum,
                                        present=owners)
    except BaseException:
        locked.close()  # refused before anything was sent: release the ledger
        raise
    try:
        with locked, Pool(workers, scheduler) as pool, Progress("owner share", total=1, quiet=quiet) as progress:
            owner = DataOwner(params, identity, clip=not no_clip, executor=pool, insecure_test_key=insecure_test_key,
                              release=rel, noise=noise, range_proofs=range_proofs,
                              range_proof_mode=range_proof_mode)
            made = "fresh"
            if randomness_path is not None or ready.exists():
                from dpdpca.protocol.offline import OwnerRandomness

                # checked whole (a randomness file of this key, release, d and layout) before it is deleted
                owner.use_randomness(OwnerRandomness.consume(ready, params.public_key, release=rel, d=X.shape[1],
                                                             slots=params.layout.slots))
                made = f"made ahead ({ready})"
            elif ahead is not None and ahead.result() is not None:
                owner.use_randomness(ahead.result())
                made = "made while the data loaded"
            progress.phase(f"encrypting and signing {X.shape[0]} rows x {X.shape[1]} features"
                           + ("" if service is None else ", then sending to the proxy"))
            data = owner_round(owner, X, sink,
                               tick=lambda label: progress("share encrypted, signed and "
                                                           + ("written" if service is None else "sent")))
            spent = ledger.record(cost) if ledger is not None and cost is not None else None
    finally:
        if service is not None:
            service.close()
    where = f"wrote {out_path}" if service is None else \
        f"proxy: {service.answer['status']} ({service.answer.get('detail', '')})"
    if ledger is not None and spent is not None:
        where += (f"; owner ledger {ledger.path}: {spent['releases']} releases, composed "
                  f"({spent['epsilon']:.4g}, {spent['delta']:g})-DP")
    # Both ways a row can be changed, each counted: clamped into the feature bounds, shrunk to norm 1.
    clamped = "" if bounds_report is None else \
        f"{bounds_report['rows_out_of_bounds']} clamped to the feature bounds, "
    click.echo(f"owner {owner_id}: {owner.n_rows_} rows, {clamped}{owner.rows_clipped_} clipped to norm 1; {where} "
               f"({len(data):,} bytes; encryptions of zero {made})")
    note = clipping_note(int(owner.rows_clipped_), int(owner.n_rows_))
    if note is not None:
        click.echo(f"dpdpca owner share: {note}", err=True)


def _check_owners(owners: int, params: Any) -> int:
    """``--owners`` (L) within [1, max_owners] of public.json: the slots are sized for at most that many."""
    if check_int("--owners", owners) not in range(1, params.max_owners + 1):
        raise param_error("--owners", f"in [1, {params.max_owners}] (max_owners in public.json)", owners)
    return owners


class _Background:
    """One call in a daemon thread; :meth:`result` waits for it (None if it failed: the share then draws fresh)."""

    def __init__(self, fn: Any) -> None:
        import threading

        self._value: Any = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name="dpdpca-owner-randomness", daemon=True)
        self._thread.start()

    def _run(self, fn: Any) -> None:
        try:
            self._value = fn()
        except Exception:  # noqa: BLE001 - a failure here only costs the head start
            self._value = None

    def result(self) -> Any:
        self._thread.join()
        return self._value


def _randomness_while_loading(params: Any, release: Any, *, d: int | None, wanted: bool) -> _Background | None:
    """With d declared in public.json, the share's DJN factors in the background while the data load."""
    if not wanted or d is None:
        return None
    from dpdpca.protocol.offline import OwnerRandomness

    return _Background(lambda: OwnerRandomness.make(params.public_key.with_own_base(),
                                                    key_fingerprint=params.key_fingerprint, release=release, d=d,
                                                    slots=params.layout.slots))


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
@range_proofs_option
@workers_option
@scheduler_option
@insecure_test_key_option("proxy")
@click.argument("shares", nargs=-1, required=True, type=click.Path(dir_okay=False))
def proxy_aggregate_cmd(public_path: str, owner_keys: tuple[str, ...], out_dir: str, quorum: int | None,
                        release: str | None, max_features: int, range_proofs: bool, range_proof_mode: str,
                        workers: int,
                        scheduler: str | None, insecure_test_key: bool, shares: tuple[str, ...]) -> None:
    """Check and aggregate signed owner shares; write the proxy state (state.msg, public.json, owner-keys.json).

    It takes no privacy setting, so it does not compare the shares' signed noise labels with the session's (the
    service and dpdpca run refuse another label on arrival): proxy finish does, and refuses a state holding one;
    aggregate again without that share.
    """
    from dpdpca.protocol.proxy import Proxy
    from dpdpca.protocol.roles import ProxySteps, collect_shares
    from dpdpca.protocol.transport import PathTransport

    params = load_public(public_path, insecure_test_key=insecure_test_key)
    keyring = load_owner_keys(owner_keys)
    # the three files are reserved (their temporary files made) before the shares are checked and aggregated: an
    # --out-dir where one cannot be written is refused first, and none is written (the click context removes them)
    ctx, out = click.get_current_context(), Path(out_dir)
    outputs = {name: ctx.with_resource(ReservedOutput(out / name, mode=mode, what="--out-dir"))
               for name, mode in (("public.json", 0o644), ("owner-keys.json", 0o644),
                                  ("state.msg", 0o600))}  # the noiseless aggregate: the proxy's alone
    with Pool(workers, scheduler) as pool:
        # Default quorum: every share given (more than max_owners fail on receipt, naming the slot width).
        default_quorum = min(len(shares), params.max_owners, len(keyring))
        proxy = Proxy(params, keyring, quorum=quorum if quorum is not None else default_quorum,
                      executor=pool, max_features=max_features, release=resolve_release(release),
                      range_proofs=range_proofs, range_proof_mode=range_proof_mode)
        steps = ProxySteps(proxy)
        collect_shares(steps, PathTransport(inbox=shares, what="share"), deadline_s=None, until_quorum=False)
        n = steps.close()
        state = proxy.state_bytes()
    outputs["public.json"].write_json(params.to_json())
    outputs["owner-keys.json"].write_json(keyring.to_json())
    outputs["state.msg"].write(state)
    for owner, why in proxy.excluded_.items():
        click.echo(f"refused owner {owner}: {why}", err=True)
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
@click.option("--range-proofs/--no-range-proofs", "range_proofs", default=None,
              help="Check that 'proxy aggregate' did (or did not) require range proofs (default: no check).")
@range_proof_mode_check_option
@workers_option
@scheduler_option
@insecure_test_key_option("proxy")
def proxy_finish_cmd(state_dir: str, epsilon: float, delta: float, calibration: str, sensitivity_mode: str,
                     noise_lattice: str, noise_by: str, honest_owners: int | None, owners: int | None,
                     ledger_path: str | None, budget_epsilon: float | None, budget_delta: float | None,
                     out_path: str, max_features: int, range_proofs: bool | None, range_proof_mode: str | None,
                     workers: int, scheduler: str | None, insecure_test_key: bool) -> None:
    """Mask, build G and add the noise under encryption; write E[R''], E[v'] for the user (once per session)."""
    from dpdpca.protocol.identity import OwnerKeyring
    from dpdpca.protocol.ledger import ReleaseLedger
    from dpdpca.protocol.config import ReleaseOptions
    from dpdpca.protocol.messages import check_frame
    from dpdpca.protocol.proxy import Proxy
    from dpdpca.protocol.roles import PROXY, USER, ProxySteps
    from dpdpca.protocol.transport import PathTransport

    state = Path(state_dir)
    params = load_public(str(state / "public.json"), insecure_test_key=insecure_test_key)
    keyring = OwnerKeyring.from_json(read_json_file(state / "owner-keys.json", "proxy owner keys"))
    # --out is reserved (its temporary file made beside it) before the session's one release is claimed and any
    # noise drawn: an unwritable --out is refused while the session can still be finished
    with ReservedOutput(out_path, what="--out") as out, Pool(workers, scheduler) as pool:
        state_msg = read_bytes_file(str(state / "state.msg"), "proxy state")
        check_frame(state_msg, f"proxy state file {str(state / 'state.msg')!r}")
        proxy = Proxy.from_state(params, keyring, state_msg, executor=pool,
                                 ledger=ReleaseLedger(state / "ledger.json"), max_features=max_features)
        if range_proofs is not None and range_proofs != proxy.range_proofs:
            raise ParameterError(f"--range-proofs must match the aggregated state (proxy aggregate "
                                 f"{'--range-proofs' if proxy.range_proofs else '--no-range-proofs'}), "
                                 f"got {'--range-proofs' if range_proofs else '--no-range-proofs'}")
        if range_proof_mode is not None and range_proof_mode != proxy.range_proof_mode:
            raise ParameterError(f"--range-proof-mode must match the aggregated state ({proxy.range_proof_mode}), "
                                 f"got {range_proof_mode}")
        ledger = open_ledger(ledger_path, budget_epsilon, budget_delta)
        if owners is not None:
            _check_owners(owners, params)
        # the privacy setting, validated once; finish prices it with the calibration that draws the
        # noise, refuses it past the ledger's budget before drawing, and records it
        options = ReleaseOptions(epsilon=epsilon, delta=delta, calibration=calibration,
                                 sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice, release=proxy.release,
                                 noise_by=noise_by, honest_owners=honest_owners)
        data = ProxySteps(proxy, options, owners=owners, ledger=ledger, label=f"proxy finish {state_dir}").release()
        PathTransport(outbox=[out]).send(PROXY, USER, data)
    if ledger is not None:
        spent = proxy.ledger_entry_
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
@click.option("--range-proofs/--no-range-proofs", "range_proofs", default=False, show_default=True,
              help="Refuse a release whose privacy report does not say the proxy checked owners' range proofs.")
@range_proof_mode_check_option
@insecure_test_key_option("data user", key="its own key")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the summary.")
@quiet_option
@click.argument("result", type=click.Path(dir_okay=False), required=False)
def user_finish_cmd(private_path: str, owner_keys: tuple[str, ...], components: int, out_path: str,
                    ledger_path: str | None, max_features: int, workers: int, proxy_url: str | None,
                    ca_cert: str | None, token: str | None, identity_path: str | None, range_proofs: bool,
                    range_proof_mode: str | None, insecure_test_key: bool, as_json: bool, quiet: bool,
                    result: str | None) -> None:
    """Check the owners' signed counts, decrypt R'' and v' (once per session), write the components (.npz).

    RESULT is the proxy's result file; or, with ``--proxy``, the user waits
    until the proxy service has released the result and fetches it.
    """
    from dpdpca.protocol.ledger import ReleaseLedger
    from dpdpca.protocol.user import DataUser
    from dpdpca.protocol.roles import user_round
    from dpdpca.protocol.transport import PathTransport

    check_int("components", components, minimum=1)
    if (result is None) == (proxy_url is None):
        raise ParameterError(f"exactly one of RESULT and --proxy must be given, got result={result!r:.80} "
                             f"proxy={proxy_url!r:.80}")
    # --out is reserved before the wait for the release and the decryption: an --out it cannot write is refused
    # before them, not after; the click context removes it (and the directories made for it) if never written
    out = click.get_current_context().with_resource(ReservedOutput(out_path, what="--out"))
    service = None
    if proxy_url is not None:
        from dpdpca.protocol.identity import OwnerIdentity

        if identity_path is None:
            raise ParameterError("--identity must be given with --proxy (dpdpca user identity), got none")
        service = transport_from_options(proxy_url, OwnerIdentity.load(identity_path), ca_cert, token, user=True)
    try:
        sk, params = load_private(private_path, insecure_test_key=insecure_test_key)
        if params.d is not None:  # d declared in public.json: --components refused before the release is claimed
            check_int("components", components, minimum=1, maximum=params.d)
        keyring = load_owner_keys(owner_keys)
        ledger = ReleaseLedger(ledger_path if ledger_path is not None else Path(private_path).parent / "releases.json",
                               what="--ledger" if ledger_path is not None else "release ledger")
        ledger.releases()  # read under its lock once: a ledger that cannot be read or written is refused now
        with Pool(workers) as pool, Progress("user finish", total=1, quiet=quiet) as progress:
            user = DataUser(sk, params, owner_keys=keyring, executor=pool, ledger=ledger, max_features=max_features,
                            require_range_proofs=range_proofs or range_proof_mode is not None,
                            require_range_proof_mode=range_proof_mode)
            progress.phase("reading the release" if service is None else
                           "waiting for the proxy's release, then decrypting")
            res = user_round(user, service if service is not None else PathTransport(inbox=[str(result)],
                                                                                     what="result"),
                             n_components=components, tick=progress)
    finally:
        if service is not None:
            service.close()
    buf = io.BytesIO()
    np.savez(buf, components=res.components, eigenvalues=res.eigenvalues,
             privacy=np.array(json.dumps(res.privacy.to_dict())))
    out.write(buf.getvalue())
    n_rows = res.extra["n_rows"] if "n_rows" in res.extra else f"private (noisy {res.extra['n_rows_noisy']:.1f})"
    summary: dict[str, Any] = {"components_shape": list(res.components.shape), "n_rows": n_rows,
                               "n_features": int(res.components.shape[0]),
                               "eigenvalues": [float(x) for x in res.eigenvalues], "privacy": res.privacy.to_dict(),
                               "timings": res.timings.to_dict(), "out": str(out_path)}
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
        return
    from dpdpca.commands.run import party_timing_lines, privacy_lines

    t = summary["timings"]
    lines = [f"dpdpca user finish: {summary['n_features']} features, N = {n_rows}, "
             f"k={summary['components_shape'][1]}; wrote {out_path}",
             "eigenvalues: " + ", ".join(f"{x:.4g}" for x in summary["eigenvalues"]),
             *privacy_lines(summary["privacy"]),
             f"timings: total {t['total_s']:.2f} s"]
    lines += party_timing_lines(t["parties"])
    click.echo("\n".join(lines))


proxy_group.add_command(proxy_serve_cmd)
proxy_group.add_command(proxy_init_cmd)
proxy_group.add_command(proxy_status_cmd)
user_group.add_command(user_identity_cmd)
