"""MOD-SuLQ comparators of FPCA (Grammenos et al. 2020, Fig. 3): symmetric and non-symmetric masks.

MOD-SuLQ (Chaudhuri, Sarwate & Sinha 2013) perturbs the second moment of
**all** the data, ``A = X^T X / N + N_mask``, and takes its top-K singular
(eigen) vectors.  It is centralised: every site sends its rows to one trusted
curator (the traffic reported is exactly that), which adds the mask.

* ``variant="symmetric"``: i.i.d. upper triangle (with diagonal), mirrored,
  omega of eq. (6); top-K eigenvectors by algebraic value.
* ``variant="non-symmetric"``: i.i.d. entries on the whole d x d mask, omega
  of eq. (8) (the one FPCA streams); top-K left singular vectors.

Both report their omega and why it is (epsilon, delta)-DP
(:class:`~dpdpca.dp.ModSulqMechanism`).  Rows must have ``||x|| <= 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from dpdpca._validation import param_error
from dpdpca.baselines._common import FLOAT_BYTES, SiteEstimator
from dpdpca.dp import PrivacyReport, resolve_source
from dpdpca.dp.modsulq import ModSulqMechanism, check_modsulq_calibration
from dpdpca.linalg import flip_signs, second_moment, top_eigenpairs
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["ModSulqPCA", "MODSULQ_VARIANTS"]

MODSULQ_VARIANTS = ("symmetric", "non-symmetric")


class ModSulqPCA(SiteEstimator):
    """Centralised MOD-SuLQ PCA on the pooled rows.

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float > 0
    delta : float in (0, 1)
    variant : {"symmetric", "non-symmetric"}
    calibration : {"modsulq", "analytic"}
        ``"modsulq"`` (default): omega of eq. (6) or (8).  ``"analytic"``: the
        analytic-Gaussian sigma for the same sensitivity ``sqrt(2)/N``.
    private : bool
        False: no mask (a utility reference; the report says not DP).
    rng : None or numpy.random.Generator

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(400, 5)) / 5
    >>> est = ModSulqPCA(2, 1.0, 0.01, rng=np.random.default_rng(1)).fit(X)
    >>> est.privacy_.mechanism
    'mod-sulq-symmetric'
    """

    method_name = "mod-sulq"

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 variant: str = "symmetric",
                 calibration: str = "modsulq", private: bool = True, rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, rng=rng)
        self.variant = variant
        self.calibration = calibration
        self.private = private

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        parts, k = super()._validate(partitions)
        if self.variant not in MODSULQ_VARIANTS:
            raise param_error("variant", "'symmetric' or 'non-symmetric'", self.variant)
        check_modsulq_calibration(self.calibration)
        if not isinstance(self.private, bool):
            raise param_error("private", "True or False", self.private)
        resolve_source(self.rng)
        return parts, k

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        d = parts[0].shape[1]
        timings = Timings(parallel_roles=("site",))
        bytes_sent = {f"site:{i}": FLOAT_BYTES * X.size for i, X in enumerate(parts, start=1)}
        n = sum(X.shape[0] for X in parts)
        mask = "streaming" if self.variant == "non-symmetric" else "symmetric"
        mech = ModSulqMechanism(epsilon=self.epsilon, delta=self.delta, d=d, n=n, mask=mask,
                                calibration=self.calibration)
        source = resolve_source(self.rng)
        with timings.measure("curator", "second-moment"):
            A = second_moment(np.vstack(parts)) if len(parts) > 1 else second_moment(parts[0])
        if self.private:
            with timings.measure("curator", "noise"):
                A += mech.sample_symmetric(source) if mask == "symmetric" else mech.sample_block(d, source)
        with timings.measure("curator", "decompose"):
            if mask == "symmetric":
                w, V = top_eigenpairs(A, k)
            else:
                U, sv, _ = scipy.linalg.svd(A, check_finite=False)
                w, V = sv[:k], U[:, :k]
        privacy = (mech.privacy("curator", notes="trusted curator: every site sends its rows") if self.private
                   else PrivacyReport.non_private())
        return PCAResult(method=self.method_name, components=V if mask == "symmetric" else flip_signs(V), eigenvalues=w,
                         privacy=privacy, timings=timings, bytes_sent=bytes_sent,
                         params={"n_components": k, "epsilon": float(self.epsilon), "delta": float(self.delta),
                                 "variant": self.variant, "calibration": self.calibration, "private": self.private,
                                 "n_sites": len(parts)},
                         extra={"n_samples": n, "omega": float(mech.sigma)})
