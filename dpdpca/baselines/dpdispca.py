"""DPdisPCA (Imtiaz & Sarwate 2018, Alg. 1) and its pooled, local and full variants.

Algorithm 1, for each site ``s`` (in parallel):

1. ``A_s = X_s^T X_s / N_s``;
2. ``E_s`` symmetric, upper triangle i.i.d. ``N(0, tau_s^2)`` with
   ``tau_s = Delta_s sqrt(2 ln(1.25/delta)) / epsilon`` (``Delta_s = 1/N_s`` in the
   paper; see ``sensitivity_mode``);
3. ``A_hat_s = A_s + E_s``; ``eigh``; ``P_s = U_R Sigma_R^{1/2}`` (top R);
4. send ``P_s`` (D x R) to the aggregator,

and at the aggregator ``A_c = (1/S) sum_s P_s P_s^T`` and release the top-K
eigenvectors of ``A_c``.

Variants (the comparison points of the paper's Table 1):

* ``"partial-root"`` (DPdisPCA itself, ``q_DPdisPCA``);
* ``"full"``: sites send ``A_hat_s`` and ``A_c = (1/S) sum_s A_hat_s`` (``q_full``);
* ``"pooled"``: a trusted curator holds all the data, ``A = X^T X / N`` plus one
  ``E`` at the pooled sensitivity ``Delta = 1/N`` (``q_pooled``); the sites'
  raw uploads are in ``bytes_sent`` under replace-one only (under
  add/remove-one their size would publish the private counts: ``extra["upload"]``);
* ``"local"``: one site alone, ``A_s + E_s`` (``q_local``).

The paper writes "SVD" of the noisy symmetric matrix; we use ``eigh`` and the
algebraically largest eigenvalues (the noisy matrix may be indefinite; the
partial square root uses ``sqrt(max(lambda, 0))``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.baselines._common import (FLOAT_BYTES, NoisySiteEstimator, check_site_precision, parallel_report,
                                      partial_square_root, site_eigh_dtype, symmetric_bytes)
from dpdpca.linalg import top_eigenpairs
from dpdpca.dp import resolve_source
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["DPDisPCA", "VARIANTS"]

VARIANTS = {"partial-root": "dpdispca", "full": "dpdispca-full", "pooled": "pooled", "local": "local"}


class DPDisPCA(NoisySiteEstimator):
    """Differentially private distributed PCA (DPdisPCA) and its comparison variants.

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float > 0
    delta : float in (0, 1)
    variant : {"partial-root", "full", "pooled", "local"}
        See the module docstring.
    n_intermediate : int or None
        R, the rank of ``P_s`` (``"partial-root"`` only); ``None`` means
        ``min(D, 2K)``.  Must satisfy ``K <= R <= D``.
    site : int
        Which site (0-based) runs alone in ``"local"``.
    site_precision : {"auto", "float64"}
        Precision of each site's eigendecomposition of its noisy matrix.
        ``"auto"`` (default): float32 when its rounding is under 1% of the DP
        noise already added, else float64 (:func:`~dpdpca.baselines._common.site_eigh_dtype`);
        ``"float64"``: always float64.  The dtypes used are in
        ``params["site_eigh_dtypes"]``.
    calibration : {"analytic", "classic"}
    sensitivity_mode : {"rigorous", "paper"}
    centering : {"site", "none"}
    neighbouring : {"add-remove", "replace-one"}
        See :class:`~dpdpca.baselines._common.NoisySiteEstimator`: under
        add/remove (the default) every party releases the protocol's add/remove
        release of its rows (noisy R, v, N) and forms its centred second moment
        from it; the pooled variant is then exactly the protocol's release at a
        trusted curator.
    n_sites : int or None
        With one (n, d) array, split its rows (in order) into this many equal
        sites; with a list of partitions, None or their number.
    rng : None or numpy.random.Generator

    Attributes
    ----------
    components_ : ndarray of shape (K, D)
    explained_variance_ : ndarray of shape (K,)
        Top eigenvalues of the matrix decomposed, times ``N/(N - 1)`` (see
        :mod:`dpdpca.estimator`; ``result_.eigenvalues`` keeps second-moment units).
    mean_ : ndarray of shape (D,)
        Zeros: the data are taken as centred.
    privacy_ : PrivacyReport
    timings_ : Timings
    bytes_sent_ : dict
    result_ : PCAResult

    References
    ----------
    H. Imtiaz and A. D. Sarwate, "Differentially private distributed principal
    component analysis", ICASSP 2018, Algorithm 1 and Table 1.

    Examples
    --------
    >>> import numpy as np
    >>> from dpdpca.data import partition, clip_rows
    >>> X = clip_rows(np.random.default_rng(0).normal(size=(400, 6)) / 3)[0]
    >>> est = DPDisPCA(2, 1.0, 1e-5, rng=np.random.default_rng(1)).fit(partition(X, 4))
    >>> est.components_.shape
    (2, 6)
    """

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 variant: str = "partial-root", n_intermediate: int | None = None, site: int = 0,
                 site_precision: str = "auto",
                 calibration: str = "analytic", sensitivity_mode: str = "rigorous", centering: str = "site",
                 neighbouring: str = "add-remove", n_sites: int | None = None, rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, calibration=calibration,
                         sensitivity_mode=sensitivity_mode, centering=centering, neighbouring=neighbouring,
                         rng=rng)
        self.variant = variant
        self.n_intermediate = n_intermediate
        self.site = site
        self.site_precision = site_precision
        self.n_sites = n_sites

    @property
    def method_name(self) -> str:  # type: ignore[override]
        return VARIANTS.get(self.variant, "dpdispca")

    def _n_rows(self, parts: Sequence[np.ndarray]) -> int:
        if self.variant == "local":
            return int(parts[check_int("site", self.site, minimum=0, maximum=len(parts) - 1)].shape[0])
        return super()._n_rows(parts)

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        if self.variant not in VARIANTS:
            raise param_error("variant", f"one of {', '.join(VARIANTS)}", self.variant)
        d = parts[0].shape[1]
        src = resolve_source(self.rng)
        params = self._base_params(k, parts)
        params["variant"] = self.variant
        if self.variant == "pooled":
            return self._pooled(parts, k, src, params)
        if self.variant == "local":
            return self._local(parts, k, src, params)
        r = d if self.variant == "full" else (min(d, 2 * k) if self.n_intermediate is None else
                                              check_int("n_intermediate", self.n_intermediate, minimum=k, maximum=d))
        check_site_precision(self.site_precision)
        timings = Timings(parallel_roles=("site",))
        bytes_sent: dict[str, int] = {}
        reports = []
        dtypes: list[str] = []
        A_c = np.zeros((d, d))
        n_released = 0.0
        noise = self._add_remove_noise(d) if self._add_remove else None
        for s, X in enumerate(parts, start=1):
            party = f"site:{s}"
            A_s, sigma, report, n_s = self._noisy_moment(X, src, party, timings, noise)
            n_released += n_s
            if self.variant == "full":
                message = A_s
                bytes_sent[party] = symmetric_bytes(d)
            else:
                with timings.measure(party, "partial-root"):
                    dtype = site_eigh_dtype(self.site_precision, A_s, sigma)
                    P_s = partial_square_root(A_s, r, dtype=dtype)
                dtypes.append(np.dtype(dtype).name)
                bytes_sent[party] = FLOAT_BYTES * d * r
            reports.append(report)
            with timings.measure("aggregator", "aggregate"):
                if self.variant == "full":
                    A_c += message
                else:
                    A_c += P_s @ P_s.T
        with timings.measure("aggregator", "aggregate"):
            A_c /= len(parts)
        with timings.measure("aggregator", "eigh"):
            w, V = top_eigenpairs(A_c, k)
        bytes_sent["aggregator"] = FLOAT_BYTES * d * k
        if self.variant != "full":
            params["n_intermediate"] = r
            params["site_precision"] = self.site_precision
            params["site_eigh_dtypes"] = dtypes
        privacy = parallel_report(reports, mechanism="gaussian", noise_added_by="site",
                                  notes="symmetric Gaussian (AG) noise on each A_s")
        return PCAResult(method=self.method_name, components=V, eigenvalues=w, privacy=privacy, timings=timings,
                         bytes_sent=bytes_sent, params=params,
                         extra={"trace": float(np.trace(A_c)), "n_released": n_released})

    def _pooled(self, parts: list[np.ndarray], k: int, src: Any, params: dict[str, Any]) -> PCAResult:
        d = parts[0].shape[1]
        timings = Timings(parallel_roles=("site",))
        bytes_sent, upload = self._raw_upload(parts)
        with timings.measure("aggregator", "pool"):
            X = np.vstack(parts)
        A, _, privacy, n = self._noisy_moment(X, src, "aggregator", timings)
        with timings.measure("aggregator", "eigh"):
            w, V = top_eigenpairs(A, k)
        bytes_sent["aggregator"] = FLOAT_BYTES * d * k
        privacy = dataclasses.replace(privacy, notes=privacy.notes + "; pooled data at a trusted curator "
                                                                     "(sites send raw rows)")
        return PCAResult(method="pooled", components=V, eigenvalues=w, privacy=privacy, timings=timings,
                         bytes_sent=bytes_sent, params=params,
                         extra={"trace": float(np.trace(A)), "n_released": n, **upload})

    def _local(self, parts: list[np.ndarray], k: int, src: Any, params: dict[str, Any]) -> PCAResult:
        i = check_int("site", self.site, minimum=0, maximum=len(parts) - 1)
        X = parts[i]
        d = X.shape[1]
        party = f"site:{i + 1}"
        timings = Timings(parallel_roles=("site",))
        A, _, privacy, n = self._noisy_moment(X, src, party, timings)
        with timings.measure(party, "eigh"):
            w, V = top_eigenpairs(A, k)
        params["site"] = i
        privacy = dataclasses.replace(privacy, notes=privacy.notes + "; one site's data only")
        return PCAResult(method="local", components=V, eigenvalues=w, privacy=privacy, timings=timings,
                         bytes_sent={party: FLOAT_BYTES * d * k}, params=params,
                         extra={"trace": float(np.trace(A)), "n_released": n})
