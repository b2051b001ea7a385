"""Federated PCA (Grammenos et al. 2020): FPCA-Edge clients, streaming MOD-SuLQ, tree merge.

* :class:`FPCAEdge` (Alg. 3) is one client.  It sees each row once, in blocks
  of ``b`` rows, and keeps only its subspace ``(U, s)`` (d x r) and the current
  block: O(d (r + b)) memory, never a d x d matrix.  Each block goes through the
  block update of eq. (3) (:func:`~dpdpca.baselines.subspace.block_update`),
  then optionally ``AdjustRank`` (eq. (4)).
* With DP on, a block ``B`` (b rows) is replaced by a private surrogate: the
  non-symmetric streaming MOD-SuLQ release ``A = B^T B / b + N`` of eq. (7),
  formed ``c`` columns at a time (``N`` drawn d x c per step,
  :class:`~dpdpca.dp.ModSulqMechanism`) and reduced on the fly to ``SVD_r(A)``
  with the same block update, so ``A`` is never held whole.  The surrogate
  ``D = U_A diag(sqrt(b s_A))`` has ``D D^T ~ B^T B``, so blocks keep their weight
  when merged (Lemma 1 merges ``U Sigma`` of the data).  The authors' code
  feeds the bare ``U_A`` (every block weighted 1); we do not.
* :func:`tree_merge` is Alg. 1's recursive merge: the clients' subspaces are
  the leaves of a tree of fan-in ``branching`` (``M = l^q`` leaves when
  balanced), merged level by level with ``Merge_r``.  Merging is
  order-independent up to a rotation (Lemma 1), so a straggler is merged
  whenever it arrives (:meth:`FederatedPCA.merge_update`, with its privacy
  report when DP is on, composed in parallel into the federation's) and a
  failed client is simply left out.
* :class:`FederatedPCA` is the scikit-learn-shaped estimator (``fit`` on
  partitions, ``partial_fit`` for a single streaming client as
  :class:`sklearn.decomposition.IncrementalPCA` does), registered as
  ``"fpca"`` in :mod:`dpdpca.pipelines`.

The noise scale: 1/b, decided from Lemma 2
-------------------------------------------
Lemma 2 is a statement about one matrix ``A = X X^T / n + N`` with ``n`` the
number of columns of ``X``, and the paper applies it with ``X = B`` (the
block), ``n = b`` ("the utility bounds for Alg. 3 can be obtained by setting
n = b in (8)").  The statistic released per block is ``B B^T / b``; replacing
one row changes it by ``(x x^T - x' x'^T)/b``, of Frobenius norm up to
``sqrt(2)/b``.  The noise must therefore be calibrated to the **block**:
``omega(epsilon, delta, d, b)``.  The authors' code scales the statistic by
``1/b`` but passes the node's total count ``n_i`` to eq. (8), i.e. a mask
``b/n_i`` times too small, which is not (epsilon, delta)-DP for any block
smaller than the whole stream.  We calibrate to the block (the alternative,
scaling by ``1/n_i`` with noise for ``n_i``, is the same mechanism up to the
factor ``b/n_i`` on both signal and noise).  Every row is in exactly one
block, each block release depends only on its own rows, and everything a
client sends is post-processing of its block releases: a client is
(epsilon, delta)-DP (parallel composition over disjoint blocks), and so is the
federation (disjoint clients).  Lemma 2's ``T`` (the smallest block for a mask
of std ``omega0``) is applied to every block when ``omega0`` is given
(Alg. 1 applies it to the first block only, which would leave later blocks
noisier than ``omega0``).

References
----------
A. Grammenos, R. Mendoza-Smith, J. Crowcroft, C. Mascolo, "Federated Principal
Component Analysis", NeurIPS 2020: Alg. 1-3, eqs. (2)-(8), Lemmas 1-2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dpdpca._validation import check_data_matrix, check_int, check_positive, check_real, param_error
from dpdpca.baselines._common import CENTERINGS, FLOAT_BYTES, SiteEstimator, check_budget, parallel_report
from dpdpca.baselines.subspace import Subspace, adjust_rank, block_update, check_forgetting, empty_subspace, merge_r
from dpdpca.data.preprocessing import check_partitions
from dpdpca.dp import PrivacyReport, resolve_source
from dpdpca.dp.mechanisms import check_sensitivity_mode
from dpdpca.dp.modsulq import ModSulqMechanism, check_modsulq_calibration, min_batch
from dpdpca.dp.report import REPLACE_ONE
from dpdpca.dp.settings import RIGOROUS, relation_of
from dpdpca.errors import UnsupportedSettingError
from dpdpca.dp.randomness import NoiseSource
from dpdpca.errors import DataError, ParameterError
from dpdpca.estimator import check_is_fitted
from dpdpca.linalg import flip_signs
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["FPCAEdge", "tree_merge", "subspace_bytes", "FederatedPCA", "DEFAULT_OVERSAMPLING"]

_NORM_TOL = 1e-9
#: The smallest block ``block_size="auto"`` uses (the former fixed size): at a large epsilon Lemma 2's T
#: falls to a few rows, and a block centred on its own mean loses the variance between such tiny blocks.
MIN_AUTO_BLOCK = 100
#: Default rank oversampling ``p`` of :class:`FederatedPCA` (``r = K + p``), chosen by measurement.
DEFAULT_OVERSAMPLING = 10


def subspace_bytes(d: int, r: int) -> int:
    """Bytes of a subspace ``(U, s)`` sent as float64: ``d r + r`` values."""
    return FLOAT_BYTES * (d * r + r)


class FPCAEdge:
    """One FPCA-Edge client (Alg. 3): streaming blocks, O(d (r + b)) memory.

    Parameters
    ----------
    n_features : int, >= 1
        ``d``.
    rank : int, 1 <= r <= d
        Initial rank ``r`` of the local subspace.
    block_size : int, >= 1
        ``b``, rows per block.
    forgetting : float in (0, 1]
        ``lambda`` of eq. (2), applied to the running subspace at each block.
    adaptive_rank : bool
        Apply ``AdjustRank`` (eq. (4)) after each block.
    alpha, beta : float
        Energy bounds of eq. (4) as fractions (the paper's 1 and 10 percent).
    max_rank : int or None
        Upper limit for the adaptive rank (default ``d``).
    mechanism_factory : callable or None
        ``n -> ModSulqMechanism`` for a block of ``n`` rows; ``None``: no DP.
        Rows must then have ``||x|| <= 1``.
    mask_columns : int, >= 1
        ``c``, columns of the mask drawn per step (memory O(d c)).
    source : NoiseSource or None
        Where the mask noise comes from (``None``: OS entropy).
    center : bool
        Centre each block on its own mean before it enters the subspace (the
        mechanism must then be calibrated to the centred block, see
        :class:`~dpdpca.dp.modsulq.ModSulqMechanism`).

    Attributes
    ----------
    U_, s_ : the local subspace (d, r) and its singular values.
    n_samples_seen_ : rows processed into the subspace (buffered rows excluded).
    n_blocks_ : blocks processed.
    mechanisms_ : the mechanism of each processed private block (empty without DP).
    """

    def __init__(self, n_features: int, rank: int, block_size: int, *, forgetting: float = 1.0,
                 adaptive_rank: bool = False, alpha: float = 0.01, beta: float = 0.10,
                 max_rank: int | None = None, mechanism_factory: Any = None, mask_columns: int = 32,
                 source: NoiseSource | None = None, center: bool = False) -> None:
        self.d = check_int("n_features", n_features, minimum=1)
        self.center = bool(center)
        self.rank = check_int("rank", rank, minimum=1, maximum=self.d)
        self.block_size = check_int("block_size", block_size, minimum=1)
        self.forgetting = check_forgetting(forgetting)
        self.adaptive_rank = bool(adaptive_rank)
        self.alpha, self.beta = _check_bounds(alpha, beta)
        self.max_rank = self.d if max_rank is None else check_int("max_rank", max_rank, minimum=1, maximum=self.d)
        self.mechanism_factory = mechanism_factory
        self.mask_columns = check_int("mask_columns", mask_columns, minimum=1)
        self.source = source if source is not None or mechanism_factory is None else resolve_source(None)
        self._buf = np.empty((self.block_size, self.d))
        self._fill = 0
        self.U_, self.s_ = empty_subspace(self.d)
        self.n_samples_seen_ = 0
        self.n_blocks_ = 0
        self.mechanisms_: list[ModSulqMechanism] = []

    @property
    def private(self) -> bool:
        return self.mechanism_factory is not None

    def update(self, rows: Any) -> "FPCAEdge":
        """Stream ``rows`` (array of shape (m, d)); every full block of ``b`` rows is processed."""
        X = check_data_matrix("rows", rows, n_features=self.d, copy=False)
        start = 0
        while start < X.shape[0]:
            take = min(self.block_size - self._fill, X.shape[0] - start)
            self._buf[self._fill:self._fill + take] = X[start:start + take]
            self._fill += take
            start += take
            if self._fill == self.block_size:
                self._process(self._buf)
                self._fill = 0
        return self

    def update_blocks(self, blocks: Iterable[Any]) -> "FPCAEdge":
        """Stream every array of ``blocks`` (e.g. :func:`dpdpca.data.iter_row_blocks` of a large file)."""
        for block in blocks:
            self.update(block)
        return self

    def flush(self) -> "FPCAEdge":
        """Process the buffered rows (fewer than ``b``) as a last, smaller block."""
        if self._fill:
            self._process(self._buf[:self._fill])
            self._fill = 0
        return self

    @property
    def subspace(self) -> Subspace:
        """The current ``(U, s)`` (processed blocks only)."""
        return self.U_, self.s_

    def privacy(self, noise_added_by: str = "site") -> PrivacyReport:
        """The report of what this client has released: its blocks, each DP on its own rows (parallel composition).

        One part per block size, each with the sigma and sensitivity its
        blocks were drawn at (a last, smaller block has a larger sigma); the
        top level gives ``sigma`` only when every block shares it (one block
        size), else None.  Without DP, :meth:`PrivacyReport.non_private`.
        This is the evidence :meth:`FederatedPCA.merge_update` needs to merge
        a late client.

        Raises
        ------
        ParameterError
            A private client that has released no block yet (call :meth:`flush`).
        """
        if not self.private:
            return PrivacyReport.non_private()
        if not self.mechanisms_:
            raise param_error("client", "a client that has released at least one block (call flush)", 0)
        by_size: dict[int, list[ModSulqMechanism]] = {}
        for m in self.mechanisms_:
            by_size.setdefault(m.n, []).append(m)
        parts = [ms[0].privacy(noise_added_by, notes=f"{len(ms)} block(s) of {n} rows (omega={ms[0].sigma:.4g})")
                 for n, ms in sorted(by_size.items(), reverse=True)]
        return parallel_report(parts, mechanism=parts[0].mechanism, noise_added_by=noise_added_by,
                               basis="parallel composition over the client's disjoint blocks")

    def _process(self, Bt: np.ndarray) -> None:
        """One block (rows of ``Bt``, shape (b, d)) through eq. (3), DP and AdjustRank."""
        b = Bt.shape[0]
        if self.private:
            norms = np.sqrt(np.einsum("ij,ij->i", Bt, Bt))
            if norms.max() > 1.0 + _NORM_TOL:
                row = int(np.argmax(norms))
                raise DataError(f"rows must have L2 norm <= 1 with DP on (clip with dpdpca.data.clip_rows), "
                                f"got {norms[row]:.6g} in row {self.n_samples_seen_ + row} of this client")
        if self.center:
            Bt = Bt - Bt.mean(axis=0)
        if self.private:
            D = self._private_surrogate(Bt)
        else:
            D = Bt.T
        r = max(self.rank, self.U_.shape[1])
        self.U_, self.s_ = block_update(D, self.U_, self.s_, r, forgetting=self.forgetting)
        if self.adaptive_rank:
            self.U_, self.s_ = adjust_rank(self.U_, self.s_, alpha=self.alpha, beta=self.beta,
                                           r_max=self.max_rank)
            self.rank = max(1, self.U_.shape[1])
        self.n_samples_seen_ += b
        self.n_blocks_ += 1

    def _private_surrogate(self, Bt: np.ndarray) -> np.ndarray:
        """``U_A diag(sqrt(b s_A))`` of ``A = B^T B / b + N``, built c columns at a time (eq. (7))."""
        b = Bt.shape[0]
        mech = self.mechanism_factory(b)
        self.mechanisms_.append(mech)
        assert self.source is not None
        Ua, sa = empty_subspace(self.d)
        r = max(self.rank, self.U_.shape[1])
        for j in range(0, self.d, self.mask_columns):
            cols = Bt[:, j:j + self.mask_columns]
            A_cols = Bt.T @ cols
            A_cols /= b
            A_cols += mech.sample_block(cols.shape[1], self.source)
            Ua, sa = block_update(A_cols, Ua, sa, r)
        return Ua * np.sqrt(b * sa)


def _check_bounds(alpha: Any, beta: Any) -> tuple[float, float]:
    a = check_real("alpha", alpha)
    b = check_real("beta", beta)
    if not 0.0 <= a < 1.0:
        raise param_error("alpha", "in [0, 1)", alpha)
    if not a < b <= 1.0:
        raise param_error("beta", f"in (alpha={a}, 1]", beta)
    return a, b


def tree_merge(subspaces: Sequence[Subspace], rank: int, *, branching: int = 2,
               order: Sequence[int] | None = None) -> tuple[Subspace, int]:
    """Alg. 1's recursive merge of client subspaces in a tree of fan-in ``branching``.

    Parameters
    ----------
    subspaces : sequence of (U, s)
        The leaves (clients that reported; a failed client is simply absent).
    rank : int
        Rank kept at every merge.
    branching : int, >= 2
        ``l``: children per aggregator (``M = l^q`` leaves fill the tree exactly).
    order : sequence of int or None
        A permutation of the leaves (asynchronous arrival); the result is the
        same up to a rotation (Lemma 1).

    Returns
    -------
    (U, s), depth
        The root subspace and the number of levels ``q``.
    """
    if not subspaces:
        raise param_error("subspaces", "a non-empty sequence of client subspaces", list(subspaces))
    fan = check_int("branching", branching, minimum=2)
    level = [subspaces[i] for i in (order if order is not None else range(len(subspaces)))]
    depth = 0
    while len(level) > 1:
        nxt = []
        for g in range(0, len(level), fan):
            U, s = level[g]
            for U2, s2 in level[g + 1:g + fan]:
                U, s = merge_r(U, s, U2, s2, rank)
            nxt.append((U, s))
        level = nxt
        depth += 1
    return level[0], depth


class FederatedPCA(SiteEstimator):
    """Federated PCA: FPCA-Edge on every site, then a tree merge (Grammenos et al. 2020, Alg. 1).

    Parameters
    ----------
    n_components : int, 1 <= K <= D
    epsilon : float > 0
    delta : float in (0, 1)
        Used when ``private`` is True (each client is (epsilon, delta)-DP on its rows).
    private : bool
        Add the streaming MOD-SuLQ mask (default True).  Rows must have ``||x|| <= 1``.
    rank : int or None
        Working rank ``r`` of the clients and merges, ``K <= r <= D``; default
        ``min(D, K + oversampling)``.
    oversampling : int >= 0
        ``p``: the clients and merges track ``r = K + p`` directions and return
        the top K, as a randomized SVD oversamples, so the truncation at every
        block barely touches the directions just below the K-th (default
        :data:`DEFAULT_OVERSAMPLING`, chosen by measurement: see
        ``docs/baselines.md``).
    block_size : "auto" or int
        ``b``.  ``"auto"`` (default, Alg. 1): each node's batch size is
        Lemma 2's ``T`` for the mask level ``omega0`` under the calibration in
        use (:func:`dpdpca.dp.modsulq.min_batch`), at least
        :data:`MIN_AUTO_BLOCK` rows, and bounded by the node's rows (a node
        with fewer rows releases them as one block, the least noise it can
        have); without DP, each node's rows are one block.  An int: that size (for reproduction of other settings;
        with ``omega0`` it grows to ``T`` if needed).  With DP, each block's
        noise is calibrated to its own size (see the module docstring).
    calibration : {"analytic", "classic", "modsulq"}
        ``"analytic"`` (default): the analytic-Gaussian sigma for the block's
        L2 sensitivity (``sqrt(2)/b``, or ``4 (b - 1)/b^2`` centred), the
        rigorous minimum for the guarantee.  ``"classic"``: the classic
        Gaussian at the same sensitivity.  ``"modsulq"`` (the paper, for
        reproduction): omega of eq. (8) with ``n = b``; uncentred only.
    sensitivity_mode : {"rigorous"}
        The block's sensitivity above (the paper states no other); ``"paper"``
        is refused.
    centering : {"site", "none"}
        ``"site"`` (default, as scikit-learn's PCA): each block is centred on
        its own mean inside its release, and the mask is calibrated to the
        centred block.  ``"none"``: the rows are taken as centred (the paper).
    neighbouring : {"replace-one"}
        The only relation FPCA has a sound form under: its fixed-size blocks
        are consecutive rows of each node's stream, so adding or removing one
        row shifts every later block (no per-block sensitivity holds, and the
        blocks' count reveals N).  ``"add-remove"`` is refused with that reason.
    omega0 : float or None
        The mask level of Lemma 2's ``T``: the largest acceptable std of a
        mask entry.  ``None`` (default): ``0.05 / (2 sqrt(D))``, so that the
        mask's expected spectral norm (``~2 sqrt(D) omega``) is at most 5% of
        the largest eigenvalue rows of norm <= 1 can have (1): a public rule.
    mask_columns : int
        ``c`` of eq. (7).
    forgetting : float in (0, 1]
        lambda of eq. (2) inside each client.
    adaptive_rank : bool
        ``AdjustRank`` with ``alpha``, ``beta`` (fractions) inside each client.
    branching : int >= 2
        Fan-in of the merge tree.
    rng : None or numpy.random.Generator

    Attributes
    ----------
    components_ : (K, D), explained_variance_ : (K,) squared singular values / (N - 1),
    singular_values_ : (K,), explained_variance_ratio_ : (K,) relative to the variance the working-rank
    subspace holds (FPCA releases no other total), subspace_ : the root (U, s) at the working rank,
    n_samples_seen_, mean_ (zeros: the rows are taken as centred), privacy_,
    timings_, bytes_sent_, result_.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(300, 6)) / 6
    >>> est = FederatedPCA(2, 1.0, 1e-5, private=False).fit([X[:150], X[150:]])
    >>> est.components_.shape
    (2, 6)
    """

    method_name = "fpca"

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 private: bool = True, rank: int | None = None, oversampling: int = DEFAULT_OVERSAMPLING,
                 block_size: int | str = "auto", calibration: str = "analytic", sensitivity_mode: str = "rigorous",
                 centering: str = "site", neighbouring: str = "replace-one",
                 omega0: float | None = None, mask_columns: int = 32, forgetting: float = 1.0,
                 adaptive_rank: bool = False, alpha: float = 0.01, beta: float = 0.10, branching: int = 2,
                 rng: Any = None) -> None:
        super().__init__(n_components, epsilon, delta, rng=rng)
        self.private = private
        self.rank = rank
        self.oversampling = oversampling
        self.block_size = block_size
        self.calibration = calibration
        self.sensitivity_mode = sensitivity_mode
        self.centering = centering
        self.neighbouring = neighbouring
        self.omega0 = omega0
        self.mask_columns = mask_columns
        self.forgetting = forgetting
        self.adaptive_rank = adaptive_rank
        self.alpha = alpha
        self.beta = beta
        self.branching = branching

    # -- construction ---------------------------------------------------------
    def _omega0(self, d: int) -> float:
        return 0.05 / (2.0 * math.sqrt(d)) if self.omega0 is None else check_positive("omega0", self.omega0)

    def _block_size(self, d: int, n_rows: int | None = None) -> int:
        """``b`` for a node of ``n_rows`` rows (``None``: a stream of unknown length)."""
        centred = self.centering == "site"
        if self.block_size == "auto":
            if not self.private:
                return max(1, n_rows) if n_rows is not None else 1000
            t = max(MIN_AUTO_BLOCK, min_batch(self.epsilon, self.delta, d, self._omega0(d),
                                              calibration=self.calibration, centred=centred))
            return t if n_rows is None else max(1, min(t, n_rows))
        b = check_int("block_size", self.block_size, minimum=1)
        if self.private and self.omega0 is not None:
            b = max(b, min_batch(self.epsilon, self.delta, d, self._omega0(d), calibration=self.calibration,
                                 centred=centred))
        return b

    def _edge(self, d: int, k: int, source: NoiseSource | None, n_rows: int | None = None) -> FPCAEdge:
        p = check_int("oversampling", self.oversampling, minimum=0)
        r = min(d, k + p) if self.rank is None else check_int("rank", self.rank, minimum=k, maximum=d)
        factory = None
        centred = self.centering == "site"
        b = self._block_size(d, n_rows)
        if self.private:
            check_budget(self.epsilon, self.delta)
            check_modsulq_calibration(self.calibration)
            eps, delta, cal = self.epsilon, self.delta, self.calibration
            made: dict[int, ModSulqMechanism] = {}  # one calibration per block size, not per block

            def factory(n: int) -> ModSulqMechanism:
                if n not in made:
                    made[n] = ModSulqMechanism(epsilon=eps, delta=delta, d=d, n=n, mask="streaming", calibration=cal,
                                               centred=centred)
                return made[n]

            factory(b)  # validates the budget and eq. (8)'s domain before any work
        return FPCAEdge(d, r, b, forgetting=self.forgetting, adaptive_rank=self.adaptive_rank,
                        alpha=self.alpha, beta=self.beta, mechanism_factory=factory,
                        mask_columns=self.mask_columns, source=source, center=centred)

    def _check_setting(self) -> None:
        if self.centering not in CENTERINGS:
            raise param_error("centering", f"one of {', '.join(CENTERINGS)}", self.centering)
        check_sensitivity_mode(self.sensitivity_mode)
        if not (isinstance(self.block_size, str) and self.block_size == "auto") and (
                isinstance(self.block_size, (str, bool)) or not isinstance(self.block_size, (int, np.integer))):
            raise param_error("block_size", "'auto' or an int >= 1", self.block_size)
        if not self.private:
            return
        if relation_of(self.neighbouring) != REPLACE_ONE:
            raise UnsupportedSettingError(
                "neighbouring 'add/remove-one' has no sound form in fpca: its fixed-size blocks are consecutive rows "
                "of each node's stream, so adding or removing a row shifts every later block (use "
                f"neighbouring='replace-one'), got {self.neighbouring!r}")
        if self.sensitivity_mode != RIGOROUS:
            raise UnsupportedSettingError(f"sensitivity_mode {self.sensitivity_mode!r} of fpca: the block's "
                                          "sensitivity is the proven one (use 'rigorous'; calibration='modsulq' "
                                          "reproduces the paper's eq. (8))")
        check_modsulq_calibration(self.calibration)
        if self.calibration == "modsulq" and self.centering != "none":
            raise UnsupportedSettingError("calibration 'modsulq' of fpca (eq. (8)) is derived for uncentred blocks: "
                                          f"use centering='none', got centering {self.centering!r}")

    def _validate(self, partitions: Any) -> tuple[list[np.ndarray], int]:
        if isinstance(partitions, np.ndarray):
            partitions = [partitions]
        parts = check_partitions(partitions)
        k = self._check_components(parts)
        check_budget(self.epsilon, self.delta)  # validated even when private=False (one contract for every pipeline)
        if not isinstance(self.private, bool):
            raise param_error("private", "True or False", self.private)
        self._check_setting()
        check_int("branching", self.branching, minimum=2)
        return parts, k

    # -- fitting ----------------------------------------------------------------
    def _fit(self, parts: list[np.ndarray], k: int) -> PCAResult:
        d = parts[0].shape[1]
        source = resolve_source(self.rng) if self.private else None
        timings = Timings(parallel_roles=("site",))
        leaves, edges, bytes_sent = [], [], {}
        for i, X in enumerate(parts, start=1):
            with timings.measure(f"site:{i}", "fpca-edge"):
                edge = self._edge(d, k, source, X.shape[0]).update(X).flush()
            edges.append(edge)
            leaves.append(edge.subspace)
            bytes_sent[f"site:{i}"] = subspace_bytes(d, edge.U_.shape[1])
        r = max(U.shape[1] for U, _ in leaves)
        with timings.measure("aggregator", "tree-merge"):
            (U, s), depth = tree_merge(leaves, r, branching=self.branching)
        # each inner node of the tree sends its merged subspace one level up
        inner = _inner_nodes(len(leaves), self.branching)
        if inner:
            bytes_sent["aggregators"] = inner * subspace_bytes(d, r)
        n_total = sum(X.shape[0] for X in parts)
        return self._result(U, s, k, n_total, edges, timings, bytes_sent,
                            {"tree_depth": depth, "n_clients": len(parts)})

    def _result(self, U: np.ndarray, s: np.ndarray, k: int, n_total: int, edges: list[FPCAEdge],
                timings: Timings, bytes_sent: dict[str, int], extra: dict[str, Any]) -> PCAResult:
        self.subspace_ = (U, s)
        self.singular_values_ = s[:k].copy()
        self.n_samples_seen_ = n_total
        components = flip_signs(U[:, :k])
        privacy = self._privacy(edges)
        params = {"n_components": k, "epsilon": float(self.epsilon), "delta": float(self.delta),
                  "private": self.private, "rank": int(U.shape[1]), "block_size": self.block_size,
                  "block_sizes": [e.block_size for e in edges], "oversampling": self.oversampling,
                  "centering": self.centering, "neighbouring": relation_of(self.neighbouring),
                  "calibration": self.calibration if self.private else "none", "mask_columns": self.mask_columns,
                  "forgetting": self.forgetting, "adaptive_rank": self.adaptive_rank, "branching": self.branching,
                  "n_sites": len(edges)}
        # explained_variance_ratio_ is relative to the variance the working-rank subspace holds (FPCA releases no
        # other total)
        extra = dict(extra, n_samples=n_total, total_variance=float((s ** 2).sum()) / max(n_total - 1, 1),
                     client_ranks=[int(e.U_.shape[1]) for e in edges],
                     client_blocks=[e.n_blocks_ for e in edges])
        return PCAResult(method=self.method_name, components=components, eigenvalues=s[:k] ** 2 / max(n_total, 1),
                         explained_variance=s[:k] ** 2 / max(n_total - 1, 1),
                         privacy=privacy, timings=timings, bytes_sent=bytes_sent, params=params, extra=extra)

    def _privacy(self, edges: list[FPCAEdge]) -> PrivacyReport:
        self._client_reports = [e.privacy("site") for e in edges] if self.private else []
        self._late_notes: list[str] = []
        return self._composed()

    def _composed(self) -> PrivacyReport:
        """Parallel composition of every client's report (disjoint clients), late ones included."""
        if not self.private:
            return PrivacyReport.non_private()
        reports = self._client_reports
        mechanisms = {r.mechanism for r in reports}
        notes = ("FPCA-Edge on each client (Grammenos et al. 2020 Alg. 3, Lemma 2 with n = block size); the tree "
                 "merge is post-processing")
        return parallel_report(reports, mechanism=mechanisms.pop() if len(mechanisms) == 1 else "composition",
                               noise_added_by="site", notes="; ".join([notes, *self._late_notes]))

    def partial_fit(self, X: Any) -> "FederatedPCA":
        """Stream one more batch of rows into a single client (as ``IncrementalPCA.partial_fit``).

        Without DP the batch is processed at once (full blocks of ``b``, then
        the rest as a smaller block).  With DP, rows are buffered until a
        block of ``b`` is full, so every release has the calibrated size;
        call :meth:`flush` to release a final smaller block.
        """
        arr = check_data_matrix("X", X)
        if not hasattr(self, "_stream"):
            k = self._check_components([arr])
            self._stream_timings = Timings(parallel_roles=("site",))
            self._check_setting()
            self._stream = self._edge(arr.shape[1], k, resolve_source(self.rng) if self.private else None)
        edge = self._stream
        with self._stream_timings.measure("site:1", "fpca-edge"):
            edge.update(arr)
            if not self.private:
                edge.flush()
        self._publish_stream()
        return self

    def flush(self) -> "FederatedPCA":
        """Release the buffered rows of the streaming client as a last, smaller block."""
        if hasattr(self, "_stream"):
            self._stream.flush()
            self._publish_stream()
        return self

    def _publish_stream(self) -> None:
        edge = self._stream
        if edge.n_blocks_ == 0:
            return
        k = min(self._check_components([np.empty((0, edge.d))]), edge.U_.shape[1])
        self._set_result(self._result(edge.U_, edge.s_, k, edge.n_samples_seen_, [edge], self._stream_timings,
                                      {"site:1": subspace_bytes(edge.d, edge.U_.shape[1])},
                                      {"tree_depth": 0, "n_clients": 1}))

    def merge_update(self, U: np.ndarray, s: np.ndarray, n_samples: int = 0, *,
                     privacy: PrivacyReport | None = None) -> "FederatedPCA":
        """Merge a late client's subspace (a straggler) into the fitted root; returns ``self``.

        By Lemma 1 the result equals, up to a rotation, a merge that included
        the client from the start.  With DP on, ``privacy`` is the late
        client's report (:meth:`FPCAEdge.privacy` of its client): it must be
        differentially private and under this federation's relation, and the
        client's rows must be in no other client (the caller's promise, as for
        the clients of :meth:`fit`).  The federation's report is then the
        parallel composition of every client's, late ones included (its
        epsilon and delta are the largest of any client's), with a note of
        the merge.  Without DP (``private=False``) ``privacy`` is not needed.

        Raises
        ------
        ParameterError
            With DP on: ``privacy`` missing, not differentially private, or
            under another neighbouring relation.
        """
        check_is_fitted(self, "subspace_")
        late = self._check_late_privacy(privacy)
        U0, s0 = self.subspace_
        U1 = check_data_matrix("U", U, n_features=None)
        if U1.shape[0] != U0.shape[0]:
            raise DataError(f"U must have {U0.shape[0]} rows like the fitted subspace, got {U1.shape[0]}")
        s1 = np.asarray(s, dtype=np.float64)
        r = max(U0.shape[1], U1.shape[1])
        with self.timings_.measure("aggregator", "late-merge"):
            Um, sm = merge_r(U0, s0, U1, s1, r)
        k = self.n_components_
        n_before = int(self.n_samples_seen_)
        n = n_before + check_int("n_samples", n_samples, minimum=0)
        self.subspace_, self.n_samples_seen_, self.singular_values_ = (Um, sm), n, sm[:k].copy()
        old = self.result_
        merges = int(old.extra.get("late_merges", 0)) + 1
        if late is not None:
            self._client_reports.append(late)
            self._late_notes.append(f"late client {merges} merged after the tree (merge_update, {n - n_before} "
                                    f"rows, ({late.epsilon:g}, {late.delta:.3g})-DP by its own report): parallel "
                                    f"composition over disjoint clients")
        self._set_result(dataclasses.replace(
            old, privacy=self._composed(), components=flip_signs(Um[:, :k]), eigenvalues=sm[:k] ** 2 / max(n, 1),
            explained_variance=sm[:k] ** 2 / max(n - 1, 1),
            extra=dict(old.extra, n_samples=n, n_released=n, total_variance=float((sm ** 2).sum()) / max(n - 1, 1),
                       late_merges=merges)))
        return self

    def _check_late_privacy(self, privacy: Any) -> PrivacyReport | None:
        """The late client's report, checked (None without DP)."""
        if not self.private:
            return None
        if not isinstance(privacy, PrivacyReport):
            raise param_error("privacy", "the late client's PrivacyReport (its privacy_, or FPCAEdge.privacy()) when DP is on",
                              privacy if privacy is None else type(privacy).__name__)
        if not math.isfinite(privacy.epsilon) or privacy.mechanism == "none":
            raise ParameterError(f"privacy must be a differentially private report (a private FederatedPCA merges "
                                 f"only private subspaces), got epsilon={privacy.epsilon}, mechanism "
                                 f"{privacy.mechanism!r}")
        relation = relation_of(self.neighbouring)
        if privacy.neighbouring != relation:
            raise param_error("privacy.neighbouring", f"{relation!r}, this federation's relation",
                              privacy.neighbouring)
        return privacy


def _inner_nodes(leaves: int, fan: int) -> int:
    """Inner nodes below the root of the merge tree (each sends one subspace up)."""
    count, level = 0, leaves
    while level > 1:
        level = -(-level // fan)
        count += level
    return max(count - 1, 0)
