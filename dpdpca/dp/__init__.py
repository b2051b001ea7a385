"""dpdpca.dp: exact DP mechanisms, calibration, sensitivities, CAPE and privacy reports.

Everything that adds noise in dpdpca takes it from here.  This layer knows
nothing of encryption.  See ``docs/dp.md``.
"""

from dpdpca.dp.accountant import ORDERS, BudgetExceededError, PrivacyLedger, ReleaseCost, rdp_to_delta, rdp_to_epsilon
from dpdpca.dp.calibration import (
    calibrate_discrete_gaussian,
    calibrate_gaussian,
    discrete_gaussian_blocks_delta,
    discrete_gaussian_delta,
    discrete_gaussian_delta_1d,
    gaussian_delta,
    rounding_tv_bound,
    zcdp_delta,
)
from dpdpca.dp.cape import CAPE_VARIANCES, JOINT_SLACK, CapeNoisePlan, check_cape_variances, cape_gain, cape_gain_max, exact_zero_sum
from dpdpca.dp.distributed import DistributedCalibration, calibrate_distributed, ddg_rdp, ddg_tau
from dpdpca.dp.discrete import bernoulli_exp_neg, sample_discrete_gaussian, sample_discrete_laplace
from dpdpca.dp.mechanisms import (
    DiscreteGaussianMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
)
from dpdpca.dp.modsulq import modsulq_min_batch, modsulq_omega, streaming_modsulq_omega
from dpdpca.dp.noise import (
    discrete_gaussian_block,
    entries_from_symmetric_tensor,
    gaussian_block,
    symmetric_discrete_gaussian_matrix,
    symmetric_discrete_gaussian_tensor,
    symmetric_from_upper,
    symmetric_gaussian_matrix,
    symmetric_gaussian_tensor,
    symmetric_tensor_from_entries,
    upper_from_symmetric,
    upper_triangle_size,
)
from dpdpca.dp.randomness import GeneratorNoiseSource, NoiseSource, OsNoiseSource, resolve_source
from dpdpca.dp.release import (
    BLOCKS,
    DEFAULT_RELEASE,
    NOISE_BY,
    RELEASES,
    AddRemoveCalibration,
    block_scales,
    calibrate_add_remove,
    split_weights,
)
from dpdpca.dp.report import ADD_REMOVE_ONE, REPLACE_ONE, PrivacyReport, compose_basic, raise_delta
from dpdpca.dp.settings import ANALYTIC, CALIBRATIONS, CLASSIC, PAPER, RIGOROUS, SENSITIVITY_MODES
from dpdpca.dp.sensitivity import (
    at_proven_sensitivity,
    centred_scatter_sensitivity,
    quadratic_sketch_sensitivity,
    scatter_sensitivity,
    second_moment_sensitivity,
    tensor_moment_sensitivity,
)

__all__ = [
    "RELEASES", "DEFAULT_RELEASE", "NOISE_BY", "BLOCKS", "AddRemoveCalibration", "calibrate_add_remove",
    "split_weights", "block_scales", "discrete_gaussian_blocks_delta", "rounding_tv_bound",
    "DistributedCalibration", "calibrate_distributed", "ddg_rdp", "ddg_tau",
    "ORDERS", "ReleaseCost", "PrivacyLedger", "BudgetExceededError", "rdp_to_epsilon", "rdp_to_delta",
    "PrivacyReport", "REPLACE_ONE", "ADD_REMOVE_ONE", "compose_basic", "raise_delta",
    "RIGOROUS", "PAPER", "SENSITIVITY_MODES", "ANALYTIC", "CLASSIC", "CALIBRATIONS",
    "resolve_source", "NoiseSource", "OsNoiseSource", "GeneratorNoiseSource",
    "calibrate_gaussian", "gaussian_delta", "zcdp_delta", "calibrate_discrete_gaussian",
    "discrete_gaussian_delta", "discrete_gaussian_delta_1d",
    "GaussianMechanism", "DiscreteGaussianMechanism", "LaplaceMechanism", "GeometricMechanism",
    "sample_discrete_gaussian", "sample_discrete_laplace", "bernoulli_exp_neg",
    "symmetric_gaussian_matrix", "symmetric_discrete_gaussian_matrix", "gaussian_block",
    "discrete_gaussian_block", "symmetric_gaussian_tensor", "symmetric_discrete_gaussian_tensor",
    "symmetric_from_upper", "upper_from_symmetric", "upper_triangle_size", "symmetric_tensor_from_entries",
    "entries_from_symmetric_tensor",
    "second_moment_sensitivity", "scatter_sensitivity", "centred_scatter_sensitivity",
    "quadratic_sketch_sensitivity", "tensor_moment_sensitivity", "at_proven_sensitivity",
    "CapeNoisePlan", "CAPE_VARIANCES", "JOINT_SLACK", "check_cape_variances", "cape_gain", "cape_gain_max", "exact_zero_sum",
    "modsulq_omega", "streaming_modsulq_omega", "modsulq_min_batch",
]
