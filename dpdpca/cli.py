"""The ``dpdpca`` command line.

Commands are registered lazily by import path, so ``dpdpca --help`` stays fast
and each command lives beside the code it drives (``dpdpca/commands``,
``dpdpca/bench``).  Every command runs under :func:`main`, which turns a
:class:`~dpdpca.errors.DpdpcaError` into one line on stderr and exit status 2,
with no traceback.
"""

from __future__ import annotations

import sys

import click

from dpdpca._lazy import LazyGroup
from dpdpca.errors import DpdpcaError

#: command name -> "module:attribute" of a click command or group.
COMMANDS: dict[str, str] = {
    "run": "dpdpca.commands.protocol:run_cmd",
    "keygen": "dpdpca.commands.protocol:keygen_cmd",
    "owner": "dpdpca.commands.protocol:owner_group",
    "proxy": "dpdpca.commands.protocol:proxy_group",
    "user": "dpdpca.commands.protocol:user_group",
    "compare": "dpdpca.commands.compare:compare_cmd",
    "tensor": "dpdpca.commands.tensor:tensor_cmd",
    "datasets": "dpdpca.commands.datasets:datasets_cmd",
    "bench": "dpdpca.bench:bench_group",
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpdpca")
def cli() -> None:
    """Privacy-preserving distributed PCA (Wang-Chang DPDPCA and DP baselines)."""


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: one-line errors, non-zero exit, no traceback."""
    try:
        cli.main(args=argv, prog_name="dpdpca", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("dpdpca: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except DpdpcaError as exc:
        click.echo(f"dpdpca: error: {exc}", err=True)
        return 2
    except (OSError, ValueError) as exc:  # unreadable files, malformed numbers in user files
        click.echo(f"dpdpca: error: {exc}", err=True)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
