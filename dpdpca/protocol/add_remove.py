"""The add/remove-one release inside the protocol: noise on encrypted R, v and N, no mask.

This module composes :mod:`dpdpca.dp.release` / :mod:`dpdpca.dp.distributed`
(the noise and what it promises) with the encrypted arrays of
:mod:`dpdpca.crypto`; the parties call it from their rounds.

* Owners encrypt ``R^l`` (upper triangle, scale ``2**2f``), ``v^l`` (scale
  ``2**f``) and ``N^l * 2**2f``.  With ``noise_by="owners"`` each owner first
  adds its share of the distributed discrete Gaussian
  (:func:`owner_noise`) to those integers: the noise lives on the lattice of
  the released integers, never on multiples of N.
* With ``noise_by="proxy"`` the proxy adds ``N_Z(0, sigma_j^2)`` per block
  (:func:`proxy_noise`) under encryption, and rerandomizes.  There is no mask
  (below) and no count round: nothing in this
  release needs N, which stays hidden (add/remove-one neighbouring).
* The data user decrypts ``R~``, ``v~``, ``N~`` and post-processes
  (:func:`centred_from_noisy`): ``S~ = R~ - v~ v~^T / max(N~, 1)``.

Why no mask.  The Wang-Chang mask b hides v from the data user.  Here the
noisy v is itself part of the DP release, so everything the user can compute
is post-processing of a DP output: the mask has nothing left to hide, would
add its total-variation term to delta, and costs the proxy d(d+1)/2
homomorphic scalar products.  The add/remove release therefore has no mask.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any, Mapping, Sequence

import numpy as np

from dpdpca._validation import param_error
from dpdpca.crypto.encrypted import as_int_list
from dpdpca.dp import (BLOCKS, AddRemoveCalibration, DistributedCalibration, block_scales, calibrate_distributed,
                       sample_discrete_gaussian)
from dpdpca.dp.distributed import honest_present
from dpdpca.errors import MessageError, OverflowRiskError
from dpdpca.protocol.bounds import noise_tail_factor
from dpdpca.protocol.counts import NO_NOISE

__all__ = ["owner_count_noise_bound", "owner_noise_bound", "owner_noise", "proxy_noise", "check_noise_fits", "centred_from_noisy",
           "add_block_noise", "owner_noise_calibration", "coalition_report", "owner_noise_label", "session_noise_label",
           "honest_owners"]


def _draw(sigma_squared: dict[str, Any], counts: dict[str, int], source: Any = None) -> dict[str, list[int]]:
    # ``source`` is for tests only; production noise comes from OS entropy (None).
    return {b: sample_discrete_gaussian(sigma_squared[b], counts[b], source) for b in BLOCKS}  # Python ints


def check_noise_fits(noise: Mapping[str, Sequence[int]], allowance: int, *, who: str) -> None:
    """Raise OverflowRiskError if a drawn sample exceeds the public allowance (a 2**-80 tail event)."""
    top = max((max(max(vals), -min(vals)) for vals in noise.values() if len(vals)), default=0)
    if top > allowance:
        raise OverflowRiskError(f"{who} noise sample must be <= the allowance {allowance}, got {top} "
                                f"(a 2**-80 tail event, or epsilon below the keygen min_epsilon)")


def proxy_noise(cal: AddRemoveCalibration, params: Any, source: Any = None) -> dict[str, list[int]]:
    """The proxy's noise for R (upper triangle), v and N, exact integers from OS entropy.

    Raises
    ------
    OverflowRiskError
        The noise for this epsilon does not fit the keygen allowance (checked
        before drawing), or a drawn sample exceeds it (a 2**-80 tail event).
    """
    params.check_noise_fits(max(math.sqrt(float(s2)) for s2 in cal.sigma_squared_int.values()), epsilon=cal.epsilon)
    noise = _draw(cal.sigma_squared_int, cal.counts, source)
    check_noise_fits(noise, params.noise_allowance, who="proxy")
    return noise


def owner_noise(cal: DistributedCalibration, params: Any, source: Any = None) -> dict[str, list[int]]:
    """One owner's share of the distributed noise, exact integers from OS entropy (checks as :func:`proxy_noise`)."""
    params.check_noise_fits(max(math.sqrt(float(s2)) for s2 in cal.local_sigma_squared_int.values()),
                            epsilon=cal.epsilon)
    noise = _draw(cal.local_sigma_squared_int, cal.counts, source)
    check_noise_fits(noise, params.noise_allowance, who="owner")
    return noise


def add_block_noise(R_upper: Sequence[int], v: Sequence[int], n_scaled: int,
                    noise: Mapping[str, Sequence[int]] | None) -> tuple[Sequence[int], Sequence[int], int]:
    """``(R + z_R, v + z_v, N 2**2f + z_N)`` in Python integers (a non-integer raises).

    Without noise the blocks are unchanged, and an int64 array stays one
    (an encryption reads it without a Python integer per value).
    """
    if noise is None and all(isinstance(b, np.ndarray) and b.dtype == np.int64 and b.ndim == 1
                             for b in (R_upper, v)):
        return R_upper, v, int(n_scaled)
    r = as_int_list("R_upper", R_upper)  # one type check per distinct type, not an int() per value
    vv = as_int_list("v", v)
    if noise is None:
        return r, vv, int(n_scaled)
    return ([a + z for a, z in zip(r, noise["R"])], [a + z for a, z in zip(vv, noise["v"])],
            int(n_scaled) + int(noise["N"][0]))


def centred_from_noisy(r_upper: Sequence[int], v: Sequence[int], n_scaled: int, *, d: int,
                       frac_bits: int) -> tuple[np.ndarray, float]:
    """Post-processing: the centred scatter ``R~ - v~ v~^T / N~`` (data units) and ``N~ = max(N, 1)``.

    ``r_upper`` is the row-major upper triangle at scale ``2**2f``, ``v`` at
    ``2**f`` and ``n_scaled`` is ``N * 2**2f`` with noise.  A noisy count below 1
    is replaced by 1 (a true count never is).
    """
    scales = block_scales(frac_bits)
    R = np.empty((d, d), dtype=np.float64)
    rows, cols = np.triu_indices(d)
    vals = np.array(r_upper, dtype=np.float64) / scales["R"]  # a power of two: the same floats as x / scale
    R[rows, cols] = vals
    R[cols, rows] = vals
    vf = np.array([x / scales["v"] for x in v], dtype=np.float64)
    n = max(1.0, n_scaled / scales["N"])
    return R - np.outer(vf, vf) / n, n


def owner_noise_label(cal: DistributedCalibration | None) -> str:
    """What an owner's signed statement says about the noise its share holds (:mod:`dpdpca.protocol.counts`).

    ``"none"`` without owners' noise; else the parameters the share's noise
    was calibrated with, which fix its sigma: ``"owners:epsilon=1.0,delta=1e-05,owners=5,honest=5,quorum=5"``.
    The proxy computes the session's label from its own setting
    (:func:`session_noise_label`, the same spelling) and refuses a statement
    that differs: on arrival when it knows its setting while collecting, else
    when it finishes.
    """
    if cal is None:
        return NO_NOISE
    return _label(epsilon=cal.epsilon, delta=cal.delta, owners=cal.owners, honest=cal.honest, quorum=cal.quorum)


def _label(*, epsilon: float, delta: float, owners: int, honest: int, quorum: int) -> str:
    """The one spelling of an owners' noise label (:func:`owner_noise_label`, :func:`session_noise_label`)."""
    return (f"owners:epsilon={float(epsilon)!r},delta={float(delta)!r},owners={int(owners)},"
            f"honest={int(honest)},quorum={int(quorum)}")


def honest_owners(setting: Any, owners: int) -> int:
    """t of a privacy setting (``setting.honest_owners``) in a session of ``owners`` owners: default L."""
    return owners if setting.honest_owners is None else int(setting.honest_owners)


def session_noise_label(setting: Any, *, owners: int, quorum: int) -> str:
    """What every share statement of a session must say about its noise under ``setting`` (a ``ReleaseOptions``).

    ``"none"`` unless ``setting.noise_by == "owners"``; else the
    :func:`owner_noise_label` of the owners' calibration for the setting's
    epsilon and delta, L = ``owners``, t (:func:`honest_owners`) and
    ``quorum``, spelt from those parameters without calibrating (a
    calibration takes about 0.2 s; the label names its parameters only).
    The proxy's one source of the label, at intake and at finish.

    Examples
    --------
    >>> from dpdpca.protocol.config import ReleaseOptions
    >>> session_noise_label(ReleaseOptions(epsilon=1.0, delta=1e-5, noise_by="owners"), owners=3, quorum=2)
    'owners:epsilon=1.0,delta=1e-05,owners=3,honest=3,quorum=2'
    >>> session_noise_label(ReleaseOptions(epsilon=1.0, delta=1e-5), owners=3, quorum=2)
    'none'
    """
    if setting.noise_by != "owners":
        return NO_NOISE
    return _label(epsilon=setting.epsilon, delta=setting.delta, owners=owners,
                  honest=honest_owners(setting, owners), quorum=quorum)


_LABEL = re.compile(r"owners:epsilon=([0-9.e+-]+),delta=([0-9.e+-]+),owners=([0-9]+),honest=([0-9]+),quorum=([0-9]+)")


def owner_count_noise_bound(label: str, *, d: int, frac_bits: int, allowance: int) -> int:
    """The largest ``|z_N|`` an honest owner's noise share in N reaches (:func:`owner_noise_bound` of block N)."""
    return owner_noise_bound(label, block="N", d=d, frac_bits=frac_bits, allowance=allowance)


@functools.lru_cache(maxsize=64)
def owner_noise_bound(label: str, *, block: str, d: int, frac_bits: int, allowance: int) -> int:
    """The largest ``|z|`` an honest owner's noise share reaches in one entry of ``block`` (``"R"``, ``"v"``, ``"N"``).

    ``ceil(t sigma_block)``, at most ``allowance``.

    ``label`` is the owner's signed :func:`owner_noise_label`, which fixes its
    calibration (:func:`dpdpca.dp.calibrate_distributed` for ``d`` and
    ``frac_bits``) and so the sigma of its N noise; ``t`` is
    :func:`~dpdpca.protocol.bounds.noise_tail_factor` (a draw beyond it is a
    ``2**-120`` event).  Cached: every share of a session has the same label.

    Raises
    ------
    MessageError
        A label that is not the canonical form of an owners' noise label.
    ParameterError
        Parameters the calibration refuses.
    """
    m = _LABEL.fullmatch(label)
    if m is None:
        raise MessageError(f"share statement noise must be an owners' noise label, got {label[:120]!r}")
    cal = calibrate_distributed(epsilon=float(m[1]), delta=float(m[2]), d=int(d), frac_bits=int(frac_bits),
                                owners=int(m[3]), honest=int(m[4]), quorum=int(m[5]))
    if owner_noise_label(cal) != label:  # one spelling per calibration (the proxy's finish compares strings)
        raise MessageError(f"share statement noise label must be canonical, got {label[:120]!r}")
    # smallest integer a with a**2 >= t**2 sigma**2 (exact: sigma**2 is a Fraction)
    if block not in cal.local_sigma_squared_int:
        raise param_error("block", f"one of {sorted(cal.local_sigma_squared_int)}", block)
    bound2 = noise_tail_factor() ** 2 * cal.local_sigma_squared_int[block]
    ceil2 = -(-bound2.numerator // bound2.denominator)
    return min(int(allowance), math.isqrt(ceil2 - 1) + 1 if ceil2 > 0 else 0)


def owner_noise_calibration(options: dict[str, Any], *, d: int, frac_bits: int, owners: int, quorum: int | None,
                            present: int) -> DistributedCalibration | None:
    """Each owner's share of the distributed noise (None unless ``noise_by="owners"``).

    Sized for the quorum (default: the owners expected to be present): every
    owner computes it alike from public values.
    """
    if options.get("noise_by", "proxy") != "owners":
        return None
    t = options.get("honest_owners") or owners
    return calibrate_distributed(epsilon=options["epsilon"], delta=options["delta"], d=d, frac_bits=frac_bits,
                                 owners=owners, honest=t, quorum=present if quorum is None else quorum)


def coalition_report(cal: DistributedCalibration, *, present: int) -> dict[str, dict[str, object]]:
    """The guarantee against each coalition of the parties, with ``present`` owners' shares aggregated.

    The proxy sees ciphertexts only (Paillier's semantic security); the data
    user, alone or with the proxy (which adds no noise with owners' noise),
    faces every present owner's noise; with ``L - t`` owners too, the noise of
    at least ``present - (L - t)`` honest owners
    (:func:`dpdpca.dp.distributed.honest_present`).
    """
    n_all = present
    n_t = honest_present(owners=cal.owners, honest=cal.honest, present=present)

    def entry(n: int, what: str) -> dict[str, object]:
        eps = cal.epsilon_for(n) if n >= 1 else math.inf
        return {"epsilon": eps if math.isfinite(eps) else "inf", "delta": cal.delta,
                "honest_noise_shares": n, "what": what}

    return {
        "proxy": {"epsilon": 0.0, "delta": 0.0, "honest_noise_shares": n_all,
                  "what": "ciphertexts only (Paillier semantic security); nothing decrypted"},
        "user": entry(n_all, "decrypts the aggregate: noise of every present owner"),
        "proxy+user": entry(n_all, "can remove nothing the proxy added (the proxy adds no noise in this "
                                   "mode): noise of every present owner"),
        f"proxy+user+{cal.owners - cal.honest} owners": entry(
            n_t, f"subtract the colluding owners' shares: noise of >= {n_t} honest present owners"),
    }
