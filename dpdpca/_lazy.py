"""A click group whose subcommands are imported on first use (shared by ``cli`` and ``bench``).

Its own module so that ``dpdpca.bench`` need not import ``dpdpca.cli`` (nothing
imports the command line; see ``docs/architecture.md``).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import click

__all__ = ["LazyGroup"]


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use.

    ``wrap``: applied once to the callback of every command the group hands
    out, and of every command below it (its own groups' commands; a lazy
    group below gets the same ``wrap``), so one decorator serves the whole
    tree (the command line's :func:`~dpdpca.commands.names.cli_names`).
    """

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None,
                 wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})
        self.wrap = wrap

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            module_name, attr = self.lazy[cmd_name].split(":")
            cmd: click.Command | None = getattr(importlib.import_module(module_name), attr)
        else:
            cmd = super().get_command(ctx, cmd_name)
        if cmd is not None and self.wrap is not None:
            _wrap_tree(cmd, self.wrap)
        return cmd


def _wrap_tree(cmd: click.Command, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """``wrap`` on the callback of ``cmd`` and of every command below it, once each (marked on the command)."""
    if getattr(cmd, "_dpdpca_wrapped", False):
        return
    if isinstance(cmd, LazyGroup):
        cmd.wrap = cmd.wrap or wrap  # its commands are wrapped as it hands them out
    elif isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _wrap_tree(sub, wrap)
    if cmd.callback is not None:
        cmd.callback = wrap(cmd.callback)
    cmd._dpdpca_wrapped = True  # type: ignore[attr-defined]
