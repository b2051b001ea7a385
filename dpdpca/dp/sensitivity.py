"""Sensitivities, each under an explicitly stated neighbouring relation.

Data contract: every record ``x`` has ``||x||_2 <= 1`` (clipped by a public rule
before anything private happens).  Every function takes ``mode``:

* ``"rigorous"`` (default): a bound we prove in the docstring, for the
  relation asked for.
* ``"paper"``: the reproduced paper's own value, for reproduction.  Where it is wrong
  for the relation used, the docstring says so.

All bounds are L2 (Frobenius) norms of the change of the statistic unless
stated (the Laplace ones are L1).  For symmetric matrices with i.i.d. noise on
the upper triangle (:mod:`dpdpca.dp.noise`) the relevant sensitivity is the L2
norm of the upper-triangle difference vector, which is at most the Frobenius
norm; we return Frobenius bounds, which are valid for both, and tight for both
at the worst pairs named in each docstring.

Nothing here looks at data: the sizes ``n`` are public by the relation's
definition (replace-one) or are public normalisers (add/remove-one).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpdpca._validation import check_int, check_nonnegative, check_positive, param_error
from dpdpca.dp.calibration import gaussian_delta
from dpdpca.dp.mechanisms import check_neighbouring, check_sensitivity_mode
from dpdpca.dp.quadratic_sketch import quadratic_sketch_bounds
from dpdpca.dp.report import ADD_REMOVE_ONE, REPLACE_ONE, PrivacyReport, raise_delta

__all__ = [
    "second_moment_sensitivity",
    "scatter_sensitivity",
    "centred_scatter_sensitivity",
    "quadratic_sketch_sensitivity",
    "tensor_moment_sensitivity",
    "at_proven_sensitivity",
]

_SQRT2 = math.sqrt(2.0)


def second_moment_sensitivity(n: int, *, neighbouring: str = REPLACE_ONE, mode: str = "rigorous") -> float:
    """L2 sensitivity of the second-moment matrix ``A = X X^T / n`` (Imtiaz & Sarwate), ``||x|| <= 1``.

    Parameters
    ----------
    n : int, >= 1
        Number of records (public under replace-one; under add/remove-one, the
        public normaliser used instead of the true count).
    neighbouring : {"replace-one", "add/remove-one"}
    mode : {"rigorous", "paper"}

    Returns
    -------
    float
        * rigorous, replace-one: ``sqrt(2)/n``.  ``A - A' = (x x^T - x' x'^T)/n`` and
          ``||x x^T - x' x'^T||_F^2 = ||x||^4 + ||x'||^4 - 2 (x.x')^2 <= 2``, with
          equality for orthogonal unit vectors (e.g. ``e_1``, ``e_2``, where the
          upper-triangle norm is also ``sqrt(2)``).
        * rigorous, add/remove-one: ``1/n`` with ``n`` a *public* normaliser:
          ``||x x^T||_F = ||x||^2 <= 1``.  Dividing by the true count instead would
          release the count, which is not private under this relation.
        * paper: ``1/n`` whatever the relation (Imtiaz & Sarwate 2016/2018, citing
          Dwork et al.'s Analyze Gauss, which is add/remove-one).  Under
          replace-one it is too small by ``sqrt(2)``.

    References
    ----------
    Imtiaz & Sarwate, "Differentially private distributed PCA" (2018) and capePCA
    (2018) §IV: ``Delta_2^s = 1/N_s``.  Dwork, Talwar, Thakurta & Zhang (2014).
    """
    n = check_int("n", n, minimum=1)
    check_neighbouring(neighbouring)
    if check_sensitivity_mode(mode, "mode") == "paper" or neighbouring == ADD_REMOVE_ONE:
        return 1.0 / n
    return _SQRT2 / n


def scatter_sensitivity(*, neighbouring: str = REPLACE_ONE, mode: str = "rigorous") -> float:
    """L2 sensitivity of the scatter matrix ``R = sum_i x_i x_i^T``, ``||x|| <= 1``.

    * rigorous, replace-one: ``sqrt(2)`` (as in :func:`second_moment_sensitivity`, times n).
    * rigorous, add/remove-one: ``1``.
    * paper: ``1`` (Wang & Chang, Theorem 2, for ``A^T A``), tight only for add/remove-one.

    References
    ----------
    Wang & Chang, DPDPCA, Theorem 2.
    """
    check_neighbouring(neighbouring)
    if check_sensitivity_mode(mode, "mode") == "paper" or neighbouring == ADD_REMOVE_ONE:
        return 1.0
    return _SQRT2


def at_proven_sensitivity(report: PrivacyReport, sensitivity: float) -> PrivacyReport:
    """A Gaussian release's ``report`` with the delta its noise really gives at the statistic's proven sensitivity.

    The paper mode calibrates ``sigma`` to the paper's sensitivity
    (``report.sensitivity``), which may be smaller than the proven one (e.g.
    ``1/N`` against ``sqrt(2)/N`` for ``X^T X / N`` under replace-one): the
    release is then (epsilon, delta')-DP with ``delta' = gaussian_delta(epsilon,
    sigma, sensitivity)`` (exact for the Gaussian, Balle & Wang 2018), which
    replaces the report's delta when larger, with a note naming the delta at
    the paper's sensitivity (:func:`~dpdpca.dp.report.raise_delta`).  The
    report keeps the sensitivity its scale was calibrated to and its
    ``sensitivity_mode``.

    Examples
    --------
    >>> from dpdpca.dp import GaussianMechanism
    >>> paper = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=0.01, calibration="classic",
    ...                           sensitivity_mode="paper").privacy("site")
    >>> f"{at_proven_sensitivity(paper, math.sqrt(2) * 0.01).delta:.2e}"
    '3.74e-05'
    """
    if report.sigma is None:
        raise param_error("report.sigma", "the Gaussian release's noise standard deviation", None)
    sens = check_positive("sensitivity", sensitivity)
    real = gaussian_delta(report.epsilon, report.sigma, sens)
    return raise_delta(report, real, why=f"at epsilon={report.epsilon:g} and the statistic's proven L2 sensitivity "
                                         f"{sens:.4g}",
                       claim=f"the delta at the paper's sensitivity {report.sensitivity:.4g}")


def centred_scatter_sensitivity(n: int, *, neighbouring: str = REPLACE_ONE, mode: str = "rigorous",
                                exact: bool = False) -> float | Fraction:
    r"""L2 (Frobenius) sensitivity of the centred scatter ``S = R - v v^T / n``, ``||x|| <= 1``.

    ``R = sum x x^T``, ``v = sum x``; ``S = sum (x - mean)(x - mean)^T``.

    Parameters
    ----------
    n : int, >= 1
        Number of records (public under replace-one).
    neighbouring : {"replace-one", "add/remove-one"}
    mode : {"rigorous", "paper"}
    exact : bool
        Return a :class:`fractions.Fraction` (rigorous mode only) so that an
        integer protocol can compute ``ceil(n * Delta * 2**(2f))`` exactly.

    Returns
    -------
    float or Fraction
        * rigorous, replace-one: ``4 (n - 1) / n`` (tight).
        * rigorous, add/remove-one: ``4`` (valid for every n; see below).
        * paper: ``1`` (Wang & Chang's Theorem 2 for ``A^T A``, which ignores the
          mean term); it is exceeded by up to a factor 4.

    Notes
    -----
    **Derivation (replace-one).**  Let the last record change from ``x`` to
    ``x'`` and let ``m`` be the mean of the other ``n - 1`` records (``||m|| <= 1``).
    The rank-one update of the centred scatter gives
    ``S(X) = S(X_{-n}) + ((n-1)/n) (x - m)(x - m)^T``, so with ``a = x - m``,
    ``b = x' - m``::

        S(X) - S(X') = ((n-1)/n) (a a^T - b b^T).

    ``f = ||a a^T - b b^T||_F^2 = ||a||^4 + ||b||^4 - 2 (a.b)^2``.  The points
    ``0, a, b`` lie in the ball ``B(-m, 1)`` (``||0 + m|| <= 1``), hence in a disk
    of radius ``r <= 1`` in their plane.  Three cases:

    1. the triangle ``0ab`` has an angle ``>= 90`` degrees at 0: its longest side
       ``|a - b| <= 2`` gives ``||a||^2 + ||b||^2 <= 4``, so ``f <= (||a||^2 + ||b||^2)^2 <= 16``;
    2. an angle ``>= 90`` at ``a`` (or ``b``): ``a.(a - b) <= 0`` so ``(a.b)^2 >= ||a||^4``
       and ``f <= ||b||^4 <= 16`` (``||b|| <= 2r``);
    3. acute: its circumcircle (radius ``R <= r <= 1``) passes through 0.  A chord from
       0 making angle ``phi`` with the tangent at 0 has length ``2R sin(phi)``, and
       the angle between the chords to ``a`` and ``b`` is ``|phi_a - phi_b|``.  With
       ``u = phi_a - phi_b``, ``w = phi_a + phi_b``:
       ``f = 16 R^4 sin^2(u) [sin^2(w) + (cos u - cos w)^2 / 2]``; maximising over
       ``cos w`` gives ``[...] <= 1 + cos^2 u``, so ``f <= 16 (1 - cos^4 u) <= 16``.

    Hence ``||S(X) - S(X')||_F <= 4 (n-1)/n``, attained by ``n - 1`` records equal to
    a unit ``m``, ``x = -m``, ``x' = m`` (then ``a a^T - b b^T = 4 m m^T``, whose
    upper-triangle norm for ``m = e_1`` is also 4).  This is four times the
    ``Delta = 1`` the paper assumes: the mean term matters.  For ``n = 1``, ``S = 0``.

    **Add/remove-one.**  Adding ``x`` to ``n`` records with mean ``m`` changes ``S``
    by ``(n/(n+1)) (x - m)(x - m)^T``, of norm ``<= 4 n/(n+1) < 4``.  But ``n`` itself
    changes, and releasing it exactly is *not* private under this relation: a
    protocol that publishes ``n`` must use replace-one (the default here) or
    protect ``n`` separately.

    References
    ----------
    Wang & Chang, DPDPCA (Paillier), Theorem 2.
    """
    n = check_int("n", n, minimum=1)
    check_neighbouring(neighbouring)
    if check_sensitivity_mode(mode, "mode") == "paper":
        return Fraction(1) if exact else 1.0
    value = Fraction(4 * (n - 1), n) if neighbouring == REPLACE_ONE else Fraction(4)
    return value if exact else float(value)


def quadratic_sketch_sensitivity(omega: Any, *, norm: str = "l2", neighbouring: str = ADD_REMOVE_ONE,
                                 mode: str = "rigorous", features_per_sample: int | None = None,
                                 mask: str = "uniform") -> float:
    r"""Sensitivity of the quadratic sketch ``Sigma(X) = sum_i (Omega^T x_i)^2`` (entrywise), ``||x|| <= 1``.

    Parameters
    ----------
    omega : array of shape (d, m)
        The public frequency matrix (columns ``omega_j``); never data.
    norm : {"l1", "l2"}
        L1 (Laplace) or L2 (Gaussian) sensitivity.
    neighbouring : {"add/remove-one", "replace-one"}
        Chatalic et al.'s table is for add/remove-one (UDP).
    mode : {"rigorous", "paper"}
    features_per_sample, mask :
        Feature subsampling (``r`` of ``m`` features per record, rescaled by
        ``m/r``); see :func:`dpdpca.dp.quadratic_sketch.quadratic_sketch_bounds`.

    Returns
    -------
    float
        * rigorous: :func:`~dpdpca.dp.quadratic_sketch.quadratic_sketch_bounds`
          (L1 exact ``||Omega||_2^2`` without subsampling; L2 the smallest of three
          proven upper bounds on ``||Omega^T||_{2->4}^2``; replace-one doubles L1
          and multiplies L2 by ``sqrt(2)``, as the features are non-negative).
        * paper: the add/remove-one value whatever the relation, with
          ``||Omega||_2^2`` (times ``m/r``) standing in for the 2->4 norm.

    References
    ----------
    Chatalic, Schellekens, Houssiau, de Montjoye, Jacques & Gribonval (2022),
    "Compressive learning with privacy guarantees", table "Privacy results".
    """
    if norm not in ("l1", "l2"):
        raise param_error("norm", "'l1' or 'l2'", norm)
    check_neighbouring(neighbouring)
    mode = check_sensitivity_mode(mode, "mode")
    if mode == "paper":
        b = quadratic_sketch_bounds(omega, features_per_sample=features_per_sample, mask=mask,
                                    neighbouring=ADD_REMOVE_ONE, lower_starts=1)
        return b.l1
    b = quadratic_sketch_bounds(omega, features_per_sample=features_per_sample, mask=mask,
                                neighbouring=neighbouring)
    return b.l1 if norm == "l1" else b.l2


def tensor_moment_sensitivity(n: int, *, model: str, order: int, dimension: int | None = None,
                              noise_variance: float = 0.0, neighbouring: str = REPLACE_ONE,
                              mode: str = "rigorous", coordinates: str = "distinct") -> float:
    r"""L2 sensitivity of the capeAGN moment estimates (Imtiaz & Sarwate 2018, App. C).

    Parameters
    ----------
    n : int, >= 1
        Local sample size ``N_s`` (public).
    model : {"stm", "mog"}
        Single topic model (words one-hot ``e_i``; ``M_2``, ``M_3`` symmetrised
        averages of word-pair / word-triple indicators) or spherical mixture of
        Gaussians (records ``||t|| <= 1`` after a public scaling and clipping,
        common covariance ``sigma^2 I`` in the scaled units).
    order : {2, 3}
        ``M_2`` or ``M_3``.
    dimension : int
        ``D``, needed for MOG ``M_3``.
    noise_variance : float, >= 0
        The MOG ``sigma^2`` of the *scaled* records (public model parameter).
    neighbouring : only ``"replace-one"`` (the paper's relation).
    mode : {"rigorous", "paper"}
        ``"rigorous"`` (default): the bounds proved below.  ``"paper"``: the
        appendix-C values, for reproduction (MOG ``M_2`` is then too small by
        ``sqrt(2)``; MOG ``M_3`` is valid but loose).
    coordinates : {"distinct", "frobenius"}
        The norm of the change (rigorous mode).  ``"distinct"`` (default): the L2
        norm of the vector of distinct entries (the upper triangle of ``M_2``, the
        ``C(D+2,3)`` entries ``i <= j <= k`` of ``M_3``), which is what the
        Gaussian mechanism needs when i.i.d. noise is drawn on exactly those
        entries and copied to the symmetric positions
        (:func:`~dpdpca.dp.noise.symmetric_gaussian_matrix`,
        :func:`~dpdpca.dp.noise.symmetric_gaussian_tensor`, CAPE with
        ``symmetric=True``).  ``"frobenius"``: the norm of the full array, for
        i.i.d. noise on every entry.

    Returns
    -------
    float
        ============  =======================  =============================  ==============================
        statistic     paper (App. C)           rigorous, distinct entries     rigorous, Frobenius
        ============  =======================  =============================  ==============================
        STM ``M_2``   ``sqrt(2)/N``            ``sqrt(2)/N``                  ``sqrt(2)/N``
        STM ``M_3``   ``sqrt(2)/N``            ``sqrt(2)/N``                  ``sqrt(2)/N``
        MOG ``M_2``   ``1/N`` (spectral norm)  ``sqrt(2)/N``                  ``sqrt(2)/N``
        MOG ``M_3``   ``(2 + 6 D s^2)/N``      ``(2 + 2 sqrt(D+8) s^2)/N``    ``(2 + 2 sqrt(3D+6) s^2)/N``
        ============  =======================  =============================  ==============================

    Notes
    -----
    **STM.**  One document contributes a symmetric array with non-negative
    entries that is a convex combination of symmetrised indicators
    ``sym(e_i (x) e_j (x) e_k)`` (or ``sym(e_i (x) e_j)``), each of norm at most 1
    in either coordinate system (its one non-zero distinct entry is 1, 1/3 or
    1/6).  For non-negative ``u, v`` with norms at most 1,
    ``||u - v||^2 = ||u||^2 + ||v||^2 - 2 u.v <= 2``: ``sqrt(2)/N``, attained by two
    documents repeating two different words.

    **MOG** ``M_2 = (1/N) sum t t^T - s^2 I``: the change is
    ``(t t^T - t' t'^T)/N`` with ``||t t^T - t' t'^T||_F^2 = ||t||^4 + ||t'||^4 - 2 (t.t')^2 <= 2``,
    and the upper-triangle norm is at most that and equal to it at ``t = e_1``,
    ``t' = e_2``.  The paper bounds the *spectral* norm (``1/N``), which is not
    the norm the Gaussian mechanism is calibrated in.

    **MOG** ``M_3 = (1/N) sum t^{(x)3} - s^2 sum_d (m (x) e_d (x) e_d + two permutations)``
    with ``m`` the sample mean.  The first part changes by
    ``(t^{(x)3} - t'^{(x)3})/N`` with ``||.||_F^2 = ||t||^6 + ||t'||^6 - 2 (t.t')^3 <= 4``
    (``t' = -t``); the distinct-entry norm is at most the Frobenius norm and
    equals 2 at ``t = e_1``.  The correction changes by ``(s^2/N) X(u)``, ``u = t - t'``
    (``||u|| <= 2``), where ``X(u)_{ijk} = u_i [j=k] + u_j [i=k] + u_k [i=j]``.
    Its distinct entries are ``X_{iii} = 3 u_i`` and ``X_{iij} = u_j`` (``i != j``),
    the rest 0, so ``||X(u)||_distinct^2 = 9 ||u||^2 + (D - 1) ||u||^2 = (D + 8) ||u||^2``;
    over all positions ``||X(u)||_F^2 = 3 D ||u||^2 + 6 ||u||^2``.  The triangle
    inequality gives the table.  The paper's ``6 D s^2`` comes from the triangle
    inequality over all ``3D`` rank-one terms: valid, but loose (``D = 50``:
    ``300 s^2`` against ``2 sqrt(58) s^2 = 15.2 s^2``).
    """
    n = check_int("n", n, minimum=1)
    if model not in ("stm", "mog"):
        raise param_error("model", "'stm' or 'mog'", model)
    order = check_int("order", order, minimum=2, maximum=3)
    if check_neighbouring(neighbouring) != REPLACE_ONE:
        raise param_error("neighbouring", "'replace-one' for the capeAGN moments", neighbouring)
    mode = check_sensitivity_mode(mode, "mode")
    if coordinates not in ("distinct", "frobenius"):
        raise param_error("coordinates", "'distinct' or 'frobenius'", coordinates)
    s2 = check_nonnegative("noise_variance", noise_variance)
    if model == "stm":
        return _SQRT2 / n
    if order == 2:
        return (1.0 if mode == "paper" else _SQRT2) / n
    if dimension is None:
        raise param_error("dimension", "an integer >= 1 for the MOG third moment", dimension)
    d = check_int("dimension", dimension, minimum=1)
    if mode == "paper":
        return (2.0 + 6.0 * d * s2) / n
    spread = d + 8 if coordinates == "distinct" else 3 * d + 6
    return (2.0 + 2.0 * math.sqrt(spread) * s2) / n
