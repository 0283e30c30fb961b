"""Authorization on a controller with Kafka's ``StandardAuthorizer``, against a stock controller
of the newest pinned release: both with ``super.users=User:admin`` and
``allow.everyone.if.no.acl.found=true``, every request from ``User:ANONYMOUS`` (their PLAINTEXT
listener's principal) or, inside an Envelope, from the principal it forwards.

One sequence goes to both nodes: while the cluster has no ACL everyone may do anything; an
ALLOW of ALTER for ANONYMOUS then leaves it ALTER and the DESCRIBE that ALTER implies, and
refuses CLUSTER_ACTION and ALTER_CONFIGS; a DENY of DESCRIBE from its host refuses DESCRIBE alone;
an ALLOW of CLUSTER_ACTION opens Envelopes, whose inner requests are decided for the forwarded
principal (a super user, a stranger); a DENY of ALL for ``User:*`` closes everything but to the
super user. The answers must be equal, with the text of Kafka's Java request object in a
CLUSTER_AUTHORIZATION_FAILED message set aside (``Request <...> needs ALTER permission.``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.differential import (
    CAUGHT_UP,
    PairNode,
    acl_answer,
    broker_features,
    finalized_features,
    forwarded,
    registration,
    send,
    start_pair,
)
from compat.harness import KafkaRelease
from kwire.uuid import Uuid
from messages.generated.add_raft_voter_request import AddRaftVoterRequest
from messages.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from messages.generated.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from messages.generated.alter_configs_request import AlterableConfig as LegacyConfig
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_configs_request import AlterConfigsResource as LegacyResource
from messages.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from messages.generated.begin_quorum_epoch_request import BeginQuorumEpochRequest
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.create_acls_request import AclCreation, CreateAclsRequest
from messages.generated.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from messages.generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from messages.generated.end_quorum_epoch_request import EndQuorumEpochRequest
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.fetch_request import FetchRequest, ReplicaState
from messages.generated.fetch_snapshot_request import FetchSnapshotRequest
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from messages.generated.remove_raft_voter_request import RemoveRaftVoterRequest
from messages.generated.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from messages.generated.update_raft_voter_request import UpdateRaftVoterRequest
from messages.generated.vote_request import VoteRequest
from messages.protocol import decode_response
from messages.runtime import Message

pytestmark = pytest.mark.compat

SETTINGS = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:admin\n"
    "allow.everyone.if.no.acl.found=true\n"
)
CLUSTER, ALL, ALTER, DESCRIBE, CLUSTER_ACTION = 4, 2, 7, 8, 9
DENY, ALLOW, LITERAL = 2, 3, 3


@pytest.fixture
def authorizing_pair(newest_kafka: KafkaRelease, tmp_path: Path) -> Iterator[dict[str, PairNode]]:
    with start_pair(newest_kafka, tmp_path, "leader", SETTINGS) as nodes:
        yield nodes


def _acl(principal: str, operation: int, permission: int, host: str = "*") -> CreateAclsRequest:
    return CreateAclsRequest(creations=[AclCreation(
        resource_type=CLUSTER, resource_name="kafka-cluster", resource_pattern_type=LITERAL, principal=principal,
        host=host, operation=operation, permission_type=permission)])


DESCRIBE_ACLS = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                    principal_filter=None, host_filter=None, operation=1, permission_type=1)
QUOTA = AlterClientQuotasRequest(entries=[EntryData(entity=[EntityData(entity_type="user", entity_name="q")],
                                                    ops=[OpData(key="producer_byte_rate", value=10.0, remove=False)])],
                                 validate_only=True)
HEARTBEAT = BrokerHeartbeatRequest(broker_id=9, broker_epoch=1, current_metadata_offset=0)
ELECT = ElectLeadersRequest(election_type=0, topic_partitions=[TopicPartitions(topic="none", partitions=[0])],
                            timeout_ms=5000)
REASSIGNMENTS = ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None)
SCRAM = AlterUserScramCredentialsRequest(deletions=[], upsertions=[ScramCredentialUpsertion(
    name="sam", mechanism=1, iterations=4096, salt=b"salt", salted_password=bytes(32))])
FEATURES = UpdateFeaturesRequest(timeout_ms=5000, feature_updates=[FeatureUpdateKey(
    feature="group.version", max_version_level=1, upgrade_type=1)], validate_only=True)


CREATE, DELETE, READ, PREFIXED, TOPIC = 5, 6, 3, 4, 2


def _on_topic(name: str, pattern: int, principal: str, operation: int) -> AclCreation:
    return AclCreation(resource_type=TOPIC, resource_name=name, resource_pattern_type=pattern, principal=principal,
                       host="*", operation=operation, permission_type=ALLOW)


def _topic(name: str) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=-1, replication_factor=-1,
                          assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[5])], configs=[])


def _register(side: dict[str, Any]) -> Message:
    side["registering"] = True
    return registration(5, broker_features(side["finalized"]))


def _caught_up(side: dict[str, Any]) -> Message:
    return BrokerHeartbeatRequest(broker_id=5, broker_epoch=side["epoch"], current_metadata_offset=CAUGHT_UP)


def _cases() -> list[tuple[str, Message | Callable[[dict[str, Any]], Message], int]]:
    return [
        ("no ACL yet: describe ACLs", DESCRIBE_ACLS, 3),
        ("no ACL yet: a heartbeat", HEARTBEAT, 2),
        ("allow ANONYMOUS to ALTER the cluster", _acl("User:ANONYMOUS", ALTER, ALLOW), 3),
        ("ALTER implies DESCRIBE: describe ACLs", DESCRIBE_ACLS, 3),
        ("ALTER_CONFIGS refused: client quotas", QUOTA, 1),
        ("CLUSTER_ACTION refused: a heartbeat", HEARTBEAT, 2),
        ("CLUSTER_ACTION refused: producer ids", AllocateProducerIdsRequest(broker_id=9, broker_epoch=1), 0),
        ("ALTER allowed: elect leaders", ELECT, 2),
        ("DESCRIBE allowed: list reassignments", REASSIGNMENTS, 0),
        ("ALTER allowed: describe the cluster", DescribeClusterRequest(include_cluster_authorized_operations=False), 1),
        ("an Envelope without CLUSTER_ACTION", forwarded("User:admin", DESCRIBE_ACLS, 3), 0),
        ("deny ANONYMOUS DESCRIBE from 127.0.0.1", _acl("User:ANONYMOUS", DESCRIBE, DENY, "127.0.0.1"), 3),
        ("DESCRIBE denied: describe ACLs", DESCRIBE_ACLS, 3),
        ("DESCRIBE denied: list reassignments", REASSIGNMENTS, 0),
        ("a DENY of DESCRIBE leaves ALTER: SCRAM", SCRAM, 0),
        ("allow ANONYMOUS CLUSTER_ACTION", _acl("User:ANONYMOUS", CLUSTER_ACTION, ALLOW), 3),
        ("CLUSTER_ACTION allowed: a heartbeat", HEARTBEAT, 2),
        ("register broker 5", _register, 4),
        ("broker 5 catches up", _caught_up, 2),
        ("topic ACLs: secret-* for another user, some rights on secret-made", CreateAclsRequest(creations=[
            _on_topic("secret-", PREFIXED, "User:other", READ),
            *(_on_topic("secret-made", LITERAL, "User:ANONYMOUS", op) for op in (CREATE, ALTER, DELETE)),
        ]), 3),
        ("create an open, a refused and an undescribable topic", CreateTopicsRequest(topics=[
            _topic("open-1"), _topic("secret-x"), _topic("secret-made")], timeout_ms=5000, validate_only=False), 7),
        ("grow the three topics", CreatePartitionsRequest(topics=[
            CreatePartitionsTopic(name=name, count=2, assignments=[CreatePartitionsAssignment(broker_ids=[5])])
            for name in ("open-1", "secret-x", "secret-made")], timeout_ms=5000, validate_only=False), 3),
        ("alter configs of the topics and the cluster", IncrementalAlterConfigsRequest(resources=[
            AlterConfigsResource(resource_type=t, resource_name=n, configs=[
                AlterableConfig(name=k, config_operation=0, value=v)])
            for t, n, k, v in ((2, "open-1", "retention.ms", "5000"), (2, "secret-made", "retention.ms", "5000"),
                               (4, "", "log.cleaner.threads", "2"))
        ], validate_only=False), 1),
        ("legacy alter configs of a refused topic", AlterConfigsRequest(resources=[LegacyResource(
            resource_type=2, resource_name="secret-made", configs=[LegacyConfig(name="retention.ms", value="7")])],
            validate_only=False), 2),
        ("describe configs of the topics and a broker", DescribeConfigsRequest(resources=[
            DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=["retention.ms"])
            for t, n in ((2, "open-1"), (2, "secret-made"), (4, "1"))], include_synonyms=False), 4),
        ("delete the topics", DeleteTopicsRequest(topic_names=["open-1", "secret-x", "secret-made", "never"],
                                                   timeout_ms=5000), 5),
        ("an Envelope for a super user", forwarded("User:admin", QUOTA, 1), 0),
        ("an Envelope for a stranger", forwarded("User:stranger", QUOTA, 1), 0),
        ("an Envelope for a stranger's ACL", forwarded("User:stranger", _acl("User:x", ALTER, ALLOW), 3), 0),
        ("deny everyone ALL", _acl("User:*", ALL, DENY), 3),
        ("everything refused: create an ACL", _acl("User:y", ALTER, ALLOW), 3),
        ("everything refused: features", FEATURES, 1),
        ("everything refused: an Envelope", forwarded("User:admin", QUOTA, 1), 0),
        *((f"everything refused: {type(request).__name__.removesuffix('Request')}", request, version)
          for request, version in _raft_requests()),
    ]


def _raft_requests() -> list[tuple[Message, int]]:
    """One of each raft RPC (their content does not matter: the refusal comes first)."""
    return [
        (FetchRequest(replica_state=ReplicaState(replica_id=-1), max_wait_ms=0, topics=[]), 17),
        (FetchSnapshotRequest(topics=[]), 1),
        (VoteRequest(cluster_id=None, topics=[]), 2),
        (BeginQuorumEpochRequest(cluster_id=None, topics=[]), 1),
        (EndQuorumEpochRequest(cluster_id=None, topics=[]), 1),
        (DescribeQuorumRequest(topics=[]), 2),
        (AddRaftVoterRequest(cluster_id=None, voter_id=7, voter_directory_id=Uuid.from_longs(7, 7), listeners=[]), 0),
        (RemoveRaftVoterRequest(cluster_id=None, voter_id=7, voter_directory_id=Uuid.from_longs(7, 7)), 0),
        (UpdateRaftVoterRequest(cluster_id=None, voter_id=7, voter_directory_id=Uuid.from_longs(7, 7), listeners=[]), 0),
    ]


_REQUEST_TEXT = re.compile(r"^Request .* needs (\w+) permission\.$")


def _normal(value: Any) -> Any:
    """``value`` with a CLUSTER_AUTHORIZATION_FAILED message's request text set aside."""
    if isinstance(value, str):
        found = _REQUEST_TEXT.match(value)
        return f"Request <request> needs {found.group(1)} permission." if found else value
    if isinstance(value, (list, tuple)):
        return type(value)(_normal(v) for v in value)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    return value


def _answer(port: int, request: Message, version: int, side: dict[str, Any]) -> Any:
    response = trio.run(send, port, request, version)
    if side.pop("registering", False) and not isinstance(response, str):
        side["epoch"] = response.broker_epoch
    if isinstance(response, str):
        return response.replace(str(port), "<port>")
    if isinstance(request, EnvelopeRequest):
        if response.response_data is None:
            return "Envelope", int(response.error_code)
        _, inner = decode_response(bytes(response.response_data), _inner_key(request), _inner_version(request))
        return "Envelope", int(response.error_code), _answer_of(inner)
    if isinstance(request, BrokerRegistrationRequest):
        return type(response).__name__, int(response.error_code)
    return _answer_of(response)


def _inner_key(envelope: EnvelopeRequest) -> int:
    return int.from_bytes(bytes(envelope.request_data)[0:2], "big")


def _inner_version(envelope: EnvelopeRequest) -> int:
    return int.from_bytes(bytes(envelope.request_data)[2:4], "big")


def _answer_of(response: Message) -> Any:
    if type(response).__name__.endswith("AclsResponse"):
        return _normal(acl_answer(response))
    json = response.to_json(response.HIGHEST_VERSION)
    for volatile in ("throttleTimeMs", "clusterId", "controllerId", "brokers", "endpointType", "isFenced"):
        json.pop(volatile, None)
    if type(response).__name__ == "DeleteTopicsResponse":  # Kafka shuffles the results
        json["responses"] = sorted(json["responses"], key=repr)
    return type(response).__name__, _normal(_ids_set_aside(json))


def _ids_set_aside(value: Any) -> Any:
    """``value`` with each topic id replaced by whether it is set (the ids are random)."""
    if isinstance(value, dict):
        return {k: (v != "AAAAAAAAAAAAAAAAAAAAAA" if k == "topicId" else _ids_set_aside(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_ids_set_aside(v) for v in value]
    return value


def test_controller_requests_are_authorized_as_kafka_authorizes_them(authorizing_pair: dict[str, PairNode]) -> None:
    ports = {name: node.port for name, node in authorizing_pair.items()}
    sides: dict[str, dict[str, Any]] = {name: {"finalized": finalized_features(port)} for name, port in ports.items()}
    differences: list[str] = []
    answered: list[tuple[str, Any]] = []
    for case, build, version in _cases():
        answers = {}
        for name, port in ports.items():
            request = build(sides[name]) if callable(build) else build
            answers[name] = _answer(port, request, version, sides[name])
        answered.append((case, answers["stock"]))
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    for name, node in authorizing_pair.items():
        assert node.proc.poll() is None, f"{name} died"
    trace = "\n".join(f"{case}: {answer}" for case, answer in answered)
    outcomes = dict(answered)
    # the sequence reached what it is about on the stock side
    assert outcomes["CLUSTER_ACTION refused: a heartbeat"][1]["errorCode"] == 31, trace
    assert outcomes["an Envelope without CLUSTER_ACTION"] == ("Envelope", 31), trace
    assert outcomes["DESCRIBE denied: describe ACLs"][1] == 31, trace
    assert outcomes["everything refused: create an ACL"][1][0][0] == 31, trace
    assert outcomes["everything refused: Vote"][1]["errorCode"] == 31, trace
    created = outcomes["create an open, a refused and an undescribable topic"][1]["topics"]
    assert [t["errorCode"] for t in created] == [0, 0, 29], trace
    assert created[1]["topicConfigErrorCode"] == 29 and created[1]["numPartitions"] == -1, trace
    assert not differences, f"{len(differences)} cases differ:\n" + "\n".join(differences) + "\n" + trace
