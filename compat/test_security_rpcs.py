"""CreateAcls, DescribeAcls and DeleteAcls against a stock controller of the newest pinned
release, both with Kafka's ``StandardAuthorizer`` (``authorizer.class.name``) and
``super.users=User:ANONYMOUS`` (their PLAINTEXT listener's principal).

One sequence of requests goes to both nodes; the answers must be equal with the orders Kafka
leaves to hash iteration sorted (``compat.differential.acl_answer``). The ACL records each
wrote must be equal with the ids set aside: each batch's AccessControlEntryRecords in order,
its RemoveAccessControlEntryRecords (in Kafka's hash order) as the set of bindings their ids
name. Both nodes snapshot after every committed batch: each one's newest snapshot holds the
bindings its log leaves, and kwire's controller replaying the stock log holds the stock
snapshot's bindings under the stock ids.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.differential import PairNode, acl_answer, send, start_pair
from compat.harness import PARTITION, KafkaRelease, log_batches
from messages.generated.access_control_entry_record import AccessControlEntryRecord
from messages.generated.create_acls_request import AclCreation, CreateAclsRequest
from messages.generated.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from messages.metadata import decode_record
from messages.runtime import Message
from server.controller.controller import QuorumController
from storage.snapshots import parse_snapshot_path, read_snapshot_content

pytestmark = pytest.mark.compat

AUTHORIZED = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:ANONYMOUS\n"
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


def _answer(port: int, request: Message, version: int) -> Any:
    response = trio.run(send, port, request, version)
    return response.replace(str(port), "<port>") if isinstance(response, str) else acl_answer(response)


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


def _newest_snapshot_acls(data: Path, timeout_s: float = 20.0) -> dict[Any, Binding]:
    """The bindings, by id, of the node's newest snapshot once it covers the whole log (the node
    writes one after every committed batch here)."""
    partition = data / PARTITION
    end = max(b.last_offset for b in log_batches(partition)) + 1
    deadline = time.monotonic() + timeout_s
    while True:
        found = sorted(
            (parsed.snapshot_id, path)
            for path in partition.glob("*.checkpoint")
            if (parsed := parse_snapshot_path(path)) is not None
        )
        if found and found[-1][0].end_offset >= end:
            break
        assert time.monotonic() < deadline, f"no snapshot at or past offset {end} in {partition}"
        time.sleep(0.2)  # poll interval
    acls = {}
    for value in read_snapshot_content(found[-1][1].read_bytes()).data_records():
        message, _ = decode_record(value)
        if isinstance(message, AccessControlEntryRecord):
            acls[message.id] = _binding(message)
    return acls


def _replayed(data: Path) -> dict[Any, Binding]:
    """The bindings, by id, of the snapshot records kwire's controller writes after replaying
    the log in ``data``."""
    controller = QuorumController(bootstrap=())
    for batch in log_batches(data / PARTITION):
        if not batch.is_control:
            for value in batch.iter_values():
                controller.replay(value)
    return {
        record.id: _binding(record) for record, _ in controller.snapshot_records()
        if isinstance(record, AccessControlEntryRecord)
    }


def test_acl_rpcs_answer_alike(authorized_pair: dict[str, PairNode]) -> None:
    nodes = authorized_pair
    ports = {name: node.port for name, node in nodes.items()}
    differences: list[str] = []
    answered: list[tuple[str, Any]] = []
    for case, request, version in _cases():
        answers = {name: _answer(port, request, version) for name, port in ports.items()}
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
    assert not differences, f"{len(differences)} cases differ:\n" + "\n".join(differences) + "\n" + trace
    batches = {name: _acl_batches(node.data) for name, node in nodes.items()}
    assert len(batches["stock"]) >= 5, batches["stock"]
    assert batches["kwire"] == batches["stock"]
    snapshots = {name: _newest_snapshot_acls(node.data) for name, node in nodes.items()}
    assert sorted(snapshots["kwire"].values()) == sorted(snapshots["stock"].values())
    assert len(snapshots["stock"]) == 9, snapshots["stock"]
    assert _replayed(nodes["stock"].data) == snapshots["stock"]
    assert _replayed(nodes["kwire"].data) == snapshots["kwire"]
