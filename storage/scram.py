"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka keeps them (``ScramFormatter``,
``ScramCredential``): what a server stores of a password is its salt, its iteration count and two
keys derived from the salted password ``Hi(password, salt, iterations)`` (PBKDF2):
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and ``ServerKey = HMAC(SaltedPassword,
"Server Key")``. The metadata log carries them (UserScramCredentialRecord), ``kafka-storage
format --add-scram`` and AlterUserScramCredentials make them, and a SCRAM login checks a
client's proof against them. No I/O.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

__all__ = ["DIGESTS", "ScramCredential", "credential_from_password", "credential_from_salted"]

DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""Mechanism name -> hashlib digest."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of one user's password for one mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted(digest: str, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of a salted password (what AlterUserScramCredentials carries)."""
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(digest, client_key).digest(),
        server_key=hmac.new(salted_password, b"Server Key", digest).digest(),
        iterations=iterations,
    )


def credential_from_password(digest: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of a password (``ScramFormatter.generateCredential``)."""
    salted = hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)
    return credential_from_salted(digest, salted, salt, iterations)
