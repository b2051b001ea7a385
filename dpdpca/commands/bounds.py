"""``dpdpca bounds template``: a per-feature bounds file for the data owner to fill in from public knowledge.

.. code-block:: sh

    dpdpca bounds template --data my.csv --out bounds.csv   # one empty row per column of my.csv
    # fill in lo and hi from public knowledge, then:
    dpdpca run --data my.csv --feature-bounds-file bounds.csv

The template is made from the data file's header alone (its column names, or
its column count): no value of the data is read, so nothing of it can leak
into the bounds.
"""

from __future__ import annotations

from pathlib import Path

import click

from dpdpca._io import atomic_write_bytes
from dpdpca.errors import FileAccessError

__all__ = ["bounds_group"]


@click.group("bounds")
def bounds_group() -> None:
    """Public per-feature bounds: a template to fill in (rows are then scaled by them, not clipped)."""


@bounds_group.command("template")
@click.option("--data", "data_file", required=True, type=click.Path(dir_okay=False),
              help="The data file (.csv, .npy or .parquet); only its header is read.")
@click.option("--out", "out_path", default="bounds.csv", show_default=True, type=click.Path(dir_okay=False),
              help="Where to write the template (CSV: a 'feature,lo,hi' header, one row per column).")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def bounds_template_cmd(data_file: str, out_path: str, force: bool) -> None:
    """Write a bounds file with one empty row per column of DATA, for the owner to fill in (never from the data)."""
    from dpdpca.data import bounds_template, column_names

    if Path(out_path).exists() and not force:
        raise FileAccessError(f"--out must not exist (pass --force to overwrite), got {out_path!r}")
    names = column_names(data_file)
    atomic_write_bytes(out_path, bounds_template(names, data_name=Path(data_file).name).encode())
    click.echo(f"wrote {out_path}: {len(names)} features, lo and hi empty; fill them in from public knowledge, then "
               f"pass --feature-bounds-file {out_path}")
