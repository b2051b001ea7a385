"""Writing a party's identity pair: ``<id>.identity.json`` (mode 0600) and ``<id>.verify.json``."""

from __future__ import annotations

from pathlib import Path

import click

from dpdpca._io import ReservedOutput
from dpdpca.errors import FileAccessError


def write_identity(out_dir: str, party_id: str, *, force: bool, what: str) -> None:
    """Generate an Ed25519 identity for ``party_id``, write both files, echo the verify key.

    Raises
    ------
    FileAccessError
        An output file exists and ``force`` is False, or one cannot be written (then neither is).
    """
    from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

    ident_path, verify_path = Path(out_dir) / f"{party_id}.identity.json", Path(out_dir) / f"{party_id}.verify.json"
    existing = [str(t) for t in (ident_path, verify_path) if t.exists()]
    if existing and not force:
        raise FileAccessError(f"{what} output must not exist (pass --force to overwrite), got {existing[0]!r}")
    # both reserved before either is written: an --out-dir where one cannot be written leaves neither
    with ReservedOutput(ident_path, mode=0o600, exclusive=not force, what="--out-dir") as ident_out, \
            ReservedOutput(verify_path, exclusive=not force, what="--out-dir") as verify_out:
        identity = OwnerIdentity.generate(party_id)
        ident_out.write_json(identity.to_json())  # the files OwnerIdentity.save and OwnerKeyring.save write
        verify_out.write_json(OwnerKeyring.from_identities([identity]).to_json())
    click.echo(f"wrote {ident_path} (mode 0600) and {verify_path}; verify key {identity.verify_key_b64}")
