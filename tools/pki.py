"""A throw-away public key infrastructure for the TLS tests and the TLS commit-path bench: an
authority, certificates it signs for the nodes and clients (each for ``localhost`` and
``127.0.0.1``, valid 30 days, one already expired), and one another authority signs
(``make_pki``). Keys are ECDSA P-256, made with ``cryptography``; nothing here is for real use."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["make_pki"]

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _certificate(name: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
                 *, ca: bool = False, expired: bool = False) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name = subject if issuer is None else x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer[0])])
    signer = key if issuer is None else issuer[1]
    start, end = (NOW - 10 * DAY, NOW - DAY) if expired else (NOW - DAY, NOW + 30 * DAY)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _pem(key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate) -> bytes:
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
            + certificate.public_bytes(serialization.Encoding.PEM))


def make_pki(root: Path) -> dict[str, Path]:
    """PEM files: ``ca`` (the trusted authority), and key-and-certificate files ``server``,
    ``admin``, ``alice``, ``expired`` (signed by it) and ``stranger`` (signed by another)."""
    ca_key, other_key = _key(), _key()
    ca = _certificate("kwire test authority", ca_key, None, ca=True)
    other = ("another authority", other_key)
    files = {"ca": root / "ca.pem"}
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for name, issuer, expired in (("server", ("kwire test authority", ca_key), False),
                                  ("admin", ("kwire test authority", ca_key), False),
                                  ("alice", ("kwire test authority", ca_key), False),
                                  ("expired", ("kwire test authority", ca_key), True),
                                  ("stranger", other, False)):
        key = _key()
        files[name] = root / f"{name}.pem"
        files[name].write_bytes(_pem(key, _certificate(name, key, issuer, expired=expired)))
    return files


