"""The protocol's two releases as objects: each owns its relation, layout, noise, cost and report.

A release is what the data user finally decrypts, and everything that
depends on which one runs is a method of its object here, so no other
module branches on a release's name:

* :data:`ADD_REMOVE` (the default of the CLI and of every library class):
  noisy uncentred ``R`` (upper triangle), ``v`` and ``N``, each with its own
  discrete Gaussian, under **add/remove-one** neighbouring; the data user
  centres by post-processing (:mod:`dpdpca.protocol.add_remove`).  N is
  private: owners sign no count, and it travels encrypted.  Noise by the
  proxy or, distributed, by the owners.
* :data:`CENTRED` (Wang & Chang's release): the centred scatter ``N S_bar``
  plus one noise matrix ``G''`` under **replace-one** neighbouring (N public,
  the sum of the owners' signed counts), behind the mask ``b``.

Each object is a ``str`` whose value is its wire name (``"add-remove"``,
``"centred"``): messages, ``public.json`` and JSON reports carry the name,
and :func:`as_release` turns a name back into the object (the one place a
name is looked up, with a one-line error for an unknown one).

The privacy setting every step below the boundary takes is one frozen
:class:`~dpdpca.protocol.config.ReleaseOptions` (validated once when it is
built); :meth:`ProtocolRelease.calibrate` turns it, with the public sizes of
the session, into a :class:`ReleaseNoise`: the one calibration that draws the
noise, writes the privacy report and prices the release for a ledger.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from dpdpca._validation import check_int, param_error
from dpdpca.crypto import PublicKey, SlotLayout, scheme_of, upper_triangle_chunks
from dpdpca.dp import (ADD_REMOVE_ONE, PAPER, REPLACE_ONE, RIGOROUS, SENSITIVITY_MODES, DiscreteGaussianMechanism,
                       DistributedCalibration, PrivacyReport, calibrate_add_remove, calibrate_distributed,
                       discrete_gaussian_delta, raise_delta)
from dpdpca.dp.accountant import ReleaseCost
from dpdpca.dp.release import DEFAULT_RELEASE, RELEASES
from dpdpca.protocol import add_remove
from dpdpca.protocol.bounds import (CALIBRATIONS, NOISE_LATTICES, add_remove_sigma_bound, add_remove_value_bound,
                                    carry_value_bound, final_value_bound, integer_noise_sensitivity, noise_sigma_int,
                                    slot_value_bound)
from dpdpca.protocol.counts import ShareStatement, check_counts, check_statements
from dpdpca.protocol.identity import OwnerKeyring
from dpdpca.protocol.layout import tile_chunks, triangle_chunk_count
from dpdpca.protocol.masking import mask_tv_bound
from dpdpca.protocol.notes import centred_report
from dpdpca.triangle import upper_triangle_size

__all__ = ["ProtocolRelease", "AddRemoveRelease", "CentredRelease", "ADD_REMOVE", "CENTRED", "RELEASE_NAMES",
           "as_release", "ReleaseNoise", "served_releases"]


@dataclass(frozen=True)
class ReleaseNoise:
    """One release's calibrated noise: what it draws, what it promises and what it costs.

    Built by :meth:`ProtocolRelease.calibrate` from the frozen setting and the
    session's public sizes, before anything is drawn; the proxy draws from
    it and a ledger records :meth:`cost`, so the price is the calibration's
    own, never a second derivation.

    Attributes
    ----------
    release : ProtocolRelease
    setting : ReleaseOptions
        The frozen privacy setting it was calibrated for.
    report : PrivacyReport
        What the release states (epsilon, delta, mechanism, sigma, relation).
    rho : float or None
        zCDP of the release (discrete Gaussians: ``Delta^2 / (2 sigma^2)``);
        None when the curve is the distributed one (:attr:`distributed`).
    delta_extra : float
        Additive delta outside the curve (the centred release's mask term).
    calibration : object
        The dp calibration or mechanism that draws the noise.
    """

    release: ProtocolRelease
    setting: Any
    report: PrivacyReport
    rho: float | None
    delta_extra: float
    calibration: Any
    distributed: DistributedCalibration | None = None

    def cost(self, *, label: str = "") -> ReleaseCost:
        """The :class:`~dpdpca.dp.accountant.ReleaseCost` a ledger records for this release."""
        if self.distributed is not None:
            return self.distributed.cost(self.distributed.n_sized, label=label)
        assert self.rho is not None
        if math.isinf(self.rho):  # not DP (the paper's integer lattice): a ledger with a budget refuses it
            return ReleaseCost.from_rdp(lambda a: math.inf, epsilon=math.inf, delta=self.report.delta,
                                        neighbouring=self.release.neighbouring, delta_extra=self.delta_extra,
                                        mechanism=self.report.mechanism, label=label)
        return ReleaseCost.from_zcdp(self.rho, epsilon=self.report.epsilon, delta=self.report.delta,
                                     neighbouring=self.release.neighbouring, delta_extra=self.delta_extra,
                                     mechanism=self.report.mechanism, label=label)


class ProtocolRelease(str):
    """Base of the two releases (module docstring); one instance of each subclass exists."""

    name: ClassVar[str]
    #: The neighbouring relation the release is DP under, and why no other.
    neighbouring: ClassVar[str]
    relation_reason: ClassVar[str]
    #: The sections of an owner's share, in the order its signed digest covers.
    sections: ClassVar[tuple[str, ...]]
    #: Owners sign their row counts and N is public (the proxy sums them).
    counted: ClassVar[bool]
    #: Owners may add the noise (distributed discrete Gaussian).
    owner_noise: ClassVar[bool]
    #: How the proxy rerandomizes: ``"standard"`` (``r^n``, the mask's exponents act on the owners'
    #: randomness) or ``"djn"`` (under the proxy's own base; no secret exponent acts).
    rerandomizer: ClassVar[str]
    #: The proxy's noise does not depend on N, so it may be drawn while the collection is open.
    noise_before_close: ClassVar[bool]
    #: The data user decrypts noisy blocks R, v, N (else the integer matrix M = N S_int + G'').
    noisy_blocks: ClassVar[bool]

    def __new__(cls) -> ProtocolRelease:
        return str.__new__(cls, cls.name)

    def __reduce__(self) -> tuple[Any, tuple[str]]:  # pickles (process pools) back to the singleton
        return as_release, (str(self),)

    def __copy__(self) -> ProtocolRelease:
        return self

    def __deepcopy__(self, memo: Any) -> ProtocolRelease:
        return self

    # -- layout -------------------------------------------------------------------
    def r_chunks(self, d: int, slots: int) -> list[int]:
        """Chunk sizes of R (and of the proxy's R'' / R~)."""
        raise NotImplementedError

    def r_count(self, d: int, slots: int) -> int:
        """``len(r_chunks(d, slots))`` in O(1)."""
        raise NotImplementedError

    def share_counts(self, d: int, slots: int) -> dict[str, int]:
        """Section -> ciphertexts of one share, in O(1) (checked before any O(d^2) list)."""
        raise NotImplementedError

    def share_chunks(self, d: int, slots: int) -> dict[str, list[int]]:
        """Section -> chunk sizes of one share (and of the proxy's aggregate), in digest order."""
        return {name: list(chunks) for name, chunks in _share_chunks(self, d, slots)}

    def share_value_count(self, d: int, slots: int) -> int:
        """Values in one owner's share: the sum of :meth:`share_chunks`."""
        return sum(sum(chunks) for chunks in self.share_chunks(d, slots).values())

    def _chunks(self, d: int, slots: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
        raise NotImplementedError

    def result_ciphertexts(self, d: int, slots: int, v_slots: int | None = None) -> int:
        """Ciphertexts the proxy sends the data user (``v_slots``: v' in a layout of its own)."""
        raise NotImplementedError

    # -- public parameters --------------------------------------------------------
    def share_bounds(self, *, rows_per_owner: int, frac_bits: int, allowance: int) -> dict[str, int]:
        """Public per-owner bound of each section's values."""
        raise NotImplementedError

    def slot_layout(self, public_key: PublicKey, *, packing: str, declared: dict[str, int]) -> SlotLayout:
        """The slot layout of parameters made for this release alone."""
        raise NotImplementedError

    def noise_sigma_bounds(self, n_max: int, *, frac_bits: int, min_epsilon: float, min_delta: float) -> list[float]:
        """Integer sigmas the keygen allowance must cover for this release (every option it accepts)."""
        raise NotImplementedError

    # -- the privacy setting --------------------------------------------------------
    def check_setting(self, *, noise_by: str, honest_owners: int | None, neighbouring: str | None,
                      sensitivity_mode: str, noise_lattice: str) -> str:
        """Refuse options this release cannot honour; return its neighbouring relation."""
        if neighbouring is not None and neighbouring != self.neighbouring:
            raise param_error("neighbouring", f"{self.neighbouring!r} for release {str(self)!r} "
                              f"({self.relation_reason})", neighbouring)
        if noise_by == "owners" and not self.owner_noise:
            raise param_error("noise_by", f"'proxy' with release {str(self)!r} (owners' noise needs release "
                              f"'add-remove')", noise_by)
        if noise_by != "owners" and honest_owners is not None:
            raise param_error("honest_owners", "given only with noise_by 'owners'", honest_owners)
        return self.neighbouring

    def calibrate(self, setting: Any, *, d: int, frac_bits: int, kappa: int, n: int | None = None,
                  owners: int = 1, quorum: int | None = None, present: int | None = None) -> ReleaseNoise:
        """The noise of this release for ``setting`` (a frozen ``ReleaseOptions``) and the session's sizes.

        Parameters
        ----------
        setting : ReleaseOptions
            Validated once when it was built; nothing here checks it again.
        d, frac_bits, kappa : int
        n : int or None
            N (public under replace-one; the centred release needs it).
        owners, quorum, present : int
            L, the quorum and the owners present (distributed noise).
        """
        raise NotImplementedError

    # -- the parties' steps ---------------------------------------------------------
    def check_statements(self, statements: Any, keyring: OwnerKeyring, *, session: str, key_fingerprint: str,
                         d: int, max_owners: int, max_rows_per_owner: int
                         ) -> tuple[list[ShareStatement], int | None]:
        """Verify the owners' signed statements; ``(statements, N)`` (N None when it is private)."""
        if self.counted:
            return check_counts(statements, keyring, session=session, key_fingerprint=key_fingerprint, d=d,
                                max_owners=max_owners, max_rows_per_owner=max_rows_per_owner)
        return check_statements(statements, keyring, session=session, key_fingerprint=key_fingerprint, d=d,
                                max_owners=max_owners, counted=False), None

    def share_values(self, r_upper: Any, v: Any, n: int, *, frac_bits: int, slots: int,
                     noise: dict[str, list[int]] | None) -> tuple[dict[str, Any], int | None]:
        """An owner's section values (integer sequences; int64 arrays stay arrays) and the count it signs (None: N private)."""
        raise NotImplementedError

    def finish(self, proxy: Any, noise: ReleaseNoise) -> bytes:
        """The proxy's release step with calibrated ``noise`` (:meth:`dpdpca.protocol.proxy.Proxy.finish` calls it)."""
        raise NotImplementedError

    def decrypt_result(self, user: Any, data: bytes, *, n_components: int) -> Any:
        """The data user's last step: decrypt, post-process, eigenpairs (a PCAResult)."""
        raise NotImplementedError


class AddRemoveRelease(ProtocolRelease):
    """Noisy R, v and N under add/remove-one; N private; no mask (:mod:`dpdpca.dp.release`)."""

    name = "add-remove"
    neighbouring = ADD_REMOVE_ONE
    relation_reason = "N is released with noise; the guarantee covers adding or removing a row"
    sections = ("R", "v", "N")
    counted = False
    owner_noise = True
    rerandomizer = "djn"
    noise_before_close = True
    noisy_blocks = True

    def r_chunks(self, d: int, slots: int) -> list[int]:
        return tile_chunks(upper_triangle_size(d), slots)

    def r_count(self, d: int, slots: int) -> int:
        return -(-upper_triangle_size(d) // slots)

    def share_counts(self, d: int, slots: int) -> dict[str, int]:
        return {"R": self.r_count(d, slots), "v": -(-d // slots), "N": 1}

    def _chunks(self, d: int, slots: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return (("R", tuple(self.r_chunks(d, slots))), ("v", tuple(tile_chunks(d, slots))), ("N", (1,)))

    def result_ciphertexts(self, d: int, slots: int, v_slots: int | None = None) -> int:
        return self.r_count(d, slots) + -(-d // slots) + 1

    def share_bounds(self, *, rows_per_owner: int, frac_bits: int, allowance: int) -> dict[str, int]:
        # every section may carry an owner's noise share; N travels at scale 2^(2f)
        n, a = rows_per_owner, allowance
        return {"R": (n << (2 * frac_bits)) + a, "v": (n << frac_bits) + a, "N": (n << (2 * frac_bits)) + a}

    def slot_layout(self, public_key: PublicKey, *, packing: str, declared: dict[str, int]) -> SlotLayout:
        return scheme_of(public_key).layout_for(public_key, add_remove_value_bound(
            owners=declared["owners"], rows_per_owner=declared["rows_per_owner"], frac_bits=declared["frac_bits"],
            noise_bound=declared["noise_bound"]))

    def noise_sigma_bounds(self, n_max: int, *, frac_bits: int, min_epsilon: float, min_delta: float) -> list[float]:
        return [add_remove_sigma_bound(frac_bits=frac_bits, min_epsilon=min_epsilon, min_delta=min_delta)]

    def calibrate(self, setting: Any, *, d: int, frac_bits: int, kappa: int, n: int | None = None,
                  owners: int = 1, quorum: int | None = None, present: int | None = None) -> ReleaseNoise:
        if setting.noise_by == "owners":
            t = add_remove.honest_owners(setting, owners)
            dist = calibrate_distributed(epsilon=setting.epsilon, delta=setting.delta, d=d, frac_bits=frac_bits,
                                         owners=owners, honest=t, quorum=quorum)
            return ReleaseNoise(self, setting, dist.report(present=owners if present is None else present), None, 0.0, dist,
                                distributed=dist)
        cal = calibrate_add_remove(epsilon=setting.epsilon, delta=setting.delta, d=d, frac_bits=frac_bits,
                                   calibration=setting.calibration)
        return ReleaseNoise(self, setting, cal.report("proxy"), cal.rho, 0.0, cal)

    def share_values(self, r_upper: Any, v: Any, n: int, *, frac_bits: int, slots: int,
                     noise: dict[str, list[int]] | None) -> tuple[dict[str, Any], int | None]:
        r, vv, n_scaled = add_remove.add_block_noise(r_upper, v, int(n) << (2 * frac_bits), noise)
        return {"R": r, "v": vv, "N": [n_scaled]}, None  # N is private: no count in the clear

    def finish(self, proxy: Any, noise: ReleaseNoise) -> bytes:
        return proxy._finish_add_remove(noise)  # type: ignore[no-any-return]

    def decrypt_result(self, user: Any, data: bytes, *, n_components: int) -> Any:
        return user._finish_add_remove(data, n_components=n_components)


class CentredRelease(ProtocolRelease):
    """Wang & Chang's release: ``N S_bar + G''`` behind the mask b, under replace-one (N public)."""

    name = "centred"
    neighbouring = REPLACE_ONE
    relation_reason = "the protocol releases N exactly, which is not DP under add/remove-one"
    # v once, as d single slots: the proxy packs the windows W_a the mask needs from them
    # (Proxy._windows), so an owner cannot send two encodings of v that disagree
    sections = ("R", "v")
    counted = True
    owner_noise = False
    rerandomizer = "standard"
    noise_before_close = False
    noisy_blocks = False

    def r_chunks(self, d: int, slots: int) -> list[int]:
        return list(upper_triangle_chunks(d, slots))

    def r_count(self, d: int, slots: int) -> int:
        return triangle_chunk_count(d, slots)

    def share_counts(self, d: int, slots: int) -> dict[str, int]:
        return {"R": self.r_count(d, slots), "v": d}

    def _chunks(self, d: int, slots: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return (("R", tuple(self.r_chunks(d, slots))), ("v", (1,) * d))

    def result_ciphertexts(self, d: int, slots: int, v_slots: int | None = None) -> int:
        return self.r_count(d, slots) + -(-d // (slots if v_slots is None else v_slots))

    def share_bounds(self, *, rows_per_owner: int, frac_bits: int, allowance: int) -> dict[str, int]:
        n = rows_per_owner
        return {"R": n << (2 * frac_bits), "v": n << frac_bits, "N": n}

    def slot_layout(self, public_key: PublicKey, *, packing: str, declared: dict[str, int]) -> SlotLayout:
        if packing == "wide":
            return SlotLayout.for_final_bound(public_key, final_value_bound(**declared), carry_value_bound(**declared))
        return SlotLayout.for_bound(public_key, slot_value_bound(d=1, **declared))

    def noise_sigma_bounds(self, n_max: int, *, frac_bits: int, min_epsilon: float, min_delta: float) -> list[float]:
        sigmas = []
        for lattice in NOISE_LATTICES:
            for mode in SENSITIVITY_MODES:
                for calibration in CALIBRATIONS:
                    try:
                        sigmas.append(noise_sigma_int(n_max, epsilon=min_epsilon, delta=min_delta,
                                                      frac_bits=frac_bits, sensitivity_mode=mode,
                                                      noise_lattice=lattice, calibration=calibration))
                    except ValueError:  # e.g. classic calibration needs epsilon < 1
                        continue
        return sigmas

    def calibrate(self, setting: Any, *, d: int, frac_bits: int, kappa: int, n: int | None = None,
                  owners: int = 1, quorum: int | None = None, present: int | None = None) -> ReleaseNoise:
        if n is None:
            raise param_error("n", "the public N (the centred release's sensitivity depends on it)", n)
        n = check_int("n", n, minimum=1)
        sens_real, sens_int = integer_noise_sensitivity(n, frac_bits=frac_bits,
                                                        sensitivity_mode=setting.sensitivity_mode,
                                                        noise_lattice=setting.noise_lattice)
        # dimension: the rounding-coupling bound (7-8% less sigma than zCDP) with "analytic"
        mech = DiscreteGaussianMechanism(epsilon=setting.epsilon, delta=setting.delta, sensitivity=sens_int,
                                         calibration=setting.calibration, neighbouring=REPLACE_ONE,
                                         sensitivity_mode=setting.sensitivity_mode,
                                         dimension=upper_triangle_size(d))
        report = centred_report(mech, epsilon=setting.epsilon, d=d, n=n, frac_bits=frac_bits, kappa=kappa,
                                noise_lattice=setting.noise_lattice, sensitivity_mode=setting.sensitivity_mode,
                                sens_real=sens_real, sens_int=sens_int)
        tv = mask_tv_bound(d, n, frac_bits=frac_bits, kappa=kappa)
        if setting.sensitivity_mode == PAPER and setting.noise_lattice != "integer":
            # Wang & Chang's Delta = 1 is below S-bar's proven replace-one sensitivity 4 (N - 1) / N: the noise
            # calibrated to it is reported and priced at the proven one (the paper's claim kept in a note)
            _, sens_int = integer_noise_sensitivity(n, frac_bits=frac_bits, sensitivity_mode=RIGOROUS,
                                                    noise_lattice=setting.noise_lattice)
            real = discrete_gaussian_delta(setting.epsilon, mech.sigma_squared, sens_int) + tv
            report = raise_delta(report, real, why=f"at epsilon={setting.epsilon:g} and S-bar's proven replace-one "
                                                   f"sensitivity 4 (N - 1) / N (integer {sens_int})",
                                 claim="the delta at Wang & Chang's Delta = 1")
        # zCDP of a discrete Gaussian: (integer sensitivity)^2 / (2 sigma^2), the sigma that is drawn, at the
        # proven sensitivity.  The paper's integer lattice adds N*G' and the user learns v_i v_j mod N: not DP, an
        # infinite cost.
        rho = (math.inf if setting.noise_lattice == "integer"
               else float(sens_int) ** 2 / (2.0 * float(mech.sigma_squared)))
        return ReleaseNoise(self, setting, report, rho, tv, mech)

    def share_values(self, r_upper: Any, v: Any, n: int, *, frac_bits: int, slots: int,
                     noise: dict[str, list[int]] | None) -> tuple[dict[str, Any], int | None]:
        if noise is not None:
            raise param_error("noise", "None unless release is 'add-remove'", type(noise).__name__)
        return {"R": [int(x) for x in r_upper], "v": [int(x) for x in v]}, int(n)

    def finish(self, proxy: Any, noise: ReleaseNoise) -> bytes:
        return proxy._finish_centred(noise)  # type: ignore[no-any-return]

    def decrypt_result(self, user: Any, data: bytes, *, n_components: int) -> Any:
        return user._finish_centred(data, n_components=n_components)


ADD_REMOVE = AddRemoveRelease()
CENTRED = CentredRelease()
_BY_NAME: dict[str, ProtocolRelease] = {str(r): r for r in (ADD_REMOVE, CENTRED)}
#: The releases' wire names, the default first: :data:`dpdpca.dp.RELEASES`, the one list of names.
RELEASE_NAMES: tuple[str, ...] = RELEASES
if tuple(_BY_NAME) != RELEASES or RELEASES[0] != DEFAULT_RELEASE:  # pragma: no cover - a programming error
    raise ImportError(f"the release objects {tuple(_BY_NAME)} must be dpdpca.dp.RELEASES {RELEASES}, default first")


def as_release(release: Any, *, name: str = "release") -> ProtocolRelease:
    """The release object for a name (or the object itself); else a one-line ParameterError."""
    if isinstance(release, ProtocolRelease):
        return release
    found = _BY_NAME.get(release) if isinstance(release, str) else None
    if found is None:
        raise param_error(name, "one of " + ", ".join(repr(r) for r in RELEASE_NAMES), release)
    return found


def served_releases(declared: str) -> tuple[ProtocolRelease, ...]:
    """The releases public parameters declared for ``declared`` serve: ``"any"`` is both."""
    return tuple(_BY_NAME.values()) if declared == "any" else (as_release(declared),)


@functools.lru_cache(maxsize=32)
def _share_chunks(release: ProtocolRelease, d: int, slots: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    # Cached (immutable): the proxy derives the same layout for every share it reads.
    return release._chunks(d, slots)

