"""Users' SCRAM credentials as the committed records leave them, and AlterUserScramCredentials
on them (Kafka's ``ScramControlManager``; KIP-554, SCRAM in KRaft from metadata.version
3.5-IV2).

Every node replays UserScramCredentialRecord (set a user's credential for one mechanism) and
RemoveUserScramCredentialRecord into one :class:`ScramControlManager`; snapshots write a
UserScramCredentialRecord per credential. A credential is what a SCRAM server keeps (RFC 5802):
the salt, the iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``; the client sends the salted password
(``Hi(password, salt, iterations)``, PBKDF2) and the controller derives the keys.

AlterUserScramCredentials, as ``ScramControlManager.alterCredentials`` decides it:

* a user named twice in one request (deletions and upsertions together, whatever the
  mechanisms) gets DUPLICATE_RESOURCE and none of its changes, unless its first mention had
  already failed, whose error stands;
* below metadata.version 3.5-IV2 every user gets UNSUPPORTED_VERSION;
* an empty name gets UNACCEPTABLE_CREDENTIAL, a mechanism other than SCRAM-SHA-256 (1) and
  SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM, a deletion of a credential not held
  RESOURCE_NOT_FOUND, an upsertion with fewer than 4096 or more than 16384 iterations
  UNACCEPTABLE_CREDENTIAL, and one with an empty salted password UNKNOWN_SERVER_ERROR (Java's
  HMAC key refuses it);
* the records: every valid deletion's RemoveUserScramCredentialRecord, then every valid
  upsertion's UserScramCredentialRecord; the results: the deletions, the upsertions, then the
  refused users, each group in the iteration order of Kafka's ``HashMap`` of user names.

No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kwire.errors import Errors
from messages.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from messages.generated.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from messages.generated.user_scram_credential_record import UserScramCredentialRecord
from messages.runtime import Message
from server.controller.cluster import ReplayError
from server.controller.errors import ApiError
from server.controller.java_order import java_hash_order, java_string_hash
from server.controller.result import Record
from storage.scram import ScramCredential, credential_from_salted

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "SCRAM_LEVEL",
    "ScramControlManager",
    "ScramCredential",
    "scram_credential",
]

MECHANISMS = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
"""Mechanism code -> (name, hashlib digest) (``org.apache.kafka.clients.admin.ScramMechanism``)."""
MIN_ITERATIONS = 4096
"""The fewest PBKDF2 iterations either mechanism takes (``ScramMechanism.minIterations``)."""
MAX_ITERATIONS = 16384
"""The most (``ScramControlManager.MAX_ITERATIONS``)."""
SCRAM_LEVEL = 11
"""metadata.version 3.5-IV2: SCRAM credentials live in the metadata log (``isScramSupported``)."""
_TWICE = "A user credential cannot be altered twice in the same request"


def scram_credential(mechanism: int, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of ``salted_password`` for the mechanism of that code
    (``storage.scram``). Raises KeyError for an unknown mechanism."""
    return credential_from_salted(MECHANISMS[mechanism][1], salted_password, salt, iterations)


class ScramControlManager:
    """Credentials by (user name, mechanism code), in the order they were first set."""

    def __init__(self) -> None:
        self.credentials: dict[tuple[str, int], ScramCredential] = {}

    def replay(self, message: Message) -> None:
        """Replay a UserScramCredentialRecord (sets) or RemoveUserScramCredentialRecord.
        Raises ReplayError for the removal of a credential not held."""
        if isinstance(message, UserScramCredentialRecord):
            self.credentials[(message.name, message.mechanism)] = ScramCredential(
                bytes(message.salt), bytes(message.stored_key), bytes(message.server_key), message.iterations
            )
        elif isinstance(message, RemoveUserScramCredentialRecord):
            if self.credentials.pop((message.name, message.mechanism), None) is None:
                raise ReplayError(f"Unable to find credential to delete: {message.name} {message.mechanism}")

    def snapshot_records(self) -> list[Record]:
        """Every credential as its UserScramCredentialRecord (``ScramControlManager.write``), by
        mechanism, then in the order users were first given one."""
        return [
            (UserScramCredentialRecord(
                name=name, mechanism=mechanism, salt=c.salt, stored_key=c.stored_key, server_key=c.server_key,
                iterations=c.iterations,
            ), 0)
            for (name, mechanism), c in sorted(self.credentials.items(), key=lambda item: item[0][1])
        ]

    def alter(
        self, request: AlterUserScramCredentialsRequest, metadata_version: int
    ) -> tuple[list[Record], list[tuple[str, ApiError | None]]]:
        """AlterUserScramCredentials' records and its ``(user, error or None)`` results, in
        Kafka's order (module docstring)."""
        supported = metadata_version >= SCRAM_LEVEL
        deletions: dict[str, ScramCredentialDeletion] = {}
        upsertions: dict[str, ScramCredentialUpsertion] = {}
        errors: dict[str, ApiError] = {}
        peaks = {"deletions": 0, "upsertions": 0, "errors": 0}

        def note(name: str, table: Mapping[str, object]) -> None:
            peaks[name] = max(peaks[name], len(table))

        for deletion in request.deletions:
            user = deletion.name
            if user in errors:
                continue
            if deletions.pop(user, None) is not None:
                errors[user] = ApiError(Errors.DUPLICATE_RESOURCE, _TWICE)
            elif not supported:
                errors[user] = _unsupported()
            else:
                refused = self._name_and_mechanism_error(user, deletion.mechanism)
                if refused is None and (user, deletion.mechanism) not in self.credentials:
                    refused = ApiError(Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
                if refused is None:
                    deletions[user] = deletion
                else:
                    errors[user] = refused
            note("deletions", deletions)
            note("errors", errors)
        for upsertion in request.upsertions:
            user = upsertion.name
            if user in errors:
                continue
            if deletions.pop(user, None) is not None or upsertions.pop(user, None) is not None:
                errors[user] = ApiError(Errors.DUPLICATE_RESOURCE, _TWICE)
            elif not supported:
                errors[user] = _unsupported()
            else:
                refused = self._name_and_mechanism_error(user, upsertion.mechanism)
                if refused is None and upsertion.iterations < MIN_ITERATIONS:
                    refused = ApiError(Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
                if refused is None and upsertion.iterations > MAX_ITERATIONS:
                    refused = ApiError(Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
                if refused is None:
                    upsertions[user] = upsertion
                else:
                    errors[user] = refused
            note("upsertions", upsertions)
            note("errors", errors)

        records: list[Record] = []
        results: list[tuple[str, ApiError | None]] = []
        for user in _order(deletions, peaks["deletions"]):
            deletion = deletions[user]
            records.append((RemoveUserScramCredentialRecord(name=user, mechanism=deletion.mechanism), 0))
            results.append((user, None))
        for user in _order(upsertions, peaks["upsertions"]):
            upsertion = upsertions[user]
            if not upsertion.salted_password:
                errors[user] = ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
                continue
            credential = scram_credential(upsertion.mechanism, bytes(upsertion.salted_password), bytes(upsertion.salt),
                                          upsertion.iterations)
            records.append((UserScramCredentialRecord(
                name=user, mechanism=upsertion.mechanism, salt=credential.salt, stored_key=credential.stored_key,
                server_key=credential.server_key, iterations=credential.iterations,
            ), 0))
            results.append((user, None))
        results += [(user, errors[user]) for user in _order(errors, max(peaks["errors"], len(errors)))]
        return records, results

    @staticmethod
    def _name_and_mechanism_error(user: str, mechanism: int) -> ApiError | None:
        if not user:
            return ApiError(Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        if mechanism not in MECHANISMS:
            return ApiError(Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        return None


def _unsupported() -> ApiError:
    return ApiError(Errors.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM")


def _order(table: Mapping[str, object], peak: int) -> list[str]:
    """The users of ``table`` in the order Kafka's ``HashMap`` (which held up to ``peak`` of
    them) iterates them."""
    capacity = 16
    while peak > capacity * 3 // 4:
        capacity *= 2
    hash_of: Callable[[str], int] = java_string_hash
    return java_hash_order(table, hash_of, capacity)
