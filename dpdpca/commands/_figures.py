"""The PNGs ``dpdpca run --out DIR`` and ``dpdpca compare --output FILE`` add when matplotlib is installed.

Each function returns the lines to print on stderr: the files written, or
the one line saying matplotlib is missing (nothing else changes then).  The
commands reserve the PNGs (:class:`~dpdpca._io.ReservedOutput`) with their
other outputs, before the work: :func:`run_figure_names` and
:func:`compare_figure_path` say which.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dpdpca import plotting
from dpdpca._io import ReservedOutput
from dpdpca.result import PCAResult

__all__ = ["run_figure_names", "run_figures", "compare_figure_path", "compare_figure"]


def run_figure_names(dataset: str | None, n_features: int) -> list[str]:
    """The PNGs :func:`run_figures` writes in ``--out``: none without matplotlib; ``components.png`` for images."""
    if not plotting.available():
        return []
    return ["scree.png"] + (["components.png"] if plotting.image_shape_for(dataset, n_features) else [])


def run_figures(outputs: Mapping[str, ReservedOutput], *, result: PCAResult, X_ref: np.ndarray,
                dataset: str | None) -> list[str]:
    """``scree.png`` (released vs non-private eigenvalues, noise level marked) and, for image
    datasets, ``components.png`` (top components as images, each private one above the non-private one it
    matches, with their |cos| and one colour scale).

    Parameters
    ----------
    outputs : mapping of str to ReservedOutput
        The files :func:`run_figure_names` named, reserved.
    result : PCAResult
        The protocol's release: eigenvalues of ``S_bar + G'`` in scatter units.
    X_ref : ndarray of shape (n, d)
        The rows the owners used (after the public clipping rule).
    dataset : str or None
        Named dataset, or None for a user's file (never drawn as images).
    """
    if not plotting.available():
        return [plotting.NO_MATPLOTLIB]
    Xc = X_ref - X_ref.mean(axis=0)
    w, V = np.linalg.eigh(Xc.T @ Xc)  # the non-private scatter S_bar, same units as the release
    w, V = w[::-1], V[:, ::-1]
    k = result.components.shape[1]
    d = X_ref.shape[1]
    sigma = result.privacy.sigma
    # the noise matrix (symmetric, i.i.d. entries of std sigma) has spectral norm about 2 sigma sqrt(d)
    noise = None if sigma is None or not math.isfinite(sigma) else 2.0 * float(sigma) * math.sqrt(d)
    eps = result.privacy.epsilon
    scree = plotting.scree_plot(
        outputs["scree.png"], [float(x) for x in result.eigenvalues], [float(x) for x in w[: max(k, min(d, 20))]],
        noise_level=noise, ylabel="eigenvalue of the scatter matrix",
        title=f"DPDPCA eigenvalues (epsilon={eps:g}, {X_ref.shape[0]} x {d}); dashed: noise spectral norm "
              f"2 sigma sqrt(d)")
    notes = [f"wrote {scree}"]
    shape = plotting.image_shape_for(dataset, d)
    if shape is not None and "components.png" in outputs:
        # a few more non-private candidates than k: a private component may match one just below the top k
        path = plotting.component_images(outputs["components.png"], result.components, V[:, :min(d, k + 5)], shape,
                                         title=f"top components: private (epsilon={eps:g}) above the non-private one "
                                               f"each matches")
        notes.append(f"wrote {path}")
    return notes


def compare_figure_path(output: str | Path) -> Path | None:
    """Where :func:`compare_figure` writes beside the JSON ``output`` (FILE with the suffix .png); None without
    matplotlib."""
    return Path(output).with_suffix(".png") if plotting.available() else None


def compare_figure(png: ReservedOutput | None, summary: dict[str, Any]) -> list[str]:
    """A bar chart of q/q_o per method (mean +- std over the runs) into ``png`` (:func:`compare_figure_path`,
    reserved)."""
    if png is None or not plotting.available():
        return [plotting.NO_MATPLOTLIB]
    methods = summary["methods"]
    names = list(methods)
    means = [float(methods[m]["captured_energy_ratio"]) for m in names]
    stds = [float(methods[m].get("std", 0.0)) for m in names]
    ds = summary.get("dataset", {})
    title = (f"q/q_o per method: {ds.get('name', 'data')}, S={ds.get('sites', '?')}, K={summary['n_components']}, "
             f"epsilon={summary['epsilon']:g}, delta={summary['delta']:g}, {summary['runs']} run(s)")
    path = plotting.bar_chart(png, names, means, stds, ylabel="q / q_o", title=title)
    return [f"wrote {path}"]
