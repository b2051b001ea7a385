"""Command-line options shared by ``run``, ``compare`` and the role commands: release, bounds, ledger.

* ``--release add-remove|centred``, ``--noise-by proxy|owners``,
  ``--honest-owners t`` (:mod:`dpdpca.dp.release`, :mod:`dpdpca.dp.distributed`);
* ``--feature-bounds LO HI`` / ``--feature-bounds-file FILE``
  (:mod:`dpdpca.data.bounds`); a named dataset with public bounds uses them
  unless ``--no-feature-bounds``;
* ``--ledger FILE`` with ``--budget-epsilon`` / ``--budget-delta``
  (:class:`dpdpca.dp.PrivacyLedger`).
"""

from __future__ import annotations

from typing import Any, Callable

import click
import numpy as np

from dpdpca.dp import NOISE_BY, RELEASES

__all__ = ["release_options", "bounds_options", "ledger_options", "apply_feature_bounds", "open_ledger"]


def _stack(opts: list[Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed(opts):
            fn = opt(fn)
        return fn
    return deco


release_options = _stack([
    click.option("--release", type=click.Choice(RELEASES), default=None,
                 help="add-remove (default): noisy R, v, N under add/remove-one, centred by the user; centred: "
                      "the paper's S-bar + G' under replace-one (default with --sensitivity-mode paper)."),
    click.option("--noise-by", type=click.Choice(NOISE_BY), default="proxy", show_default=True,
                 help="owners: each owner adds its share of the noise before encrypting (DP even if the proxy "
                      "colludes with the data user); needs --release add-remove."),
    click.option("--honest-owners", type=int, default=None,
                 help="t: with --noise-by owners, the noise of any t honest owners alone gives (epsilon, delta) "
                      "(default: every owner)."),
])

bounds_options = _stack([
    click.option("--feature-bounds", type=(float, float), default=None, metavar="LO HI",
                 help="Public bounds of every feature: rows are mapped into the unit ball by them (no row clipped)."),
    click.option("--feature-bounds-file", type=click.Path(dir_okay=False), default=None,
                 help="Per-feature public bounds: JSON {\"lo\": [...], \"hi\": [...]} or a CSV of two rows."),
    click.option("--no-feature-bounds", is_flag=True,
                 help="Ignore a named dataset's public bounds (clip every row to norm 1 instead)."),
])

ledger_options = _stack([
    click.option("--ledger", "ledger_path", type=click.Path(dir_okay=False), default=None,
                 help="Privacy ledger of this dataset (JSON): every release is recorded and composed (RDP); a "
                      "release past the declared budget is refused before it runs."),
    click.option("--budget-epsilon", type=float, default=None, help="Declare the ledger's total epsilon."),
    click.option("--budget-delta", type=float, default=None, help="Declare the ledger's total delta."),
])


def apply_feature_bounds(X: np.ndarray, *, dataset_bounds: Any, feature_bounds: Any, bounds_file: str | None,
                         no_feature_bounds: bool) -> tuple[np.ndarray, dict[str, Any] | None]:
    """Scale X by the public bounds chosen on the command line; return it and a report (None: no bounds).

    Raises
    ------
    ParameterError
        Both ``--feature-bounds`` and ``--feature-bounds-file``.
    """
    from dpdpca.data import FeatureBounds, load_bounds_file, scale_by_bounds
    from dpdpca.errors import ParameterError

    if feature_bounds is not None and bounds_file is not None:
        raise ParameterError("--feature-bounds and --feature-bounds-file are exclusive, got both")
    if bounds_file is not None:
        bounds, source = load_bounds_file(bounds_file), str(bounds_file)
    elif feature_bounds is not None:
        bounds, source = FeatureBounds(*feature_bounds), "--feature-bounds"
    elif dataset_bounds is not None and not no_feature_bounds:
        bounds, source = FeatureBounds(*dataset_bounds), "the dataset's public bounds"
    else:
        return X, None
    Y, outside = scale_by_bounds(X, bounds)
    lo, hi = bounds.arrays(X.shape[1])
    return Y, {"source": source, "lo": float(lo.min()), "hi": float(hi.max()), "rows_out_of_bounds": outside}


def open_ledger(path: str | None, budget_epsilon: float | None, budget_delta: float | None) -> Any:
    """The :class:`~dpdpca.dp.PrivacyLedger` at ``path`` (None without ``--ledger``), checked writable.

    Its lock is taken and released once here, so a ``--ledger`` that cannot be
    written (under a file, in a directory that cannot be made) is refused in
    one line before the command's work, and a refused command leaves no
    directory or lock file behind (:func:`dpdpca._io.exclusive_lock`).
    """
    from dpdpca._io import check_output_path
    from dpdpca.dp import PrivacyLedger
    from dpdpca.errors import ParameterError

    if path is None:
        if budget_epsilon is not None or budget_delta is not None:
            raise ParameterError("--budget-epsilon/--budget-delta must come with --ledger, got no ledger")
        return None
    check_output_path(path, "--ledger")
    ledger = PrivacyLedger(path, budget_epsilon=budget_epsilon, budget_delta=budget_delta, what="--ledger")
    with ledger.transaction():
        pass
    return ledger
