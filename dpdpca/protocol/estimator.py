"""scikit-learn-shaped estimator for the Wang-Chang protocol: :class:`DPDPCA`."""

from __future__ import annotations

from dpdpca.crypto.compute import EngineLike
from typing import Any

import numpy as np

from dpdpca.estimator import PCAEstimator
from dpdpca.protocol.config import ProtocolOptions
from dpdpca.protocol.runner import run_protocol
from dpdpca.result import PCAResult

__all__ = ["DPDPCA"]


class DPDPCA(PCAEstimator):
    """Differentially private distributed PCA over Paillier (Wang & Chang).

    Owners encrypt their scatter shares, the proxy aggregates, masks and adds
    integer discrete-Gaussian noise under encryption, and the data user
    decrypts ``S_bar + G'`` exactly and eigendecomposes it.

    Parameters
    ----------
    n_components : int >= 1 or None
        k, at most the number of features; ``None`` keeps every feature.
    epsilon : float > 0
    delta : float in (0, 1)
        The reported delta also includes the mask's tiny total-variation term.
    key_bits : int
        Paillier modulus bits (>= 2048 unless ``insecure_test_key``).
    frac_bits : int in [0, 26]
        Fixed-point scale ``2**frac_bits`` (rows truncated toward zero).
    kappa : int >= 40
        Statistical hiding bits of the mask b.
    clip : bool
        Clip rows to L2 norm 1 (public rule) or raise on a row of norm > 1.
    calibration : {"analytic", "classic"}
    sensitivity_mode : {"rigorous", "paper"}
        ``"paper"`` is Wang & Chang's Delta = 1 (for reproduction only).
    noise_lattice : {"n-scaled", "integer"}
        ``"n-scaled"`` is the rigorous default; ``"integer"`` is the
        paper's form and leaks ``v_i v_j mod N`` (not DP).
    executor : Executor, compute engine, distributed.Client or None
        Process pool for the crypto batches.
    insecure_test_key : bool
        Allow keys below 2048 bits (tests only).
    quorum : int or None
        Shares the proxy needs before it proceeds (default: all owners).
    processes : bool
        Run every party as its own OS process.
    release : {"add-remove", "centred"} or None
        ``"add-remove"`` (the rigorous default): noisy uncentred R, v and N
        under add/remove-one neighbouring, centred by the data user
        (:mod:`dpdpca.protocol.add_remove`).  ``"centred"``: the paper's
        release of ``S_bar + G'`` under replace-one.  None: add-remove unless
        ``sensitivity_mode="paper"`` or ``noise_lattice="integer"``.
    noise_by : {"proxy", "owners"}
        ``"owners"``: distributed noise, DP even against a proxy colluding
        with the data user (and ``L - honest_owners`` owners).
    honest_owners : int or None
        t for ``noise_by="owners"`` (default: every owner).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows, signs fixed as in :func:`dpdpca.linalg.flip_signs`.
    explained_variance_ : ndarray of shape (n_components,)
        Eigenvalues of the noisy scatter ``S_bar + G'`` divided by ``N - 1``
        (a covariance, as scikit-learn); ``result_.eigenvalues`` keeps the
        scatter units.
    mean_ : ndarray of shape (n_features,)
        Zeros: the protocol masks the sum ``v``, so the data user never learns
        the mean, and :meth:`transform` projects the rows as given (centre
        them first with a mean you may use).
    privacy_ : PrivacyReport
    timings_ : Timings
    bytes_sent_ : dict
    result_ : PCAResult
    run_ : ProtocolRun
    n_features_in_ : int

    References
    ----------
    Wang & Chang, "Differentially private distributed principal component
    analysis", Sec. IV, Alg. 1 and eq. (8)-(22).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> parts = [rng.normal(size=(30, 4)) / 4 for _ in range(3)]
    >>> est = DPDPCA(n_components=2, key_bits=1024, insecure_test_key=True).fit(parts)
    >>> est.components_.shape
    (2, 4)
    """

    def __init__(self, n_components: int | None = None, epsilon: float = 1.0, delta: float = 1e-5, *,
                 key_bits: int = 2048, frac_bits: int = 16, kappa: int = 40, clip: bool = True,
                 calibration: str = "analytic",
                 sensitivity_mode: str = "rigorous", noise_lattice: str = "n-scaled",
                 executor: EngineLike = None, insecure_test_key: bool = False, quorum: int | None = None,
                 processes: bool = False, release: str | None = None, noise_by: str = "proxy",
                 honest_owners: int | None = None, scheme: str = "paillier") -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.key_bits = key_bits
        self.frac_bits = frac_bits
        self.kappa = kappa
        self.clip = clip
        self.calibration = calibration
        self.sensitivity_mode = sensitivity_mode
        self.noise_lattice = noise_lattice
        self.executor = executor
        self.insecure_test_key = insecure_test_key
        self.quorum = quorum
        self.processes = processes
        self.release = release
        self.noise_by = noise_by
        self.honest_owners = honest_owners
        self.scheme = scheme

    def options(self) -> ProtocolOptions:
        """The estimator's parameters as the protocol's option groups (:mod:`dpdpca.protocol.config`)."""
        return ProtocolOptions.from_flat(
            epsilon=self.epsilon, delta=self.delta, calibration=self.calibration,
            sensitivity_mode=self.sensitivity_mode, noise_lattice=self.noise_lattice, release=self.release,
            noise_by=self.noise_by, honest_owners=self.honest_owners, key_bits=self.key_bits,
            insecure_test_key=self.insecure_test_key, frac_bits=self.frac_bits, kappa=self.kappa, clip=self.clip,
            executor=self.executor, quorum=self.quorum, processes=self.processes, scheme=self.scheme)

    def _fit_result(self, partitions: list[Any]) -> PCAResult:
        k = self.n_components
        if k is None:  # every feature; malformed partitions are named by run_protocol's validation
            try:
                shape: tuple[int, ...] = np.shape(partitions[0]) if isinstance(partitions, list) and partitions else ()
            except ValueError:  # ragged rows
                shape = ()
            k = int(shape[1]) if len(shape) == 2 else 1
        run = run_protocol(partitions, n_components=k, options=self.options())
        self.run_ = run
        return run.result
