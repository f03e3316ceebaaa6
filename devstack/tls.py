"""A throwaway certificate authority for the local Kafka's TLS listeners.

``ensure(directory)`` writes, once, into ``.devstack/kafka/tls/``:

- ``ca.pem``: the CA certificate (what a client trusts; the broker's trust store
  for client certificates too);
- ``server.pem``: the broker's private key (PKCS#8, unencrypted) and its
  certificate chain, for 127.0.0.1 and localhost (subjectAltName IP and DNS),
  read by Kafka as an ``ssl.keystore.type=PEM`` key store (no keytool, no JKS);
- ``client.pem`` and ``client.key``: a client certificate (CN ``redstring``)
  and its key, for the listener that requires client authentication.

The CA's own key is never written: to renew, everything is generated again
(at the next ``up`` after a file went missing or a certificate comes within
30 days of its end). Keys are written with mode 0600; ``.devstack/`` is gitignored.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack.errors import DevstackError

VALID_DAYS = 3650
RENEW_DAYS = 30
SERVER_NAMES = ("localhost",)
SERVER_IPS = ("127.0.0.1",)
CLIENT_NAME = "redstring"


@dataclass(frozen=True)
class TlsFiles:
    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def server_keystore(self) -> Path:
        """The server's key followed by its certificate and the CA's (Kafka PEM key store)."""
        return self.directory / "server.pem"

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    def all(self) -> tuple[Path, ...]:
        return (self.ca_cert, self.server_keystore, self.client_cert, self.client_key)


def ensure(directory: Path) -> TlsFiles:
    """The CA, server and client files in ``directory``: reused if complete and not
    about to expire, else all generated anew."""
    files = TlsFiles(directory)
    if not _usable(files):
        _generate(files)
    return files


def _x509() -> Any:
    try:
        from cryptography import x509
    except ImportError:
        raise DevstackError(
            "the Python package cryptography is missing (it makes the certificates of the "
            "secured Kafka listeners): run pip install -e '.[dev]'"
        ) from None
    return x509


def _usable(files: TlsFiles) -> bool:
    if not all(path.is_file() for path in files.all()):
        return False
    x509 = _x509()
    horizon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=RENEW_DAYS)
    try:
        for path in (files.ca_cert, files.server_keystore, files.client_cert):
            for cert in x509.load_pem_x509_certificates(path.read_bytes()):
                if cert.not_valid_after_utc < horizon:
                    return False
    except ValueError:  # not a PEM certificate (a truncated file, say)
        return False
    return True


def _generate(files: TlsFiles) -> None:
    x509 = _x509()
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=VALID_DAYS)

    def name(common_name: str) -> Any:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "redstring devstack"),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )

    def key_usage(*, cert_sign: bool) -> Any:
        return x509.KeyUsage(
            digital_signature=not cert_sign,
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign=cert_sign,
            crl_sign=cert_sign,
            encipher_only=False,
            decipher_only=False,
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("redstring devstack throwaway CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common_name: str, usage: Any, names: list[Any] | None) -> tuple[Any, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(key_usage(cert_sign=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    server_key, server_cert = leaf(
        SERVER_NAMES[0],
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName(n) for n in SERVER_NAMES]
        + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVER_IPS],
    )
    client_key, client_cert = leaf(CLIENT_NAME, ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def key_pem(key: Any) -> bytes:
        data: bytes = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,  # the only key format Kafka's PEM store reads
            serialization.NoEncryption(),
        )
        return data

    def cert_pem(cert: Any) -> bytes:
        data: bytes = cert.public_bytes(serialization.Encoding.PEM)
        return data

    files.directory.mkdir(parents=True, exist_ok=True)
    files.ca_cert.unlink(missing_ok=True)  # no mix of two generations if this is cut short
    _write(files.server_keystore, key_pem(server_key) + cert_pem(server_cert) + cert_pem(ca_cert))
    _write(files.client_key, key_pem(client_key))
    _write(files.client_cert, cert_pem(client_cert), mode=0o644)
    _write(files.ca_cert, cert_pem(ca_cert), mode=0o644)  # last: marks the set complete


def _write(path: Path, data: bytes, mode: int = 0o600) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    tmp.replace(path)
