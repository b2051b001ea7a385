"""MOD-SuLQ comparators of FPCA (Grammenos et al. 2020, Fig. 3): symmetric and non-symmetric masks.

MOD-SuLQ (Chaudhuri, Sarwate & Sinha 2013) perturbs the second moment of
**all** the data, ``A = X^T X / N + N_mask``, and takes its top-K singular
(eigen) vectors.  It is centralised: every site sends its rows to one trusted
curator, which adds the mask.  The traffic reported is that upload under
replace-one (the sizes are public); under add/remove-one its size would
publish each site's private count, so it is accounted as the curator's own
input and left out of ``bytes_sent`` (``extra["upload"]`` says so), and
nothing public carries the exact count (``extra["n_released"]`` is the noisy
one).

* ``variant="symmetric"``: i.i.d. upper triangle (with diagonal), mirrored,
  omega of eq. (6); top-K eigenvectors by algebraic value.
* ``variant="non-symmetric"``: i.i.d. entries on the whole d x d mask, omega
  of eq. (8) (the one FPCA streams); top-K left singular vectors.

Both report their omega and why it is (epsilon, delta)-DP
(:class:`~dpdpca.dp.ModSulqMechanism`).  Rows must have ``||x|| <= 1``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import scipy.linalg

from dpdpca._validation import param_error
from dpdpca.baselines._common import FLOAT_BYTES, NoisySiteEstimator, SiteEstimator
from dpdpca.dp import REPLACE_ONE, PrivacyReport, resolve_source
from dpdpca.dp.settings import relation_of
from dpdpca.errors import UnsupportedSettingError
from dpdpca.dp.modsulq import ModSulqMechanism, check_modsulq_calibration
from dpdpca.linalg import flip_signs, second_moment, top_eigenpairs
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["ModSulqPCA", "MODSULQ_VARIANTS"]

MODSULQ_VARIANTS = ("symmetric", "non-symmetric")


class ModSulqPCA(NoisySiteEstimator):
    """Centralised MOD-SuLQ PCA on the pooled rows.

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float > 0
    delta : float in (0, 1)
    variant : {"symmetric", "non-symmetric"}
    calibration : {"analytic", "classic", "modsulq"}
        ``"analytic"`` (default) or ``"classic"``: the Gaussian of that
        calibration at the rigorous sensitivity of the statistic released,
        under the relation asked for: with the symmetric mask this is the
        trusted curator's release (:class:`~dpdpca.baselines._common.NoisySiteEstimator`;
        under add/remove the protocol's noisy R, v, N).  ``"modsulq"`` (the
        paper, for reproduction): omega of eq. (6) or (8), which is derived
        for the uncentred ``X^T X / N`` with ``N`` public: replace-one and
        ``centering="none"`` only (other settings are refused).  The
        non-symmetric mask is FPCA's streaming mask: replace-one, uncentred.
    sensitivity_mode : {"rigorous", "paper"}
    centering : {"site", "none"}
    neighbouring : {"add-remove", "replace-one"}
        See :class:`~dpdpca.baselines._common.NoisySiteEstimator`.
    private : bool
        False: no mask (a utility reference; the report says not DP).
    rng : None or numpy.random.Generator

    Raises
    ------
    UnsupportedSettingError
        ``calibration="modsulq"`` or ``variant="non-symmetric"`` with
        add/remove-one, centring or the paper sensitivity.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(400, 5)) / 5
    >>> est = ModSulqPCA(2, 1.0, 0.01, calibration="modsulq", neighbouring="replace-one", centering="none",
    ...                  rng=np.random.default_rng(1)).fit(X)
    >>> est.privacy_.mechanism
    'mod-sulq-symmetric'
    """

    method_name = "mod-sulq"

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 variant: str = "symmetric", calibration: str = "analytic", sensitivity_mode: str = "rigorous",
                 centering: str = "site", neighbouring: str = "add-remove", private: bool = True,
                 rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, calibration=calibration, sensitivity_mode=sensitivity_mode,
                         centering=centering, neighbouring=neighbouring, rng=rng)
        self.variant = variant
        self.private = private

    @property
    def _own_mask(self) -> bool:
        """MOD-SuLQ's own mask (eq. (6)/(8) or the non-symmetric one) rather than the curator's release."""
        return self.calibration == "modsulq" or self.variant == "non-symmetric"

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        if self.variant not in MODSULQ_VARIANTS:
            raise param_error("variant", "'symmetric' or 'non-symmetric'", self.variant)
        check_modsulq_calibration(self.calibration)
        if not isinstance(self.private, bool):
            raise param_error("private", "True or False", self.private)
        if not self._own_mask:
            return super()._validate(partitions)
        parts, k = SiteEstimator._validate(self, partitions)
        what = "calibration 'modsulq'" if self.calibration == "modsulq" else "variant 'non-symmetric'"
        if relation_of(self.neighbouring) != REPLACE_ONE:
            raise UnsupportedSettingError(f"{what} of mod-sulq has no add/remove-one form (its mask is derived for "
                                          f"X^T X / N with N public): use neighbouring='replace-one', got "
                                          f"neighbouring {self.neighbouring!r}")
        if self.centering != "none":
            raise UnsupportedSettingError(f"{what} of mod-sulq releases the uncentred second moment: use "
                                          f"centering='none', got centering {self.centering!r}")
        if self.sensitivity_mode != "rigorous":
            raise UnsupportedSettingError(f"{what} of mod-sulq has one sensitivity, sqrt(2)/N: use "
                                          f"sensitivity_mode='rigorous', got {self.sensitivity_mode!r}")
        resolve_source(self.rng)
        return parts, k

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        d = parts[0].shape[1]
        timings = Timings(parallel_roles=("site",))
        bytes_sent, upload = self._raw_upload(parts)  # no site sizes under add/remove-one
        bytes_sent["curator"] = FLOAT_BYTES * d * k  # its release, the top-K components
        n = sum(X.shape[0] for X in parts)
        source = resolve_source(self.rng)
        params = {"n_components": k, "epsilon": float(self.epsilon), "delta": float(self.delta),
                  "variant": self.variant, "calibration": self.calibration, "private": self.private,
                  "centering": self.centering, "neighbouring": relation_of(self.neighbouring),
                  "sensitivity_mode": self.sensitivity_mode, "n_sites": len(parts)}
        with timings.measure("curator", "pool"):
            X = np.vstack(parts) if len(parts) > 1 else parts[0]
        if self.private and not self._own_mask:
            A, sigma, privacy, n_rel = self._noisy_moment(X, source, "curator", timings)
            with timings.measure("curator", "decompose"):
                w, V = top_eigenpairs(A, k)
            privacy = dataclasses.replace(privacy, mechanism="mod-sulq-symmetric",
                                          notes=privacy.notes + "; MOD-SuLQ's symmetric mask at the rigorous "
                                                                "sensitivity (trusted curator)")
            extra = {"n_released": n_rel, "trace": float(np.trace(A)),
                     "omega": float(sigma)}  # the mask's std per entry of A, either relation
            if not self._add_remove:  # N is public under replace-one only
                extra["n_samples"] = n
            extra.update(upload)
            return PCAResult(method=self.method_name, components=V, eigenvalues=w, privacy=privacy, timings=timings,
                             bytes_sent=bytes_sent, params=params, extra=extra)
        mask = "streaming" if self.variant == "non-symmetric" else "symmetric"
        calibration = self.calibration if self._own_mask else "modsulq"
        mech = ModSulqMechanism(epsilon=self.epsilon, delta=self.delta, d=d, n=n, mask=mask, calibration=calibration)
        with timings.measure("curator", "second-moment"):
            A = second_moment(X, center=self.centering == "site")
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
                         privacy=privacy, timings=timings, bytes_sent=bytes_sent, params=params,
                         extra={"n_samples": n, "omega": float(mech.sigma), "trace": float(np.trace(A)), **upload})
