"""The papers' synthetic data generators.

Randomness: a generator only makes test data, not DP noise, so a seeded
``numpy.random.Generator`` is the normal input; ``rng=None`` draws a fresh
Generator from OS entropy.  Numpy's global random functions are never used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdpca._validation import check_int, check_nonnegative, param_error

__all__ = ["make_covariance_data", "make_synth_power_law", "random_orthonormal"]


def _generator(rng: Any) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng()
    if not isinstance(rng, np.random.Generator):
        raise param_error("rng", "None or a numpy.random.Generator", rng)
    return rng


def random_orthonormal(n_rows: int, n_cols: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """``Q`` of ``[Q, ~] = QR(N^{n_rows x n_cols})`` with sign-fixed columns (Haar when square)."""
    gen = _generator(rng)
    q, r = np.linalg.qr(gen.standard_normal((n_rows, n_cols)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def make_covariance_data(n_samples: int, n_features: int = 200, *, eigenvalues: Any = None,
                         decay: float = 20.0, rng: np.random.Generator | None = None) -> np.ndarray:
    """Zero-mean Gaussian rows with a chosen covariance (the papers' D = 200 set).

    Imtiaz & Sarwate (2018, both papers) use "a synthetic dataset (D = 200,
    K = 50) generated with zero mean and a pre-determined covariance matrix"
    without giving the matrix.  We draw ``x ~ N(0, C)`` with
    ``C = U diag(lambda) U^T``, ``U`` Haar-random orthogonal and, by default,
    the exponentially decaying spectrum ``lambda_i = exp(-(i - 1) / decay)``
    (with D = 200 and decay = 20 the top 50 directions hold ~92% of the
    energy).

    Parameters
    ----------
    n_samples : int >= 1
    n_features : int >= 1
        D.
    eigenvalues : array-like of shape (n_features,), optional
        The spectrum of ``C`` (non-negative); overrides ``decay``.
    decay : float > 0
    rng : numpy.random.Generator or None

    Returns
    -------
    ndarray of shape (n_samples, n_features)
        Not centred or scaled; run :func:`~dpdpca.data.preprocess` next.
    """
    n = check_int("n_samples", n_samples, minimum=1)
    d = check_int("n_features", n_features, minimum=1)
    gen = _generator(rng)
    if eigenvalues is None:
        if check_nonnegative("decay", decay) == 0:
            raise param_error("decay", "> 0", decay)
        lam = np.exp(-np.arange(d) / float(decay))
    else:
        lam = np.asarray(eigenvalues, dtype=np.float64)
        if lam.shape != (d,) or not np.all(np.isfinite(lam)) or np.any(lam < 0):
            raise param_error("eigenvalues", f"{d} finite non-negative values", eigenvalues)
    U = random_orthonormal(d, d, gen)
    return (gen.standard_normal((n, d)) * np.sqrt(lam)) @ U.T


def make_synth_power_law(n_samples: int, n_features: int, alpha: float, *,
                         rng: np.random.Generator | None = None) -> np.ndarray:
    """FPCA's ``Synth(alpha)``: singular values ``i^(-alpha)``.

    Grammenos et al. (2020), footnote 2: ``Y = U Sigma V^T`` with
    ``[U, ~] = QR(N^{d x d})``, ``[V, ~] = QR(N^{n x d})`` and
    ``Sigma_ii = i^(-alpha)``; ``Y`` is d x n with samples as columns.  We
    return ``Y^T`` (rows are samples).  Larger ``alpha`` gives a steeper
    spectrum (easier private PCA).

    Parameters
    ----------
    n_samples : int >= n_features
    n_features : int >= 1
    alpha : float >= 0
    rng : numpy.random.Generator or None

    Returns
    -------
    ndarray of shape (n_samples, n_features)
    """
    n = check_int("n_samples", n_samples, minimum=1)
    d = check_int("n_features", n_features, minimum=1, maximum=n)
    a = check_nonnegative("alpha", alpha)
    gen = _generator(rng)
    U = random_orthonormal(d, d, gen)
    V = random_orthonormal(n, d, gen)
    sigma = np.arange(1, d + 1, dtype=np.float64) ** (-a)
    return (V * sigma) @ U.T
