"""Per-site empirical moments ``M_2`` (D x D) and ``M_3`` (D x D x D), App. B, and their projection.

MOG (``E[t] = m``)::

    M_2 = E[t t^T] - sigma^2 I
    M_3 = E[t (x) t (x) t] - sigma^2 sum_d (m (x) e_d (x) e_d + e_d (x) m (x) e_d + e_d (x) e_d (x) m)

both equal to ``sum_k w_k a_k^{(x)2}`` and ``sum_k w_k a_k^{(x)3}`` in expectation.
The sensitivities of appendix C assume ``||t|| <= 1``; raw Gaussian records are
unbounded, so :func:`prepare_mog_records` divides them by a **public** scale
``zeta`` (never computed from the data) and clips any row still longer than 1.
The moments of the scaled records are those of the model with means
``a_k / zeta`` and variance ``sigma^2 / zeta^2``; means are multiplied back by
``zeta`` at the end (post-processing).

STM: with word counts ``c`` of a document of ``L`` words, the averages over all
ordered pairs / triples of *distinct positions* (``words="all"``, default)::

    M_2 = E[(c c^T - diag(c)) / (L (L-1))]
    M_3 = E[(c^{(x)3} - sum_i c_i (e_i (x) e_i (x) c + e_i (x) c (x) e_i + c (x) e_i (x) e_i)
             + 2 sum_i c_i e_i^{(x)3}) / (L (L-1) (L-2))]

equal ``E[t_1 (x) t_2]`` and ``E[t_1 (x) t_2 (x) t_3]`` in expectation.  The paper
uses the first three words only (``words="first"``, the symmetrised
``e_{w1} (x) e_{w2} (x) e_{w3}``); both have the same sensitivity ``sqrt(2)/N``
(:func:`dpdpca.dp.tensor_moment_sensitivity`), and all pairs/triples have lower
sampling variance.  All moments returned here are exactly symmetric.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np

from dpdpca._validation import check_int, check_nonnegative, check_positive, param_error
from dpdpca.errors import DataError

__all__ = ["SiteMoments", "default_mog_scale", "prepare_mog_records", "mog_moments", "stm_moments",
           "third_moment", "mean_correction", "project", "exact_symmetric2", "exact_symmetric3", "WORD_MODES"]

WORD_MODES = ("all", "first")
_CHUNK = 2048


@dataclass(frozen=True)
class SiteMoments:
    """One site's moments and its public size.

    Attributes
    ----------
    m2 : array of shape (D, D)
    m3 : array of shape (D, D, D)
    n_samples : int
        ``N_s`` (public under replace-one).
    """

    m2: np.ndarray
    m3: np.ndarray
    n_samples: int


def default_mog_scale(n_features: int, noise_variance: float) -> float:
    """Public record scale ``zeta = sqrt(1 + D sigma^2) + 3 sigma`` for MOG records with ``||a_k|| <= 1``.

    ``||a + z||`` is 1-Lipschitz in ``z ~ N(0, sigma^2 I)`` with mean at most
    ``sqrt(||a||^2 + D sigma^2) <= sqrt(1 + D sigma^2)``, so Gaussian concentration
    gives ``Pr[||t|| > zeta] <= exp(-9/2) ~ 1.1%``: few records are clipped, and
    those only slightly.  It depends on public model parameters only.
    """
    d = check_int("n_features", n_features, minimum=1)
    s2 = check_nonnegative("noise_variance", noise_variance)
    return math.sqrt(1.0 + d * s2) + 3.0 * math.sqrt(s2)


def prepare_mog_records(X: np.ndarray, scale: float) -> np.ndarray:
    """``X / scale`` with every row clipped to L2 norm at most 1 (a new array)."""
    zeta = check_positive("sample_scale", scale)
    T = np.asarray(X, dtype=np.float64) / zeta
    norms = np.sqrt(np.einsum("ij,ij->i", T, T))
    long_rows = norms > 1.0
    T[long_rows] /= norms[long_rows, None]
    return T


def third_moment(T: np.ndarray) -> np.ndarray:
    """``sum_n t_n (x) t_n (x) t_n`` of the rows of ``T`` (n, D), exactly symmetric; shape (D, D, D).

    Only the ``D(D+1)/2`` pair products ``t_j t_k`` (``j <= k``) are formed, in row
    chunks, then mirrored: half the work of the full ``T^T (T (x) T)``.
    """
    n, d = T.shape
    rows, cols = np.triu_indices(d)
    out = np.zeros((d, rows.size))
    for start in range(0, n, _CHUNK):
        block = T[start:start + _CHUNK]
        out += block.T @ (block[:, rows] * block[:, cols])
    full = np.empty((d, d, d))
    full[:, rows, cols] = out
    full[:, cols, rows] = out
    return exact_symmetric3(full)


def _index_counts(words: np.ndarray, positions: list[tuple[int, ...]], d: int) -> np.ndarray:
    """``sum_docs sum_{p in positions} e_{w_p1} (x) ... `` as a dense (D,)*order array, by bincount."""
    order = len(positions[0])
    flat = np.zeros(words.shape[0] * len(positions), dtype=np.int64)
    for i, pos in enumerate(positions):
        idx = np.zeros(words.shape[0], dtype=np.int64)
        for p in pos:
            idx = idx * d + words[:, p]
        flat[i * words.shape[0]:(i + 1) * words.shape[0]] = idx
    return np.bincount(flat, minlength=d ** order).astype(np.float64).reshape((d,) * order)


def exact_symmetric3(X: np.ndarray) -> np.ndarray:
    """Copy each sorted-index entry ``X[i, j, k]``, ``i <= j <= k``, to its permutations (exact symmetry)."""
    return X.reshape(-1)[_sorted_flat_index(X.shape[0])].reshape(X.shape)


@functools.lru_cache(maxsize=8)
def _sorted_flat_index(d: int) -> np.ndarray:
    """For each flat position (i, j, k), the flat position of its sorted permutation.  Cached, read-only."""
    grid = np.sort(np.stack(np.meshgrid(np.arange(d), np.arange(d), np.arange(d), indexing="ij")), axis=0)
    idx = ((grid[0] * d + grid[1]) * d + grid[2]).reshape(-1)
    idx.flags.writeable = False
    return idx


def exact_symmetric2(M: np.ndarray) -> np.ndarray:
    """The symmetric matrix with the upper triangle (diagonal included) of ``M``."""
    upper = np.triu(M)
    return upper + np.triu(M, 1).T


def mean_correction(mean: np.ndarray) -> np.ndarray:
    """``sum_d (m (x) e_d (x) e_d + e_d (x) m (x) e_d + e_d (x) e_d (x) m)``, shape (D, D, D)."""
    d = mean.shape[0]
    eye = np.eye(d)
    return (np.einsum("i,jk->ijk", mean, eye) + np.einsum("j,ik->ijk", mean, eye)
            + np.einsum("k,ij->ijk", mean, eye))


def mog_moments(T: np.ndarray, noise_variance: float) -> SiteMoments:
    """MOG ``M_2``, ``M_3`` of records ``T`` (n, D) with common variance ``noise_variance``.

    ``T`` should already satisfy ``||t|| <= 1`` (:func:`prepare_mog_records`) when
    the moments are to be released with DP; ``noise_variance`` is then the
    scaled ``sigma^2 / zeta^2``.
    """
    T = np.asarray(T, dtype=np.float64)
    n, d = T.shape
    s2 = check_nonnegative("noise_variance", noise_variance)
    m2 = exact_symmetric2(T.T @ T / n - s2 * np.eye(d))
    m3 = third_moment(T) / n - s2 * mean_correction(T.mean(axis=0))
    return SiteMoments(m2, exact_symmetric3(m3), n)


def _check_words(docs: Any, n_features: int) -> np.ndarray:
    words = np.asarray(docs)
    if words.ndim != 2 or not np.issubdtype(words.dtype, np.integer):
        raise DataError(f"documents must be a 2-D integer array (n_documents, L) of word ids, "
                        f"got {words.dtype} array of shape {words.shape}")
    if words.shape[1] < 3:
        raise param_error("words_per_document", ">= 3 (the third moment needs three words)", int(words.shape[1]))
    if words.size and (words.min() < 0 or words.max() >= n_features):
        raise DataError(f"documents must hold word ids in [0, {n_features}) (n_features), "
                        f"got ids in [{int(words.min())}, {int(words.max())}]")
    return words


def stm_moments(docs: Any, n_features: int, *, words: str = "all") -> SiteMoments:
    """STM ``M_2``, ``M_3`` of documents ``docs`` (n, L) of word ids in ``[0, D)``.

    Parameters
    ----------
    docs : int array of shape (n_documents, L), L >= 3
    n_features : int
        Vocabulary size ``D`` (public; never inferred from the data).
    words : {"all", "first"}
        ``"all"`` (default): every ordered pair / triple of distinct positions.
        ``"first"``: the first two / three words, as in the paper.
    """
    d = check_int("n_features", n_features, minimum=1)
    w = _check_words(docs, d)
    if words not in WORD_MODES:
        raise param_error("words", "'all' or 'first'", words)
    n, length = w.shape
    if words == "first":
        m2 = _index_counts(w, [(0, 1), (1, 0)], d) / (2.0 * n)
        m3 = _index_counts(w, list(permutations(range(3))), d) / (6.0 * n)
        return SiteMoments(exact_symmetric2(m2), exact_symmetric3(m3), n)
    if length < d:  # few words: accumulate the L(L-1)(L-2) ordered triples of each document directly
        m2 = _index_counts(w, list(permutations(range(length), 2)), d) / (length * (length - 1) * n)
        m3 = _index_counts(w, list(permutations(range(length), 3)), d)
        return SiteMoments(exact_symmetric2(m2), exact_symmetric3(m3 / (length * (length - 1) * (length - 2) * n)),
                           n)
    counts = np.zeros((n, d))
    np.add.at(counts, (np.repeat(np.arange(n), length), w.ravel()), 1.0)
    total = counts.sum(axis=0)
    gram = counts.T @ counts
    m2 = (gram - np.diag(total)) / (length * (length - 1) * n)
    eye = np.eye(d)
    pair_terms = (np.einsum("ij,ik->ijk", eye, gram) + np.einsum("ij,jk->ikj", eye, gram)
                  + np.einsum("jk,ji->ijk", eye, gram))
    diag3 = np.zeros((d, d, d))
    diag3[np.arange(d), np.arange(d), np.arange(d)] = total
    m3 = (third_moment(counts) - pair_terms + 2.0 * diag3) / (length * (length - 1) * (length - 2) * n)
    return SiteMoments(exact_symmetric2(m2), exact_symmetric3(m3), n)


def project(tensor: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Multilinear map ``T(W, W, W) = sum_{ijk} T_ijk W_ia W_jb W_kc``: (D, D, D) -> (K, K, K)."""
    t = np.tensordot(tensor, W, axes=([2], [0]))        # (D, D, K)
    t = np.tensordot(t, W, axes=([1], [0]))             # (D, K, K)  axes (i, c, b)
    t = np.tensordot(W, t, axes=([0], [0]))             # (K, K, K)  axes (a, c, b)
    return np.ascontiguousarray(np.transpose(t, (0, 2, 1)))
