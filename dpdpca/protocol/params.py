"""Public parameters of the Wang-Chang protocol and the slot bound they imply.

Everything here is declared in advance and public: it never depends on the
private data.  The slot bound is the largest |value| any packed slot can hold
at any step of the protocol, from the owners' shares to the proxy's
``R'' = N*R + v b^T + b v^T + b b^T + G''`` (ARCHITECTURE.md, "The crypto
protocol in integers").
"""

from __future__ import annotations

from dpdpca._validation import check_int

__all__ = ["slot_value_bound"]


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
