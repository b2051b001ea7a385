"""``dpdpca datasets``: every dataset dpdpca knows, whether it is here, and how to get it."""

from __future__ import annotations

import json

import click

from dpdpca.data.catalog import CATALOG, dataset_status

__all__ = ["datasets_cmd"]


@click.command("datasets")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def datasets_cmd(as_json: bool) -> None:
    """List every dataset: present?, shape, source, and the one command that installs it."""
    rows = [dataset_status(name) for name in CATALOG]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'name':<17}{'present':<9}{'shape':<13}{'install':<48}source")
    for row in rows:
        shape = "x".join(str(n) for n in row["shape"])
        install = row["install"] or "(always available)"
        click.echo(f"{row['name']:<17}{'yes' if row['present'] else 'no':<9}{shape:<13}{install:<48}{row['source']}")
