"""The options a user typed, in the library's one-line errors: the CLI boundary's one mapping.

The library names its parameters as its functions do: ``dpdpca run --owners 31`` on 30 rows reaches
:func:`~dpdpca.data.partition`, which says ``n_sites must be <= the number of rows (30), got 31``.  A command
wrapped in :func:`cli_names` says ``--owners must be <= the number of rows (30), got 31`` instead: an error
whose message starts with a library parameter of :data:`LIBRARY_PARAMETERS` that one of the command's own
options sets starts with that option; the rest of the line (constraint, value) is the library's.  A parameter
no option of the command sets (a config key, a file's field) keeps its name.  :mod:`dpdpca.cli` wraps every
command of the tree (the benchmarks' too) as it hands it out (:class:`~dpdpca._lazy.LazyGroup`'s ``wrap``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import click

from dpdpca.errors import DpdpcaError

__all__ = ["LIBRARY_PARAMETERS", "cli_names", "cli_message"]

#: A library parameter (as its one-line errors begin) -> the options that set it, the first the command has wins
#: (``n_sites`` is ``--sites`` in compare and tensor, ``--owners`` in run).  Names that also begin other
#: sentences (``release must keep the ledger ...``, ``data file ...``) are left out.
LIBRARY_PARAMETERS: dict[str, tuple[str, ...]] = {
    "n_sites": ("--sites", "--owners"),
    "owners": ("--owners",),
    "n_components": ("--components",),
    "components": ("--components",),
    "n_features": ("--dim", "--features"),
    "features": ("--features",),
    "sizes": ("--site-size",),
    "samples_per_site": ("--samples-per-site",),
    "quorum": ("--quorum",),
    "honest_owners": ("--honest-owners",),
    "max_owners": ("--max-owners",),
    "max_rows_per_owner": ("--max-rows-per-owner",),
    "key bits": ("--key-bits",),
    "bits": ("--key-bits",),
    "frac_bits": ("--frac-bits",),
    "kappa": ("--kappa",),
    "epsilon": ("--epsilon",),
    "delta": ("--delta",),
    "min_epsilon": ("--min-epsilon",),
    "min_delta": ("--min-delta",),
    "budget_epsilon": ("--budget-epsilon",),
    "budget_delta": ("--budget-delta",),
    "noise_by": ("--noise-by",),
    "noise_lattice": ("--noise-lattice",),
    "sensitivity_mode": ("--sensitivity-mode",),
    "calibration": ("--calibration",),
    "cape_variances": ("--cape-variances",),
    "runs": ("--runs",),
    "noise_variance": ("--noise-variance",),
    "words_per_document": ("--words-per-document",),
    "budget_split": ("--budget-split",),
}

#: Longest first: ``key bits`` before ``bits``.
_BY_LENGTH = sorted(LIBRARY_PARAMETERS, key=len, reverse=True)


def cli_message(message: str, options: set[str]) -> str:
    """``message`` with its leading library parameter replaced by the option of ``options`` that sets it.

    >>> cli_message("n_sites must be <= the number of rows (30), got 31", {"--owners", "--components"})
    '--owners must be <= the number of rows (30), got 31'
    >>> cli_message("n_sites must be >= 1, got 0", {"--sites", "--owners"})
    '--sites must be >= 1, got 0'
    >>> cli_message("release must keep the ledger", {"--release"})
    'release must keep the ledger'
    """
    for name in _BY_LENGTH:
        if message.startswith(name + " must "):
            option = next((o for o in LIBRARY_PARAMETERS[name] if o in options), None)
            return message if option is None else option + message[len(name):]
    return message


F = TypeVar("F", bound=Callable[..., Any])


def cli_names(callback: F) -> F:
    """Wrap a click command's callback: its one-line errors name the command's options (:func:`cli_message`).

    Put it directly above the ``def`` (below the click decorators).  The error keeps its class and attributes;
    only its message changes.
    """
    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except DpdpcaError as exc:
            ctx = click.get_current_context(silent=True)
            if ctx is not None and len(exc.args) == 1 and isinstance(exc.args[0], str):
                options = {opt for param in ctx.command.params for opt in param.opts if opt.startswith("--")}
                exc.args = (cli_message(exc.args[0], options),)
            raise

    return wrapper  # type: ignore[return-value]
