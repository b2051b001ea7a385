"""The options of one protocol run, grouped by who they concern.

``run_protocol``, ``dpdpca run``, the :class:`~dpdpca.protocol.DPDPCA`
estimator and the launchers pass the same four frozen objects instead of two
dozen keyword arguments (the proxy service and ``dpdpca proxy finish`` the
first of them):

* :class:`ReleaseOptions` -- what is released and how it is noised (the
  proxy's, and with ``noise_by="owners"`` the owners', DP options);
* :class:`KeyOptions` -- the key pair and the fixed-point encoding the data
  user publishes;
* :class:`DeclaredBounds` -- the public bounds every party relies on (slot
  widths, the row-norm rule);
* :class:`Deployment` -- where and how the parties run (launcher, transport,
  executors, quorum, deadline, dropout simulation, verification).

:class:`ProtocolOptions` holds one of each; :meth:`ProtocolOptions.from_flat`
maps the historical flat keyword names onto them (``run_protocol(...,
epsilon=..., key_bits=...)`` keeps working).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from dpdpca.crypto.compute import EngineLike
from dpdpca.dp import DistributedCalibration
from dpdpca.dp.release import check_noise_by
from dpdpca.protocol.add_remove import owner_noise_calibration
from dpdpca.protocol.params import check_noise_options, check_release_options, resolve_release
from dpdpca.protocol.releases import ProtocolRelease
from dpdpca.protocol.transport import Transport

__all__ = ["ReleaseOptions", "PrivacySetting", "KeyOptions", "DeclaredBounds", "Deployment", "ProtocolOptions",
           "LAUNCHERS"]

#: The launchers of :func:`dpdpca.protocol.runner.run_protocol`.
LAUNCHERS = ("in-process", "processes")


@dataclass(frozen=True)
class ReleaseOptions:
    """The privacy setting of one release: what is released and how it is noised (also :data:`PrivacySetting`).

    The one frozen value every step below the entry point takes: validated
    once, on construction (one-line :class:`~dpdpca.errors.ParameterError`),
    and never checked again below (the proxy calibrates from it, the ledger
    prices it, the release object draws from it).  ``release=None`` resolves
    to the project's default, the add/remove release, or to the centred one
    when ``sensitivity_mode="paper"`` or ``noise_lattice="integer"`` ask for
    the paper's release; ``release`` is then the release object
    (:mod:`dpdpca.protocol.releases`), which is also its wire name.

    Parameters
    ----------
    epsilon : float in [1e-6, 1e9]
        (:data:`dpdpca._validation.MIN_EPSILON`, ``MAX_EPSILON``: every calibration stays computable)
    delta : float in (0, 1)
    calibration : {"analytic", "classic"}
    sensitivity_mode : {"rigorous", "paper"}
    noise_lattice : {"n-scaled", "integer"}
    release : {"add-remove", "centred"} or None
    noise_by : {"proxy", "owners"}
    honest_owners : int or None
        t for ``noise_by="owners"`` (default L).
    neighbouring : str or None
        The release's relation (None: the release's own; add/remove-one or
        replace-one). Another value is refused: the centred release is
        replace-one only (N is released exactly).
    """

    epsilon: float = 1.0
    delta: float = 1e-5
    calibration: str = "analytic"
    sensitivity_mode: str = "rigorous"
    noise_lattice: str = "n-scaled"
    release: str | None = None
    noise_by: str = "proxy"
    honest_owners: int | None = None
    neighbouring: str | None = None

    def __post_init__(self) -> None:
        rel = resolve_release(self.release, sensitivity_mode=self.sensitivity_mode, noise_lattice=self.noise_lattice)
        check_noise_by(self.noise_by)
        relation = rel.check_setting(noise_by=self.noise_by, honest_owners=self.honest_owners,
                                     neighbouring=self.neighbouring, sensitivity_mode=self.sensitivity_mode,
                                     noise_lattice=self.noise_lattice)
        eps, dl = check_noise_options(epsilon=self.epsilon, delta=self.delta, calibration=self.calibration,
                                      sensitivity_mode=self.sensitivity_mode, noise_lattice=self.noise_lattice)
        object.__setattr__(self, "release", rel)
        object.__setattr__(self, "neighbouring", relation)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dl)

    @property
    def kind(self) -> ProtocolRelease:
        """The release object (:mod:`dpdpca.protocol.releases`)."""
        assert isinstance(self.release, ProtocolRelease)
        return self.release

    @property
    def mode(self) -> str:
        """The release's wire name, ``"add-remove"`` or ``"centred"``."""
        return str(self.release)

    def check_owners(self, *, owners: int, quorum: int | None = None) -> None:
        """What needs the session's L and quorum Q: owners' noise with t <= L and Q > L - t (ParameterError)."""
        check_release_options(release=self.mode, noise_by=self.noise_by, honest_owners=self.honest_owners,
                              owners=owners, quorum=quorum)

    def owner_noise(self, *, d: int, frac_bits: int, owners: int, quorum: int | None,
                    present: int) -> DistributedCalibration | None:
        """Each owner's share of the distributed noise; None unless ``noise_by="owners"``."""
        return owner_noise_calibration(dataclasses.asdict(self), d=d, frac_bits=frac_bits, owners=owners,
                                       quorum=quorum, present=present)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["release"] = str(self.release)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ReleaseOptions":
        return cls(**dict(data))


#: The frozen privacy setting (the same class): what every layer below the entry point takes.
PrivacySetting = ReleaseOptions


@dataclass(frozen=True)
class KeyOptions:
    """The key pair and the fixed-point encoding of the data user's public parameters.

    Parameters
    ----------
    key_bits : int
        Paillier modulus bits; < 2048 needs ``insecure_test_key=True``.
    insecure_test_key : bool
    frac_bits : int
        Fixed-point fraction bits f.
    kappa : int
        Statistical hiding bits of the mask (>= 40).
    packing : {"wide", "plain"}
        Slot layout (:class:`~dpdpca.protocol.params.ProtocolParams`).
    scheme : {"paillier", "bfv"}
        The encryption scheme (:mod:`dpdpca.crypto.schemes`): Paillier
        (default, the paper's) or BFV (post-quantum, add/remove release only,
        optional extra ``[lattice]``; ``key_bits`` does not apply to it).
    """

    key_bits: int = 2048
    insecure_test_key: bool = False
    frac_bits: int = 16
    kappa: int = 40
    packing: str = "wide"
    scheme: str = "paillier"

    def __post_init__(self) -> None:
        from dpdpca.crypto import scheme_named

        scheme_named(self.scheme)  # one-line ParameterError for an unknown name

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class DeclaredBounds:
    """Public bounds every party relies on, never derived from the data.

    Parameters
    ----------
    max_owners : int or None
        Declared slot width in owners (default: the number of owners).
    max_rows_per_owner : int or None
        Declared rows per owner (default: the largest partition, a simulation
        convenience of ``run_protocol``; real owners declare it in ``keygen``).
    clip : bool
        Clip rows to L2 norm 1 (public rule) or refuse rows of norm > 1.
    range_proofs : bool
        Owners prove in zero knowledge that every slot of their shares is
        within these bounds and the proxy checks it (:mod:`dpdpca.protocol.proofs`;
        off by default: see README for its cost).
    range_proof_mode : {"slack", "exact"}
        Which proof (:data:`dpdpca.protocol.proofs.RANGE_PROOF_MODES`): slack
        bounds every slot up to the slack proof's proven bound and N exactly;
        exact proves every slot within its declared interval (costlier).
    """

    max_owners: int | None = None
    max_rows_per_owner: int | None = None
    clip: bool = True
    range_proofs: bool = False
    range_proof_mode: str = "slack"

    def __post_init__(self) -> None:
        from dpdpca.protocol.proofs import check_range_proof_mode

        check_range_proof_mode(self.range_proof_mode)  # one-line ParameterError for another name


@dataclass(frozen=True)
class Deployment:
    """Where and how the parties run.

    Parameters
    ----------
    launcher : {"in-process", "processes"}
        One process, or one OS process per party over pipes.
    transport : Transport or None
        In-process launcher only: carry the messages over this transport
        (default: in-memory queues).
    executor : Executor, compute engine, distributed.Client or None
        Runs the crypto batches of owners and proxy.
    user_executor : local executor, None or "auto"
        The data user's decryption batches; ``"auto"``: ``executor`` if it is
        local, else serial (the secret key never leaves the key holder).
    quorum : int or None
        Shares the proxy needs; default all present owners.
    deadline_s : float or None
        How long the proxy waits for shares.
    absent_owners : tuple of int
        0-based owner indices that never send (dropout simulation).
    verify : bool
        Compare with a plaintext reference in the integer domain.
    """

    launcher: str = "in-process"
    transport: Transport | None = None
    executor: EngineLike = None
    user_executor: Any = "auto"
    quorum: int | None = None
    deadline_s: float | None = None
    absent_owners: tuple[int, ...] = ()
    verify: bool = False

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            from dpdpca._validation import param_error

            raise param_error("launcher", f"one of {LAUNCHERS}", self.launcher)
        object.__setattr__(self, "absent_owners", tuple(self.absent_owners))


_GROUPS: dict[str, type] = {"release": ReleaseOptions, "key": KeyOptions, "bounds": DeclaredBounds,
                            "deployment": Deployment}


@dataclass(frozen=True)
class ProtocolOptions:
    """One of each option group (:mod:`dpdpca.protocol.config`)."""

    release: ReleaseOptions = field(default_factory=ReleaseOptions)
    key: KeyOptions = field(default_factory=KeyOptions)
    bounds: DeclaredBounds = field(default_factory=DeclaredBounds)
    deployment: Deployment = field(default_factory=Deployment)

    @classmethod
    def from_flat(cls, **flat: Any) -> "ProtocolOptions":
        """The groups from the historical flat keyword names (``epsilon=``, ``key_bits=``, ``processes=``...).

        Raises
        ------
        TypeError
            An unknown keyword (as a misspelt keyword argument would).
        """
        if "processes" in flat:
            flat["launcher"] = "processes" if flat.pop("processes") else "in-process"
        groups: dict[str, dict[str, Any]] = {name: {} for name in _GROUPS}
        names = {f.name: g for g, klass in _GROUPS.items() for f in dataclasses.fields(klass)}
        for key, value in flat.items():
            if key not in names:
                raise TypeError(f"run_protocol() got an unexpected keyword argument {key!r}")
            groups[names[key]][key] = value
        return cls(**{g: _GROUPS[g](**kw) for g, kw in groups.items()})
