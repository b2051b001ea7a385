"""Run the three parties end to end over a transport.

:func:`run_protocol` is the in-process (or, with ``processes=True``,
multi-process) runner behind ``dpdpca run`` and :class:`DPDPCA` (the
estimator the pipeline registry names); :func:`run_pipeline` is its
functional form with the driver's signature.

Randomness: the mask b and the DP noise always come from the OS CSPRNG
(:func:`dpdpca.dp.resolve_source` with ``None``).  An explicit
``numpy.random.Generator`` passed as ``rng`` only drives experiment-side
choices (which owners drop out in a simulation); nothing switches the
protocol's production randomness to a seeded source.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.crypto.compute import EngineLike, as_engine
from dpdpca.data import check_partitions
from dpdpca.dp import REPLACE_ONE
from dpdpca.errors import DataError, OverflowRiskError, ParameterError, ProtocolError
from dpdpca.protocol.add_remove import owner_noise_calibration
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.protocol.params import check_noise_options, check_release_options, resolve_release
from dpdpca.protocol.parties import DataOwner, DataUser, Proxy
from dpdpca.protocol.rounds import (ProtocolRun, collect_shares, finish_run, reference_scatter_int,
                                    verify_add_remove, verify_exact)
from dpdpca.protocol.transport import InProcessTransport, Transport
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["ProtocolRun", "run_protocol", "run_pipeline", "collect_shares", "progress_steps",
           "reference_scatter_int", "owner_ids"]

Progress = Callable[[str], None]


def owner_ids(n: int) -> list[str]:
    """Default owner ids ``"1"`` ... ``"n"``."""
    return [str(i) for i in range(1, n + 1)]


def run_protocol(partitions: Sequence[Any], *, n_components: int, epsilon: float = 1.0, delta: float = 1e-5,
                 key_bits: int = 2048, insecure_test_key: bool = False, frac_bits: int = 16, kappa: int = 40,
                 clip: bool = True, calibration: str = "analytic", sensitivity_mode: str = "rigorous",
                 noise_lattice: str = "n-scaled", neighbouring: str = REPLACE_ONE, quorum: int | None = None,
                 absent_owners: Sequence[int] = (), deadline_s: float | None = None,
                 max_owners: int | None = None, max_rows_per_owner: int | None = None,
                 executor: EngineLike = None, verify: bool = False, processes: bool = False,
                 user: DataUser | None = None, progress: Progress | None = None,
                 transport: Transport | None = None, release: str | None = None, noise_by: str = "proxy",
                 honest_owners: int | None = None, packing: str = "wide",
                 user_executor: EngineLike | str = "auto") -> ProtocolRun:
    """Run owners, proxy and data user end to end.

    Parameters
    ----------
    partitions : list of array-like, each of shape (n_l, d)
        One matrix per owner (owner ids ``"1"``..``"L"``).
    n_components : int in [1, d]
    epsilon : float > 0, delta : float in (0, 1)
    key_bits : int
        Paillier modulus bits; < 2048 needs ``insecure_test_key=True``.
    frac_bits, kappa : int
        Fixed-point bits f (default 16) and mask hiding bits (>= 40).
    clip : bool
        Clip rows to norm 1 (public rule) or reject rows of norm > 1.
    calibration, sensitivity_mode, noise_lattice : str
        See :meth:`Proxy.finish`.
    neighbouring : str
        ``"replace-one"`` for the centred release (N is released exactly); the
        add/remove release states its own relation.
    release : {"add-remove", "centred"} or None
        Default (None): ``"add-remove"`` (:mod:`dpdpca.protocol.add_remove`),
        or ``"centred"`` when ``sensitivity_mode="paper"`` or
        ``noise_lattice="integer"`` ask for the paper's release.
    noise_by : {"proxy", "owners"}
        Who adds the noise (``"owners"``: distributed, needs ``"add-remove"``).
    honest_owners : int or None
        t for ``noise_by="owners"`` (default L).
    quorum : int or None
        Shares the proxy needs; default all present owners.
    absent_owners : sequence of int
        0-based owner indices that never send (dropout simulation).
    deadline_s : float or None
        How long the proxy waits for shares.
    max_owners, max_rows_per_owner : int or None
        Declared public bounds (default: L and the largest partition).
    executor : Executor, compute engine, distributed.Client or None
        Runs the crypto batches of owners and proxy (a local process pool, or
        a Dask cluster: :func:`dpdpca.crypto.compute.dask_engine`).
    user_executor : local executor, None or "auto"
        The data user's decryption batches; ``"auto"`` (default): ``executor``
        if it is local, else serial in this process (the secret key never
        leaves the key holder's host; a remote engine is refused at
        decryption).
    verify : bool
        Compare with a plaintext reference in the integer domain; the proxy
        discloses its noise to the runner (not to the user) for this.
    processes : bool
        Run every party as a separate OS process (see
        :mod:`dpdpca.protocol.processes`).
    user : DataUser or None
        Reuse an existing key pair (its parameters must fit this run).
    packing : {"wide", "plain"}
        Slot layout of new parameters (:class:`~dpdpca.protocol.params.ProtocolParams`):
        wide (default) subtracts v'v'^T under encryption before decrypting,
        plain is the earlier layout sized for R''.
    progress : callable or None
        Called with a label after each step (:func:`progress_steps` steps).

    Returns
    -------
    ProtocolRun

    Raises
    ------
    DataError, ParameterError, OverflowRiskError, ProtocolError
        Bad input; one-line messages.
    """
    rel = resolve_release(release, sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice)
    eps, dl = check_noise_options(epsilon=epsilon, delta=delta, calibration=calibration,
                                  sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice,
                                  neighbouring=neighbouring)
    parts = check_partitions(list(partitions))
    L = len(parts)
    check_release_options(release=rel, noise_by=noise_by, honest_owners=honest_owners, owners=L, quorum=quorum)
    d = parts[0].shape[1]
    k = check_int("n_components", n_components, minimum=1, maximum=d)
    ids = owner_ids(L)
    absent = sorted({check_int("absent_owners[i]", a, minimum=0, maximum=L - 1) for a in absent_owners})
    present = [i for i in range(L) if i not in absent]
    if not present:
        raise param_error("absent_owners", f"fewer than the {L} owners", len(absent))
    total_rows = sum(parts[i].shape[0] for i in present)
    if total_rows < 2:  # refused before anyone encrypts
        raise DataError(f"rows in total must be >= 2 (the centred scatter of one row is 0), got {total_rows}")
    if quorum is not None:
        check_int("quorum", quorum, minimum=1, maximum=L)
    declared_owners = L if max_owners is None else check_int("max_owners", max_owners, minimum=1)
    if L > declared_owners:
        raise OverflowRiskError(f"owners must be <= max_owners={declared_owners} (the declared slot width), got {L}")
    declared_rows = max(p.shape[0] for p in parts) if max_rows_per_owner is None else \
        check_int("max_rows_per_owner", max_rows_per_owner, minimum=1)
    param_kwargs: dict[str, Any] = dict(max_owners=declared_owners, max_rows_per_owner=declared_rows, frac_bits=frac_bits,
                        kappa=kappa, min_epsilon=min(eps, 0.01), min_delta=min(dl, 1e-12), packing=packing)
    options: dict[str, Any] = dict(epsilon=eps, delta=dl, calibration=calibration,
                                   sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice)
    if rel == "add-remove":
        options.update(noise_by=noise_by, honest_owners=honest_owners, owners=L)
    if processes:
        from dpdpca.protocol.processes import run_in_processes
        return run_in_processes(parts, ids=ids, present=present, n_components=k, key_bits=key_bits,
                                insecure_test_key=insecure_test_key, param_kwargs=param_kwargs, clip=clip,
                                quorum=quorum, deadline_s=deadline_s, verify=verify, options=options,
                                progress=progress, release=rel)

    tick = progress or (lambda label: None)
    if isinstance(user_executor, str):
        user_executor = None if as_engine(executor).remote else executor
    if user is None:
        user = DataUser.generate(key_bits=key_bits, insecure_test_key=insecure_test_key, executor=user_executor,
                                 **param_kwargs)
    else:
        user.executor = user_executor
    params = user.params
    # Every owner has its own signing key; the proxy and the user list the verify keys.
    identities = [OwnerIdentity.generate(oid) for oid in ids]
    keyring = OwnerKeyring.from_identities(identities)
    user.owner_keys = keyring
    tick("keygen")
    net = transport if transport is not None else InProcessTransport()
    timings = Timings(parallel_roles=("owner",))
    rows_clipped: dict[str, int] = {}
    owner_cal = owner_noise_calibration(options, d=d, frac_bits=params.frac_bits, owners=L, quorum=quorum,
                                        present=len(present))
    owner_noises: dict[str, Any] = {}
    proxy = Proxy(params, keyring, quorum=len(present) if quorum is None else quorum,
                  executor=executor, record_noise_for_testing=verify, release=rel)
    proxy.prepare(d)  # its rerandomizers depend on d only: made while the owners encrypt
    for i in present:
        owner = DataOwner(params, identities[i], clip=clip, executor=executor, insecure_test_key=insecure_test_key,
                          release=rel, noise=owner_cal, record_noise_for_testing=verify)
        net.send(owner.party, "proxy", owner.share(parts[i]))
        if verify and owner_cal is not None:
            owner_noises[ids[i]] = owner.noise_blocks_for_testing_
        rows_clipped[ids[i]] = owner.rows_clipped_
        timings.merge(owner.timings_)
        tick(f"owner {ids[i]}")
    collect_shares(proxy, net, deadline_s=deadline_s)
    proxy.close_collection()
    late = _reject_late_shares(proxy, net)
    tick("aggregate")
    net.send("proxy", "user", proxy.finish(**options))
    tick("mask and noise")
    result = user.finish(_recv(net, "user"), n_components=k)
    tick("decrypt and eigh")
    timings.merge(proxy.timings_)
    timings.merge(user.timings_)
    check = None
    used = [parts[ids.index(o)] for o in proxy.owners_]
    if rel == "add-remove":
        if verify:
            noises = ([owner_noises[o] for o in proxy.owners_] if owner_cal is not None
                      else [proxy.noise_blocks_for_testing_])
            check = verify_add_remove(user.noisy_blocks_, noises, used, frac_bits=params.frac_bits, clip=clip)
        result = dataclasses.replace(result, extra={**dict(result.extra),
                                                    "n_rows": int(sum(p.shape[0] for p in used))})
        run = finish_run(result, timings, dict(net.bytes_sent), proxy.owners_, rows_clipped, check,
                         np.empty((0, 0), dtype=object), 0, params, L)
        run.extra["noisy_blocks"] = user.noisy_blocks_
        if verify:
            run.extra["noise_blocks"] = noises
        run.extra["late_shares_rejected"] = late
        return run
    if verify:
        check = verify_exact(user.noisy_scatter_int_, proxy.noise_for_testing_, used, frac_bits=params.frac_bits,
                             clip=clip)
    run = finish_run(result, timings, dict(net.bytes_sent), proxy.owners_, rows_clipped, check,
                      user.noisy_scatter_int_, user.scale_, params, L)
    run.noise_for_testing = list(proxy.noise_for_testing_) if verify else None
    run.extra["late_shares_rejected"] = late
    return run


def _reject_late_shares(proxy: Proxy, net: Transport) -> int:
    """Shares still queued for the proxy after it closed collection: each is refused as late."""
    late = 0
    while (data := net.receive("proxy", timeout=0.0)) is not None:
        try:
            proxy.receive_share(data)
        except ProtocolError:
            late += 1
    return late


def _recv(net: Transport, party: str) -> bytes:
    data = net.receive(party, timeout=None)
    if data is None:  # pragma: no cover - in-process queues are filled before every receive
        raise ProtocolError(f"{party} must receive a message at this round, got none")
    return data


def progress_steps(n_owners: int) -> int:
    """Number of ``progress`` calls a run makes."""
    return n_owners + 4


def run_pipeline(partitions: Sequence[Any], *, n_components: int, epsilon: float, delta: float,
                 rng: np.random.Generator | None = None, **options: Any) -> PCAResult:
    """The protocol with the driver's signature, returning the :class:`PCAResult` (functional form of :class:`DPDPCA`).

    Parameters
    ----------
    partitions : list of array-like (n_s, d)
    n_components : int
    epsilon, delta : float
    rng : numpy.random.Generator or None
        Accepted for the common contract; the protocol's masks and noise always
        come from OS entropy, so it is only validated.
    **options
        Forwarded to :func:`run_protocol` (``key_bits``, ``insecure_test_key``,
        ``frac_bits``, ``kappa``, ``clip``, ``calibration``,
        ``sensitivity_mode``, ``noise_lattice``, ``executor``...).

    Returns
    -------
    PCAResult
    """
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise ParameterError(f"rng must be None or a numpy.random.Generator, got {type(rng).__name__}")
    return run_protocol(partitions, n_components=n_components, epsilon=epsilon, delta=delta, **options).result
