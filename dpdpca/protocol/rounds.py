"""What the launchers share after the parties are done: the run record and the exactness checks.

:mod:`dpdpca.protocol.runner` (in-process) and :mod:`dpdpca.protocol.processes`
(one OS process per party) both build their :class:`ProtocolRun` with
:func:`assemble_run`, so neither imports the other's internals.  The parties'
steps themselves are :mod:`dpdpca.protocol.roles`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from dpdpca.linalg import pack_upper
from dpdpca.protocol.quantize import exact_scatter_share, quantize_rows
from dpdpca.protocol.releases import as_release
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["ProtocolRun", "reference_scatter_int", "verify_exact", "finish_run", "assemble_run",
           "reference_blocks_int", "verify_add_remove"]


@dataclass
class ProtocolRun:
    """Everything one run produced (the experimenter's view, not one party's).

    Attributes
    ----------
    result : PCAResult
        What the data user gets, with every party's timings and bytes.
    owners_present : list of str
        Owners whose shares made the quorum.
    rows_clipped : dict
        Rows each owner clipped (owner-local diagnostics; never sent).
    verify : dict or None
        ``{"max_abs_integer_error": int}`` with ``verify=True``.
    noisy_scatter_int : ndarray of object
        The user's exact ``M = N*S_int + G''``.
    scale : int
        ``N * 2**(2f)``.
    noise_for_testing : list of int or None
        With ``verify=True``: the proxy's noise (upper triangle of G'' as added
        to R'').  A test/verification hook; never part of what the user gets.
    """

    result: PCAResult
    owners_present: list[str]
    rows_clipped: dict[str, int]
    verify: dict[str, Any] | None
    noisy_scatter_int: np.ndarray
    scale: int
    noise_for_testing: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def pooled_scatter_shares(partitions: Sequence[np.ndarray], *, frac_bits: int, clip: bool) -> tuple[Any, Any, int]:
    """Exact pooled ``(R, v, N)`` (Python ints) over the owners' quantized rows, as the owners compute them."""
    from dpdpca.data import clip_rows

    total_r: Any = 0
    total_v: Any = 0
    n = 0
    for X in partitions:
        Xc = clip_rows(X)[0] if clip else X
        R, v, m = exact_scatter_share(quantize_rows(Xc, frac_bits), frac_bits)
        total_r, total_v, n = total_r + R, total_v + v, n + m
    return total_r, total_v, n


def reference_scatter_int(partitions: Sequence[np.ndarray], *, frac_bits: int, clip: bool) -> np.ndarray:
    """Plaintext reference ``N*R - v v^T`` (exact ints) over the same quantized rows."""
    total_r, total_v, n = pooled_scatter_shares(partitions, frac_bits=frac_bits, clip=clip)
    return n * total_r - np.outer(total_v, total_v)


def verify_exact(M: np.ndarray, noise_upper: Sequence[int], partitions: Sequence[np.ndarray], *, frac_bits: int,
                 clip: bool) -> dict[str, Any]:
    """``max |M - G'' - (N*R - v v^T)|`` over the upper triangle (0 when exact)."""
    ref = reference_scatter_int(partitions, frac_bits=frac_bits, clip=clip)
    diff = pack_upper(M).astype(object) - np.array([int(g) for g in noise_upper], dtype=object) \
        - pack_upper(ref).astype(object)
    return {"max_abs_integer_error": max((abs(int(x)) for x in diff), default=0)}


def reference_blocks_int(partitions: Sequence[np.ndarray], *, frac_bits: int, clip: bool) -> dict[str, list[int]]:
    """Plaintext reference of the add/remove release: upper triangle of R, v, and ``N * 2**2f`` (exact ints)."""
    from dpdpca.crypto import upper_triangle_flatten

    total_r, total_v, n = pooled_scatter_shares(partitions, frac_bits=frac_bits, clip=clip)
    return {"R": [int(x) for x in upper_triangle_flatten(total_r)], "v": [int(x) for x in total_v],
            "N": [n << (2 * frac_bits)]}


def verify_add_remove(blocks: Mapping[str, Sequence[int]], noises: Sequence[Mapping[str, Sequence[int]]],
                      partitions: Sequence[np.ndarray], *, frac_bits: int, clip: bool) -> dict[str, Any]:
    """``max |decrypted - sum of noise shares - reference|`` over R, v and N (0 when exact)."""
    ref = reference_blocks_int(partitions, frac_bits=frac_bits, clip=clip)
    err = 0
    for b, values in ref.items():
        for i, r in enumerate(values):
            z = sum(int(nz[b][i]) for nz in noises)
            err = max(err, abs(int(blocks[b][i]) - z - r))
    return {"max_abs_integer_error": err}


def finish_run(result: PCAResult, timings: Timings, bytes_sent: dict[str, int], owners: list[str],
                rows_clipped: dict[str, int], check: dict[str, Any] | None, M: np.ndarray, scale: int,
                params: Any, n_owners: int) -> ProtocolRun:
    full = dataclasses.replace(
        result, timings=timings, bytes_sent=bytes_sent,
        params={**dict(result.params), **params.scheme.describe_key(params.public_key), "owners": n_owners,
                "max_owners": params.max_owners, "max_rows_per_owner": params.max_rows_per_owner,
                "slot_bits": params.layout.slot_bits, "slots": params.layout.slots},
        extra={**dict(result.extra), "owners_present": list(owners), "rows_clipped": dict(rows_clipped)})
    return ProtocolRun(full, list(owners), dict(rows_clipped), check, M, scale)


def assemble_run(result: PCAResult, *, release: str, timings: Timings, bytes_sent: dict[str, int],
                 owners: list[str], rows_clipped: dict[str, int], used: Sequence[np.ndarray], params: Any,
                 n_owners: int, clip: bool, verify: bool, noisy_blocks: Mapping[str, list[int]] | None = None,
                 M: np.ndarray | None = None, scale: int = 0, noise_upper: Sequence[int] | None = None,
                 noise_blocks: Sequence[Mapping[str, Sequence[int]]] | None = None) -> ProtocolRun:
    """The run record of either release, from what the parties reported.

    Parameters
    ----------
    result : PCAResult
        The data user's.
    release : {"add-remove", "centred"}
    used : list of ndarray
        The partitions of ``owners`` (those in the aggregate), for ``verify``.
    noisy_blocks : dict or None
        Add/remove: the user's decrypted R, v, N integers.
    M, scale : ndarray, int
        Centred: the user's ``M = N*S_int + G''`` and ``N * 2**(2f)``.
    noise_upper : list of int or None
        Centred, ``verify``: the proxy's noise G''.
    noise_blocks : list of dict or None
        Add/remove, ``verify``: every noise share (the proxy's, or each owner's).
    """
    check = None
    if as_release(release).noisy_blocks:
        if verify:
            check = verify_add_remove(noisy_blocks or {}, noise_blocks or [], used, frac_bits=params.frac_bits,
                                      clip=clip)
        result = dataclasses.replace(result, extra={**dict(result.extra),
                                                    "n_rows": int(sum(p.shape[0] for p in used))})
        run = finish_run(result, timings, bytes_sent, owners, rows_clipped, check, np.empty((0, 0), dtype=object),
                         0, params, n_owners)
        run.extra["noisy_blocks"] = noisy_blocks
        if verify:
            run.extra["noise_blocks"] = list(noise_blocks or [])
        return run
    assert M is not None
    if verify:
        check = verify_exact(M, noise_upper or [], used, frac_bits=params.frac_bits, clip=clip)
    run = finish_run(result, timings, bytes_sent, owners, rows_clipped, check, M, scale, params, n_owners)
    run.noise_for_testing = [int(g) for g in noise_upper] if verify and noise_upper is not None else None
    return run
