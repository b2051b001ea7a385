"""Latent-variable models whose moments are orthogonally decomposable (Imtiaz & Sarwate 2018, App. B).

* **MOG** (spherical mixture of Gaussians): ``t = a_h + z``, ``Pr[h = k] = w_k``,
  ``z ~ N(0, sigma^2 I_D)``, ``||a_k|| <= 1``.
* **STM** (single topic model): a document has one topic ``h`` (``Pr[h = k] = w_k``)
  and ``L >= 3`` words drawn i.i.d. from the word distribution ``a_h`` over a
  vocabulary of ``D`` words.

A :class:`LatentModel` holds the true parameters; :func:`sample_partitions`
draws ``S`` sites of ``N_s`` records each.  The paper fixes the parameters but
does not say how it drew them; our defaults are stated in each function.
Parameters and data come from an explicit ``numpy.random.Generator``
(experiments only: these are synthetic data, not privacy noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdpca._validation import check_int, check_positive, param_error

__all__ = ["LatentModel", "make_mog", "make_stm", "sample_records", "sample_partitions", "random_components",
           "MODELS", "check_model_kind", "check_components"]

MODELS = ("mog", "stm")


def check_model_kind(kind: Any) -> str:
    """``"mog"`` or ``"stm"``."""
    if kind not in MODELS:
        raise param_error("model", "'mog' or 'stm'", kind)
    return str(kind)


def check_components(n_components: Any, n_features: Any) -> tuple[int, int]:
    """``1 <= K <= D``: the whitening needs ``K`` linearly independent ``a_k`` in ``R^D``."""
    d = check_int("n_features", n_features, minimum=1)
    k = check_int("n_components", n_components, minimum=1)
    if k > d:
        raise param_error("n_components", f"<= n_features = {d} (K linearly independent components in R^D)", k)
    return k, d


def _check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise param_error("rng", "a numpy.random.Generator (synthetic data are experiments)", rng)
    return rng


@dataclass(frozen=True)
class LatentModel:
    """True parameters of a MOG or STM model.

    Attributes
    ----------
    kind : {"mog", "stm"}
    weights : array of shape (K,)
        Mixing / topic probabilities ``w_k`` (positive, sum 1).
    means : array of shape (K, D)
        Rows ``a_k``: component means (MOG, ``||a_k|| <= 1``) or word
        distributions (STM, rows on the probability simplex).
    noise_variance : float
        MOG ``sigma^2`` (0 for STM).
    words_per_document : int
        STM ``L`` (0 for MOG).
    """

    kind: str
    weights: np.ndarray
    means: np.ndarray
    noise_variance: float = 0.0
    words_per_document: int = 0

    @property
    def n_components(self) -> int:
        """``K``."""
        return int(self.means.shape[0])

    @property
    def n_features(self) -> int:
        """``D`` (dimension or vocabulary size)."""
        return int(self.means.shape[1])


def _weights(k: int, concentration: float, rng: np.random.Generator) -> np.ndarray:
    return rng.dirichlet(np.full(k, concentration))


def make_mog(n_features: int, n_components: int, *, noise_variance: float = 0.05,
             norm_range: tuple[float, float] = (0.5, 1.0), weight_concentration: float = 10.0,
             rng: Any) -> LatentModel:
    """A spherical mixture of Gaussians (App. B-B).

    Parameters
    ----------
    n_features : int, >= 1
        ``D``.
    n_components : int, 1 <= K <= D
    noise_variance : float, > 0
        ``sigma^2`` (the paper's experiments: 0.05).
    norm_range : (float, float), 0 < low <= high <= 1
        ``||a_k||`` uniform in this range; directions uniform on the sphere
        (linearly independent with probability 1 when ``K <= D``).
    weight_concentration : float, > 0
        ``w ~ Dirichlet(concentration * 1_K)``.
    rng : numpy.random.Generator

    Examples
    --------
    >>> m = make_mog(10, 5, rng=np.random.default_rng(0))
    >>> m.means.shape, bool(np.all(np.linalg.norm(m.means, axis=1) <= 1))
    ((5, 10), True)
    """
    k, d = check_components(n_components, n_features)
    s2 = check_positive("noise_variance", noise_variance)
    low, high = (float(v) for v in norm_range)
    if not 0 < low <= high <= 1:
        raise param_error("norm_range", "(low, high) with 0 < low <= high <= 1", tuple(norm_range))
    conc = check_positive("weight_concentration", weight_concentration)
    gen = _check_rng(rng)
    directions = gen.standard_normal((k, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    means = directions * gen.uniform(low, high, size=(k, 1))
    return LatentModel("mog", _weights(k, conc, gen), means, noise_variance=s2)


def make_stm(n_features: int, n_components: int, *, words_per_document: int = 3,
             topic_concentration: float = 1.0, weight_concentration: float = 10.0, rng: Any) -> LatentModel:
    """A single topic model (App. B-A).

    Parameters
    ----------
    n_features : int, >= 1
        Vocabulary size ``D``.
    n_components : int, 1 <= K <= D
        Number of topics.
    words_per_document : int, >= 3
        ``L`` (the third moment needs three words per document).
    topic_concentration : float, > 0
        Each ``a_k ~ Dirichlet(concentration * 1_D)``.
    weight_concentration : float, > 0
        ``w ~ Dirichlet(concentration * 1_K)``.
    rng : numpy.random.Generator
    """
    k, d = check_components(n_components, n_features)
    length = check_words_per_document(words_per_document)
    topic_conc = check_positive("topic_concentration", topic_concentration)
    conc = check_positive("weight_concentration", weight_concentration)
    gen = _check_rng(rng)
    means = gen.dirichlet(np.full(d, topic_conc), size=k)
    return LatentModel("stm", _weights(k, conc, gen), means, words_per_document=length)


def check_words_per_document(value: Any) -> int:
    """``L >= 3``."""
    return check_int("words_per_document", value, minimum=3)


def sample_records(model: LatentModel, n_samples: int, rng: Any) -> np.ndarray:
    """Draw ``n_samples`` records.

    Returns
    -------
    array
        MOG: float64 of shape (n_samples, D).  STM: int64 word ids of shape
        (n_samples, L), each in ``[0, D)``.
    """
    n = check_int("n_samples", n_samples, minimum=1)
    gen = _check_rng(rng)
    topics = gen.choice(model.n_components, size=n, p=model.weights)
    if model.kind == "mog":
        return model.means[topics] + gen.standard_normal((n, model.n_features)) * np.sqrt(model.noise_variance)
    # inverse-CDF sampling of L words per document from its topic's distribution
    cdf = np.cumsum(model.means, axis=1)
    cdf[:, -1] = 1.0
    u = gen.random((n, model.words_per_document))
    words = np.empty((n, model.words_per_document), dtype=np.int64)
    for k in range(model.n_components):
        rows = topics == k
        words[rows] = np.searchsorted(cdf[k], u[rows], side="right")
    return words


def sample_partitions(model: LatentModel, n_sites: int, samples_per_site: int, rng: Any) -> list[np.ndarray]:
    """``S`` sites of ``N_s`` i.i.d. records each (equal sites, as in the paper's experiments)."""
    s = check_int("n_sites", n_sites, minimum=1)
    n = check_int("samples_per_site", samples_per_site, minimum=1)
    return [sample_records(model, n, rng) for _ in range(s)]


def random_components(model: LatentModel, rng: Any) -> np.ndarray:
    """The ``random`` baseline: ``K`` vectors from the prior of :func:`make_mog` / :func:`make_stm`.

    MOG: uniform directions with norms uniform in (0.5, 1); STM: ``Dirichlet(1_D)``
    rows.  Uses no data: the error it gets is the no-information level.
    """
    gen = _check_rng(rng)
    k, d = model.n_components, model.n_features
    if model.kind == "stm":
        return gen.dirichlet(np.ones(d), size=k)
    directions = gen.standard_normal((k, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions * gen.uniform(0.5, 1.0, size=(k, 1))
