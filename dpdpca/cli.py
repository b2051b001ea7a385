"""The ``dpdpca`` command line.

Commands are registered lazily by import path, so ``dpdpca --help`` stays fast
and each command lives beside the code it drives (``dpdpca/commands``,
``dpdpca/bench``).  Every command runs under :func:`main`, which turns a
:class:`~dpdpca.errors.DpdpcaError` into one line on stderr and exit status 2,
with no traceback.
"""

from __future__ import annotations

import sys
import traceback

import click

from dpdpca._lazy import LazyGroup
from dpdpca.commands.names import cli_names
from dpdpca.errors import DpdpcaError

#: command name -> "module:attribute" of a click command or group.
COMMANDS: dict[str, str] = {
    "run": "dpdpca.commands.run:run_cmd",
    "keygen": "dpdpca.commands.roles:keygen_cmd",
    "owner": "dpdpca.commands.roles:owner_group",
    "proxy": "dpdpca.commands.roles:proxy_group",
    "user": "dpdpca.commands.roles:user_group",
    "compare": "dpdpca.commands.compare:compare_cmd",
    "tensor": "dpdpca.commands.tensor:tensor_cmd",
    "datasets": "dpdpca.commands.datasets:datasets_cmd",
    "bounds": "dpdpca.commands.bounds:bounds_group",
    "bench": "dpdpca.bench:bench_group",
}


#: Set by ``--debug``: show the traceback of a DpdpcaError above its one-line message.
_DEBUG = False
#: click's "no arguments: show the help" (a UsageError since click 8.2), shown as click shows it.
_HELP_ERRORS: tuple[type[click.ClickException], ...] = tuple(
    t for t in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if t is not None)


# Every command's one-line errors name its options, not the library's parameters (cli_names, on the whole tree).
@click.group(cls=LazyGroup, lazy=COMMANDS, wrap=cli_names, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dpdpca")
@click.option("--debug", is_flag=True, help="Show the traceback of an error as well as its one-line message.")
def cli(debug: bool) -> None:
    """Privacy-preserving distributed PCA (Wang-Chang DPDPCA and DP baselines)."""
    global _DEBUG
    _DEBUG = bool(debug)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: one-line errors, exit status 2, no traceback.

    Only :class:`~dpdpca.errors.DpdpcaError` is turned into a line (file errors
    dpdpca raises itself are ``FileAccessError``, a subclass): anything else is
    a bug and keeps its traceback.  ``dpdpca --debug ...`` also prints the
    traceback of a DpdpcaError.
    """
    global _DEBUG
    _DEBUG = False
    try:
        cli.main(args=argv, prog_name="dpdpca", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("dpdpca: aborted", err=True)
        return 130
    except _HELP_ERRORS as exc:  # ``dpdpca`` alone, or a group without its command: the help, as click shows it
        exc.show()
        return exc.exit_code
    except click.UsageError as exc:  # a bad option or value: one line, as every other refusal (not click's usage block)
        message = " ".join(exc.format_message().split())
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"dpdpca: error: {message}{where}", err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except DpdpcaError as exc:
        if _DEBUG:
            traceback.print_exc()
        message = " ".join(str(exc).split())  # one line, whatever the message holds
        click.echo(f"dpdpca: error: {message}", err=True)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
