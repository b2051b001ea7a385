"""Optional PNG figures (matplotlib, from the ``[plot]`` or ``[bench]`` extra).

dpdpca imports and runs without matplotlib: every function here first calls
:func:`require_matplotlib`, and callers check :func:`available` and print
:data:`NO_MATPLOTLIB` (one line) instead of writing a PNG.  Figures are drawn
on a bare :class:`matplotlib.figure.Figure` with the Agg canvas, so no GUI
backend and no global pyplot state are involved.

Each function writes one PNG atomically and returns its path; the path may
be an output reserved before the work (:class:`~dpdpca._io.ReservedOutput`),
as ``dpdpca run --out`` and ``dpdpca compare --output`` reserve theirs.
"""

from __future__ import annotations

import importlib.util
import io
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

import numpy as np

from dpdpca._io import ReservedOutput, atomic_write_bytes
from dpdpca.errors import ParameterError

__all__ = ["available", "require_matplotlib", "NO_MATPLOTLIB", "line_plot", "timing_plot", "scree_plot",
           "component_images", "bar_chart", "image_shape_for"]

#: The one line printed when a PNG was asked for but matplotlib is missing.
NO_MATPLOTLIB = "matplotlib is not installed: no PNG written (install it with: pip install 'dpdpca[plot]')"

#: Square image datasets by feature count: digits 8x8, MNIST / Fashion-MNIST 28x28.
_IMAGE_SHAPES = {64: (8, 8), 784: (28, 28)}
_IMAGE_DATASETS = {"digits", "mnist", "fashion-mnist"}


def available() -> bool:
    """True when matplotlib can be imported."""
    return importlib.util.find_spec("matplotlib") is not None


def require_matplotlib() -> None:
    """Raise :class:`ParameterError` with :data:`NO_MATPLOTLIB` when matplotlib is absent."""
    if not available():
        raise ParameterError(NO_MATPLOTLIB)


def image_shape_for(dataset: str | None, n_features: int) -> tuple[int, int] | None:
    """Pixel grid of an image dataset (digits, MNIST, Fashion-MNIST), else None."""
    if dataset in _IMAGE_DATASETS and n_features in _IMAGE_SHAPES:
        return _IMAGE_SHAPES[n_features]
    return None


def _figure(width: float, height: float) -> Any:
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


#: Where a figure goes: a path, or an output reserved before the work.
Output = Union[str, "os.PathLike[str]", ReservedOutput]


def _save(fig: Any, path: Output) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    if isinstance(path, ReservedOutput):
        return path.write(buf.getvalue())
    return atomic_write_bytes(path, buf.getvalue())


def line_plot(path: str | os.PathLike[str], x: Sequence[float], series: Mapping[str, tuple[Sequence[float],
              Sequence[float] | None]], *, xlabel: str, ylabel: str, title: str, logx: bool = False,
              logy: bool = False, ylim: tuple[float, float] | None = None) -> Path:
    """One panel: a line with error bars (mean +- std) per series.

    Parameters
    ----------
    path : path of the PNG
    x : sequence of float
        Shared x values.
    series : mapping label -> (means, stds or None)
        NaN means are left out (a method that could not run at that x).
    xlabel, ylabel, title : str
    logx, logy : bool
    ylim : (low, high) or None
    """
    fig = _figure(6.0, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    markers = "osD^v<>px*h"
    xs = np.asarray(x, dtype=float)
    for i, (label, (mean, std)) in enumerate(series.items()):
        m = np.asarray(mean, dtype=float)
        s = None if std is None else np.asarray(std, dtype=float)
        ok = np.isfinite(m)
        if not ok.any():
            continue
        # ten colours, then the same colours dashed, then dotted: more than ten methods stay distinguishable
        ax.errorbar(xs[ok], m[ok], yerr=None if s is None else s[ok], label=label, marker=markers[i % len(markers)],
                    color=f"C{i % 10}", linestyle=("-", "--", ":")[(i // 10) % 3], markersize=4, capsize=3,
                    linewidth=1.3)
    if logx:
        ax.set_xscale("log")
    if len(xs) <= 12:  # label the swept values themselves, not a log scale's powers of ten
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{v:g}" for v in xs])
        ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    if len(series) > 4:  # many methods: the legend beside the panel, never over the curves
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    else:
        ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def timing_plot(path: str | os.PathLike[str], L: Sequence[int], dpdpca_s: Sequence[float],
                sequential_s: Sequence[float], *, dpdpca_latency_s: Sequence[float] | None = None,
                sequential_latency_s: Sequence[float] | None = None, latency_ms: float | None = None,
                dpdpca_online_s: Sequence[float] | None = None, title: str) -> Path:
    """Running time against the number of owners (Wang & Chang, Fig. 3).

    Left panel: measured critical path (compute and file transfer), and when
    given, DPDPCA's path with its precomputation moved to set-up (dashed).
    Right panel, when given: the same plus ``latency_ms`` per message on the
    critical path.
    """
    panels = 2 if dpdpca_latency_s is not None and sequential_latency_s is not None else 1
    fig = _figure(5.2 * panels, 4.0)
    data = [(dpdpca_s, sequential_s, "measured (compute + file transfer)")]
    if panels == 2:
        assert dpdpca_latency_s is not None and sequential_latency_s is not None
        data.append((dpdpca_latency_s, sequential_latency_s, f"with {latency_ms:g} ms per message"))
    for i, (ours, seq, label) in enumerate(data, start=1):
        ax = fig.add_subplot(1, panels, i)
        ax.plot(L, ours, marker="o", label="DPDPCA (critical path)")
        ax.plot(L, seq, marker="s", label="PrivateLocalPCA (sequential)")
        if i == 1 and dpdpca_online_s is not None:
            ax.plot(L, dpdpca_online_s, marker="o", linestyle="--", color="C0", alpha=0.6,
                    label="DPDPCA, precompute in set-up")
        if max(L) >= 20 * min(L):
            ax.set_xscale("log")
        ax.set_xticks(list(L))
        ax.set_xticklabels([str(n) for n in L])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel("number of data owners L")
        ax.set_ylabel("running time (s)")
        ax.set_title(label, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def scree_plot(path: Output, private: Sequence[float], nonprivate: Sequence[float], *,
               noise_level: float | None, title: str, ylabel: str = "eigenvalue") -> Path:
    """Released eigenvalues beside the non-private ones, with the noise level marked.

    ``noise_level`` (same units) is drawn as a horizontal line: eigenvalues
    below it are dominated by the DP noise.
    """
    fig = _figure(6.0, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    npv = np.asarray(nonprivate, dtype=float)
    pv = np.asarray(private, dtype=float)
    ax.plot(np.arange(1, len(npv) + 1), npv, marker="o", markersize=3, label="non-private")
    ax.plot(np.arange(1, len(pv) + 1), pv, marker="s", markersize=3, label="released (private)")
    if noise_level is not None and math.isfinite(noise_level) and noise_level > 0:
        ax.axhline(noise_level, color="tab:red", linestyle="--", linewidth=1,
                   label=f"noise level ({noise_level:.3g})")
    positive = np.concatenate([npv[npv > 0], pv[pv > 0]])
    if positive.size and positive.max() / max(positive.min(), 1e-300) > 100:
        ax.set_yscale("log")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("component index")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def component_images(path: Output, private: np.ndarray, nonprivate: np.ndarray,
                     image_shape: tuple[int, int], *, title: str, n_show: int = 5) -> Path:
    """Top components as images: each private one (top row) above the non-private one it matches (bottom row).

    ``private`` is (n_features, k) and ``nonprivate`` (n_features, m) with
    orthonormal columns; give m a little above k so a private component that
    came out of the noise in another place still finds its match.  Each pair
    is matched by absolute cosine with the non-private sign aligned
    (:func:`dpdpca.linalg.match_components`), its ``|cos|`` is printed above
    it, and every image shares one colour scale (its bar on the right).
    """
    from dpdpca.linalg import match_components

    k = min(n_show, private.shape[1])
    P = private[:, :k]
    index, sign, cosine = match_components(P, nonprivate)
    Q = nonprivate[:, index] * sign
    lim = float(max(np.max(np.abs(P)), np.max(np.abs(Q)))) or 1.0
    fig = _figure(1.7 * k + 1.2, 4.0)
    image = None
    for j in range(k):
        for row, (vec, name) in enumerate(((P[:, j], "private"), (Q[:, j], "non-private"))):
            ax = fig.add_subplot(2, k, row * k + j + 1)
            image = ax.imshow(vec.reshape(image_shape), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            if j == 0:
                ax.set_ylabel(name, fontsize=9)
            if row == 0:
                ax.set_title(f"|cos| = {cosine[j]:.2f}\nPC {j + 1}", fontsize=9)
            else:
                ax.set_xlabel(f"PC {int(index[j]) + 1}" + (" (sign flipped)" if sign[j] < 0 else ""), fontsize=8)
    fig.colorbar(image, ax=fig.axes, shrink=0.8, label="component value (one scale for all)")
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def bar_chart(path: Output, labels: Sequence[str], means: Sequence[float],
              stds: Sequence[float], *, ylabel: str, title: str) -> Path:
    """One bar per method with a mean +- std error bar."""
    fig = _figure(max(5.0, 0.8 * len(labels) + 1.5), 4.2)
    ax = fig.add_subplot(1, 1, 1)
    xs = np.arange(len(labels))
    ax.bar(xs, means, yerr=stds, capsize=4, color="tab:blue", alpha=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, path)
