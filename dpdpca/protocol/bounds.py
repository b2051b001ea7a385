"""Public bounds of the protocol's integers: slot values, the noise tail, the centred release's sensitivity.

Everything here is declared in advance and public: it never depends on the
private data.  The slot bound is the largest |value| any packed slot can hold
at any step of the protocol, from the owners' shares to the proxy's
``R'' = N*R + v b^T + b v^T + b b^T + G''`` (``docs/architecture.md``, "The
protocol in integers").  :mod:`dpdpca.protocol.releases` (each release's
layout and noise) and :mod:`dpdpca.protocol.params` (the public parameters)
build on it.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpdpca._validation import check_delta, check_epsilon, check_int, param_error
from dpdpca.dp import CALIBRATIONS, REPLACE_ONE, SENSITIVITY_MODES, DiscreteGaussianMechanism, centred_scatter_sensitivity
from dpdpca.dp.calibration import classic_gaussian_sigma, zcdp_rho_for
from dpdpca.errors import DataError

__all__ = ["slot_value_bound", "final_value_bound", "masked_sum_bound", "carry_value_bound", "add_remove_value_bound",
           "NOISE_LATTICES", "SENSITIVITY_MODES", "CALIBRATIONS", "noise_tail_factor", "integer_noise_sensitivity",
           "noise_sigma_int", "check_noise_options", "DEFAULT_MAX_FEATURES", "MAX_FEATURES", "check_features",
           "add_remove_sigma_bound", "TAIL_LOG2_ENTRIES", "TAIL_LOG2_FAILURE"]

#: Largest number of features d a proxy or data user accepts by default (CLI ``--max-features``).
#: A share's d drives O(d^2) work and memory; at 4096 a 2048-bit share is already ~ 1 GB.
DEFAULT_MAX_FEATURES = 4096
#: Largest d any public parameters declare (``keygen --features``, ``public.json``'s ``d``): a share of
#: d = 65536 features holds 2^31 values, some 100 GB of 2048-bit ciphertexts, beyond any deployment; a larger
#: d in a file is refused before anything is allocated for it.
MAX_FEATURES = 1 << 16

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




#: ``"n-scaled"`` (rigorous default): the proxy adds G'' calibrated to the
#: integer query N*S_int; ``"integer"`` (the paper's form): N*G' with G'
#: integer on S_int's scale, which leaks v_i v_j mod N to the data user.
NOISE_LATTICES = ("n-scaled", "integer")
# SENSITIVITY_MODES and CALIBRATIONS are dpdpca.dp's (imported above), re-exported here.
#: The noise allowance covers up to 2**40 noisy entries ...
TAIL_LOG2_ENTRIES = 40
#: ... with total probability of exceeding it below 2**-80.
TAIL_LOG2_FAILURE = 80
def check_noise_options(*, epsilon: float, delta: float, calibration: str, sensitivity_mode: str,
                        noise_lattice: str, neighbouring: str = REPLACE_ONE) -> tuple[float, float]:
    """Validate the budget and noise options; return ``(epsilon, delta)``.

    Raises
    ------
    ParameterError
        epsilon outside [1e-6, 1e9] (:func:`dpdpca._validation.check_epsilon`,
        where every calibration stays in double precision), delta outside
        (0, 1), an unknown option, a neighbouring relation other than
        replace-one for the centred release (it releases N exactly, which is
        not DP under add/remove-one; the add/remove release checks its own
        relation), or a budget whose calibration leaves double precision.
    """
    eps = check_epsilon("epsilon", epsilon)
    dl = check_delta("delta", delta)
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
