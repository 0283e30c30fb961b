"""CreateAcls, DescribeAcls, DeleteAcls, AlterUserScramCredentials,
DescribeUserScramCredentials and AlterClientQuotas against a stock controller of the newest
pinned release, both with Kafka's ``StandardAuthorizer`` (``authorizer.class.name``) and
``super.users=User:ANONYMOUS`` (their PLAINTEXT listener's principal).

One sequence of requests goes to both nodes; the answers must be equal: the ACL answers with
the orders Kafka leaves to identity hashes sorted (``compat.differential.acl_answer``), the
credential and quota answers as sent (their orders are those of Kafka's hash maps of strings,
which kwire computes). The records each wrote must be equal: each batch's SCRAM and quota
records exactly; for ACLs, with the random ids set aside, each batch's AccessControlEntryRecords
in order and its RemoveAccessControlEntryRecords as the set of bindings their ids name. Both
nodes snapshot after every committed batch: the newest snapshots hold the same bindings,
credentials and quotas, and kwire's controller replaying each node's log writes what that
node's snapshot holds, under the same ACL ids.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.differential import (
    PairNode,
    Snapshot,
    acl_answer,
    forwarded,
    newest_snapshot,
    send,
    start_pair,
)
from compat.harness import PARTITION, KafkaRelease, log_batches
from messages.generated.access_control_entry_record import AccessControlEntryRecord
from messages.generated.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from messages.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from messages.generated.client_quota_record import ClientQuotaRecord
from messages.generated.create_acls_request import AclCreation, CreateAclsRequest
from messages.generated.create_delegation_token_request import (
    CreatableRenewers,
    CreateDelegationTokenRequest,
)
from messages.generated.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from messages.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.envelope_response import EnvelopeResponse
from messages.generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from messages.generated.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from messages.generated.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from messages.generated.renew_delegation_token_request import RenewDelegationTokenRequest
from messages.generated.user_scram_credential_record import UserScramCredentialRecord
from messages.metadata import decode_record, encode_record
from messages.protocol import decode_response
from messages.runtime import Message
from server.controller.controller import ControlManagers

pytestmark = pytest.mark.compat

SECRET = "token-secret"
AUTHORIZED = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:ANONYMOUS\n"
    f"delegation.token.secret.key={SECRET}\n"
)

ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
DENY, ALLOW = 2, 3

Binding = tuple[int, str, int, str, str, int, int]
"""(resource type, name, pattern type, principal, host, operation, permission)."""


@pytest.fixture
def authorized_pair(newest_kafka: KafkaRelease, tmp_path: Path) -> Iterator[dict[str, PairNode]]:
    with start_pair(newest_kafka, tmp_path, "leader", AUTHORIZED) as nodes:
        yield nodes


def _create(*bindings: Binding) -> CreateAclsRequest:
    return CreateAclsRequest(creations=[
        AclCreation(resource_type=t, resource_name=n, resource_pattern_type=p, principal=who, host=host,
                    operation=op, permission_type=perm)
        for t, n, p, who, host, op, perm in bindings
    ])


Filter = tuple[int, str | None, int, str | None, str | None, int, int]


def _describe(f: Filter) -> DescribeAclsRequest:
    t, n, p, who, host, op, perm = f
    return DescribeAclsRequest(resource_type_filter=t, resource_name_filter=n, pattern_type_filter=p,
                               principal_filter=who, host_filter=host, operation=op, permission_type=perm)


def _delete(*filters: Filter) -> DeleteAclsRequest:
    return DeleteAclsRequest(filters=[
        DeleteAclsFilter(resource_type_filter=t, resource_name_filter=n, pattern_type_filter=p, principal_filter=who,
                         host_filter=host, operation=op, permission_type=perm)
        for t, n, p, who, host, op, perm in filters
    ])


EVERYTHING: Filter = (ANY, None, ANY, None, None, ANY, ANY)
ALICE_READS: Binding = (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW)


def _cases() -> list[tuple[str, Message, int]]:
    return [
        ("describe an empty authorizer", _describe(EVERYTHING), 3),
        ("create one of each resource type", _create(
            ALICE_READS,
            (TOPIC, "logs-", PREFIXED, "User:alice", "10.0.0.1", WRITE, ALLOW),
            (TOPIC, "*", LITERAL, "User:*", "*", DESCRIBE, ALLOW),
            (GROUP, "g1", LITERAL, "User:bob", "*", READ, DENY),
            (CLUSTER, "kafka-cluster", LITERAL, "User:bob", "*", ALTER, ALLOW),
            (TRANSACTIONAL_ID, "tx-", PREFIXED, "User:carol", "*", ALL, ALLOW),
            (DELEGATION_TOKEN, "token-1", LITERAL, "User:carol", "*", DESCRIBE, ALLOW),
            (USER, "dave", LITERAL, "User:carol", "*", 13, ALLOW),  # CREATE_TOKENS
        ), 3),
        ("create an existing binding, and one twice", _create(
            ALICE_READS, (TOPIC, "payments", LITERAL, "User:erin", "*", WRITE, DENY),
            (TOPIC, "payments", LITERAL, "User:erin", "*", WRITE, DENY),
        ), 3),
        ("a CLUSTER binding of another name, an empty name", _create(
            (CLUSTER, "other", LITERAL, "User:bob", "*", ALTER, ALLOW),
            (TOPIC, "", LITERAL, "User:bob", "*", READ, ALLOW),
            (TOPIC, "fine", LITERAL, "User:bob", "*", READ, ALLOW),
        ), 3),
        ("a principal without a type", _create((TOPIC, "t", LITERAL, "alice", "*", READ, ALLOW)), 3),
        ("unknown codes", _create(
            (99, "t", LITERAL, "User:x", "*", READ, ALLOW),
            (TOPIC, "t", 99, "User:x", "*", READ, ALLOW),
            (TOPIC, "t", LITERAL, "User:x", "*", 99, ALLOW),
            (TOPIC, "t", LITERAL, "User:x", "*", READ, 99),
        ), 3),
        ("host patterns", _create(
            (TOPIC, "hosts", LITERAL, "User:h", "", READ, ALLOW),
            (TOPIC, "hosts", LITERAL, "User:h", "10.0.0.0/8", READ, ALLOW),
            (TOPIC, "hosts", LITERAL, "User:h", "10.0.0.0/33", READ, ALLOW),
            (TOPIC, "hosts", LITERAL, "User:h", "300.0.0.0/8", READ, ALLOW),
            (TOPIC, "hosts", LITERAL, "User:h", "ten/8", READ, ALLOW),
            (TOPIC, "hosts", LITERAL, "User:h", "fd00::/8", READ, ALLOW),
            (TOPIC, "hosts", LITERAL, "User:h", "fd00::/200", READ, ALLOW),
        ), 3),
        ("a creation with ANY beside a good one", _create(
            (TOPIC, "good", LITERAL, "User:x", "*", READ, ALLOW), (TOPIC, "t", LITERAL, "User:x", "*", ANY, ALLOW),
        ), 3),
        ("a creation with the pattern type MATCH", _create((TOPIC, "t", MATCH, "User:x", "*", READ, ALLOW)), 3),
        ("a creation with an UNKNOWN (0) code", _create((TOPIC, "t", LITERAL, "User:x", "*", 0, ALLOW)), 3),
        ("create v1", _create((TOPIC, "v1-topic", LITERAL, "User:frank", "*", CREATE, ALLOW)), 1),
        ("describe everything", _describe(EVERYTHING), 3),
        ("describe the literal orders", _describe((TOPIC, "orders", LITERAL, None, None, ANY, ANY)), 3),
        ("describe what applies to orders", _describe((TOPIC, "orders", MATCH, None, None, ANY, ANY)), 3),
        ("describe what applies to logs-today", _describe((TOPIC, "logs-today", MATCH, None, None, ANY, ANY)), 3),
        ("describe the prefixed patterns", _describe((ANY, None, PREFIXED, None, None, ANY, ANY)), 3),
        ("describe by principal and host", _describe((ANY, None, ANY, "User:alice", "10.0.0.1", ANY, ANY)), 3),
        ("describe the denials", _describe((ANY, None, ANY, None, None, ANY, DENY)), 3),
        ("describe v1", _describe((ANY, None, ANY, None, None, READ, ANY)), 1),
        ("describe with an UNKNOWN (0) code", _describe((0, None, ANY, None, None, ANY, ANY)), 3),
        ("describe with an unrecognized code", _describe((TOPIC, None, ANY, None, None, 99, ANY)), 3),
        ("delete nothing", _delete((GROUP, "none", LITERAL, None, None, ANY, ANY)), 3),
        ("delete alice's, two filters overlapping", _delete(
            (ANY, None, ANY, "User:alice", None, ANY, ANY),
            (TOPIC, "orders", MATCH, None, None, READ, ANY),
        ), 3),
        ("delete with an UNKNOWN (0) code beside a good filter", _delete(
            (TOPIC, None, 0, None, None, ANY, ANY),
            (GROUP, "g1", LITERAL, "User:bob", None, ANY, ANY),
        ), 3),
        ("delete with an unrecognized code beside a good filter", _delete(
            (TOPIC, None, ANY, None, None, ANY, 99),
            (GROUP, "g1", LITERAL, "User:bob", None, ANY, ANY),
        ), 3),
        ("delete v1", _delete((USER, None, ANY, None, None, ANY, ANY)), 1),
        ("describe what is left", _describe(EVERYTHING), 2),
    ]


SHA256, SHA512 = 1, 2


def _scram(deletions: list[tuple[str, int]] = (), upserts: list[tuple[str, int, int, bytes]] = ()) -> Message:  # type: ignore[assignment]
    """AlterUserScramCredentials: deletions (user, mechanism), upsertions (user, mechanism,
    iterations, salted password); each salt is ``salt-<user>``."""
    return AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name=n, mechanism=m) for n, m in deletions],
        upsertions=[ScramCredentialUpsertion(name=n, mechanism=m, iterations=i, salt=f"salt-{n}".encode(),
                                             salted_password=p) for n, m, i, p in upserts],
    )


def _quotas(*entries: tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]], validate_only: bool = False) -> Message:
    return AlterClientQuotasRequest(entries=[
        EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                  ops=[OpData(key=k, value=v, remove=r) for k, v, r in ops])
        for entity, ops in entries
    ], validate_only=validate_only)


KEY = bytes(range(32))


def _parts(*parts: tuple[str, str | None]) -> list[tuple[str, str | None]]:
    return list(parts)


def _credential_cases() -> list[tuple[str, Message, int]]:
    many = [(f"user{i}", SHA256, 4096 + i, KEY) for i in range(14)]
    return [
        ("set alice's and bob's credentials", _scram(upserts=[("alice", SHA256, 8192, KEY), ("bob", SHA512, 4096, KEY * 2)]), 0),
        ("refused credentials", _scram(
            deletions=[("dave", SHA256), ("erin", 9), ("", SHA256)],
            upserts=[("carol", SHA256, 4096, KEY), ("carol", SHA512, 4096, KEY), ("frank", SHA256, 100, KEY),
                     ("gina", SHA256, 20000, KEY), ("hank", SHA256, 4096, b""), ("ivy", 0, 4096, KEY)],
        ), 0),
        ("delete and set one user in one request", _scram(deletions=[("alice", SHA256)], upserts=[("alice", SHA512, 4096, KEY)]), 0),
        ("fourteen users at once", _scram(upserts=many), 0),
        ("delete bob's and a missing one", _scram(deletions=[("bob", SHA512), ("user3", SHA512), ("user4", SHA256)]), 0),
        ("nothing to alter", _scram(), 0),
        ("describe credentials on a controller",
         DescribeUserScramCredentialsRequest(users=[UserName(name="alice"), UserName(name="bob")]), 0),
        ("describe no users on a controller", DescribeUserScramCredentialsRequest(users=[]), 0),
        ("set quotas of a user", _quotas(([("user", "alice")], [("producer_byte_rate", 1024.0, False),
                                                               ("consumer_byte_rate", 2048.0, False)])), 1),
        ("set quotas of more entities", _quotas(
            ([("user", "bob"), ("client-id", "app")], [("request_percentage", 50.5, False)]),
            ([("user", None)], [("controller_mutation_rate", 10.0, False), ("producer_byte_rate", 5e6, False)]),
            ([("client-id", None)], [("consumer_byte_rate", 300.0, False)]),
            ([("ip", "10.0.0.1")], [("connection_creation_rate", 100.0, False)]),
            ([("ip", None)], [("connection_creation_rate", 5.0, False)]),
            ([("ip", "fd00::1")], [("connection_creation_rate", 7.0, False)]),
        ), 1),
        ("refused quotas", _quotas(
            ([("group", "g")], [("producer_byte_rate", 1.0, False)]),
            ([("user", "")], [("producer_byte_rate", 1.0, False)]),
            ([("ip", "10.0.0.2"), ("user", "x")], [("connection_creation_rate", 1.0, False)]),
            ([("ip", "not an address")], [("connection_creation_rate", 1.0, False)]),
            ([("user", "k1")], [("no_such_quota", 1.0, False)]),
            ([("user", "k2")], [("producer_byte_rate", -5.0, False)]),
            ([("user", "k3")], [("producer_byte_rate", 1.5, False)]),
            ([("user", "k4")], [("producer_byte_rate", float("nan"), False)]),
            ([("ip", "10.0.0.3")], [("connection_creation_rate", 3e9, False)]),
            ([("user", "k5")], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)]),
            ([("user", "k6")], [("consumer_byte_rate", 7.0, False), ("request_percentage", 0.0, False)]),
            ([], [("producer_byte_rate", 1.0, False)]),
        ), 1),
        ("an entity twice in one request", _quotas(
            ([("user", "twice")], [("producer_byte_rate", 1.0, False)]),
            ([("user", "twice")], [("consumer_byte_rate", 1.0, False)]),
        ), 1),
        ("remove, remove nothing, set unchanged", _quotas(
            ([("user", "alice")], [("producer_byte_rate", 0.0, True), ("request_percentage", 0.0, True),
                                   ("consumer_byte_rate", 2048.0, False), ("no_such_quota", 0.0, True)]),
        ), 1),
        ("validate only", _quotas(([("user", "checked")], [("producer_byte_rate", 9.0, False)]), validate_only=True), 1),
        ("sixteen entities at once, v0", _quotas(*[
            (_parts(("user", f"u{i}")) if i % 2 else _parts(("client-id", f"c{i}"), ("user", f"u{i}")),
             [("producer_byte_rate", 100.0 + i, False)]) for i in range(16)
        ]), 0),
        ("no entries", _quotas(), 1),
    ]


def _credential_answer(response: Any) -> tuple[Any, ...]:
    """An AlterUserScramCredentials, DescribeUserScramCredentials or AlterClientQuotas answer as
    sent (Kafka's orders are those of its hash maps of strings, which kwire computes)."""
    name = type(response).__name__
    if name == "AlterUserScramCredentialsResponse":
        return name, [(r.user, int(r.error_code), r.error_message) for r in response.results]
    if name == "DescribeUserScramCredentialsResponse":
        return name, int(response.error_code), response.error_message, [
            (r.user, int(r.error_code), r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in response.results
        ]
    assert name == "AlterClientQuotasResponse", name
    return name, [
        (int(e.error_code), e.error_message, [(d.entity_type, d.entity_name) for d in e.entity]) for e in response.entries
    ]


def _answer(port: int, request: Message, version: int) -> Any:
    response = trio.run(send, port, request, version)
    if isinstance(response, str):
        return response.replace(str(port), "<port>")
    if type(response).__name__.endswith("AclsResponse"):
        return acl_answer(response)
    return _credential_answer(response)


def _binding(record: AccessControlEntryRecord) -> Binding:
    return (record.resource_type, record.resource_name, record.pattern_type, record.principal, record.host,
            record.operation, record.permission_type)


def _acl_batches(data: Path) -> list[tuple[list[Binding], list[Binding]]]:
    """Per batch with ACL records: its created bindings in order, and the bindings its removals
    name, sorted."""
    live: dict[Any, Binding] = {}
    batches = []
    for batch in log_batches(data / PARTITION):
        if batch.is_control:
            continue
        created: list[Binding] = []
        removed: list[Binding] = []
        for value in batch.iter_values():
            assert value is not None
            message, _ = decode_record(value)
            if isinstance(message, AccessControlEntryRecord):
                live[message.id] = _binding(message)
                created.append(_binding(message))
            elif isinstance(message, RemoveAccessControlEntryRecord):
                removed.append(live.pop(message.id))
        if created or removed:
            batches.append((created, sorted(removed)))
    return batches


def _acls(values: list[bytes]) -> dict[Any, Binding]:
    """The bindings, by id, among snapshot records."""
    return {m.id: _binding(m) for m, _ in map(decode_record, values) if isinstance(m, AccessControlEntryRecord)}


def _replayed(data: Path) -> list[bytes]:
    """The snapshot records kwire's controller writes after replaying the log in ``data``."""
    controller = ControlManagers(bootstrap=())
    for batch in log_batches(data / PARTITION):
        if not batch.is_control:
            for value in batch.iter_values():
                controller.replay(value)
    return [encode_record(record, version) for record, version in controller.snapshot_records()]


_CREDENTIAL_RECORDS = (UserScramCredentialRecord, RemoveUserScramCredentialRecord, ClientQuotaRecord)


def _credential_batches(data: Path) -> list[list[str]]:
    """Per batch with SCRAM or quota records: those records, decoded, in order."""
    batches = []
    for batch in log_batches(data / PARTITION):
        if batch.is_control:
            continue
        found = []
        for value in batch.iter_values():
            assert value is not None
            message, version = decode_record(value)
            if isinstance(message, _CREDENTIAL_RECORDS):
                found.append(f"{type(message).__name__} {message.to_json(version)}")
        if found:
            batches.append(found)
    return batches


def _snapshot_credentials(values: list[bytes]) -> list[str]:
    return sorted(
        f"{type(m).__name__} {m.to_json(v)}" for m, v in map(decode_record, values) if isinstance(m, _CREDENTIAL_RECORDS)
    )


def _create_token(owner: str | None = None, renewers: tuple[str, ...] = (), lifetime: int = -1) -> CreateDelegationTokenRequest:
    kind, _, name = (owner or ":").partition(":")
    return CreateDelegationTokenRequest(
        owner_principal_type=kind or None, owner_principal_name=name or None, max_lifetime_ms=lifetime,
        renewers=[CreatableRenewers(principal_type=r.partition(":")[0], principal_name=r.partition(":")[2])
                  for r in renewers],
    )


def _token_cases() -> list[tuple[str, Callable[[dict[str, bytes]], Message], int]]:
    """Token requests, some built from the HMAC each node gave its first token."""
    return [
        ("create a token unforwarded over PLAINTEXT", lambda side: _create_token(), 3),
        ("alice creates a token bob may renew", lambda side: forwarded("User:alice", _create_token(renewers=("User:bob",)), 3), 3),
        ("alice creates one for carol", lambda side: forwarded("User:alice", _create_token(owner="User:carol"), 3), 3),
        ("alice names a Group renewer", lambda side: forwarded("User:alice", _create_token(renewers=("Group:g",)), 3), 3),
        ("alice creates one of a second's life", lambda side: forwarded("User:alice", _create_token(lifetime=1000), 3), 3),
        ("bob renews alice's token", lambda side: forwarded("User:bob", RenewDelegationTokenRequest(
            hmac=side["token"], renew_period_ms=60_000), 2), 2),
        ("dave renews it", lambda side: forwarded("User:dave", RenewDelegationTokenRequest(
            hmac=side["token"], renew_period_ms=60_000), 2), 2),
        ("renew an unknown token", lambda side: forwarded("User:alice", RenewDelegationTokenRequest(
            hmac=b"x" * 64, renew_period_ms=1), 2), 2),
        ("renew unforwarded over PLAINTEXT", lambda side: RenewDelegationTokenRequest(
            hmac=side["token"], renew_period_ms=1), 2),
        ("alice brings the expiry in", lambda side: forwarded("User:alice", ExpireDelegationTokenRequest(
            hmac=side["token"], expiry_time_period_ms=5000), 2), 2),
        ("alice ends it", lambda side: forwarded("User:alice", ExpireDelegationTokenRequest(
            hmac=side["token"], expiry_time_period_ms=-1), 2), 2),
        ("renew the ended token", lambda side: forwarded("User:bob", RenewDelegationTokenRequest(
            hmac=side["token"], renew_period_ms=1), 2), 2),
        ("describe tokens on a controller", lambda side: DescribeDelegationTokenRequest(owners=None), 3),
    ]


def _token_answer(response: Any, side: dict[str, bytes], request: Message) -> Any:
    """A token answer with the random id and HMAC set aside and the times made relative to the
    request's (issue) time; a first created token's HMAC is kept in ``side`` for later cases."""
    if isinstance(response, str):
        return response
    if isinstance(response, EnvelopeResponse):
        if response.response_data is None:
            return "Envelope", int(response.error_code)
        data = bytes(request.request_data)  # type: ignore[attr-defined]
        _, response = decode_response(bytes(response.response_data), int.from_bytes(data[:2], "big"),
                                      int.from_bytes(data[2:4], "big"))
    json = response.to_json(response.HIGHEST_VERSION)
    json.pop("throttleTimeMs", None)
    if type(response).__name__ == "CreateDelegationTokenResponse" and json["errorCode"] == 0:
        token_id, token = json.pop("tokenId"), base64.b64decode(json.pop("hmac"))
        assert token == hmac.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()
        side.setdefault("token", token)
        issue = json.pop("issueTimestampMs")
        json["expiry"] = json.pop("expiryTimestampMs") - issue
        json["max"] = json.pop("maxTimestampMs") - issue
    elif "expiryTimestampMs" in json and json["expiryTimestampMs"] > 1_000_000_000_000:
        json["expiryTimestampMs"] = "a time"
    return type(response).__name__, json


def test_security_rpcs_answer_alike(authorized_pair: dict[str, PairNode], newest_kafka: KafkaRelease) -> None:
    nodes = authorized_pair
    ports = {name: node.port for name, node in nodes.items()}
    differences: list[str] = []
    answered: list[tuple[str, Any]] = []
    for case, request, version in _cases() + _credential_cases():
        answers = {name: _answer(port, request, version) for name, port in ports.items()}
        answered.append((case, answers["stock"]))
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    sides: dict[str, dict[str, bytes]] = {name: {} for name in ports}
    for case, build, version in _token_cases():
        answers = {}
        for name, port in ports.items():
            request = build(sides[name])
            sent = 0 if isinstance(request, EnvelopeRequest) else version
            answers[name] = _token_answer(trio.run(send, port, request, sent), sides[name], request)
            # a stock controller finds tokens in a cache its metadata publishers update after
            # the commit: the next case waits until they have (its snapshot generator, another
            # publisher, has written the snapshot of the whole log)
            newest_snapshot(nodes[name].data / PARTITION)
        answered.append((case, answers["stock"]))
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    for name, node in nodes.items():
        assert node.proc.poll() is None, f"{name} died"
    trace = "\n".join(f"{case}: {answer}" for case, answer in answered)
    outcomes = dict(answered)
    # the sequence reached what it is about on the stock side
    assert outcomes["create one of each resource type"] == ("CreateAclsResponse", [(0, "")] * 8), trace
    assert len(outcomes["describe everything"][3]) == 12, trace
    deleted = outcomes["delete alice's, two filters overlapping"][1]
    assert [len(matched) for _, _, matched in deleted] == [2, 1], trace
    assert outcomes["set alice's and bob's credentials"][1] == [("bob", 0, None), ("alice", 0, None)], trace
    assert outcomes["set quotas of a user"] == ("AlterClientQuotasResponse", [(0, None, [("user", "alice")])]), trace
    assert outcomes["alice creates a token bob may renew"][1]["expiry"] == 86_400_000, trace
    assert outcomes["dave renews it"][1]["errorCode"] == 63, trace  # DELEGATION_TOKEN_OWNER_MISMATCH
    assert not differences, f"{len(differences)} cases differ:\n" + "\n".join(differences) + "\n" + trace
    batches = {name: _acl_batches(node.data) for name, node in nodes.items()}
    assert len(batches["stock"]) >= 5, batches["stock"]
    assert batches["kwire"] == batches["stock"]
    credentials = {name: _credential_batches(node.data) for name, node in nodes.items()}
    assert len(credentials["stock"]) >= 8, credentials["stock"]
    assert credentials["kwire"] == credentials["stock"]
    newest = {name: newest_snapshot(node.data / PARTITION) for name, node in nodes.items()}
    snapshots = {name: snapshot.records for name, snapshot in newest.items()}
    acls = {name: _acls(values) for name, values in snapshots.items()}
    assert sorted(acls["kwire"].values()) == sorted(acls["stock"].values())
    assert len(acls["stock"]) == 9, acls["stock"]
    assert _snapshot_credentials(snapshots["kwire"]) == _snapshot_credentials(snapshots["stock"])
    assert len(_snapshot_credentials(snapshots["stock"])) >= 20, snapshots["stock"]
    for name, node in nodes.items():
        replayed = _replayed(node.data)
        assert _acls(replayed) == acls[name]
        assert _snapshot_credentials(replayed) == _snapshot_credentials(snapshots[name])
    _check_stock_readers(newest_kafka, newest["kwire"])


def _check_stock_readers(kafka: KafkaRelease, snapshot: Snapshot) -> None:
    """Stock dump-log decodes every record of kwire's newest snapshot, the security ones among
    them. (The newest release's metadata-shell is not on Maven Central; the 4.3 stand-in the
    tools classpath holds cannot read metadata.version 4.4-IV2, the level these nodes run at.)"""
    dump = kafka.run_tool("dump-log", ["--cluster-metadata-decoder", "--files", snapshot.path]).stdout
    decoded = [line for line in dump.splitlines() if 'payload: {"type":' in line and "_RECORD" in line]
    assert len(decoded) == len(snapshot.records), dump[-3000:]
    for kind in ("ACCESS_CONTROL_ENTRY_RECORD", "USER_SCRAM_CREDENTIAL_RECORD", "CLIENT_QUOTA_RECORD",
                 "DELEGATION_TOKEN_RECORD"):
        assert any(kind in line for line in decoded), (kind, dump[-3000:])
