"""The privacy report of the centred release, in words: what was added, at which scale, what is public.

The proxy builds it in :meth:`dpdpca.protocol.proxy.Proxy.finish`; keeping
the wording here keeps the proxy's module about the rounds.  (The add/remove
release's reports are written by :mod:`dpdpca.dp` calibrations.)
"""

from __future__ import annotations

from typing import Any

from dpdpca.dp import REPLACE_ONE, PrivacyReport
from dpdpca.protocol.masking import mask_tv_bound

__all__ = ["lattice_note", "centred_report"]


def lattice_note(noise_lattice: str) -> str:
    """One sentence on the noise lattice: the rigorous ``"n-scaled"`` one, or the paper's (not DP)."""
    if noise_lattice == "n-scaled":
        return "noise lattice n-scaled (rigorous): G'' discrete Gaussian on the integer query N*S_int"
    return ("noise lattice integer (the paper's form): N*G' added; the user learns "
            "v_i*v_j mod N, so this release is NOT differentially private")


def centred_report(mech: Any, *, epsilon: float, d: int, n: int, frac_bits: int, kappa: int, noise_lattice: str,
                   sensitivity_mode: str, sens_real: float, sens_int: int) -> PrivacyReport:
    """The centred release's report: the mechanism's, with the mask's total-variation term added to delta.

    With the paper's ``"integer"`` noise lattice the release is not DP (the
    user learns ``v_i v_j mod N``): the report says ``epsilon = inf``,
    ``delta = 1``, as the release's ledger cost does, and keeps the mechanism
    and sigma that ran for information.

    Parameters
    ----------
    mech : DiscreteGaussianMechanism
        The proxy's, calibrated to the integer query.
    epsilon : float
    d, n : int
        Features and N (public under replace-one).
    frac_bits, kappa : int
    noise_lattice, sensitivity_mode : str
    sens_real, sens_int : float, int
        The sensitivity in data units and in the integer domain.
    """
    tv = mask_tv_bound(d, n, frac_bits=frac_bits, kappa=kappa)
    base = mech.privacy(noise_added_by="proxy")
    scale = (n << (2 * frac_bits)) if noise_lattice == "n-scaled" else (1 << (2 * frac_bits))
    private = noise_lattice == "n-scaled"
    return PrivacyReport(
        epsilon=epsilon if private else float("inf"), delta=min(1.0, base.delta + tv) if private else 1.0, mechanism=base.mechanism, calibration=base.calibration,
        sensitivity=sens_real, neighbouring=REPLACE_ONE, noise_added_by="proxy",
        sigma=float(mech.sigma) / scale, sensitivity_mode=sensitivity_mode,
        notes=(f"{lattice_note(noise_lattice)}; {base.notes + '; ' if base.notes else ''}integer sensitivity "
               f"{sens_int} at scale {scale}; delta includes the mask's total-variation term {tv:.3e} "
               f"(kappa={kappa}); N={n} is released exactly (replace-one: N is public)"))
