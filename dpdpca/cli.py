"""The ``dpdpca`` command line.

Commands are registered lazily by import path, so ``dpdpca --help`` stays fast
and each command lives beside the code it drives (``dpdpca/commands``,
``dpdpca/bench``).  Every command runs under :func:`main`, which turns a
:class:`~dpdpca.errors.DpdpcaError` into one line on stderr and exit status 2,
with no traceback.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from dpdpca.errors import DpdpcaError

#: command name -> "module:attribute" of a click command or group.
COMMANDS: dict[str, str] = {
    "run": "dpdpca.commands.protocol:run_cmd",
    "keygen": "dpdpca.commands.protocol:keygen_cmd",
    "owner": "dpdpca.commands.protocol:owner_group",
    "proxy": "dpdpca.commands.protocol:proxy_group",
    "user": "dpdpca.commands.protocol:user_group",
    "compare": "dpdpca.commands.compare:compare_cmd",
    "bench": "dpdpca.bench:bench_group",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module_name, attr = self.lazy[cmd_name].split(":")
            return getattr(importlib.import_module(module_name), attr)
        return super().get_command(ctx, cmd_name)


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
