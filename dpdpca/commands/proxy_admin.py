"""``dpdpca proxy init`` and ``dpdpca proxy status``: setting up a proxy service in one step, and watching it.

.. code-block:: sh

    dpdpca proxy init --out-dir proxy --host 10.0.0.5 --owners-dir ids --public keys/public.json --dev-tls
    dpdpca proxy serve --config proxy/proxy.toml
    dpdpca proxy status --proxy https://10.0.0.5:8443 --ca-cert proxy/ca.pem

``init`` writes a commented ``proxy.toml`` naming every owner verify key
found in ``--owners-dir`` (``*.verify.json``; the data user's
``user.verify.json`` there, or ``--user-key``, becomes ``[user]``) and the
data user's ``public.json``; with ``--dev-tls`` also a throwaway CA and a
server certificate for ``--host`` (:mod:`dpdpca.net.devtls`), for testing
only.  ``status`` reads the service's public session summary
(``/v1/session``: what the status page at ``/`` shows).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from dpdpca._io import ReservedOutput
from dpdpca.commands.protocol_options import insecure_test_key_option, load_public
from dpdpca.errors import DpdpcaError, FileAccessError, ParameterError
from dpdpca.net.config import MAX_COLLECTION_SECONDS

__all__ = ["format_session", "proxy_init_cmd", "proxy_status_cmd"]


def _rel(path: Path, base: Path) -> str:
    """``path`` as proxy.toml names it: relative to the file's directory (so the directory can move whole)."""
    return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@click.command("init")
@click.option("--out-dir", required=True, type=click.Path(file_okay=False),
              help="Writes proxy.toml here (and, with --dev-tls, ca.pem, server.pem, server.key).")
@click.option("--host", required=True, help="The IP address or DNS name owners and the user will connect to.")
@click.option("--port", default=8443, show_default=True, type=click.IntRange(1, 65535))
@click.option("--owners-dir", default=None, type=click.Path(file_okay=False, exists=True),
              help="Directory of the owners' *.verify.json files (from 'dpdpca owner keygen').")
@click.option("--owner-keys", "owner_keys", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="An owner's verify-key file (repeatable; with or instead of --owners-dir).")
@click.option("--user-key", default=None, type=click.Path(dir_okay=False, exists=True),
              help="The data user's user.verify.json (default: the one in --owners-dir).")
@click.option("--public", "public_path", default=None, type=click.Path(dir_okay=False, exists=True),
              help="The data user's public.json (from 'dpdpca keygen').")
@click.option("--quorum", default=None, type=int, help="Shares that close the collection (default: every owner).")
@click.option("--collection-seconds", default=3600.0, show_default=True, type=float,
              help=f"Deadline of the collection, from the service's first start (at most "
                   f"{MAX_COLLECTION_SECONDS:.0f}, a year).")
@click.option("--epsilon", default=1.0, show_default=True, type=float)
@click.option("--delta", default=1e-5, show_default=True, type=float)
@click.option("--dev-tls", is_flag=True,
              help="Also write a THROWAWAY test CA and a server certificate for --host (testing only).")
@click.option("--force", is_flag=True, help="Overwrite existing files.")
@insecure_test_key_option("proxy")
def proxy_init_cmd(out_dir: str, host: str, port: int, owners_dir: str | None, owner_keys: tuple[str, ...],
                   user_key: str | None, public_path: str | None, quorum: int | None, collection_seconds: float,
                   epsilon: float, delta: float, dev_tls: bool, force: bool, insecure_test_key: bool) -> None:
    """Write a commented proxy.toml listing the owners' verify keys and the data user's key (and test TLS).

    A --public key below 2048 bits is refused (as proxy serve would refuse it) unless --insecure-test-key is
    given; then the config says protocol.insecure_test_key = true.
    """
    from dpdpca.net.auth import USER
    from dpdpca.net.devtls import check_host
    from dpdpca.protocol.identity import OwnerKeyring
    from dpdpca.protocol.config import ReleaseOptions

    ReleaseOptions(epsilon=epsilon, delta=delta)  # the privacy setting, validated where it always is
    host = check_host(host)
    if not 0 < collection_seconds <= MAX_COLLECTION_SECONDS:
        raise ParameterError(f"--collection-seconds must be in (0, {MAX_COLLECTION_SECONDS:.0f}] (a year), got "
                             f"{collection_seconds}")
    out = Path(out_dir)
    targets = [out / "proxy.toml"] + ([out / "ca.pem", out / "server.pem", out / "server.key"] if dev_tls else [])
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        raise FileAccessError(f"proxy init output must not exist (pass --force to overwrite), got {existing[0]!r}")
    found = sorted(Path(owners_dir).glob("*.verify.json")) if owners_dir else []
    owners: dict[str, Path] = {}
    user_file = Path(user_key) if user_key else None
    for path in [*found, *map(Path, owner_keys)]:
        ids = list(OwnerKeyring.load([path]))
        if ids == [USER] and user_key is None:
            user_file = path
        elif USER not in ids:
            for oid in ids:
                owners[oid] = path
    if user_key is not None:  # the data user's own verify key, as proxy serve will read it from [user]
        try:
            ids = list(OwnerKeyring.load([user_key]))
        except DpdpcaError as exc:
            raise ParameterError(f"--user-key must be the data user's verify-key file (user.verify.json from dpdpca "
                                 f"user identity), got: {exc}") from None
        if ids != [USER]:
            raise ParameterError(f"--user-key must be the data user's verify-key file (user.verify.json from dpdpca "
                                 f"user identity, id {USER!r}), got {user_key!r} with ids {ids[:8]}")
    if not owners:
        raise ParameterError(f"--owners-dir or --owner-keys must name at least one owner's verify key "
                             f"(*.verify.json from dpdpca owner keygen), got none in {owners_dir!r}")
    if quorum is not None and not 1 <= quorum <= len(owners):
        raise ParameterError(f"--quorum must be in [1, {len(owners)}] (the owners found), got {quorum}")
    if public_path is not None:  # the check proxy serve makes at start, made here while the config is written
        max_owners = load_public(public_path, insecure_test_key=insecure_test_key).max_owners
        if (quorum or len(owners)) > max_owners:
            raise ParameterError(f"--quorum must be <= max_owners={max_owners} of --public (no more shares fit the "
                                 f"slots; the default is every owner found, {len(owners)}), got "
                                 f"{quorum or len(owners)}")
    # proxy.toml is reserved before the TLS files are made (and those before any is written): an --out-dir where
    # one cannot be written is refused with none written (the click context removes the reservation)
    config = click.get_current_context().with_resource(ReservedOutput(out / "proxy.toml", what="--out-dir"))
    tls = None
    if dev_tls:
        from dpdpca.net.devtls import write_dev_tls

        tls = write_dev_tls(out, host, what="--out-dir")
    files = sorted({_rel(p, out) for p in owners.values()})
    lines = [
        "# proxy.toml for 'dpdpca proxy serve --config THIS_FILE' (written by dpdpca proxy init).",
        "# Relative paths are read from this file's directory. Format: docs/network.md.",
        "",
        "[server]",
        f"host = {_toml_str(host)}",
        f"port = {port}",
    ]
    if tls is not None:
        lines += ["# TESTING ONLY: a throwaway CA (its key was never written) signed this certificate.",
                  "# Give ca.pem to the owners and the user (--ca-cert). For real use, your organisation's CA:",
                  "# see docs/network.md.",
                  f"tls_cert = {_toml_str(_rel(tls.cert, out))}",
                  f"tls_key = {_toml_str(_rel(tls.key, out))}        # mode 0600"]
    else:
        lines += ["# The certificate chain and key of this host, from your organisation's CA (docs/network.md);",
                  "# or run 'dpdpca proxy init --dev-tls' for a throwaway test certificate.",
                  '# tls_cert = "server.pem"',
                  '# tls_key = "server.key"']
    lines += [
        'state_dir = "proxy-state"      # accepted shares and the release, written atomically',
        "",
        "[protocol]",
        "# The data user's public parameters (dpdpca keygen)." + ("" if public_path else " Copy them here."),
        f"public = {_toml_str(_rel(Path(public_path), out) if public_path else 'public.json')}",
        f"# {len(owners)} owners found: {', '.join(sorted(owners))}",
        "owner_keys = [" + ", ".join(_toml_str(f) for f in files) + "]",
        f"quorum = {quorum if quorum is not None else len(owners)}"
        "                     # close as soon as this many shares arrived",
        "min_shares = 1                 # shares needed when the deadline closes the collection",
        f"collection_seconds = {collection_seconds:g}      # deadline, from the service's first start",
        'release = "on-close"           # finish when the collection closes; or "on-request"',
        f"epsilon = {epsilon!r}",
        f"delta = {delta!r}",
        'release_mode = "add-remove"    # the default release, as dpdpca run; "centred": the paper\'s',
        *(["# TESTING ONLY (proxy init --insecure-test-key): accept a data-user key below 2048 bits that the",
           "# public parameters declare a test key (dpdpca keygen --insecure-test-key).",
           "insecure_test_key = true"] if insecure_test_key else []),
        "",
        "[user]",
        "# The data user's verify key (dpdpca user identity)." + ("" if user_file else " Copy it here."),
        f"verify_keys = {_toml_str(_rel(user_file, out) if user_file else 'user.verify.json')}",
        "",
    ]
    config.write("\n".join(lines).encode())
    click.echo(f"wrote {out / 'proxy.toml'}: {len(owners)} owners ({', '.join(sorted(owners))}), quorum "
               f"{quorum if quorum is not None else len(owners)}, user key "
               f"{user_file if user_file else 'MISSING (copy user.verify.json there)'}, public parameters "
               f"{public_path if public_path else 'MISSING (copy public.json there)'}")
    if tls is not None:
        click.echo(f"wrote {tls.ca_cert}, {tls.cert} and {tls.key} (mode 0600) for {host}: a THROWAWAY test "
                   f"CA, NOT FOR PRODUCTION; clients pass --ca-cert {tls.ca_cert}")
    click.echo(f"start it with: dpdpca proxy serve --config {out / 'proxy.toml'}")


def format_session(s: dict[str, Any]) -> str:
    """The session summary (``/v1/session``) as ``dpdpca proxy status`` prints it."""
    import datetime as _dt

    deadline = _dt.datetime.fromtimestamp(float(s["deadline_unix"]), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    budget = s.get("budget") or {}
    lines = [
        f"session {s['session']}: phase {s['phase']}",
        f"quorum {s['quorum']} of {len(s['owners_expected'])} owners (min_shares {s['min_shares']}); deadline "
        f"{deadline} UTC" + (f" ({s['seconds_left']:.0f} s left)" if s["phase"] == "collecting" else ""),
        f"accepted ({len(s['owners_accepted'])}): {', '.join(s['owners_accepted']) or 'none'}",
        f"still expected ({len(s['owners_missing'])}): {', '.join(s['owners_missing']) or 'none'}",
        f"release: {s['release']['state']} ({s['release']['mode']}, made {s['release']['when']})",
        f"budget used: epsilon {budget.get('epsilon_spent', 0):g}, delta {budget.get('delta_spent', 0):g} "
        f"(this session's release: epsilon {budget.get('epsilon', 0):g}, delta {budget.get('delta', 0):g})",
    ]
    service = budget.get("service")
    if service:
        lines.append(f"service budget: epsilon {service['epsilon_spent']:.4g} of {service['epsilon']}, delta "
                     f"{service['delta_spent']:.3g} of {service['delta']} over {service['releases']} release(s)")
    return "\n".join(lines)


@click.command("status")
@click.option("--proxy", "proxy_url", required=True, help="The proxy service, https://HOST:PORT.")
@click.option("--ca-cert", default=None, type=click.Path(dir_okay=False),
              help="PEM file of the CA that signed the proxy's certificate (default: system CAs).")
@click.option("--json", "as_json", is_flag=True, help="Print the session as one JSON object.")
def proxy_status_cmd(proxy_url: str, ca_cert: str | None, as_json: bool) -> None:
    """The running proxy's session: quorum, deadline, owners accepted and still expected, release, budget used."""
    import json

    from dpdpca.net.client import public_session

    session = public_session(proxy_url, ca_cert=ca_cert)
    click.echo(json.dumps(session, sort_keys=True) if as_json else format_session(session))
