"""The pipeline registry: one :class:`PipelineSpec` per pipeline, in :data:`PIPELINES`.

The driver (:mod:`dpdpca.driver`), ``dpdpca compare`` (its ``--methods``
choices, help and noise options) and the benchmarks all read this registry;
nothing else lists pipelines.  Adding a pipeline means one module with an
estimator class (a :class:`~dpdpca.estimator.PCAEstimator` or
:class:`~dpdpca.estimator.TensorEstimator`) and one entry in
:data:`_BUILTIN` below (see ``docs/architecture.md``).

An estimator class is imported only when its pipeline is first used, so the
plaintext pipelines never import the crypto stack, and a pipeline whose module
is missing gives a one-line error.

The contract the driver relies on: the class is constructed as
``Cls(n_components=k, epsilon=..., delta=..., **fixed, **options)`` (plus
``rng=`` when ``__init__`` takes ``rng``), then ``fit(partitions)`` and
``result_`` is a :class:`~dpdpca.result.Result` of the spec's ``kind``.

Examples
--------
>>> spec = get_spec("pooled")
>>> spec.kind, spec.noisy, spec.crypto
('subspace', True, False)
>>> est = spec.make(n_components=2, epsilon=1.0, delta=1e-5)
>>> type(est).__name__, est.variant
('DPDisPCA', 'pooled')
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from dpdpca._validation import param_error, type_error
from dpdpca.errors import ParameterError
from dpdpca.result import RESULT_KINDS, SUBSPACE, TENSOR_FACTORS

__all__ = ["PipelineSpec", "PIPELINES", "NOISE_OPTIONS", "register", "unregister", "get_spec", "pipeline_names"]

#: Options every DP pipeline with Gaussian noise takes; their values are defined in :mod:`dpdpca.dp`.
NOISE_OPTIONS = ("calibration", "sensitivity_mode")


@dataclass(frozen=True)
class PipelineSpec:
    """Everything the driver, ``compare`` and the benchmarks need to know about one pipeline.

    Attributes
    ----------
    name : str
        Registry name (``dpdpca compare --methods`` uses it).
    estimator : str
        ``"module:Class"`` of the estimator, imported on first use.
    summary : str
        One line for help texts and docs.
    kind : {"subspace", "tensor-factors"}
        The result kind (:data:`dpdpca.result.RESULT_KINDS`).
    crypto : bool
        Needs the crypto stack (Paillier).
    private : bool
        Differentially private (``False`` only for the non-private reference).
    options : tuple of str
        Constructor arguments beyond ``n_components``, ``epsilon``, ``delta``,
        ``rng`` that callers may pass (the driver refuses others).
    fixed : mapping
        Constructor arguments this entry fixes (e.g. ``variant="pooled"``).
    """

    name: str
    estimator: str
    summary: str
    kind: str = SUBSPACE
    crypto: bool = False
    private: bool = True
    options: tuple[str, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)

    @property
    def noisy(self) -> bool:
        """Takes the noise options (:data:`NOISE_OPTIONS`: calibration and sensitivity mode)."""
        return all(opt in self.options for opt in NOISE_OPTIONS)

    def load(self) -> Any:
        """The estimator class (imported now).

        Raises
        ------
        ParameterError
            Its module cannot be imported (the message names it and the import error).
        """
        module_name, attr = self.estimator.split(":")
        try:
            return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]
        except (ImportError, AttributeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise ParameterError(f"method {self.name!r} is not available: {self.estimator} could not be loaded "
                                 f"({type(exc).__name__}: {first})") from None

    def available(self) -> bool:
        """Whether :meth:`load` succeeds right now."""
        try:
            self.load()
        except ParameterError:
            return False
        return True

    def make(self, *, n_components: int | None, epsilon: float, delta: float, rng: Any = None,
             **options: Any) -> Any:
        """An unfitted estimator for this pipeline.

        ``rng`` is passed only to estimators that take one (the protocol's
        noise and masks always come from OS entropy, so it takes none).

        Raises
        ------
        ParameterError
            An option this pipeline does not accept, or the class cannot be loaded.
        """
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            allowed = ", ".join(self.options) if self.options else "none"
            raise ParameterError(f"options of method {self.name!r} must be among ({allowed}), "
                                 f"got {', '.join(map(repr, unknown))}")
        cls = self.load()
        kwargs: dict[str, Any] = {"n_components": n_components, "epsilon": epsilon, "delta": delta,
                                  **dict(self.fixed), **options}
        if "rng" in cls._get_param_names():
            kwargs["rng"] = rng
        return cls(**kwargs)


_NOISE = ("calibration", "sensitivity_mode")
_SITE_DP = (*_NOISE, "centering", "neighbouring")
_SITES = ("n_sites",)
#: The tensor pipelines' model options (``dpdpca.baselines.tensor``).
_TENSOR = ("model", "noise_variance", "n_features", "sample_scale", "words", "n_restarts", "n_iter", "random_state")
_PROTOCOL = ("key_bits", "frac_bits", "kappa", "clip", "calibration", "sensitivity_mode", "noise_lattice",
             "executor", "insecure_test_key", "quorum", "processes", "scheme")
_CAPE = ("weights", "site_epsilons", "site_deltas", "dropped_sites", "scheme", "cape_variances", "keep_noise",
         *_SITE_DP, "n_sites")

#: The built-in pipelines, in the order ``compare`` lists them.  One entry per pipeline.
_BUILTIN = (
    PipelineSpec("dpdpca", "dpdpca.protocol.estimator:DPDPCA",
                 "the Wang-Chang protocol: encrypted scatter, noise added by the proxy under Paillier "
                 "(default release add-remove)",
                 crypto=True, options=_PROTOCOL + ("release", "noise_by", "honest_owners")),
    PipelineSpec("dpdpca-centred", "dpdpca.protocol.estimator:DPDPCA",
                 "the protocol's centred release S-bar + G' (replace-one, sensitivity 4(N-1)/N)",
                 crypto=True, options=_PROTOCOL, fixed={"release": "centred"}),
    PipelineSpec("dpdpca-paper", "dpdpca.protocol.estimator:DPDPCA",
                 "the centred release with Wang-Chang's Delta = 1 (paper mode, for reproduction)",
                 crypto=True, options=tuple(o for o in _PROTOCOL if o != "sensitivity_mode"),
                 fixed={"release": "centred", "sensitivity_mode": "paper"}),
    PipelineSpec("dpdpca-distributed", "dpdpca.protocol.estimator:DPDPCA",
                 "the add/remove release with the owners' distributed discrete-Gaussian noise",
                 crypto=True, options=_PROTOCOL + ("honest_owners",),
                 fixed={"release": "add-remove", "noise_by": "owners"}),
    PipelineSpec("dpdispca", "dpdpca.baselines.dpdispca:DPDisPCA",
                 "DPdisPCA (Imtiaz-Sarwate 2018): noisy partial square roots averaged",
                 options=("n_intermediate", "site_precision", *_SITE_DP, *_SITES), fixed={"variant": "partial-root"}),
    PipelineSpec("dpdispca-full", "dpdpca.baselines.dpdispca:DPDisPCA",
                 "DPdisPCA's full variant: noisy second moments averaged",
                 options=_SITE_DP, fixed={"variant": "full"}),
    PipelineSpec("capepca", "dpdpca.baselines.capepca:CapePCA",
                 "capePCA: CAPE correlated noise, pooled-level noise at the aggregate",
                 options=_CAPE, fixed={"correlated": True}),
    PipelineSpec("conv", "dpdpca.baselines.capepca:CapePCA",
                 "conventional averaging of independently noised second moments",
                 options=_CAPE, fixed={"correlated": False}),
    PipelineSpec("local", "dpdpca.baselines.dpdispca:DPDisPCA",
                 "one site alone with its own noise",
                 options=("site", *_SITE_DP), fixed={"variant": "local"}),
    PipelineSpec("pooled", "dpdpca.baselines.dpdispca:DPDisPCA",
                 "a trusted curator: pooled second moment, one noise draw",
                 options=_SITE_DP, fixed={"variant": "pooled"}),
    PipelineSpec("private-local-pca", "dpdpca.baselines.private_local_pca:PrivateLocalPCA",
                 "PrivateLocalPCA: sites refine a noisy subspace in sequence",
                 options=("n_intermediate", "site_precision", "relay", *_SITE_DP, *_SITES)),
    PipelineSpec("nonprivate", "dpdpca.baselines.nonprivate:NonPrivatePCA",
                 "exact PCA of the pooled data (not DP; the q_o reference)", private=False,
                 options=("centering",)),
    PipelineSpec("fpca", "dpdpca.baselines.fpca:FederatedPCA",
                 "Federated PCA (Grammenos et al. 2020): streaming FPCA-Edge clients, streaming MOD-SuLQ, tree merge",
                 options=("private", "rank", "oversampling", "block_size", "calibration",
                          "sensitivity_mode", "centering", "neighbouring", "omega0", "mask_columns", "forgetting",
                          "adaptive_rank", "alpha", "beta", "branching")),
    PipelineSpec("mod-sulq", "dpdpca.baselines.modsulq:ModSulqPCA",
                 "MOD-SuLQ on the pooled second moment (trusted curator), symmetric or non-symmetric mask",
                 options=("variant", "private", *_SITE_DP)),
    PipelineSpec("sketch", "dpdpca.baselines.sketch:SketchPCA",
                 "DP compressive PCA (Chatalic et al.): noisy quadratic random-feature sketches, least-squares decoder",
                 options=("sketch_size", "kind", "noise", "private", "neighbouring", "calibration",
                          "sensitivity_mode", "count_fraction", "features_per_sample", "mask", "seed")),
    PipelineSpec("frequent-directions", "dpdpca.baselines.frequent_directions:FrequentDirectionsPCA",
                 "Frequent Directions sketches merged across sites (streaming comparator, not DP)",
                 private=False, options=("ell",)),
    PipelineSpec("capeagn", "dpdpca.baselines.tensor.capeagn:CapeAGN",
                 "capeAGN: tensor decomposition (MOG/STM) with CAPE noise on M2 and M3",
                 kind=TENSOR_FACTORS, options=(*_TENSOR, *_NOISE, "budget_split", "scheme", "cape_variances"),
                 fixed={"variant": "capeagn"}),
    PipelineSpec("capeagn-conv", "dpdpca.baselines.tensor.capeagn:CapeAGN",
                 "capeAGN's conv: every site noises its own moments, the aggregator averages",
                 kind=TENSOR_FACTORS, options=(*_TENSOR, *_NOISE, "budget_split"), fixed={"variant": "conv"}),
    PipelineSpec("capeagn-local", "dpdpca.baselines.tensor.capeagn:CapeAGN",
                 "capeAGN's local: one site's noisy moments alone",
                 kind=TENSOR_FACTORS, options=(*_TENSOR, *_NOISE, "budget_split", "site"),
                 fixed={"variant": "local"}),
    PipelineSpec("capeagn-nonprivate", "dpdpca.baselines.tensor.capeagn:NonPrivateTensorDecomposition",
                 "tensor power method on the pooled moments (not DP)", kind=TENSOR_FACTORS, private=False,
                 options=_TENSOR),
)

#: Registry name -> :class:`PipelineSpec`.
PIPELINES: dict[str, PipelineSpec] = {}


def register(spec: PipelineSpec, *, replace: bool = False) -> PipelineSpec:
    """Add ``spec`` to :data:`PIPELINES`; return it.

    Raises
    ------
    ParameterError
        A name already registered (unless ``replace``), or an unknown kind.
    """
    if not isinstance(spec, PipelineSpec):
        raise type_error("spec", "a PipelineSpec", spec)
    if spec.kind not in RESULT_KINDS:
        raise param_error("kind", f"one of {', '.join(RESULT_KINDS)}", spec.kind)
    if spec.estimator.count(":") != 1:
        raise param_error("estimator", "'module:Class'", spec.estimator)
    if spec.name in PIPELINES and not replace:
        raise param_error("name", "not registered yet", spec.name)
    PIPELINES[spec.name] = spec
    return spec


def unregister(name: str) -> PipelineSpec:
    """Remove and return the spec registered as ``name``."""
    return PIPELINES.pop(get_spec(name).name)


def get_spec(name: str) -> PipelineSpec:
    """The spec registered as ``name``.

    Raises
    ------
    ParameterError
        An unknown name (the message lists the registered ones).
    """
    if not isinstance(name, str) or name not in PIPELINES:
        raise param_error("method", f"one of {', '.join(PIPELINES)}", name)
    return PIPELINES[name]


def pipeline_names(*, kind: str | None = None, crypto: bool | None = None, private: bool | None = None,
                   available: bool = False) -> list[str]:
    """Registered names, in registry order, filtered by kind, crypto, privacy and importability."""
    return [name for name, spec in PIPELINES.items()
            if (kind is None or spec.kind == kind) and (crypto is None or spec.crypto == crypto)
            and (private is None or spec.private == private) and (not available or spec.available())]


for _spec in _BUILTIN:
    register(_spec)
del _spec
