"""The front proxy's identity: a CA of its own and the client certificate the sandbox presents to
aggregated API servers, as kube-apiserver's ``--requestheader-client-ca-file`` and
``--proxy-client-cert-file`` (CN ``front-proxy-client``, kubeadm's name) are.

An aggregated server trusts a request's ``X-Remote-User``/``X-Remote-Group``/``X-Remote-Extra-*``
headers only when the TLS client certificate is signed by this CA and its CN is one of the
allowed names; both are published in ``kube-system/extension-apiserver-authentication``
(:mod:`sandbox.bootstrap`).
"""

from __future__ import annotations

import datetime
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLIENT_NAME = "front-proxy-client"
USERNAME_HEADERS = ("X-Remote-User",)
UID_HEADERS = ("X-Remote-Uid",)
GROUP_HEADERS = ("X-Remote-Group",)
EXTRA_PREFIXES = ("X-Remote-Extra-",)


@dataclass(frozen=True, slots=True)
class FrontProxy:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    common_name: str = CLIENT_NAME

    def client_context(self, ca_bundle: bytes | None, verify: bool = True) -> ssl.SSLContext:
        """A client context presenting the front-proxy certificate, trusting ``ca_bundle``
        (the system CAs when None); ``verify=False``: ``insecureSkipTLSVerify``."""
        context = ssl.create_default_context(cadata=ca_bundle.decode() if ca_bundle else None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if not verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp) / "proxy.crt", Path(tmp) / "proxy.key"
            cert.write_bytes(self.cert_pem)
            key.write_bytes(self.key_pem)
            context.load_cert_chain(cert, key)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate(common_name: str = CLIENT_NAME, days: int = 30) -> FrontProxy:
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("fleetgate-sandbox-front-proxy-ca"))
        .issuer_name(_name("fleetgate-sandbox-front-proxy-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(ca_usage, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return FrontProxy(
        ca_pem=ca.public_bytes(pem),
        cert_pem=cert.public_bytes(pem),
        key_pem=key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
        common_name=common_name,
    )
