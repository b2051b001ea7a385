"""Small checks that build one-line errors: parameter, constraint, value."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np

from dpdpca.errors import DataError, ParameterError, ParameterTypeError


def _fmt(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        # A 5000-digit integer has no repr (Python's 4300-digit limit), and no one-line error should hold it.
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    return repr(value) if not isinstance(value, float) else f"{value!r}"


def param_error(name: str, constraint: str, value: Any) -> ParameterError:
    """Return ``ParameterError('<name> must be <constraint>, got <value>')``."""
    return ParameterError(f"{name} must be {constraint}, got {_fmt(value)}")


def type_error(name: str, constraint: str, value: Any) -> ParameterTypeError:
    """Return ``ParameterTypeError('<name> must be <constraint>, got <value>')`` (a wrong *type*)."""
    return ParameterTypeError(f"{name} must be {constraint}, got {_fmt(value)}")


def check_real(name: str, value: Any) -> float:
    """Return ``value`` as a finite float; a non-number is a type error, a non-finite one a value error."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise type_error(name, "a real number", value)
    v = float(value)
    if not math.isfinite(v):
        raise param_error(name, "finite", value)
    return v


def check_positive(name: str, value: Any) -> float:
    """A finite real strictly greater than zero (e.g. ``epsilon``)."""
    v = check_real(name, value)
    if v <= 0:
        raise param_error(name, "> 0", value)
    return v


def check_nonnegative(name: str, value: Any) -> float:
    """A finite real greater than or equal to zero (e.g. a sensitivity)."""
    v = check_real(name, value)
    if v < 0:
        raise param_error(name, ">= 0", value)
    return v


def check_open_unit(name: str, value: Any) -> float:
    """A real in the open interval (0, 1) (e.g. ``delta``)."""
    v = check_real(name, value)
    if not 0.0 < v < 1.0:
        raise param_error(name, "in (0, 1)", value)
    return v


#: Smallest delta accepted: below it log(1/delta) and the calibrations built on it leave double precision
#: (delta = 5e-324, the smallest double, makes 1.25 / delta infinite).
MIN_DELTA = 1e-300
#: Largest delta accepted anywhere: a larger one is no privacy guarantee (it allows releasing a record
#: with that probability).  Where the number of rows N is known, delta must also be < 1/N.
MAX_DELTA = 0.5


#: Smallest epsilon accepted: its noise is already 10^6 times the sensitivity (nothing useful is released), and
#: far below it (1e-300) the calibrated variances leave double precision (the discrete Gaussian's sigma^2 of
#: the protocol's integer sensitivities overflows a float).
MIN_EPSILON = 1e-6
#: Largest epsilon accepted: no privacy is left long before it (e^epsilon bounds the likelihood ratio); the
#: tests use epsilon = 1e9 as "noise negligible", and far above it (1e100) the analytic Gaussian calibration's
#: root leaves its bracket.
MAX_EPSILON = 1e9


def check_epsilon(name: str, value: Any) -> float:
    """A DP epsilon: a finite real ``> 0`` in ``[MIN_EPSILON, MAX_EPSILON]`` (every calibration stays computable).

    Raises
    ------
    ParameterError
        Naming ``name`` (e.g. ``epsilon``, ``min_epsilon``), the range and the value.
    """
    v = check_positive(name, value)
    if not MIN_EPSILON <= v <= MAX_EPSILON:
        raise param_error(name, f"in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]", value)
    return v


def check_delta(name: str, value: Any, *, n_rows: int | None = None) -> float:
    """A DP delta in ``[MIN_DELTA, MAX_DELTA]``, and ``< 1 / n_rows`` when the number of rows is known.

    Raises
    ------
    ParameterError
        Naming ``name`` (delta, never epsilon), the bound and the value.
    """
    v = check_real(name, value)
    if not 0.0 < v < 1.0:
        raise param_error(name, "in (0, 1)", value)
    if not MIN_DELTA <= v <= MAX_DELTA:
        raise param_error(name, f"in [{MIN_DELTA:g}, {MAX_DELTA:g}]", value)
    if n_rows is not None and n_rows > 0 and not v < 1.0 / n_rows:
        raise param_error(name, f"< 1/N = {1.0 / n_rows:.3g} (N = {n_rows} rows)", value)
    return v


#: Largest number of repeated runs an experiment accepts (``compare --runs``, ``tensor --runs``): the mean of
#: 10^4 runs already has a standard error of 1% of one run's spread, and far past it (10^12) the list of runs
#: alone exhausts memory before the first one starts.
MAX_RUNS = 10_000


def check_int(name: str, value: Any, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """An integer (not bool) within optional inclusive bounds."""
    if isinstance(value, bool) or not isinstance(value, (Integral, np.integer)):
        raise type_error(name, "an integer", value)
    v = int(value)
    if minimum is not None and v < minimum:
        raise param_error(name, f">= {minimum}", value)
    if maximum is not None and v > maximum:
        raise param_error(name, f"<= {maximum}", value)
    return v


def check_data_matrix(name: str, X: Any, *, n_features: int | None = None, copy: bool = True,
                      check_finite: bool = True) -> np.ndarray:
    """A finite, non-empty 2-D float array; returns a float64 copy.

    ``copy=False`` returns a **read-only** float64 view instead (no copy when
    ``X`` already is a float64 array): for callers that only read, at N = 60000,
    d = 784 a copy costs as much as a tenth of the whole pipeline.
    ``check_finite=False`` leaves the NaN/inf scan to a caller that makes its
    own pass over the data anyway (and then calls :func:`check_finite_rows`).

    Raises :class:`DataError` naming ``name`` when ``X`` is not 2-D, is empty,
    holds NaN or inf, or has a different number of columns than ``n_features``.
    """
    X = _numeric_frame(name, X)
    if copy:
        arr = np.array(X, dtype=np.float64, copy=True)
    else:
        arr = np.asarray(X, dtype=np.float64).view()
        arr.flags.writeable = False
    if arr.ndim != 2:
        raise DataError(f"{name} must be a 2-D array (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise DataError(f"{name} must have at least 1 row, got shape {arr.shape}")
    if arr.shape[1] == 0:
        raise DataError(f"{name} must have at least 1 feature, got shape {arr.shape}")
    if check_finite:
        # one fast reduction: any NaN or inf makes the sum non-finite (so can overflow; then look closely)
        with np.errstate(over="ignore", invalid="ignore"):
            total = float(np.sum(arr))
        if not math.isfinite(total):
            check_finite_rows(name, arr)
    if n_features is not None and arr.shape[1] != n_features:
        raise DataError(f"{name} must have {n_features} features like the other partitions, got {arr.shape[1]}")
    return arr


def _numeric_frame(name: str, X: Any) -> Any:
    """A pandas DataFrame (or anything with ``columns`` and ``dtypes``) as its values, every column numeric.

    Anything else is returned unchanged.  A column of strings, dates or
    objects is refused naming the column (numpy's own message would name none).
    """
    columns, dtypes = getattr(X, "columns", None), getattr(X, "dtypes", None)
    if columns is None or dtypes is None or not hasattr(X, "to_numpy"):
        return X
    for column, dtype in zip(list(columns), list(dtypes)):
        kind = getattr(np.dtype(dtype) if isinstance(dtype, np.dtype) else getattr(dtype, "numpy_dtype", None),
                       "kind", None)
        if kind is None or kind not in "biuf":
            raise DataError(f"{name} must have numeric columns only, got column {str(column)!r:.60} of dtype {dtype}")
    return X.to_numpy(dtype=np.float64, na_value=np.nan)


def check_finite_rows(name: str, arr: np.ndarray) -> None:
    """Raise :class:`DataError` naming the first row of ``arr`` that holds NaN or inf."""
    bad = ~np.isfinite(arr)
    if bad.any():
        raise DataError(f"{name} must be finite (no NaN or inf), got a non-finite value in row "
                        f"{int(np.argwhere(bad)[0][0])}")
