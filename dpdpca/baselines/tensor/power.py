"""Whitening and the robust tensor power method with deflation (Anandkumar et al. 2014, Alg. 1).

With ``M_2 = sum_k w_k a_k a_k^T`` and ``M_3 = sum_k w_k a_k^{(x)3}``, the
whitening ``W = U D^{-1/2}`` from the top-K eigenpairs of ``M_2`` makes
``v_k = sqrt(w_k) W^T a_k`` orthonormal, and

    M_3(W, W, W) = sum_k lambda_k v_k^{(x)3},  lambda_k = 1 / sqrt(w_k).

The power method recovers ``(lambda_k, v_k)``; then ``w_k = 1 / lambda_k^2`` and
``a_k = lambda_k (W^T)^+ v_k = lambda_k U D^{1/2} v_k`` (Anandkumar et al. 2014,
Theorem 4.3; Imtiaz & Sarwate 2018, App. B-C).

"SVD(K)" of the symmetric ``M_2`` (Imtiaz & Sarwate 2018, Alg. 3 step 7): we
take the K algebraically largest eigenpairs (``M_2`` is PSD up to noise).  When
noise makes one of them non-positive, its eigenvalue is floored at
``1e-12`` times the largest magnitude so ``D^{-1/2}`` exists; the estimate is
then noise-dominated, as it should be.

The random starts of the power method are not privacy noise (they touch only
the already-private tensor), so they may come from any Generator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdpca._validation import check_int, param_error

__all__ = ["whiten", "tensor_power_method", "recover_components", "project_to_simplex_rows"]

_EIG_FLOOR = 1e-12


def whiten(m2: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-K eigenpairs of the symmetric ``m2`` and ``W = U D^{-1/2}``.

    Returns
    -------
    W : array of shape (D, K)
    U : array of shape (D, K)
    eigenvalues : array of shape (K,), positive (floored), descending
    """
    m = np.asarray(m2, dtype=np.float64)
    k = check_int("n_components", n_components, minimum=1, maximum=m.shape[0])
    vals, vecs = np.linalg.eigh((m + m.T) / 2.0)
    order = np.argsort(vals)[::-1][:k]
    vals, vecs = vals[order], vecs[:, order]
    floor = _EIG_FLOOR * max(float(np.max(np.abs(vals))), np.finfo(np.float64).tiny)
    vals = np.maximum(vals, floor)
    return vecs / np.sqrt(vals), vecs, vals


def _apply(tensor: np.ndarray, thetas: np.ndarray) -> np.ndarray:
    """Rows ``T(I, theta, theta)`` for each row ``theta`` of ``thetas`` (R, K)."""
    return np.einsum("ijk,rj,rk->ri", tensor, thetas, thetas)


def tensor_power_method(tensor: np.ndarray, n_components: int, *, n_restarts: int = 10, n_iter: int = 100,
                        rng: Any) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of a symmetric (K, K, K) tensor by power iteration with restarts and deflation.

    For each component: ``n_restarts`` random unit starts, ``n_iter`` updates
    ``theta <- T(I, theta, theta) / ||T(I, theta, theta)||`` each; keep the start
    with the largest ``T(theta, theta, theta)``, run ``n_iter`` more updates,
    set ``lambda = T(theta, theta, theta)`` and deflate ``T <- T - lambda theta^{(x)3}``.

    Parameters
    ----------
    tensor : array of shape (K, K, K)
    n_components : int, 1 <= k <= K
    n_restarts, n_iter : int, >= 1
    rng : numpy.random.Generator
        For the random starts.

    Returns
    -------
    eigenvalues : array of shape (k,), non-negative
    eigenvectors : array of shape (k, K), unit rows
    """
    t = np.array(tensor, dtype=np.float64, copy=True)
    if t.ndim != 3 or len(set(t.shape)) != 1:
        raise param_error("tensor", "of shape (K, K, K)", t.shape)
    dim = t.shape[0]
    k = check_int("n_components", n_components, minimum=1, maximum=dim)
    restarts = check_int("n_restarts", n_restarts, minimum=1)
    iters = check_int("n_iter", n_iter, minimum=1)
    if not isinstance(rng, np.random.Generator):
        raise param_error("rng", "a numpy.random.Generator (random starts only)", rng)
    lambdas = np.zeros(k)
    vectors = np.zeros((k, dim))
    for c in range(k):
        thetas = rng.standard_normal((restarts, dim))
        thetas /= np.linalg.norm(thetas, axis=1, keepdims=True)
        for _ in range(iters):
            thetas = _normalise_rows(_apply(t, thetas), thetas)
        values = np.einsum("ri,ri->r", _apply(t, thetas), thetas)
        theta = thetas[int(np.argmax(values))][None, :]
        for _ in range(iters):
            theta = _normalise_rows(_apply(t, theta), theta)
        lam = float(np.einsum("i,i->", _apply(t, theta)[0], theta[0]))
        if lam < 0:  # odd order: T(-theta, -theta, -theta) = -T(theta, theta, theta)
            theta, lam = -theta, -lam
        lambdas[c], vectors[c] = lam, theta[0]
        t -= lam * np.einsum("i,j,k->ijk", theta[0], theta[0], theta[0])
    return lambdas, vectors


def _normalise_rows(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(new, axis=1, keepdims=True)
    ok = norms[:, 0] > 0
    out = old.copy()  # a zero update (T(I, theta, theta) = 0) keeps the previous iterate
    out[ok] = new[ok] / norms[ok]
    return out


def recover_components(eigenvalues: np.ndarray, eigenvectors: np.ndarray, U: np.ndarray,
                       whitening_eigenvalues: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``w_k = 1/lambda_k^2`` and rows ``a_k = lambda_k U D^{1/2} v_k``.

    A zero eigenvalue (a direction the noise erased) gives weight ``inf``
    replaced by 0 and mean 0.
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    with np.errstate(divide="ignore"):
        weights = np.where(lam > 0, 1.0 / np.where(lam > 0, lam, 1.0) ** 2, 0.0)
    means = lam[:, None] * (eigenvectors * np.sqrt(whitening_eigenvalues)[None, :]) @ U.T
    return weights, means


def project_to_simplex_rows(means: np.ndarray) -> np.ndarray:
    """The paper's STM post-processing: zero the negative entries, then divide each row by its sum.

    A row with no positive entry becomes uniform.
    """
    out = np.maximum(np.asarray(means, dtype=np.float64), 0.0)
    sums = out.sum(axis=1, keepdims=True)
    d = out.shape[1]
    return np.where(sums > 0, out / np.where(sums > 0, sums, 1.0), 1.0 / d)
