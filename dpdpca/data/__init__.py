"""Data: offline loaders, the papers' generators, preprocessing, partitioning.

See :mod:`dpdpca.data.preprocessing` for which steps are differentially
private (only :func:`clip_rows` is a public rule; centring and max-norm scaling
read the data).
"""

from dpdpca.data.bounds import FeatureBounds, load_bounds_file, scale_by_bounds
from dpdpca.data.loaders import DATASETS, Dataset, dataset_names, load_dataset, load_file
from dpdpca.data.preprocessing import (SCALINGS, center, check_partitions, clip_rows, partition, preprocess,
                                       scale_by_max_norm)
from dpdpca.data.streaming import iter_row_blocks
from dpdpca.data.synthetic import make_covariance_data, make_synth_power_law, random_orthonormal

__all__ = [
    "FeatureBounds", "scale_by_bounds", "load_bounds_file",
    "Dataset", "DATASETS", "dataset_names", "load_dataset", "load_file",
    "center", "scale_by_max_norm", "clip_rows", "preprocess", "partition", "check_partitions", "SCALINGS",
    "make_covariance_data", "make_synth_power_law", "random_orthonormal", "iter_row_blocks",
]
