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
from fractions import Fraction
from typing import Any, Mapping

from dpdpca._validation import check_int, check_open_unit, check_positive, param_error
from dpdpca.crypto import PublicKey, SlotLayout
from dpdpca.dp import (CALIBRATIONS, DEFAULT_RELEASE, REPLACE_ONE, SENSITIVITY_MODES, DiscreteGaussianMechanism,
                       centred_scatter_sensitivity)
from dpdpca.dp.calibration import classic_gaussian_sigma, zcdp_rho_for
from dpdpca.dp.release import check_noise_by, check_release
from dpdpca.errors import DataError, DpdpcaError, MessageError, OverflowRiskError
from dpdpca.protocol.messages import check_session_id, decimal_int, strict_int

__all__ = ["slot_value_bound", "final_value_bound", "masked_sum_bound", "carry_value_bound", "PACKINGS", "ProtocolParams", "NOISE_LATTICES", "SENSITIVITY_MODES", "CALIBRATIONS",
           "noise_tail_factor", "integer_noise_sensitivity", "noise_sigma_int", "check_noise_options",
           "DEFAULT_MAX_FEATURES", "check_features", "resolve_release", "check_release_options",
           "add_remove_sigma_bound", "PARAMS_VERSION",
           "add_remove_value_bound", "PARAM_RELEASES"]

#: Largest number of features d a proxy or data user accepts by default (CLI ``--max-features``).
#: A share's d drives O(d^2) work and memory; at 4096 a 2048-bit share is already ~ 1 GB.
DEFAULT_MAX_FEATURES = 4096

#: Version of ``public.json``'s protocol fields.  2: v' in its own layout, M's slots sized for the
#: add/remove blocks, add/remove shares carry v once as packed tiles (version 1 files derive
#: other layouts, so they are refused with a hint to run keygen again).
PARAMS_VERSION = 3

def check_features(d: int, max_features: int = DEFAULT_MAX_FEATURES) -> int:
    """A declared number of features, refused above ``max_features`` before anything is allocated from it.

    Raises
    ------
    DataError
        ``d`` above ``max_features``.
    """
    if d > max_features:
        raise DataError(f"d (declared features) must be <= max_features={max_features} "
                        f"(raise it with --max-features), got {d}")
    return d


def slot_value_bound(*, d: int, owners: int, rows_per_owner: int, frac_bits: int = 16,
                     kappa: int = 40, noise_bound: int = 0) -> int:
    """Largest |slot value| the protocol can produce under declared public bounds.

    Rows are clipped to L2 norm <= 1 and quantized toward zero at scale
    ``2**frac_bits``, so every integer row ``x`` has ``|x_i| <= 2**f`` and
    ``sum_i x_i**2 <= 2**(2f)``.  With ``N <= N_max = owners * rows_per_owner``:

    * ``|R_ij| <= N_max * 2**(2f)`` and ``|v_i| <= V = N_max * 2**f``;
    * the mask ``b_i`` is uniform in ``[-B, B]`` with ``B = 2**kappa * V``;
    * ``|R''_ij| <= N_max * N_max * 2**(2f) + 2 * V * B + B**2 + noise_bound``.

    Parameters
    ----------
    d : int
        Number of features (only validated here; the bound is per slot).
    owners, rows_per_owner : int
        Declared maximum number of owners and of rows per owner.
    frac_bits : int
        Fixed-point fraction bits ``f`` of the row entries.
    kappa : int
        Statistical hiding parameter of the mask, >= 40.
    noise_bound : int
        Declared bound on |noise| added to a slot of ``R''``.

    Returns
    -------
    int
        The bound; a slot needs ``bound.bit_length() + 1`` bits (sign).
    """
    check_int("d", d, minimum=1)
    check_int("owners", owners, minimum=1)
    check_int("rows_per_owner", rows_per_owner, minimum=1)
    check_int("frac_bits", frac_bits, minimum=0, maximum=52)
    check_int("kappa", kappa, minimum=40)
    check_int("noise_bound", noise_bound, minimum=0)
    n_max = owners * rows_per_owner
    v_bound = n_max << frac_bits
    b_bound = v_bound << kappa
    return n_max * (n_max << (2 * frac_bits)) + 2 * v_bound * b_bound + b_bound * b_bound + noise_bound


def final_value_bound(*, owners: int, rows_per_owner: int, frac_bits: int = 16, kappa: int = 40,
                      noise_bound: int = 0) -> int:
    """Largest |slot| of any multi-slot value the data user decrypts in the wide layout.

    Centred release: the user decrypts ``M = R'' - v' v'^T = N*S_int + G''``
    (after subtracting ``v' v'^T`` homomorphically); ``v'`` travels in a
    layout of its own (:func:`masked_sum_bound`).  With ``N <= N_max`` and
    integer rows of L2 norm ``<= 2**f``:

    * ``N*S_int = N R - v v^T = N * sum_rows (x - mu)(x - mu)^T`` is ``N``
      times a positive semi-definite matrix S, so ``|S_ij| <= sqrt(S_ii S_jj)``
      and ``S_ii = sum_rows (x_i - mu_i)**2 <= sum_rows x_i**2 <= N 2**(2f)``
      (each ``|x_i| <= ||x|| <= 2**f``); hence ``|N S_ij| <= N_max**2 2**(2f)``;
    * ``|G''_ij| <= noise_bound`` (the declared allowance, checked when the
      noise is drawn).

    Add/remove release: the user decrypts ``R~`` and ``v~`` in this layout;
    each owner's share is within ``n_max 2**(2f) + noise_bound`` (its noise
    share included) and the proxy may add one more ``noise_bound``.

    Returns ``max(N_max**2 2**(2f), owners (n_max 2**(2f) + noise_bound)) +
    noise_bound``.
    """
    owners = check_int("owners", owners, minimum=1)
    rows = check_int("rows_per_owner", rows_per_owner, minimum=1)
    f = check_int("frac_bits", frac_bits, minimum=0, maximum=52)
    check_int("kappa", kappa, minimum=40)
    noise_bound = check_int("noise_bound", noise_bound, minimum=0)
    n_max = owners * rows
    return max(n_max * (n_max << (2 * f)) + noise_bound,
               add_remove_value_bound(owners=owners, rows_per_owner=rows, frac_bits=f, noise_bound=noise_bound))


def add_remove_value_bound(*, owners: int, rows_per_owner: int, frac_bits: int = 16, noise_bound: int = 0) -> int:
    """Largest |slot| of the add/remove release: ``owners (n 2**(2f) + a) + a``.

    Each owner's share is within ``n 2**(2f)`` (``|R_ij| <= sum_rows |x_i x_j|
    <= n 2**(2f)`` for rows of L2 norm ``<= 2**f``; ``v_i`` and ``N 2**(2f)``
    are smaller) plus its noise share, at most the allowance ``a``; the proxy
    may add one more ``a``.  No slot ever holds anything larger, so a layout
    made for this release alone needs no carry room and no ``N**2`` term:
    about ``bits(N_max)`` bits narrower than :func:`final_value_bound`.
    """
    owners = check_int("owners", owners, minimum=1)
    rows = check_int("rows_per_owner", rows_per_owner, minimum=1)
    f = check_int("frac_bits", frac_bits, minimum=0, maximum=52)
    a = check_int("noise_bound", noise_bound, minimum=0)
    return owners * ((rows << (2 * f)) + a) + a


def masked_sum_bound(*, owners: int, rows_per_owner: int, frac_bits: int = 16, kappa: int = 40) -> int:
    """``V + B``: the largest ``|v'_i| = |v_i + b_i|`` (``V = N_max 2**f``, ``B = 2**kappa V``).

    Under wide packing ``v'`` gets its own plain layout sized for this bound
    (:attr:`ProtocolParams.v2_layout`): it is about ``kappa`` bits wider
    than a slot of M needs when ``N_max < 2**kappa``, so sharing M's layout
    would cost M slots.
    """
    n_max = check_int("owners", owners, minimum=1) * check_int("rows_per_owner", rows_per_owner, minimum=1)
    v_bound = n_max << check_int("frac_bits", frac_bits, minimum=0, maximum=52)
    return v_bound + (v_bound << check_int("kappa", kappa, minimum=40))


def carry_value_bound(*, owners: int, rows_per_owner: int, frac_bits: int = 16, kappa: int = 40,
                      noise_bound: int = 0) -> int:
    """Largest |slot| of any intermediate value under wide packing.

    ``|R''_ij| <= slot_value_bound(...)`` and the user subtracts
    ``|v'_i v'_j| <= (V + B)**2``; the crypto layer checks
    ``bound(R'') + (V + B)**2 <= carry_bound`` before the subtraction, so the
    carry bound is their sum.
    """
    n_max = owners * rows_per_owner
    v_bound = n_max << frac_bits
    b_bound = v_bound << kappa
    return slot_value_bound(d=1, owners=owners, rows_per_owner=rows_per_owner, frac_bits=frac_bits, kappa=kappa,
                            noise_bound=noise_bound) + (v_bound + b_bound) ** 2


# ---------------------------------------------------------------------------
# The public parameters every party derives the same slot layout from.
# ---------------------------------------------------------------------------

#: ``"wide"`` (default): slots sized for the values the user decrypts, with a
#: carry bound for R'' (the user subtracts v'v'^T under encryption first);
#: ``"plain"``: slots sized for R'' itself (the earlier layout, ~half the slots).
PACKINGS = ("wide", "plain")
#: What ``ProtocolParams.release`` may declare: both releases, or one of them.
PARAM_RELEASES = ("any", "add-remove", "centred")



#: ``"n-scaled"`` (rigorous default): the proxy adds G'' calibrated to the
#: integer query N*S_int; ``"integer"`` (the paper's form): N*G' with G'
#: integer on S_int's scale, which leaks v_i v_j mod N to the data user.
NOISE_LATTICES = ("n-scaled", "integer")
# SENSITIVITY_MODES and CALIBRATIONS are dpdpca.dp's (imported above), re-exported here.
#: The noise allowance covers up to 2**40 noisy entries ...
TAIL_LOG2_ENTRIES = 40
#: ... with total probability of exceeding it below 2**-80.
TAIL_LOG2_FAILURE = 80
PARAMS_KEY = "dpdpca_protocol"


def resolve_release(release: str | None, *, sensitivity_mode: str = "rigorous",
                    noise_lattice: str = "n-scaled") -> str:
    """The release mode: as given, else ``"centred"`` for the paper's options, else the rigorous default.

    ``--sensitivity-mode paper`` and ``--noise-lattice integer`` describe the
    paper's centred release, so without an explicit ``release`` they select
    it; otherwise the default is :data:`dpdpca.dp.DEFAULT_RELEASE`
    (``"add-remove"``).
    """
    if release is not None:
        return check_release(release)
    if sensitivity_mode == "paper" or noise_lattice == "integer":
        return "centred"
    return DEFAULT_RELEASE


def check_release_options(*, release: str, noise_by: str, honest_owners: int | None, owners: int,
                          quorum: int | None = None) -> None:
    """Refuse inconsistent release options with a one-line ParameterError.

    Distributed noise needs the add/remove release (the owners cannot know N,
    and the centred release's sensitivity depends on it), and t in [L - Q + 1, L].
    """
    check_release(release)
    check_noise_by(noise_by)
    if noise_by == "owners":
        if release != "add-remove":
            raise param_error("noise_by", "'proxy' with release 'centred' (owners' noise needs release "
                              "'add-remove')", noise_by)
        t = owners if honest_owners is None else check_int("honest_owners", honest_owners, minimum=1,
                                                           maximum=owners)
        q = owners if quorum is None else quorum
        if q - (owners - t) < 1:
            raise param_error("quorum", f"> L - t = {owners - t} so that an honest owner's noise is always "
                              f"present", q)
    elif honest_owners is not None:
        raise param_error("honest_owners", "given only with noise_by 'owners'", honest_owners)


def check_noise_options(*, epsilon: float, delta: float, calibration: str, sensitivity_mode: str,
                        noise_lattice: str, neighbouring: str = REPLACE_ONE) -> tuple[float, float]:
    """Validate the budget and noise options; return ``(epsilon, delta)``.

    Raises
    ------
    ParameterError
        epsilon <= 0, delta outside (0, 1), an unknown option, a
        neighbouring relation other than replace-one for the centred release
        (it releases N exactly, which is not DP under add/remove-one; the
        add/remove release checks its own relation), or a budget whose
        calibration leaves double precision (e.g. epsilon = 1e155).
    """
    eps = check_positive("epsilon", epsilon)
    dl = check_open_unit("delta", delta)
    for name, value, allowed in (("calibration", calibration, CALIBRATIONS),
                                 ("sensitivity_mode", sensitivity_mode, SENSITIVITY_MODES),
                                 ("noise_lattice", noise_lattice, NOISE_LATTICES)):
        if value not in allowed:
            raise param_error(name, f"one of {allowed}", value)
    if neighbouring != REPLACE_ONE:
        raise param_error("neighbouring", f"{REPLACE_ONE!r} (the protocol releases N exactly, which is not DP "
                          f"under add/remove-one)", neighbouring)
    # The calibration itself must be computable (an epsilon of 1e155 overflows it): find out now,
    # at unit sensitivity, before any owner encrypts or the proxy computes.
    DiscreteGaussianMechanism(epsilon=eps, delta=dl, sensitivity=1, calibration=calibration,
                              neighbouring=REPLACE_ONE, sensitivity_mode=sensitivity_mode)
    return eps, dl


def noise_tail_factor() -> int:
    """t with ``P(|Z| >= t*sigma) <= 2**-80 / 2**40`` for one discrete-Gaussian entry.

    A discrete Gaussian of scale sigma is sub-Gaussian with variance proxy
    sigma**2 (Canonne, Kamath & Steinke 2020, Prop. 1), so
    ``P(|Z| >= t sigma) <= 2 exp(-t**2 / 2)``; the union over <= 2**40 entries
    stays below 2**-80.
    """
    return math.ceil(math.sqrt(2.0 * math.log(2.0) * (TAIL_LOG2_FAILURE + TAIL_LOG2_ENTRIES + 1)))


def integer_noise_sensitivity(n: int, *, frac_bits: int, sensitivity_mode: str = "rigorous",
                              noise_lattice: str = "n-scaled") -> tuple[float, int]:
    """Real sensitivity of S-bar and the integer sensitivity the noise is calibrated to.

    Parameters
    ----------
    n : int >= 1
        Number of rows N (public under replace-one).
    frac_bits : int
        Fixed-point scale ``2**f``; ``S_int = S_bar * 2**(2f)``.
    sensitivity_mode : {"rigorous", "paper"}
        Forwarded to :func:`dpdpca.dp.centred_scatter_sensitivity` (``"paper"``
        is Wang & Chang's Delta = 1).
    noise_lattice : {"n-scaled", "integer"}
        ``"n-scaled"``: the query is ``N * S_int`` (an integer matrix), so
        ``Delta_int = ceil(N * Delta * 2**(2f))``.  ``"integer"``: the query is
        ``S_int``, ``Delta_int = ceil(Delta * 2**(2f))``.

    Returns
    -------
    (float, int)
        ``Delta`` in S-bar units (rigorous replace-one: ``4 (N - 1) / N``;
        paper: 1) and ``Delta_int``, rounded up exactly from the rational
        ``Delta`` (at least 1).
    """
    if sensitivity_mode not in SENSITIVITY_MODES:
        raise param_error("sensitivity_mode", f"one of {SENSITIVITY_MODES}", sensitivity_mode)
    if noise_lattice not in NOISE_LATTICES:
        raise param_error("noise_lattice", f"one of {NOISE_LATTICES}", noise_lattice)
    exact = Fraction(centred_scatter_sensitivity(n, neighbouring=REPLACE_ONE, mode=sensitivity_mode, exact=True))
    scale = exact * (1 << (2 * frac_bits))
    if noise_lattice == "n-scaled":
        scale *= n
    # N = 1 has sensitivity 0 (S_bar = 0); calibrating to 1 instead only adds noise.
    return float(exact), max(1, math.ceil(scale))


def noise_sigma_int(n: int, *, epsilon: float, delta: float, frac_bits: int, sensitivity_mode: str = "rigorous",
                    noise_lattice: str = "n-scaled", calibration: str = "analytic") -> float:
    """Std. deviation of the noise as it lands in a slot of ``R''`` (integer units)."""
    _, sens = integer_noise_sensitivity(n, frac_bits=frac_bits, sensitivity_mode=sensitivity_mode,
                                        noise_lattice=noise_lattice)
    mech = DiscreteGaussianMechanism(epsilon=epsilon, delta=delta, sensitivity=sens, calibration=calibration,
                                     neighbouring=REPLACE_ONE, sensitivity_mode=sensitivity_mode)
    return float(mech.sigma) * (n if noise_lattice == "integer" else 1)


def add_remove_sigma_bound(*, frac_bits: int, min_epsilon: float, min_delta: float,
                           max_features: int = DEFAULT_MAX_FEATURES) -> float:
    """Upper bound on every block's sigma (integer units) of the add/remove release, any d <= max_features.

    With the public split (:func:`dpdpca.dp.split_weights`, mean bound 1),
    ``sigma_j^2 = c^2 / w_j <= c^2 (d + sqrt(2(d+1)) + 1)`` in data units for every
    block, times the block scale (at most ``2**2f``); ``c`` is the larger of the
    zCDP and classic per-unit scales at (min_epsilon, min_delta), with 10% room
    for the distributed calibration's integer orders (owners' shares are
    smaller still: the central variance divided by the honest owners).
    """
    c = max(1.0 / math.sqrt(2.0 * zcdp_rho_for(min_epsilon, min_delta)),
            classic_gaussian_sigma(min_epsilon, min_delta)) * 1.1
    d = max_features
    return c * math.sqrt(d + math.sqrt(2.0 * (d + 1)) + 1.0) * float(1 << (2 * frac_bits))


def _noise_allowance(n_max: int, *, frac_bits: int, min_epsilon: float, min_delta: float,
                     release: str = "any") -> int:
    """``ceil(t * sigma_max)`` over the declared release(s), every lattice, sensitivity mode and valid calibration."""
    sigmas = []
    if release in ("any", "add-remove"):
        sigmas.append(add_remove_sigma_bound(frac_bits=frac_bits, min_epsilon=min_epsilon, min_delta=min_delta))
    for lattice in NOISE_LATTICES if release in ("any", "centred") else ():
        for mode in SENSITIVITY_MODES:
            for calibration in CALIBRATIONS:
                try:
                    sigmas.append(noise_sigma_int(n_max, epsilon=min_epsilon, delta=min_delta, frac_bits=frac_bits,
                                                  sensitivity_mode=mode, noise_lattice=lattice,
                                                  calibration=calibration))
                except ValueError:  # e.g. classic calibration needs epsilon < 1
                    continue
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
    kappa : int >= 40
        Statistical hiding of the mask b (default 40).
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
    release : {"any", "add-remove", "centred"}
        The release these parameters serve.  ``"any"`` (default): the layout
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

    @classmethod
    def create(cls, public_key: PublicKey, *, max_owners: int, max_rows_per_owner: int, frac_bits: int = 16,
               kappa: int = 40, min_epsilon: float = 0.01, min_delta: float = 1e-12,
               session_id: str | None = None, packing: str = "wide", release: str = "any") -> "ProtocolParams":
        """Derive the noise allowance and slot layout from declared public bounds.

        Raises
        ------
        ParameterError
            A parameter out of range.
        OverflowRiskError
            The slot bound does not fit one plaintext (too many owners or rows
            for the key size).
        """
        check_int("max_owners", max_owners, minimum=1)
        check_int("max_rows_per_owner", max_rows_per_owner, minimum=1)
        check_int("frac_bits", frac_bits, minimum=0, maximum=26)
        check_int("kappa", kappa, minimum=40)
        min_epsilon = check_positive("min_epsilon", min_epsilon)
        min_delta = check_open_unit("min_delta", min_delta)
        session_id = secrets.token_hex(16) if session_id is None else check_session_id(session_id)
        n_max = max_owners * max_rows_per_owner
        if packing not in PACKINGS:
            raise param_error("packing", f"one of {PACKINGS}", packing)
        if release not in PARAM_RELEASES:
            raise param_error("release", f"one of {PARAM_RELEASES}", release)
        allowance = _noise_allowance(n_max, frac_bits=frac_bits, min_epsilon=min_epsilon, min_delta=min_delta,
                                     release=release)
        declared = dict(owners=max_owners, rows_per_owner=max_rows_per_owner, frac_bits=frac_bits, kappa=kappa,
                        noise_bound=allowance)
        if release == "add-remove":
            layout = SlotLayout.for_bound(public_key, add_remove_value_bound(
                owners=max_owners, rows_per_owner=max_rows_per_owner, frac_bits=frac_bits, noise_bound=allowance))
        elif packing == "wide":
            layout = SlotLayout.for_final_bound(public_key, final_value_bound(**declared),
                                                carry_value_bound(**declared))
        else:
            layout = SlotLayout.for_bound(public_key, slot_value_bound(d=1, **declared))
        return cls(public_key, session_id, max_owners, max_rows_per_owner, frac_bits, kappa, min_epsilon,
                   min_delta, allowance, layout, packing, release)

    def check_release(self, release: str) -> str:
        """``release`` if these parameters serve it, else a one-line :class:`ParameterError`."""
        if self.release not in ("any", release):
            raise param_error("release", f"{self.release!r}, the release the public parameters were made for "
                              f"(keygen --release any serves both)", release)
        return release

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
        ``v'`` in :attr:`layout`.
        """
        if self.packing != "wide":
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

    def share_bounds(self, release: str = "centred") -> dict[str, int]:
        """Public per-owner bounds: |R_ij| <= n*2^(2f), |v_i| <= n*2^f, N^l <= n.

        ``release="add-remove"``: every section may carry an owner's noise
        share (up to the allowance) and N travels encrypted at scale 2^(2f).
        """
        n = self.max_rows_per_owner
        if release == "add-remove":
            a = self.noise_allowance
            return {"R": (n << (2 * self.frac_bits)) + a, "v": (n << self.frac_bits) + a,
                    "N": (n << (2 * self.frac_bits)) + a}
        return {"R": n << (2 * self.frac_bits), "v": n << self.frac_bits, "N": n}

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
            "insecure_test_key": bool(getattr(self.public_key, "insecure_test_key", False)),
        }
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ProtocolParams":
        """Inverse of :meth:`to_json`; re-derives and checks the layout.

        Raises
        ------
        MessageError
            Missing or inconsistent protocol fields.
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
            pk = PublicKey.from_json(jwk, insecure_test_key=insecure)
            params = cls.create(pk, max_owners=ints["max_owners"], max_rows_per_owner=ints["max_rows_per_owner"],
                                frac_bits=ints["frac_bits"], kappa=ints["kappa"],
                                min_epsilon=reals["min_epsilon"], min_delta=reals["min_delta"],
                                session_id=p["session_id"], packing=texts["packing"], release=texts["release"])
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


def _strict_real(name: str, value: Any) -> float:
    """A JSON number (an int or a float, never a bool or a string) as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MessageError(f"{name} must be a number, got {type(value).__name__} {str(value)[:40]!r}")
    return float(value)


def _strict_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise MessageError(f"{name} must be a string, got {type(value).__name__} {str(value)[:40]!r}")
    return value
