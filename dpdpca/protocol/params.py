"""Public parameters of the Wang-Chang protocol and the slot bound they imply.

Everything here is declared in advance and public: it never depends on the
private data.  The slot bound is the largest |value| any packed slot can hold
at any step of the protocol, from the owners' shares to the proxy's
``R'' = N*R + v b^T + b v^T + b b^T + G''`` (``docs/architecture.md``, "The
protocol in integers").
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any, Mapping

from dpdpca._validation import _fmt, check_delta, check_epsilon, check_int, param_error
from dpdpca.crypto import PublicKey, SlotLayout
from dpdpca.crypto.keys import MIN_SECURE_BITS
from dpdpca.crypto.schemes import CipherScheme, public_key_from_json, scheme_named, scheme_of
from dpdpca.dp.release import check_noise_by
from dpdpca.errors import DataError, DpdpcaError, InsecureKeyError, MessageError, OverflowRiskError
from dpdpca.protocol.bounds import (CALIBRATIONS, DEFAULT_MAX_FEATURES, MAX_FEATURES, NOISE_LATTICES,
                                    SENSITIVITY_MODES, TAIL_LOG2_ENTRIES, TAIL_LOG2_FAILURE, add_remove_sigma_bound,
                                    add_remove_value_bound, carry_value_bound, check_features, check_noise_options,
                                    final_value_bound, integer_noise_sensitivity, masked_sum_bound, noise_sigma_int,
                                    noise_tail_factor, slot_value_bound)
from dpdpca.protocol.messages import check_session_id, decimal_int, strict_int
from dpdpca.protocol.releases import ADD_REMOVE, CENTRED, RELEASE_NAMES, ProtocolRelease, as_release, served_releases

__all__ = ["slot_value_bound", "final_value_bound", "masked_sum_bound", "carry_value_bound", "PACKINGS", "ProtocolParams", "NOISE_LATTICES", "SENSITIVITY_MODES", "CALIBRATIONS",
           "noise_tail_factor", "integer_noise_sensitivity", "noise_sigma_int", "check_noise_options",
           "DEFAULT_MAX_FEATURES", "check_features", "resolve_release", "check_release_options",
           "add_remove_sigma_bound", "PARAMS_VERSION",
           "add_remove_value_bound", "PARAM_RELEASES", "TAIL_LOG2_ENTRIES", "TAIL_LOG2_FAILURE",
           "MAX_ROWS_PER_OWNER", "MAX_OWNERS", "MAX_KAPPA", "MAX_FEATURES"]


#: How :meth:`ProtocolParams.from_json`'s refusal names a caller's consent to a test key (a command: its option).
TEST_KEY_CONSENT = "the caller passes insecure_test_key=True (CLI --insecure-test-key)"

#: Largest declared ``max_rows_per_owner`` (2^40, about 10^12 rows) and ``max_owners`` (2^20): the slot
#: bounds and the noise allowance grow with N_max = max_owners * max_rows_per_owner, and beyond these
#: they leave double precision in the calibration or need more slot bits than any key has.
MAX_ROWS_PER_OWNER = 1 << 40
MAX_OWNERS = 1 << 20
#: Largest declared ``kappa`` (statistical hiding bits of the centred release's mask): the keys this project
#: makes (at most 16384 bits, :data:`dpdpca.crypto.keys.MAX_KEY_BITS`) give at most 256-bit computational
#: security, so a statistical distance below 2^-256 adds nothing; and every kappa bit widens each slot by one.
MAX_KAPPA = 256

#: Version of ``public.json``'s protocol fields.  2: v' in its own layout, M's slots sized for the
#: add/remove blocks, add/remove shares carry v once as packed tiles (version 1 files derive
#: other layouts, so they are refused with a hint to run keygen again).
PARAMS_VERSION = 3

#: ``"wide"`` (default): slots sized for the values the user decrypts, with a
#: carry bound for R'' (the user subtracts v'v'^T under encryption first);
#: ``"plain"``: slots sized for R'' itself (the earlier layout, ~half the slots).
PACKINGS = ("wide", "plain")
#: What ``ProtocolParams.release`` may declare: both releases, or one of them.
PARAM_RELEASES = ("any", *RELEASE_NAMES)
PARAMS_KEY = "dpdpca_protocol"


def resolve_release(release: str | None, *, sensitivity_mode: str = "rigorous",
                    noise_lattice: str = "n-scaled") -> ProtocolRelease:
    """The release object: as given, else the centred one for the paper's options, else add/remove.

    ``--sensitivity-mode paper`` and ``--noise-lattice integer`` describe the
    paper's centred release, so without an explicit ``release`` they select
    it; otherwise the default is :data:`~dpdpca.protocol.releases.ADD_REMOVE`
    (the CLI's and every library class's).
    """
    if release is not None:
        return as_release(release)
    if sensitivity_mode == "paper" or noise_lattice == "integer":
        return CENTRED
    return ADD_REMOVE


def check_release_options(*, release: str, noise_by: str, honest_owners: int | None, owners: int,
                          quorum: int | None = None) -> None:
    """Refuse inconsistent release options with a one-line ParameterError.

    Distributed noise needs a release that takes owners' noise (add/remove:
    the owners cannot know N, and the centred release's sensitivity depends
    on it), and t in [L - Q + 1, L].
    """
    rel = as_release(release)
    check_noise_by(noise_by)
    rel.check_setting(noise_by=noise_by, honest_owners=honest_owners, neighbouring=None,
                      sensitivity_mode="rigorous", noise_lattice="n-scaled")
    if noise_by == "owners":  # checked in the order of dpdpca.dp.distributed: L first, then t and Q within it
        owners = check_int("owners", owners, minimum=1)
        t = owners if honest_owners is None else check_int("honest_owners", honest_owners, minimum=1,
                                                           maximum=owners)
        q = owners if quorum is None else check_int("quorum", quorum, minimum=1, maximum=owners)
        if q - (owners - t) < 1:
            raise param_error("quorum", f"> L - t = {owners - t} so that an honest owner's noise is always "
                              f"present", q)


def _noise_allowance(n_max: int, *, frac_bits: int, min_epsilon: float, min_delta: float,
                     release: str = "any") -> int:
    """``ceil(t * sigma_max)`` over the declared release(s), every option each accepts."""
    sigmas = [s for rel in served_releases(release)
              for s in rel.noise_sigma_bounds(n_max, frac_bits=frac_bits, min_epsilon=min_epsilon,
                                              min_delta=min_delta)]
    return math.ceil(noise_tail_factor() * max(sigmas)) + 1


@dataclass(frozen=True)
class ProtocolParams:
    """Public parameters: written by ``dpdpca keygen`` beside the JWK fields.

    Every party derives the same :class:`~dpdpca.crypto.SlotLayout` from them,
    and nothing in them depends on the private data.

    Parameters
    ----------
    public_key : PublicKey
    session_id : str
        32 hex characters from the OS CSPRNG; messages of another session are
        rejected as replays.
    max_owners : int >= 1
        Declared maximum number of owners L_max.
    max_rows_per_owner : int >= 1
        Declared maximum rows per owner; ``N <= N_max = L_max * n_max``.
    frac_bits : int in [0, 26]
        Fixed-point fraction bits f (default 16).
    kappa : int in [40, 256]
        Statistical hiding of the mask b (default 40; :data:`MAX_KAPPA`).
    min_epsilon : float > 0, min_delta : float in (0, 1)
        The smallest budget the noise allowance was sized for.
    noise_allowance : int
        ``ceil(t * sigma_max) + 1``: the declared bound on |noise| per slot of
        ``R''`` (see :func:`noise_tail_factor`).
    packing : {"wide", "plain"}
        ``"wide"`` (default): ``SlotLayout.for_final_bound(public_key,
        final_value_bound(...), carry_value_bound(...))``, about twice the
        slots per ciphertext; the user subtracts ``v' v'^T`` homomorphically
        and decrypts only small values; ``v'`` travels in :attr:`v2_layout`.  ``"plain"``:
        ``SlotLayout.for_bound(public_key, slot_value_bound(...))``, every
        slot holds R'' itself.
    release : {"add-remove", "centred", "any"}
        The release these parameters serve (:meth:`create`'s default
        ``"add-remove"``, as every command's).  ``"any"``: the layout
        and allowance fit both.  ``"add-remove"``: the allowance covers that
        release's noise only and the layout is
        ``SlotLayout.for_bound(public_key, add_remove_value_bound(...))``
        (no ``N**2`` term, no carry room; packing does not matter, as nothing
        is subtracted), about 30% more slots per ciphertext.  ``"centred"``:
        the centred release's allowance only, in the packing's layout.
        Parties refuse a release other than the declared one
        (:meth:`check_release`).
    layout : SlotLayout
        Derived from the above.

    The scheme is the public key's (:func:`dpdpca.crypto.schemes.scheme_of`):
    Paillier serves both releases; BFV only the add/remove release
    (:attr:`scheme`), so its parameters always declare ``release="add-remove"``.
    """

    public_key: PublicKey
    session_id: str
    max_owners: int
    max_rows_per_owner: int
    frac_bits: int
    kappa: int
    min_epsilon: float
    min_delta: float
    noise_allowance: int
    layout: SlotLayout = field(compare=False)
    packing: str = "wide"
    release: str = "any"
    d: int | None = None

    @classmethod
    def create(cls, public_key: PublicKey, *, max_owners: int, max_rows_per_owner: int, frac_bits: int = 16,
               kappa: int = 40, min_epsilon: float = 0.01, min_delta: float = 1e-12,
               session_id: str | None = None, packing: str = "wide", release: str = "add-remove",
               d: int | None = None) -> "ProtocolParams":
        """Derive the noise allowance and slot layout from declared public bounds.

        Raises
        ------
        ParameterError
            A parameter out of range.
        OverflowRiskError
            The slot bound does not fit one plaintext (too many owners or rows
            for the key size).
        """
        min_epsilon, min_delta = cls.check_declared(max_owners=max_owners, max_rows_per_owner=max_rows_per_owner,
                                                    frac_bits=frac_bits, kappa=kappa, min_epsilon=min_epsilon,
                                                    min_delta=min_delta, packing=packing, release=release, d=d)
        session_id = secrets.token_hex(16) if session_id is None else check_session_id(session_id)
        n_max = max_owners * max_rows_per_owner
        release = cls.check_scheme_release(scheme_of(public_key), release)
        allowance = _noise_allowance(n_max, frac_bits=frac_bits, min_epsilon=min_epsilon, min_delta=min_delta,
                                     release=release)
        declared = dict(owners=max_owners, rows_per_owner=max_rows_per_owner, frac_bits=frac_bits, kappa=kappa,
                        noise_bound=allowance)
        # "any" serves both releases: the centred release's layout, whose slots also fit the add/remove values
        served = served_releases(release)
        layout = (served[0] if len(served) == 1 else CENTRED).slot_layout(public_key, packing=packing,
                                                                          declared=declared)
        return cls(public_key, session_id, max_owners, max_rows_per_owner, frac_bits, kappa, min_epsilon,
                   min_delta, allowance, layout, packing, release, d)

    @staticmethod
    def check_declared(*, max_owners: int, max_rows_per_owner: int, frac_bits: int = 16, kappa: int = 40,
                       min_epsilon: float = 0.01, min_delta: float = 1e-12, packing: str = "wide",
                       release: str = "add-remove", d: int | None = None, **_: Any) -> tuple[float, float]:
        """Check the declared bounds of :meth:`create` without a key; return ``(min_epsilon, min_delta)``.

        :meth:`create` calls it, and :meth:`DataUser.generate
        <dpdpca.protocol.user.DataUser.generate>` before the (slow) key generation.

        Raises
        ------
        ParameterError
            A bound out of range: ``max_owners`` in [1, 2^20],
            ``max_rows_per_owner`` in [1, 2^40], ``d`` in [1, MAX_FEATURES],
            ``frac_bits`` in [0, 26], ``kappa`` in [40, MAX_KAPPA],
            ``min_epsilon`` (:func:`dpdpca._validation.check_epsilon`),
            ``min_delta``, an unknown packing or release.
        """
        check_int("max_owners", max_owners, minimum=1, maximum=MAX_OWNERS)
        check_int("max_rows_per_owner", max_rows_per_owner, minimum=1, maximum=MAX_ROWS_PER_OWNER)
        if d is not None:
            check_int("d", d, minimum=1, maximum=MAX_FEATURES)
        check_int("frac_bits", frac_bits, minimum=0, maximum=26)
        check_int("kappa", kappa, minimum=40, maximum=MAX_KAPPA)
        if packing not in PACKINGS:
            raise param_error("packing", f"one of {PACKINGS}", packing)
        if release not in PARAM_RELEASES:
            raise param_error("release", f"one of {PARAM_RELEASES}", release)
        return check_epsilon("min_epsilon", min_epsilon), check_delta("min_delta", min_delta)

    def check_d(self, d: int, *, who: str) -> int:
        """``d`` if the parameters declare no d or this one, else a one-line :class:`DataError` naming ``who``.

        A declared d (``keygen --features``) fixes the session's number of
        features for every party, so no share can fix it for the others.
        """
        if self.d is not None and d != self.d:
            raise DataError(f"d must be the d={self.d} declared in public.json (keygen --features), "
                            f"got d={d} from {who}")
        return d

    @staticmethod
    def check_scheme_release(scheme: CipherScheme, release: str) -> str:
        """``"add-remove"`` for a scheme without the centred release (``"any"`` becomes it), else ``release``."""
        if scheme.centred_release:
            return release
        if ADD_REMOVE not in served_releases(release):
            raise param_error("release", f"{str(ADD_REMOVE)!r} with scheme {scheme.name!r} (the centred release's "
                              f"mask needs Paillier: it stays Paillier-only)", release)
        return str(ADD_REMOVE)

    @staticmethod
    def share_value_count(*, d: int | None = None, release: str = "add-remove", **_: Any) -> int | None:
        """Values in one owner's share for the declared d (None when d is not declared): the release's sections."""
        if d is None:
            return None
        rel = as_release(release if release != "any" else "add-remove")
        return rel.share_value_count(check_int("d", d, minimum=1), 1 << 40)

    @staticmethod
    def release_value_bound(*, max_owners: int, max_rows_per_owner: int, frac_bits: int = 16,
                            min_epsilon: float = 0.01, min_delta: float = 1e-12, release: str = "add-remove",
                            **_: Any) -> int:
        """:func:`add_remove_value_bound` of the parameters :meth:`create` would make (a BFV key is sized by it)."""
        allowance = _noise_allowance(check_int("max_owners", max_owners, minimum=1)
                                     * check_int("max_rows_per_owner", max_rows_per_owner, minimum=1),
                                     frac_bits=frac_bits, min_epsilon=check_epsilon("min_epsilon", min_epsilon),
                                     min_delta=check_delta("min_delta", min_delta), release=release)
        return add_remove_value_bound(owners=max_owners, rows_per_owner=max_rows_per_owner, frac_bits=frac_bits,
                                      noise_bound=allowance)

    @property
    def scheme(self) -> CipherScheme:
        """The encryption scheme of the key (Paillier or BFV): every party asks it, never its name."""
        return scheme_of(self.public_key)

    def check_release(self, release: str) -> ProtocolRelease:
        """The release object if these parameters serve it, else a one-line :class:`ParameterError`."""
        rel = as_release(release)
        if rel not in served_releases(self.release):
            raise param_error("release", f"{self.release!r}, the release the public parameters were made for "
                              f"(keygen --release any serves both)", release)
        return rel

    @property
    def final_bound(self) -> int:
        """:func:`final_value_bound` of these parameters (wide packing's declared bound on M)."""
        return final_value_bound(owners=self.max_owners, rows_per_owner=self.max_rows_per_owner,
                                 frac_bits=self.frac_bits, kappa=self.kappa, noise_bound=self.noise_allowance)

    @property
    def v2_layout(self) -> SlotLayout:
        """The layout ``v'`` travels in: wide packing, plain slots for :func:`masked_sum_bound`.

        The proxy repacks the owners' one-slot ``E[v_i]`` into it
        (:meth:`~dpdpca.crypto.EncryptedArray.repack`); plain packing keeps
        ``v'`` in :attr:`layout`, and so do parameters made for the
        add/remove release alone (it has no ``v'``: v travels in tiles of
        :attr:`layout`).
        """
        if self.packing != "wide" or served_releases(self.release) == (ADD_REMOVE,):
            return self.layout
        return SlotLayout.for_bound(self.public_key, masked_sum_bound(
            owners=self.max_owners, rows_per_owner=self.max_rows_per_owner, frac_bits=self.frac_bits,
            kappa=self.kappa))

    @property
    def n_max(self) -> int:
        """``max_owners * max_rows_per_owner``."""
        return self.max_owners * self.max_rows_per_owner

    @property
    def key_fingerprint(self) -> str:
        return str(self.public_key.fingerprint)

    def share_bounds(self, release: str = "add-remove") -> dict[str, int]:
        """Public per-owner bounds of each section of ``release``'s shares (the release object's rule).

        Centred: |R_ij| <= n*2^(2f), |v_i| <= n*2^f, N^l <= n.  Add/remove:
        every section may carry an owner's noise share (up to the allowance)
        and N travels encrypted at scale 2^(2f).
        """
        return as_release(release).share_bounds(rows_per_owner=self.max_rows_per_owner, frac_bits=self.frac_bits,
                                                allowance=self.noise_allowance)

    def to_json(self) -> dict[str, Any]:
        """``public.json``: the JWK fields plus ``dpdpca_protocol``."""
        out = dict(self.public_key.to_json())
        out[PARAMS_KEY] = {
            "version": PARAMS_VERSION,
            "session_id": self.session_id,
            "max_owners": self.max_owners,
            "max_rows_per_owner": self.max_rows_per_owner,
            "frac_bits": self.frac_bits,
            "kappa": self.kappa,
            "min_epsilon": self.min_epsilon,
            "min_delta": self.min_delta,
            "noise_allowance": str(self.noise_allowance),
            "slot_bits": self.layout.slot_bits,
            "slots": self.layout.slots,
            "packing": self.packing,
            "release": self.release,
            "scheme": self.scheme.name,
            "insecure_test_key": bool(getattr(self.public_key, "insecure_test_key", False)),
        }
        if self.d is not None:
            out[PARAMS_KEY]["d"] = self.d
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, insecure_test_key: bool = False,
                  test_key_consent: str = TEST_KEY_CONSENT) -> "ProtocolParams":
        """Inverse of :meth:`to_json`; re-derives and checks the layout.

        A key below the security floor (Paillier < 2048 bits) is accepted only
        if both the parameters declare ``insecure_test_key`` (the data user's
        ``keygen --insecure-test-key``) and the caller passes its own
        ``insecure_test_key=True`` (CLI ``--insecure-test-key``): the file's
        word alone exempts nobody.  ``test_key_consent`` names the caller's
        consent in the refusal (a clause: a command's option, a config key).

        Raises
        ------
        MessageError
            Missing or inconsistent protocol fields.
        InsecureKeyError
            A key below the security floor without both consents.
        """
        if not isinstance(data, Mapping) or PARAMS_KEY not in data:
            raise MessageError(f"public parameters must contain {PARAMS_KEY!r}, got keys "
                               f"{sorted(data) if isinstance(data, Mapping) else type(data).__name__}")
        jwk = {k: v for k, v in data.items() if k != PARAMS_KEY}
        p = data[PARAMS_KEY]
        if not isinstance(p, Mapping):
            raise MessageError(f"{PARAMS_KEY} must be an object, got {type(p).__name__}")
        try:
            if strict_int(f"{PARAMS_KEY}.version", p["version"]) != PARAMS_VERSION:
                raise MessageError(f"{PARAMS_KEY}.version must be {PARAMS_VERSION} (the slot layouts and the "
                                   f"add/remove share layout changed; run dpdpca keygen again), got "
                                   f"{str(p['version'])[:20]}")
            ints = {name: strict_int(f"{PARAMS_KEY}.{name}", p[name])
                    for name in ("max_owners", "max_rows_per_owner", "frac_bits", "kappa", "slot_bits", "slots")}
            reals = {name: _strict_real(f"{PARAMS_KEY}.{name}", p[name]) for name in ("min_epsilon", "min_delta")}
            texts = {name: _strict_text(f"{PARAMS_KEY}.{name}", p[name]) for name in ("packing", "release")}
            insecure = p.get("insecure_test_key", False)
            if not isinstance(insecure, bool):
                raise MessageError(f"{PARAMS_KEY}.insecure_test_key must be true or false, got "
                                   f"{type(insecure).__name__}")
            allowance = decimal_int(f"{PARAMS_KEY}.noise_allowance", p["noise_allowance"], minimum=1)
            d = None if p.get("d") is None else strict_int(f"{PARAMS_KEY}.d", p["d"], minimum=1)
            if d is not None and d > MAX_FEATURES:  # refused before anything is sized by it
                raise MessageError(f"{PARAMS_KEY}.d must be <= {MAX_FEATURES}, got {_fmt(d)}")
            pk = _public_key(jwk, declared=insecure, allowed=bool(insecure_test_key), consent=test_key_consent)
            declared_scheme = scheme_named(_strict_text(f"{PARAMS_KEY}.scheme", p.get("scheme", "paillier")))
            if scheme_of(pk) is not declared_scheme:
                raise MessageError(f"{PARAMS_KEY}.scheme must be the key's scheme {scheme_of(pk).name!r}, "
                                   f"got {declared_scheme.name!r}")
            params = cls.create(pk, max_owners=ints["max_owners"], max_rows_per_owner=ints["max_rows_per_owner"],
                                frac_bits=ints["frac_bits"], kappa=ints["kappa"],
                                min_epsilon=reals["min_epsilon"], min_delta=reals["min_delta"],
                                session_id=p["session_id"], packing=texts["packing"], release=texts["release"],
                                d=d)
            layout_ok = (params.noise_allowance == allowance and params.layout.slot_bits == ints["slot_bits"]
                         and params.layout.slots == ints["slots"])
        except DpdpcaError:
            raise
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise MessageError(f"{PARAMS_KEY} must have every protocol field with a valid value, "
                               f"got {type(exc).__name__} on {str(exc)[:60]}") from None
        if not layout_ok:
            raise MessageError(f"{PARAMS_KEY} slot layout must match the declared bounds, got slot_bits="
                               f"{str(p.get('slot_bits'))[:20]} slots={str(p.get('slots'))[:20]}")
        return params

    def check_noise_fits(self, sigma_int: float, *, epsilon: float) -> None:
        """Raise OverflowRiskError if ``t * sigma_int`` exceeds the allowance."""
        if noise_tail_factor() * sigma_int >= self.noise_allowance:
            raise OverflowRiskError(
                f"epsilon must be large enough that the noise fits the declared allowance "
                f"(keygen min_epsilon={self.min_epsilon}, min_delta={self.min_delta}), got {epsilon}")


def _public_key(jwk: dict[str, Any], *, declared: bool, allowed: bool, consent: str) -> Any:
    """The data user's key; below the floor only with the file's ``declared`` and the caller's ``allowed`` consent."""
    try:
        return public_key_from_json(jwk, insecure_test_key=declared and allowed)
    except InsecureKeyError:
        if declared == allowed:  # neither consented: the key's own error
            raise
    bits = jwk.get("bits")
    paillier = jwk.get("kty") == "DAJ" and type(bits) is int
    if declared:  # the data user's keygen did, this party did not
        floor, got = ((f"public key bits must be >= {MIN_SECURE_BITS}", f"got {bits}") if paillier else
                      ("public key must meet the security floor", "got a weaker one"))
        raise InsecureKeyError(f"{floor} unless {consent}, {got} (the parameters' own {PARAMS_KEY}."
                               f"insecure_test_key: true exempts no party that did not ask for test keys itself)")
    what = f"a {bits}-bit key (below {MIN_SECURE_BITS} bits)" if paillier else "a key below the security floor"
    raise InsecureKeyError(f"{PARAMS_KEY}.insecure_test_key must be true (dpdpca keygen --insecure-test-key) for "
                           f"any party to use {what}, got false")


def _strict_real(name: str, value: Any) -> float:
    """A JSON number (an int or a float, never a bool or a string) as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MessageError(f"{name} must be a number, got {type(value).__name__} {str(value)[:40]!r}")
    return float(value)


def _strict_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise MessageError(f"{name} must be a string, got {type(value).__name__} {str(value)[:40]!r}")
    return value
