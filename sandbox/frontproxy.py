"""The front proxy's identity: a CA of its own and the client certificate the sandbox presents to
aggregated API servers, as kube-apiserver's ``--requestheader-client-ca-file`` and
``--proxy-client-cert-file`` (CN ``front-proxy-client``, kubeadm's name) are.

An aggregated server trusts a request's ``X-Remote-User``/``X-Remote-Group``/``X-Remote-Extra-*``
headers only when the TLS client certificate is signed by this CA and its CN is one of the
allowed names; both are published in ``kube-system/extension-apiserver-authentication``
(:mod:`sandbox.bootstrap`).
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.x509.oid import ExtendedKeyUsageOID

from sandbox import tls

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


def generate(common_name: str = CLIENT_NAME, days: int = 30) -> FrontProxy:
    ca_pem, cert_pem, key_pem = tls.issue(
        "fleetgate-sandbox-front-proxy-ca", common_name, ExtendedKeyUsageOID.CLIENT_AUTH, days=days
    )
    return FrontProxy(ca_pem, cert_pem, key_pem, common_name)
