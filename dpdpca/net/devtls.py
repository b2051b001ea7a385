"""A throwaway CA and a server certificate for testing the proxy service: ``dpdpca proxy init --dev-tls``.

FOR TESTING ONLY.  The CA's private key is never written anywhere (it signs
one certificate and is dropped), so nobody can issue another certificate
under it; the files carry that warning in their first line.  An
organisation's own CA is the production path (docs/network.md shows the
openssl commands).

Uses ``cryptography`` (part of the ``[server]`` extra).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from dpdpca._io import ReservedOutput
from dpdpca.errors import MissingDependencyError, ParameterError

__all__ = ["TEST_ONLY_BANNER", "DevTLS", "check_host", "write_dev_tls"]

#: First line of every file --dev-tls writes (PEM readers skip text outside the BEGIN/END blocks).
TEST_ONLY_BANNER = ("# dpdpca proxy init --dev-tls: THROWAWAY TEST CERTIFICATE, NOT FOR PRODUCTION "
                    "(use your organisation's CA; see docs/network.md)\n")


@dataclass(frozen=True)
class DevTLS:
    """The files written: the CA certificate the clients pass as ``--ca-cert``, the server's chain and key."""

    ca_cert: Path
    cert: Path
    key: Path


def check_host(host: str) -> str:
    """``host`` if it is an IP address or a DNS name (what a certificate can name); ParameterError otherwise."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    label = host.rstrip(".")
    if not label or len(label) > 253 or any(not part or len(part) > 63 or not all(c.isalnum() or c == "-"
                                                                                   for c in part)
                                             for part in label.split(".")):
        raise ParameterError(f"--host must be an IP address or a DNS name, got {host!r:.80}")
    return label


def _host_name(host: str) -> tuple[object, str]:
    """The subject-alternative name of ``host``: an IP address entry for an IP, a DNS entry otherwise."""
    from cryptography import x509

    name = check_host(host)
    try:
        return x509.IPAddress(ipaddress.ip_address(name)), name
    except ValueError:
        return x509.DNSName(name), name


def write_dev_tls(out_dir: str | os.PathLike[str], host: str, *, days: int = 30,
                  what: str = "dev TLS file") -> DevTLS:
    """Write ``ca.pem``, ``server.pem`` (leaf then CA) and ``server.key`` (mode 0600) for ``host``.

    All three are reserved (:class:`~dpdpca._io.ReservedOutput`) before any is
    written: where one cannot be written, none is.

    Parameters
    ----------
    out_dir : path
    host : str
        The address the owners and the user will connect to: an IP address
        (an IP subject-alternative name) or a DNS name.
    days : int
        Validity of both certificates.
    what : str
        The files' name in errors (``proxy init`` passes ``"--out-dir"``).

    Raises
    ------
    MissingDependencyError
        ``cryptography`` is absent.
    ParameterError
        ``host`` is neither an IP address nor a DNS name.
    FileAccessError
        One of the files cannot be written (then none is).
    """
    try:
        import cryptography  # noqa: F401 - whether it is installed; _dev_tls_pems uses it
    except ImportError:
        raise MissingDependencyError("--dev-tls needs the 'cryptography' package: pip install 'dpdpca[server]'") \
            from None
    san, name = _host_name(host)
    out = Path(out_dir)
    files = DevTLS(out / "ca.pem", out / "server.pem", out / "server.key")
    with contextlib.ExitStack() as stack:
        ca_out, cert_out, key_out = (stack.enter_context(ReservedOutput(path, mode=mode, what=what)) for path, mode
                                     in ((files.ca_cert, 0o644), (files.cert, 0o644), (files.key, 0o600)))
        ca_pem, cert_pem, key_pem = _dev_tls_pems(san, name, days)
        ca_out.write(ca_pem)
        cert_out.write(cert_pem)
        key_out.write(key_pem)
    return files


def _dev_tls_pems(san: object, name: str, days: int) -> tuple[bytes, bytes, bytes]:
    """The PEM bytes of ``ca.pem``, ``server.pem`` and ``server.key`` (each after the test-only banner)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = _dt.datetime.now(_dt.timezone.utc)
    not_before, not_after = now - _dt.timedelta(minutes=5), now + _dt.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())  # never written: the CA dies with this process
    ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dpdpca TEST ONLY"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "dpdpca throwaway test CA (not for production)")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_before).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dpdpca TEST ONLY"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName([san]), critical=False)  # type: ignore[list-item]
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    banner = TEST_ONLY_BANNER.encode()
    return (banner + ca_cert.public_bytes(pem),
            banner + leaf.public_bytes(pem) + ca_cert.public_bytes(pem),
            banner + key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
