"""The floor of a protocol run: what its big-integer operations alone cost on this machine, now.

For each party and phase the model counts the operations the code performs
(:func:`operation_counts`: 4096-bit multiplications, plaintext
multiplications, CRT half-decryptions, ``r**n`` exponentiations) and
multiplies them by the per-operation times measured in the same run
(:func:`dpdpca.crypto.primitives.time_primitives`), divided by the cores the
phase runs on (a phase's ``serial_ops``, made in one process after its workers'
tasks, count in full).  ``fraction_of_floor = floor_s / measured_s`` (wall clock):
1.0 means the phase costs no more than its arithmetic; 0.5 means half its
time goes elsewhere (conversions, packing, scheduling, Python) -- or, on a
shared machine, to other processes: serial phases also report
``fraction_of_floor_cpu`` against their CPU time, which other load does not
stretch.

Phases with no big-integer model (quantizing, the DP noise sampler, the
eigendecomposition, key generation) have no floor: they are reported as
``unmodelled_s`` beside each party's fraction, never folded into it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from dpdpca.crypto.primitives import djn_joining_mulmods, djn_mulmods
from dpdpca.protocol.releases import ADD_REMOVE, as_release
from dpdpca.timing import Timings

__all__ = ["fastest", "floor_report", "intake_per_share", "operation_counts", "verify_seconds"]

OFFLINE_PHASES = Timings.OFFLINE_PHASES


def fastest(*samples: Mapping[str, float] | None) -> dict[str, float]:
    """Per primitive, the fastest of several timings taken at different moments of one run (None: not taken).

    A shared machine is slower in some seconds than in others, in CPU time
    too; primitives timed in one slow moment would put the floor above what
    the run's arithmetic cost (fractions above 1).  Each timing is already the
    fastest of its rounds; this takes the fastest of the moments.

    Examples
    --------
    >>> fastest({"mulmod_s": 6e-06, "verify_s": 5e-05}, None, {"mulmod_s": 4.5e-06})
    {'mulmod_s': 4.5e-06, 'verify_s': 5e-05}
    """
    out: dict[str, float] = {}
    for sample in samples:
        for name, seconds in (sample or {}).items():
            out[name] = min(out.get(name, float("inf")), float(seconds))
    return out


def operation_counts(key_bits: int, *, release: str, d: int, slots: int, v_slots: int, owners: int,
                     workers: int, user_workers: int | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Role -> phase -> ``{"ops": {primitive: count}, "cores": k}`` for one run under a ``key_bits`` key.

    ``workers``: the process pool of the owners' and proxy's batches (1 =
    serial); ``user_workers``: the data user's (default ``workers``).  A
    phase may also have ``"serial_ops"``: operations it makes on one core
    after its workers' tasks (a pool's DJN factors: the ``count (workers - 1)``
    products joining the workers' partial products, made in the calling
    process; the model counted them on every core before, which put the
    floor below what the code can do).
    """
    rel = as_release(release)
    share = sum(len(c) for c in rel.share_chunks(d, slots).values())
    out_count = rel.result_ciphertexts(d, slots, v_slots)
    uw = workers if user_workers is None else user_workers
    alpha_bits = (int(key_bits) + 1) // 2

    def djn(count: int) -> dict[str, Any]:
        # A pool's DJN factors: the table and lookups split over the workers, then the partial products
        # joined in the calling process (compute.shared_table_powers), on one core: serial_ops.
        joining = djn_joining_mulmods(alpha_bits, count, workers)
        out: dict[str, Any] = {"ops": {"mulmod_s": djn_mulmods(alpha_bits, count, workers) - joining},
                               "cores": workers}
        if joining:
            out["serial_ops"] = {"mulmod_s": joining}
        return out

    model: dict[str, dict[str, dict[str, Any]]] = {
        "owner": {
            "precompute": djn(share),
            "encrypt": {"ops": {"plain_mul_s": share}, "cores": 1},
        },
        "proxy": {
            "aggregate": {"ops": {"mulmod_s": (owners - 1) * share}, "cores": workers},
            "rerandomize": {"ops": {"mulmod_s": out_count}, "cores": 1},
        },
        "user": {"decrypt": {"ops": {"half_decrypt_s": 2 * out_count}, "cores": uw}},
    }
    if rel is ADD_REMOVE:
        # Its DJN rerandomizers are made on the proxy's engine (one table split by rows over the workers,
        # RandomizerPool.fill -> encryptions_of_zero), like an owner's factors: not serially.
        model["proxy"]["precompute"] = djn(out_count)
        model["proxy"]["noise"] = {"ops": {"plain_mul_s": out_count}, "cores": 1}
    else:  # r^n in a background thread; the mask's exponentiations have no model here
        model["proxy"]["precompute"] = {"ops": {"powmod_n_s": out_count}, "cores": 1}
    return model


def _fraction(floor: float, measured: float) -> float | None:
    return floor / measured if measured > 0 else None


def floor_report(timings: Mapping[str, Any], model: Mapping[str, Mapping[str, Mapping[str, Any]]],
                 primitives: Mapping[str, float], *, cores: int, wall_s: float | None = None) -> dict[str, Any]:
    """Per party and phase, per party, the online critical path and the whole run: ``floor_s``, ``fraction_of_floor``.

    Parameters
    ----------
    timings : dict
        :meth:`dpdpca.timing.Timings.to_dict` of the run.
    model : dict
        :func:`operation_counts`.
    primitives : dict
        Seconds per operation (:func:`~dpdpca.crypto.primitives.time_primitives`).
    cores : int
        Cores of the machine every party shares (the whole run's floor is
        its single-core work over these cores).
    wall_s : float or None
        The whole run's wall time (key generation excluded), for ``whole_run``.

    Returns
    -------
    dict
        ``phases`` (party -> phase -> ``ops``, ``cores``, ``serial_ops`` if
        any, ``work_s``, ``floor_s``, ``measured_s``, ``fraction_of_floor``), ``parties``
        (party -> ``floor_s``, ``measured_s`` of the modelled phases,
        ``fraction_of_floor``, ``unmodelled_s``, ``offline_floor_s``,
        ``online_floor_s``), ``critical_path`` (online, from the last
        share's arrival to the components: the proxy's online phases and the
        user's but key generation), ``whole_run`` and
        ``online_over_decrypt_floor`` (that path over the user's decryption floor).  The
        benchmark may add ``whole_run["cpu_s"]`` (every process's CPU) and
        ``fraction_of_floor_cpu`` (single-core work over it).
    """
    parties = timings["parties"]
    cpu = timings.get("cpu_s", {})
    phases: dict[str, dict[str, dict[str, Any]]] = {}
    per_party: dict[str, dict[str, Any]] = {}
    total_work = 0.0
    for party, measured in parties.items():
        role = party.split(":", 1)[0]
        mine: dict[str, dict[str, Any]] = {}
        for phase, spec in model.get(role, {}).items():
            if phase not in measured:
                continue
            spread = sum(float(primitives[k]) * float(v) for k, v in spec["ops"].items())
            serial = sum(float(primitives[k]) * float(v) for k, v in spec.get("serial_ops", {}).items())
            work = spread + serial
            floor = spread / spec["cores"] + serial
            total_work += work
            mine[phase] = {"ops": dict(spec["ops"]), "cores": spec["cores"], "work_s": work, "floor_s": floor,
                           "measured_s": measured[phase], "fraction_of_floor": _fraction(floor, measured[phase])}
            if "serial_ops" in spec:
                mine[phase]["serial_ops"] = dict(spec["serial_ops"])
            if spec["cores"] == 1 and phase in cpu.get(party, {}):
                # A serial phase's CPU time: what other load on a shared machine does not stretch.
                mine[phase]["cpu_s"] = cpu[party][phase]
                mine[phase]["fraction_of_floor_cpu"] = _fraction(floor, cpu[party][phase])
        phases[party] = mine
        floor = sum(v["floor_s"] for v in mine.values())
        seen = sum(v["measured_s"] for v in mine.values())
        per_party[party] = {
            "floor_s": floor, "measured_s": seen, "fraction_of_floor": _fraction(floor, seen),
            "unmodelled_s": sum(s for ph, s in measured.items() if ph not in mine and ph != "keygen"),
            "offline_floor_s": sum(v["floor_s"] for ph, v in mine.items() if ph in OFFLINE_PHASES),
            "online_floor_s": sum(v["floor_s"] for ph, v in mine.items() if ph not in OFFLINE_PHASES),
        }
    online_measured = sum(s for party, ph in parties.items() if party.split(":", 1)[0] in ("proxy", "user")
                          for name, s in ph.items() if name not in (*OFFLINE_PHASES, "keygen"))
    online_floor = sum(per_party[p]["online_floor_s"] for p in parties if p.split(":", 1)[0] in ("proxy", "user"))
    decrypt_floor = phases.get("user", {}).get("decrypt", {}).get("floor_s", 0.0)
    out: dict[str, Any] = {
        "primitives": dict(primitives),
        "cores": cores,
        "phases": phases,
        "parties": per_party,
        "critical_path": {"floor_s": online_floor, "measured_s": online_measured,
                          "fraction_of_floor": _fraction(online_floor, online_measured)},
        "online_over_decrypt_floor": online_measured / decrypt_floor if decrypt_floor else None,
    }
    if wall_s is not None:
        whole = total_work / max(1, cores)
        out["whole_run"] = {"floor_s": whole, "measured_s": wall_s, "fraction_of_floor": _fraction(whole, wall_s)}
    return out


def verify_seconds(rounds: int = 50) -> float:
    """One owner's signature checked, as the proxy checks a share's statement: the fastest of ``rounds``.

    An Ed25519 verification of 200 bytes through the owners' keyring
    (:meth:`~dpdpca.protocol.identity.OwnerKeyring.verify`), the floor's
    ``verify_s`` (:func:`intake_per_share`).
    """
    from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

    ident = OwnerIdentity.generate("floor")
    ring = OwnerKeyring.from_identities([ident])
    message = os.urandom(200)
    signature = ident.sign(message)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        ring.verify("floor", message, signature)
        best = min(best, time.perf_counter() - start)
    return best


def intake_per_share(share_ciphertexts: int, share_bytes: int, primitives: Mapping[str, float], *,
                     verify_s: float, cores: int = 1) -> dict[str, Any]:
    """The proxy's floor for one more share: its multiplications into the aggregate, the SHA-256 of its bytes
    and one signature verification, on ``cores`` (the proxy's pool checks and multiplies shares in its workers).

    On one core the serial intake also takes one step of the batched unit test per ciphertext
    (``unit_check_s``); a pool tests the product of a chunk it has already multiplied (one gcd per
    chunk, nothing per ciphertext), so on ``cores > 1`` that step is not part of the floor.
    """
    ops = {"mulmod_s": share_ciphertexts, "sha256_byte_s": share_bytes}
    if cores <= 1:
        ops["unit_check_s"] = share_ciphertexts
    work = sum(float(primitives[k]) * v for k, v in ops.items()) + verify_s
    return {"ops": {**ops, "verify_s": 1}, "cores": cores, "work_s": work, "floor_s": work / cores}
