"""``--add-scram`` of ``kafka-storage format`` (Kafka's ``ScramParser``; KIP-900): SCRAM
credentials written into the bootstrap metadata, so brokers can authenticate with SCRAM before
any controller is running.

An argument is ``MECHANISM=[key=value,...]`` with the mechanism SCRAM-SHA-256 or SCRAM-SHA-512
and the keys ``name`` (required), ``password`` or ``saltedpassword`` (base64; then ``salt``,
base64, is required), ``salt`` (random when absent), ``iterations`` (default 4096, from 4096 to
16384). A value may be wrapped in double quotes. Each argument becomes one
UserScramCredentialRecord, after the bootstrap FeatureLevelRecords, from metadata.version
3.5-IV2 on. Errors are :class:`~storage.format.FormatError` with Kafka's messages.
"""

from __future__ import annotations

import base64
import binascii
import secrets

from messages.generated.user_scram_credential_record import UserScramCredentialRecord
from storage.scram import credential_from_password, credential_from_salted

__all__ = ["MECHANISMS", "ScramArgumentError", "parse_scram_argument"]

MECHANISMS = {"SCRAM-SHA-256": (1, "sha256", "SCRAM_SHA_256"), "SCRAM-SHA-512": (2, "sha512", "SCRAM_SHA_512")}
"""Mechanism name -> (record code, hashlib digest, Kafka's enum name)."""
MIN_ITERATIONS, MAX_ITERATIONS, DEFAULT_ITERATIONS = 4096, 16384, 4096


class ScramArgumentError(ValueError):
    """An ``--add-scram`` argument Kafka's parser refuses; the message is Kafka's."""


def _random_salt() -> bytes:
    """``ScramFormatter.secureRandomBytes``: the ASCII of a 130-bit random number in base 36."""
    number = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while number:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
    return (text or "0").encode("ascii")


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ScramArgumentError(f"Failed to decode given {what}: {value}") from None


def parse_scram_argument(argument: str) -> UserScramCredentialRecord:
    """One ``--add-scram`` argument as its UserScramCredentialRecord. Raises
    ScramArgumentError."""
    text = argument.strip()
    mechanism, sep, rest = text.partition("=")
    if not sep:
        raise ScramArgumentError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism not in MECHANISMS:
        raise ScramArgumentError(f"The add-scram mechanism {mechanism} is not supported.")
    if not rest.startswith("["):
        raise ScramArgumentError("Expected configuration string to start with [")
    if not rest.endswith("]"):
        raise ScramArgumentError("Expected configuration string to end with ]")
    values: dict[str, str] = {}
    for component in rest[1:-1].split(","):
        key, sep, value = component.partition("=")
        if not sep:
            raise ScramArgumentError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        values[key] = value
    name = values.pop("name", None)
    if name is None:
        raise ScramArgumentError("You must supply 'name' to add-scram")
    salt_text = values.pop("salt", None)
    salt = None if salt_text is None else _base64(salt_text, "salt")
    iterations = DEFAULT_ITERATIONS
    if "iterations" in values:
        count = values.pop("iterations")
        try:
            iterations = int(count)
        except ValueError:
            raise ScramArgumentError(f"Failed to parse iterations count: {count}") from None
    password = values.pop("password", None)
    salted_text = values.pop("saltedpassword", None)
    salted = None if salted_text is None else _base64(salted_text, "saltedPassword")
    if password is None and salted is None:
        raise ScramArgumentError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    if password is None and salt is None:
        raise ScramArgumentError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if values:
        raise ScramArgumentError(f"Unknown SCRAM configurations: {', '.join(sorted(values))}")
    code, digest, enum_name = MECHANISMS[mechanism]
    if iterations < MIN_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using {enum_name}")
    if iterations > MAX_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {enum_name}")
    if salt is None:
        salt = _random_salt()
    if password is not None:
        credential = credential_from_password(digest, password, salt, iterations)
    else:
        assert salted is not None
        credential = credential_from_salted(digest, salted, salt, iterations)
    return UserScramCredentialRecord(
        name=name, mechanism=code, salt=credential.salt, stored_key=credential.stored_key,
        server_key=credential.server_key, iterations=iterations,
    )
