"""Writing a party's identity pair: ``<id>.identity.json`` (mode 0600) and ``<id>.verify.json``."""

from __future__ import annotations

from pathlib import Path

import click

from dpdpca.errors import FileAccessError


def write_identity(out_dir: str, party_id: str, *, force: bool, what: str) -> None:
    """Generate an Ed25519 identity for ``party_id``, write both files, echo the verify key.

    Raises
    ------
    FileAccessError
        An output file exists and ``force`` is False.
    """
    from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

    ident_path, verify_path = Path(out_dir) / f"{party_id}.identity.json", Path(out_dir) / f"{party_id}.verify.json"
    existing = [str(t) for t in (ident_path, verify_path) if t.exists()]
    if existing and not force:
        raise FileAccessError(f"{what} output must not exist (pass --force to overwrite), got {existing[0]!r}")
    identity = OwnerIdentity.generate(party_id)
    identity.save(ident_path, overwrite=force)
    OwnerKeyring.from_identities([identity]).save(verify_path, overwrite=force)
    click.echo(f"wrote {ident_path} (mode 0600) and {verify_path}; verify key {identity.verify_key_b64}")
