"""Utility metrics for a released subspace.

All take the components (an array of shape (d, k) with orthonormal columns, or
a :class:`~dpdpca.result.PCAResult`) and the pooled data ``X`` of shape
(n_samples, d), rows as samples.

The matrix ``A`` whose energy is measured depends on ``center``:

* ``center=False`` (the Imtiaz-Sarwate papers): the second-moment matrix
  ``A = X^T X / N`` of pre-centred data (their ``A = (1/N) X X^T`` with
  samples as columns).
* ``center=True`` (what the encrypted DPDPCA protocol decomposes): the centred
  scatter ``S = sum_n (x_n - mu)(x_n - mu)^T``, not divided by N.

Ratios (:func:`captured_energy_ratio`, :func:`captured_variance_ratio`) do not
depend on that normalisation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdpca import linalg
from dpdpca._validation import check_data_matrix, check_int, param_error
from dpdpca.errors import DataError, DpdpcaError

__all__ = ["second_moment", "captured_energy", "optimal_energy", "captured_energy_ratio",
           "subspace_distance", "captured_variance_ratio", "svm_f1", "q_comp", "ORTHONORMAL_TOL"]

#: Largest allowed ``max |V^T V - I|`` for components to count as orthonormal.
ORTHONORMAL_TOL = 1e-6


def _components(components: Any, n_features: int | None = None, name: str = "components") -> np.ndarray:
    """Orthonormal (d, k) array from an array or anything with ``.components``."""
    V = getattr(components, "components", components)
    V = np.asarray(V, dtype=np.float64)
    if V.ndim != 2 or V.shape[1] == 0 or not np.all(np.isfinite(V)):
        raise DataError(f"{name} must be a finite (n_features, k) array with k >= 1, got shape {V.shape}")
    if n_features is not None and V.shape[0] != n_features:
        raise DataError(f"{name} must have {n_features} rows (the data's features), got {V.shape[0]}")
    err = float(np.max(np.abs(V.T @ V - np.eye(V.shape[1]))))
    if err > ORTHONORMAL_TOL:
        raise DataError(f"{name} must have orthonormal columns (|V^T V - I| <= {ORTHONORMAL_TOL}), got {err:.3g}")
    return V


def _matrix_rows(X: Any, center: bool) -> tuple[np.ndarray, float]:
    """Rows ``Y`` and divisor ``c`` such that ``A = Y^T Y / c``."""
    arr = check_data_matrix("X", X)
    if center:
        arr -= arr.mean(axis=0)
        return arr, 1.0
    return arr, float(arr.shape[0])


def second_moment(X: Any, *, center: bool = False) -> np.ndarray:
    """The matrix ``A`` the metrics use (see the module docstring).

    Returns
    -------
    ndarray of shape (n_features, n_features)
        ``X^T X / N`` (``center=False``) or the centred scatter (``center=True``).
    """
    arr = check_data_matrix("X", X, copy=False)
    S = linalg.scatter(arr, center=center)
    return S if center else S / arr.shape[0]


def captured_energy(components: Any, X: Any, *, center: bool = False) -> float:
    """Captured energy ``q(V) = tr(V^T A V)``.

    Imtiaz & Sarwate (2018), eq. (1).  Computed as ``||Y V||_F^2 / c`` without
    forming ``A``.

    Parameters
    ----------
    components : ndarray of shape (n_features, k) or PCAResult
        Orthonormal columns.
    X : array-like of shape (n_samples, n_features)
    center : bool
        ``False``: ``A = X^T X / N``; ``True``: ``A`` = centred scatter.

    Returns
    -------
    float

    Raises
    ------
    DataError
        Bad shapes, non-orthonormal components, non-finite data.
    """
    Y, c = _matrix_rows(X, center)
    V = _components(components, Y.shape[1])
    P = Y @ V
    return float(np.einsum("ij,ij->", P, P) / c)


def optimal_energy(X: Any, n_components: int, *, center: bool = False) -> float:
    """``q_o``: the sum of the top-``k`` eigenvalues of ``A`` (non-private PCA on pooled data)."""
    A = second_moment(X, center=center)
    k = check_int("n_components", n_components, minimum=1, maximum=A.shape[0])
    return float(np.sum(np.linalg.eigvalsh(A)[-k:]))


def captured_energy_ratio(components: Any, X: Any, *, center: bool = False,
                          q_optimal: float | None = None) -> float:
    """``q / q_o`` against non-private PCA on the same pooled data.

    ``q_o = tr(V_K(A)^T A V_K(A))`` with ``V_K(A)`` the top-k eigenvectors of
    the same ``A`` (Imtiaz & Sarwate 2018, Sec. 4).  It lies in [0, 1].

    Parameters
    ----------
    components : ndarray of shape (n_features, k) or PCAResult
    X : array-like of shape (n_samples, n_features)
    center : bool
        As in :func:`captured_energy`.
    q_optimal : float, optional
        A precomputed :func:`optimal_energy` for this ``X``, ``k`` and
        ``center`` (saves an eigendecomposition per call in repeated runs).

    Returns
    -------
    float
    """
    V = _components(components)
    q = captured_energy(V, X, center=center)
    q_o = optimal_energy(X, V.shape[1], center=center) if q_optimal is None else float(q_optimal)
    if not q_o > 0:
        why = ("the centred data is all zeros (every row equal, e.g. constant data or a single row)" if center
               else "the data is all zeros")
        raise DataError(f"q_o (optimal captured energy) must be > 0, got {q_o!r}: {why}, so the captured-energy "
                        f"ratio is undefined")
    return q / q_o


def captured_variance_ratio(components: Any, X: Any, *, center: bool = False) -> float:
    """Fraction of the total energy captured: ``tr(V^T A V) / tr(A)``.

    With ``center=True`` (or pre-centred data) this is the explained-variance
    ratio of the subspace; Wang & Chang measure utility this way.
    """
    Y, _ = _matrix_rows(X, center)
    V = _components(components, Y.shape[1])
    total = float(np.einsum("ij,ij->", Y, Y))
    if not total > 0:
        raise DataError("X must not be all zeros (total energy 0)")
    P = Y @ V
    return float(np.einsum("ij,ij->", P, P)) / total


def subspace_distance(U: Any, V: Any, *, norm: str = "spectral") -> float:
    """Distance between the subspaces spanned by ``U`` and ``V``.

    ``||U U^T - V V^T||`` of the orthogonal projectors: in the spectral norm
    this is the sine of the largest principal angle (0 = same subspace, 1 =
    some direction of one is orthogonal to the other); in the Frobenius norm it
    is ``sqrt(k_U + k_V - 2 ||U^T V||_F^2)``.

    Parameters
    ----------
    U, V : ndarray of shape (n_features, k) or PCAResult
        Orthonormal columns; ``k`` may differ (then the spectral distance is 1).
    norm : {"spectral", "frobenius"}

    Returns
    -------
    float
    """
    A = _components(U, name="U")
    B = _components(V, A.shape[0], name="V")
    C = A.T @ B
    if norm == "frobenius":
        # ||AA^T - BB^T||_F^2 = ||(I - AA^T) B||_F^2 + ||(I - BB^T) A||_F^2, computed without cancellation
        return float(np.sqrt(np.linalg.norm(B - A @ C) ** 2 + np.linalg.norm(A - B @ C.T) ** 2))
    if norm != "spectral":
        raise param_error("norm", "'spectral' or 'frobenius'", norm)
    if A.shape[1] != B.shape[1]:
        return 1.0
    # sin of the largest principal angle as ||(I - A A^T) B||_2: accurate for tiny angles,
    # unlike sqrt(1 - cos^2), which cannot go below ~1e-8
    return min(1.0, float(np.linalg.norm(B - A @ C, 2)))


def q_comp(estimated: Any, true: Any) -> float:
    """Factor error of a tensor decomposition: ``mean_k min_k' ||a_hat_k - a_k'||``.

    Each recovered factor is matched to its nearest true factor (Imtiaz &
    Sarwate 2018, Sec. VI-B); 0 means every recovered factor is a true one.

    Parameters
    ----------
    estimated : array-like of shape (k, n_features) or TensorResult
        Recovered factors (rows), or a result whose ``means`` they are.
    true : array-like of shape (k_true, n_features)
        The true factors, as rows.

    Returns
    -------
    float >= 0

    Raises
    ------
    DataError
        Not finite 2-D arrays, or different numbers of features.

    Examples
    --------
    >>> q_comp([[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]])
    0.0
    """
    A = check_data_matrix("estimated", getattr(estimated, "means", estimated))
    B = check_data_matrix("true", true, n_features=A.shape[1])
    dist = np.linalg.norm(A[:, None, :] - B[None, :, :], axis=2)
    return float(np.mean(dist.min(axis=1)))


def svm_f1(components: Any, X_train: Any, y_train: Any, X_test: Any, y_test: Any, *,
           average: str = "macro", C: float = 1.0, gamma: str | float = "scale") -> float:
    """F1 of an RBF-kernel SVM trained on the projected data (Wang & Chang, Fig. 4).

    Both sets are projected onto the components (``X V``), an
    ``sklearn.svm.SVC(kernel="rbf")`` is trained on the projected training set
    and scored on the projected test set with ``f1_score`` (eq. 25).

    Parameters
    ----------
    components : ndarray of shape (n_features, k) or PCAResult
    X_train : array-like of shape (n_train, n_features)
    y_train : array-like of shape (n_train,)
    X_test : array-like of shape (n_test, n_features)
    y_test : array-like of shape (n_test,)
    average : str
        Passed to ``f1_score`` (``"macro"`` suits the unbalanced sets the
        paper uses; ``"binary"`` for two classes).
    C, gamma
        SVC hyper-parameters.

    Returns
    -------
    float in [0, 1]

    Raises
    ------
    DpdpcaError
        scikit-learn is not installed (``pip install 'dpdpca[bench]'``).
    DataError
        Shapes do not match.
    """
    try:
        from sklearn.metrics import f1_score
        from sklearn.svm import SVC
    except ImportError:  # pragma: no cover - exercised only without scikit-learn
        raise DpdpcaError("svm_f1 needs scikit-learn; install it with: pip install 'dpdpca[bench]'") from None
    Xtr = check_data_matrix("X_train", X_train)
    Xte = check_data_matrix("X_test", X_test, n_features=Xtr.shape[1])
    V = _components(components, Xtr.shape[1])
    ytr = np.asarray(y_train)
    yte = np.asarray(y_test)
    if ytr.shape != (Xtr.shape[0],) or yte.shape != (Xte.shape[0],):
        raise DataError(f"y_train and y_test must have one label per row, got shapes {ytr.shape} and {yte.shape}")
    model = SVC(kernel="rbf", C=C, gamma=gamma).fit(Xtr @ V, ytr)
    return float(f1_score(yte, model.predict(Xte @ V), average=average))
