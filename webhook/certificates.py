"""Serving certificates fleetgate makes for itself: a CA, and a certificate it signs.

Pure (no I/O beyond the clock it is given): ``webhook.certmanager`` keeps the result in a Secret
and the files the server reloads. The rules, as Kueue's internal certificate management
(open-policy-agent's cert-controller) has them, with fleetgate's numbers:

- the CA lives :data:`CA_DAYS` (10 years); the serving certificate :data:`SERVING_DAYS` (1
  year). Both start :data:`BACKDATE` early, so a clock a little behind still accepts them.
- the serving certificate is renewed once less than :data:`RENEW_FRACTION` of its life is left
  (about four months), when its DNS names are not the ones asked for, or when it is not signed
  by the current CA or does not match its key.
- the CA is replaced once less than :data:`RENEW_FRACTION` of its life is left. The old CA
  stays in ``ca.crt`` (after the new one) until it expires, so a ``caBundle`` holding both is
  trusted by callers that still have the old one while the new certificate is rolled out.

ECDSA P-256 keys: quick to make, and accepted by Go (the API servers), urllib3 and ``ssl``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_FRACTION = 1 / 3
BACKDATE = dt.timedelta(hours=1)
CA_NAME = "fleetgate-ca"

# the Secret's keys (kubernetes.io/tls, plus the CA's), as cert-manager writes them too
CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"


@dataclass(frozen=True, slots=True)
class Bundle:
    """PEM texts: ``ca`` may hold more than one CA (the current one first)."""

    ca: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def as_data(self) -> dict[str, bytes]:
        return {CA_CERT: self.ca, CA_KEY: self.ca_key, TLS_CERT: self.cert, TLS_KEY: self.key}

    @classmethod
    def from_data(cls, data: dict[str, bytes]) -> Bundle | None:
        """The bundle in a Secret's (decoded) data; None when a key is missing."""
        try:
            return cls(data[CA_CERT], data[CA_KEY], data[TLS_CERT], data[TLS_KEY])
        except KeyError:
            return None


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def new_ca(now: dt.datetime, days: int = CA_DAYS) -> tuple[bytes, bytes]:
    """(certificate, key) of a new CA valid from ``now`` (backdated) for ``days``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(f"{CA_NAME}@{int(now.timestamp())}")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def new_serving(
    ca_cert: bytes, ca_key: bytes, names: Sequence[str], now: dt.datetime, days: int = SERVING_DAYS
) -> tuple[bytes, bytes]:
    """(certificate, key) for the DNS ``names`` (the first is the common name), signed by the
    CA, never outliving it."""
    ca = x509.load_pem_x509_certificate(ca_cert)
    signer = serialization.load_pem_private_key(ca_key, None)
    if not isinstance(signer, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    end = min(now + dt.timedelta(days=days), ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .sign(signer, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def _due(cert: x509.Certificate, now: dt.datetime) -> bool:
    """Less than :data:`RENEW_FRACTION` of its life left (or not valid yet)."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return now < start or end - now < (end - start) * RENEW_FRACTION


def renewal_due(cert_pem: bytes, now: dt.datetime) -> dt.datetime:
    """When a certificate's renewal falls due (the moment :func:`problem` starts saying so)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return max(now, end - (end - start) * RENEW_FRACTION)


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    public = ca.public_key()
    if cert.issuer != ca.subject or not isinstance(public, ec.EllipticCurvePublicKey):
        return False
    algorithm = cert.signature_hash_algorithm
    if algorithm is None:
        return False
    try:
        public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(algorithm))
    except InvalidSignature:
        return False
    return True


def _key_matches(cert: x509.Certificate, key_pem: bytes) -> bool:
    key = serialization.load_pem_private_key(key_pem, None)
    return key.public_key() == cert.public_key()  # type: ignore[union-attr]


def _cas(pem: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem)


def problem(bundle: Bundle | None, names: Sequence[str], now: dt.datetime) -> str | None:
    """Why ``bundle`` must be renewed for ``names`` at ``now``; None when it serves as it is."""
    if bundle is None:
        return "no certificate yet"
    try:
        cas = _cas(bundle.ca)
        cert = x509.load_pem_x509_certificate(bundle.cert)
        if not cas or not _key_matches(cas[0], bundle.ca_key):
            return "the CA does not match its key"
        if not _key_matches(cert, bundle.key):
            return "the certificate does not match its key"
    except ValueError as error:  # unreadable PEM, or a key of another type
        return f"unreadable: {error}"
    if _due(cas[0], now):
        return f"the CA expires at {cas[0].not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
    if not _signed_by(cert, cas[0]):
        return "the certificate is not signed by the current CA"
    try:
        found = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        dns = found.value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        dns = []
    if sorted(dns) != sorted(names):
        return f"its DNS names are {', '.join(dns) or 'none'}, not {', '.join(names)}"
    if any(old.not_valid_after_utc <= now for old in cas[1:]):
        return "an earlier CA it still lists has expired"
    if _due(cert, now):
        return f"it expires at {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
    return None


def renew(bundle: Bundle | None, names: Sequence[str], now: dt.datetime) -> Bundle:
    """A bundle that serves ``names`` from ``now``: the CA kept while it is good, else a new
    one with the old CAs still valid kept after it; a new serving certificate."""
    ca, ca_key, kept = None, None, b""
    if bundle is not None:
        try:
            cas = _cas(bundle.ca)
            good = bool(cas) and _key_matches(cas[0], bundle.ca_key) and not _due(cas[0], now)
        except ValueError:
            cas, good = [], False
        if good:
            ca, ca_key = cas[0].public_bytes(serialization.Encoding.PEM), bundle.ca_key
            rest = cas[1:]
        else:
            rest = cas
        kept = b"".join(
            c.public_bytes(serialization.Encoding.PEM) for c in rest if c.not_valid_after_utc > now
        )
    if ca is None or ca_key is None:
        ca, ca_key = new_ca(now)
    cert, key = new_serving(ca, ca_key, names, now)
    return Bundle(ca + kept, ca_key, cert, key)


def next_check(bundle: Bundle, now: dt.datetime) -> dt.datetime:
    """The first moment :func:`problem` may say something new about ``bundle`` by time alone."""
    moments = [renewal_due(bundle.cert, now)]
    cas = _cas(bundle.ca)
    moments.append(renewal_due(cas[0].public_bytes(serialization.Encoding.PEM), now))
    moments.extend(c.not_valid_after_utc for c in cas[1:] if c.not_valid_after_utc > now)
    return min(moments)
