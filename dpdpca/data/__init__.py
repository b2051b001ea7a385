"""Data: offline loaders, the papers' generators, preprocessing, partitioning.

See :mod:`dpdpca.data.preprocessing` for which steps are differentially
private (only :func:`clip_rows` is a public rule; centring and max-norm scaling
read the data).
"""

from dpdpca.data.bounds import FeatureBounds, bounds_template, clipping_note, load_bounds_file, scale_by_bounds
from dpdpca.data.loaders import DATA_SUFFIXES, DATASETS, Dataset, column_names, dataset_names, load_dataset, load_file
from dpdpca.data.preprocessing import (SCALINGS, center, check_partitions, clip_rows, partition, preprocess,
                                       scale_by_max_norm)
from dpdpca.data.streaming import iter_row_blocks
from dpdpca.data.synthetic import make_covariance_data, make_synth_power_law, random_orthonormal

__all__ = [
    "FeatureBounds", "scale_by_bounds", "load_bounds_file", "bounds_template", "clipping_note",
    "Dataset", "DATASETS", "DATA_SUFFIXES", "dataset_names", "load_dataset", "load_file", "column_names",
    "center", "scale_by_max_norm", "clip_rows", "preprocess", "partition", "check_partitions", "SCALINGS",
    "make_covariance_data", "make_synth_power_law", "random_orthonormal", "iter_row_blocks",
]
