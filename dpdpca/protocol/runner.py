"""Run the three parties end to end: the launchers of one protocol session.

:func:`run_protocol` is the runner behind ``dpdpca run`` and :class:`DPDPCA`
(the estimator the pipeline registry names); :func:`run_pipeline` is its
functional form with the driver's signature.  It validates the options once
and hands them, unchanged, to a launcher: in one process over a
:class:`~dpdpca.protocol.transport.Transport` (default in-memory queues), or
one OS process per party (:mod:`dpdpca.protocol.processes`).  Both drive the
parties' steps of :mod:`dpdpca.protocol.roles`; neither has its own copy of
the rounds.

Randomness: the mask b and the DP noise always come from the OS CSPRNG
(:func:`dpdpca.dp.resolve_source` with ``None``).  An explicit
``numpy.random.Generator`` passed as ``rng`` only drives experiment-side
choices (which owners drop out in a simulation); nothing switches the
protocol's production randomness to a seeded source.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import numpy as np

from dpdpca.crypto.compute import as_engine
from dpdpca.dp.accountant import PrivacyLedger
from dpdpca.errors import ParameterError
from dpdpca.protocol.config import ProtocolOptions
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.protocol.owner import DataOwner
from dpdpca.protocol.plan import RunPlan, owner_ids, plan_run
from dpdpca.protocol.proxy import Proxy
from dpdpca.protocol.roles import ProxySteps, collect_shares, owner_round, proxy_round, user_round
from dpdpca.protocol.rounds import ProtocolRun, assemble_run, reference_scatter_int
from dpdpca.protocol.transport import InProcessTransport
from dpdpca.protocol.user import DataUser
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["ProtocolRun", "RunPlan", "run_protocol", "run_pipeline", "collect_shares", "progress_steps",
           "reference_scatter_int", "owner_ids", "plan_run"]

Progress = Callable[[str], None]


def run_protocol(partitions: Sequence[Any], *, n_components: int, options: ProtocolOptions | None = None,
                 user: DataUser | None = None, progress: Progress | None = None,
                 ledger: PrivacyLedger | None = None, ledger_label: str = "", **flat: Any) -> ProtocolRun:
    """Run owners, proxy and data user end to end.

    Parameters
    ----------
    partitions : list of array-like, each of shape (n_l, d)
        One matrix per owner (owner ids ``"1"``..``"L"``).
    n_components : int in [1, d]
    options : ProtocolOptions or None
        The release, key, bounds and deployment options
        (:mod:`dpdpca.protocol.config`).
    user : DataUser or None
        Reuse an existing key pair (its parameters must fit this run;
        in-process launcher only).
    progress : callable or None
        Called with a label after each step, when it happens
        (:func:`progress_steps` calls).
    ledger : PrivacyLedger or None
        A budget ledger: the proxy prices its release with the calibration
        that draws the noise, refuses it past the budget (BudgetExceededError,
        before the noise is drawn or anything is decrypted) and records it
        (:meth:`dpdpca.protocol.proxy.Proxy.finish`).
    ledger_label : str
        The ledger entry's label.
    **flat
        Instead of ``options``: the options by their flat names
        (:meth:`ProtocolOptions.from_flat`): ``epsilon``, ``delta``,
        ``calibration``, ``sensitivity_mode``, ``noise_lattice``, ``release``,
        ``noise_by``, ``honest_owners``, ``neighbouring``; ``key_bits``,
        ``insecure_test_key``, ``frac_bits``, ``kappa``, ``packing``;
        ``max_owners``, ``max_rows_per_owner``, ``clip``; ``processes`` (or
        ``launcher``), ``transport``, ``executor``, ``user_executor``,
        ``quorum``, ``deadline_s``, ``absent_owners``, ``verify``.

    Returns
    -------
    ProtocolRun

    Raises
    ------
    DataError, ParameterError, OverflowRiskError, ProtocolError
        Bad input; one-line messages.
    """
    if options is not None and flat:
        raise ParameterError(f"options must be given alone or not at all, got it with {sorted(flat)}")
    opts = options if options is not None else ProtocolOptions.from_flat(**flat)
    plan = plan_run(partitions, n_components=n_components, options=opts)
    tick = progress or (lambda label: None)
    if opts.deployment.launcher == "processes":
        from dpdpca.protocol.processes import run_in_processes

        return run_in_processes(plan, progress=tick, ledger=ledger, ledger_label=ledger_label)
    return _run_in_process(plan, user=user, tick=tick, ledger=ledger, ledger_label=ledger_label)


def _run_in_process(plan: RunPlan, *, user: DataUser | None, tick: Progress, ledger: PrivacyLedger | None = None,
                    ledger_label: str = "") -> ProtocolRun:
    """The in-process launcher: every party's steps in turn, over one transport."""
    opts = plan.options
    dep, rel = opts.deployment, opts.release
    user_executor = dep.user_executor
    if isinstance(user_executor, str):
        user_executor = None if as_engine(dep.executor).remote else dep.executor
    if user is None:
        user = DataUser.generate(key_bits=opts.key.key_bits, insecure_test_key=opts.key.insecure_test_key,
                                 executor=user_executor, scheme=opts.key.scheme, **plan.param_kwargs())
    else:
        user.executor = user_executor
    params = user.params
    # Every owner has its own signing key; the proxy and the user list the verify keys.
    identities = {oid: OwnerIdentity.generate(oid) for oid in plan.ids}
    keyring = OwnerKeyring.from_identities(identities.values())
    user.owner_keys = keyring
    net = dep.transport if dep.transport is not None else InProcessTransport()
    timings = Timings(parallel_roles=("owner",))
    rows_clipped: dict[str, int] = {}
    d = next(iter(plan.partitions.values())).shape[1]
    owner_cal = plan.owner_noise(d, params.frac_bits)
    owner_noises: dict[str, Any] = {}
    proxy = Proxy(params, keyring, quorum=plan.quorum, executor=dep.executor, record_noise_for_testing=dep.verify,
                  release=rel.mode, range_proofs=opts.bounds.range_proofs,
                  range_proof_mode=opts.bounds.range_proof_mode)
    # Its rerandomizers (and the add/remove noise) depend on d and the setting only: made while the owners encrypt.
    proxy.prepare(d, setting=rel)
    # Every owner checks the key's modulus proof once per key, before it has data (offline): the check is
    # cached per process, so in this one-process run it is made here, not in the first owner's turn.
    params.scheme.check_encryptor_policy(params.public_key, opts.key.insecure_test_key)
    tick("keygen")  # set-up ends here: keys, and the proxy's offline work that runs before any owner's turn
    def ready_owner(oid: str) -> DataOwner:
        owner = DataOwner(params, identities[oid], clip=opts.bounds.clip, executor=dep.executor,
                          insecure_test_key=opts.key.insecure_test_key, release=rel.mode, noise=owner_cal,
                          record_noise_for_testing=dep.verify, range_proofs=opts.bounds.range_proofs,
                          range_proof_mode=opts.bounds.range_proof_mode)
        if not opts.bounds.range_proofs:  # a proving owner encrypts under a base whose n-th root it knows
            owner.precompute(d)  # offline: its DJN factors depend on the key, d and the release only
        return owner

    # With an executor, the owners' offline work is made in its processes by a thread that runs ahead of their
    # turns: the next owner's factors are made while this one quantizes, encrypts and sends (one core).
    # Without one, or for BFV (its encryptions of zero run in this process and hold the GIL), in turn: a thread
    # would only contend for the GIL with the owner whose turn it is.
    ahead = (ThreadPoolExecutor(1, thread_name_prefix="dpdpca-owner-precompute")
             if dep.executor is not None and params.scheme.offline_factors else None)
    made = {oid: ahead.submit(ready_owner, oid) for oid in plan.present} if ahead is not None else {}
    try:
        for oid in plan.present:
            owner = made[oid].result() if oid in made else ready_owner(oid)
            owner_round(owner, plan.partitions[oid], net, tick=tick)
            if dep.verify and owner_cal is not None:
                owner_noises[oid] = owner.noise_blocks_for_testing_
            rows_clipped[oid] = owner.rows_clipped_
            timings.merge(owner.timings_)
    finally:
        if ahead is not None:
            for fut in made.values():
                fut.cancel()
            ahead.shutdown(wait=True)
    late = proxy_round(ProxySteps(proxy, rel, owners=len(plan.ids), ledger=ledger, label=ledger_label), net, deadline_s=dep.deadline_s, tick=tick)
    result = user_round(user, net, n_components=plan.n_components, tick=tick)
    timings.merge(proxy.timings_)
    timings.merge(user.timings_)
    common: dict[str, Any] = dict(release=rel.mode, timings=timings, bytes_sent=dict(net.bytes_sent),
                                  owners=proxy.owners_, rows_clipped=rows_clipped,
                                  used=[plan.partitions[o] for o in proxy.owners_], params=params,
                                  n_owners=len(plan.ids), clip=opts.bounds.clip, verify=dep.verify)
    if rel.kind.noisy_blocks:
        noises: list[Any] | None = None
        if dep.verify:
            noises = ([owner_noises[o] for o in proxy.owners_] if owner_cal is not None
                      else [proxy.noise_blocks_for_testing_])
        run = assemble_run(result, noisy_blocks=user.noisy_blocks_, noise_blocks=noises, **common)
    else:
        run = assemble_run(result, M=user.noisy_scatter_int_, scale=user.scale_,
                           noise_upper=getattr(proxy, "noise_for_testing_", None), **common)
    run.extra["late_shares_rejected"] = late
    run.extra["proxy_intake_cpu_s"] = proxy.intake_cpu_s_
    return run


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
