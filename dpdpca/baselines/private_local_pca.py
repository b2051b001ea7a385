"""PrivateLocalPCA: the sequential DP distributed PCA of Imtiaz et al. (2016).

This is the baseline Wang & Chang compare DPDPCA against ("PrivateLocalPCA",
their ref. [18]: Imtiaz, Silva, Baker, Plis, Sarwate & Calhoun, "Privacy-
preserving source separation for distributed data using independent component
analysis", CISS 2016).  Wang & Chang describe it as sites "transferring the
local PCA one by one ... the next data owner has to wait for the result from
the previous one", and Imtiaz & Sarwate (ICASSP 2018) as "the scheme proposed
to send data from one site to another in a sequential manner".

The recursion we implement (sites in the given order, ``P_0 = 0``)::

    M_s = A_s + E_s + P_{s-1} P_{s-1}^T        A_s = X_s^T X_s / N_s
    P_s = U_R(M_s) Sigma_R(M_s)^{1/2}            (top R eigenpairs, sqrt(max(lambda, 0)))

where ``E_s`` is site ``s``'s symmetric Gaussian noise (i.i.d. upper triangle,
``tau_s`` calibrated to ``A_s``'s sensitivity, as in DPdisPCA Alg. 1 step 3).
Site ``s`` sends ``P_s`` (D x R) to site ``s + 1``; the last site releases the
top-K eigenvectors of ``M_S`` (equivalently of ``P_S P_S^T`` when ``R >= K``).
This is the partial-square-root mechanism of DPdisPCA run as a chain instead
of a star: the combined matrix at the end is a running sum, not an average,
which does not change its eigenvectors.

Privacy: site ``s``'s data enter only through ``A_s``, protected by ``E_s`` at
``(epsilon, delta)``; ``P_{s-1}`` is post-processing of earlier sites' releases.
The sites hold disjoint data, so the released subspace is ``(epsilon, delta)``
-DP (parallel composition), but every intermediate ``P_s`` is seen by the next
site.

Timing: the sites work one after another, so ``Timings(parallel_roles=())``
puts every site on the critical path (Wang & Chang, Fig. 3: time linear in S).
A ``relay`` callable can carry each ``P_s`` (and the final components, to a
party named ``"user"``) through a real transport, as the timing benchmark
does with files; its time is the sender's ``"transfer"`` phase.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from dpdpca._validation import check_int
from dpdpca.baselines._common import (FLOAT_BYTES, NoisySiteEstimator, check_site_precision, parallel_report,
                                      partial_square_root, site_eigh_dtype)
from dpdpca.linalg import top_eigenpairs
from dpdpca.dp import resolve_source
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["PrivateLocalPCA", "Relay"]

#: ``relay(sender, recipient, array) -> array``: moves one message and returns what the recipient read.
Relay = Callable[[str, str, np.ndarray], np.ndarray]


class PrivateLocalPCA(NoisySiteEstimator):
    """Sequential DP distributed PCA (PrivateLocalPCA, Imtiaz et al. 2016).

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float > 0
    delta : float in (0, 1)
    n_intermediate : int or None
        R, the rank passed from site to site; ``None`` means ``min(D, 2K)``.
        ``K <= R <= D``.
    site_precision : {"auto", "float64"}
        As in :class:`~dpdpca.baselines.DPDisPCA`: each site's partial square
        root in float32 when that rounding is under 1% of its DP noise.
    calibration : {"analytic", "classic"}
    sensitivity_mode : {"rigorous", "paper"}
    centering : {"site", "none"}
    neighbouring : {"add-remove", "replace-one"}
        See :class:`~dpdpca.baselines._common.NoisySiteEstimator` (under
        add/remove each site forms ``A_s`` from its own noisy R, v, N).
    n_sites : int or None
        With one (n, d) array, split its rows (in order) into this many equal
        sites; with a list of partitions, None or their number.
    rng : None or numpy.random.Generator
    relay : callable or None
        ``relay(sender, recipient, array) -> array`` carries ``P_s`` from
        ``"site:s"`` to ``"site:s+1"`` and the final components from the last
        site to ``"user"`` (e.g. written to a file and read back); timed as the
        sender's ``"transfer"`` phase.  ``None``: handed over in memory.

    Attributes
    ----------
    components_ : ndarray of shape (K, D)
    explained_variance_ : ndarray of shape (K,)
        Top eigenvalues of the matrix decomposed, times ``N/(N - 1)`` (see
        :mod:`dpdpca.estimator`; ``result_.eigenvalues`` keeps second-moment units).
    mean_ : ndarray of shape (D,)
        Zeros: the data are taken as centred.
    privacy_, timings_, bytes_sent_, result_

    References
    ----------
    H. Imtiaz et al., CISS 2016 (Wang & Chang's ref. [18]); Wang & Chang,
    DPDPCA, §V-B.

    Examples
    --------
    >>> import numpy as np
    >>> from dpdpca.data import partition, clip_rows
    >>> X = clip_rows(np.random.default_rng(0).normal(size=(400, 6)) / 3)[0]
    >>> est = PrivateLocalPCA(2, 1.0, 1e-5, rng=np.random.default_rng(1)).fit(partition(X, 4))
    >>> est.timings_.critical_path_s() == est.timings_.total_s()
    True
    """

    method_name = "private-local-pca"

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 n_intermediate: int | None = None, site_precision: str = "auto", calibration: str = "analytic",
                 sensitivity_mode: str = "rigorous", centering: str = "site", neighbouring: str = "add-remove",
                 n_sites: int | None = None, rng: Any = None, relay: Relay | None = None) -> None:
        super().__init__(n_components, epsilon, delta, calibration=calibration,
                         sensitivity_mode=sensitivity_mode, centering=centering, neighbouring=neighbouring, rng=rng)
        self.n_intermediate = n_intermediate
        self.site_precision = site_precision
        self.relay = relay
        self.n_sites = n_sites

    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        d = parts[0].shape[1]
        r = min(d, 2 * k) if self.n_intermediate is None else \
            check_int("n_intermediate", self.n_intermediate, minimum=k, maximum=d)
        check_site_precision(self.site_precision)
        src = resolve_source(self.rng)
        timings = Timings(parallel_roles=())
        bytes_sent: dict[str, int] = {}
        reports = []
        dtypes: list[str] = []
        P_prev: np.ndarray | None = None
        S = len(parts)
        n_released = 0.0
        noise = self._add_remove_noise(d) if self._add_remove else None
        for s, X in enumerate(parts, start=1):
            party = f"site:{s}"
            M, sigma, report, n_s = self._noisy_moment(X, src, party, timings, noise)
            n_released += n_s
            reports.append(report)
            with timings.measure(party, "combine"):
                if P_prev is not None:
                    M += P_prev @ P_prev.T
            if s < S:
                with timings.measure(party, "partial-root"):
                    dtype = site_eigh_dtype(self.site_precision, M, sigma)
                    P_prev = partial_square_root(M, r, dtype=dtype)
                dtypes.append(np.dtype(dtype).name)
                bytes_sent[party] = FLOAT_BYTES * d * r
                if self.relay is not None:
                    with timings.measure(party, "transfer"):
                        P_prev = self.relay(party, f"site:{s + 1}", P_prev)
            else:
                with timings.measure(party, "eigh"):
                    w, V = top_eigenpairs(M, k)
                bytes_sent[party] = FLOAT_BYTES * d * k
                if self.relay is not None:
                    with timings.measure(party, "transfer"):
                        V = self.relay(party, "user", V)
        params = self._base_params(k, parts)
        params["n_intermediate"] = r
        params["site_precision"] = self.site_precision
        params["site_eigh_dtypes"] = dtypes
        privacy = parallel_report(reports, mechanism="gaussian", noise_added_by="site",
                                  notes="sequential chain: each site adds symmetric Gaussian noise to A_s and "
                                        "passes P_s to the next site")
        return PCAResult(method=self.method_name, components=V, eigenvalues=w, privacy=privacy, timings=timings,
                         bytes_sent=bytes_sent, params=params,
                         extra={"trace": float(np.trace(M)), "n_released": n_released})
