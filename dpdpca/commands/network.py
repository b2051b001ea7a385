"""The HTTP side of the role commands: ``dpdpca proxy serve``, ``dpdpca user identity``, and the
``--proxy`` options of ``dpdpca owner share`` and ``dpdpca user finish``.

.. code-block:: sh

    dpdpca user identity --out-dir ids                  # ids/user.identity.json (0600), ids/user.verify.json
    dpdpca proxy serve --config proxy.toml
    dpdpca owner share --public public.json --identity ids/a.identity.json --data a.csv \\
        --proxy https://HOST:PORT --ca-cert ca.pem
    dpdpca user finish --private private.json --owner-keys ids/a.verify.json --components 2 --out pcs.npz \\
        --proxy https://HOST:PORT --identity ids/user.identity.json --ca-cert ca.pem

Needs the ``[server]`` extra (``pip install 'dpdpca[server]'``).
"""

from __future__ import annotations

from typing import Any, Callable

import click

from dpdpca.commands.protocol_options import insecure_test_key_option, range_proof_mode_check_option, workers_option

__all__ = ["proxy_serve_cmd", "user_identity_cmd", "proxy_client_options", "client_from_options",
           "transport_from_options"]

_CLIENT_OPTIONS = [
    click.option("--proxy", "proxy_url", default=None,
                 help="Talk to the proxy service at https://HOST:PORT instead of using files."),
    click.option("--ca-cert", default=None, type=click.Path(dir_okay=False),
                 help="With --proxy: PEM file of the CA that signed the proxy's certificate (default: system CAs)."),
    click.option("--token", default=None, envvar="DPDPCA_PROXY_TOKEN",
                 help="With --proxy: bearer token, if the proxy requires one (or env DPDPCA_PROXY_TOKEN)."),
]


def proxy_client_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_CLIENT_OPTIONS):
        fn = opt(fn)
    return fn


def client_from_options(proxy_url: str, identity: Any, ca_cert: str | None, token: str | None, *,
                        user: bool = False) -> Any:
    """A :class:`~dpdpca.net.client.ProxyClient` signing with ``identity`` (an OwnerIdentity)."""
    from dpdpca.net.auth import party_of
    from dpdpca.net.client import ProxyClient

    return ProxyClient(proxy_url, identity, party_of(identity, user=user), token=token, ca_cert=ca_cert)


def transport_from_options(proxy_url: str, identity: Any, ca_cert: str | None, token: str | None, *,
                           user: bool = False) -> Any:
    """A :class:`~dpdpca.net.client.ServiceTransport` to the proxy at ``proxy_url`` (close it after use)."""
    from dpdpca.net.client import ServiceTransport

    return ServiceTransport(client_from_options(proxy_url, identity, ca_cert, token, user=user))


@click.command("serve")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False), help="proxy.toml")
@click.option("--insecure-http", is_flag=True, help="Allow serving without TLS (local experiments only).")
@click.option("--range-proofs/--no-range-proofs", "range_proofs", default=None,
              help="Require a valid range proof with every share (default: protocol.range_proofs of the config, "
                   "false if absent).")
@range_proof_mode_check_option
@workers_option
@insecure_test_key_option("proxy")
def proxy_serve_cmd(config_path: str, insecure_http: bool, range_proofs: bool | None,
                    range_proof_mode: str | None, workers: int, insecure_test_key: bool) -> None:
    """Run the proxy as an HTTPS service: collect signed shares, close at quorum or deadline, release once."""
    import dataclasses

    from dpdpca.net.config import load_config
    from dpdpca.net.serve import serve

    config = load_config(config_path)
    if range_proofs is not None:
        config = dataclasses.replace(config, range_proofs=range_proofs)
    if range_proof_mode is not None:  # the config's protocol.range_proof_mode, overridden
        config = dataclasses.replace(config, range_proof_mode=range_proof_mode)
    if insecure_test_key:  # the operator's consent, as the config's protocol.insecure_test_key = true
        config = dataclasses.replace(config, insecure_test_key=True)
    serve(config, insecure_http=insecure_http, workers=workers)


@click.command("identity")
@click.option("--out-dir", required=True, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing identity.")
def user_identity_cmd(out_dir: str, force: bool) -> None:
    """The data user's Ed25519 identity for the proxy service (the owners' file format, id 'user')."""
    from dpdpca.commands._identity import write_identity
    from dpdpca.net.auth import USER

    write_identity(out_dir, USER, force=force, what="user identity")
