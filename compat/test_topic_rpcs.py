"""CreateTopics, CreatePartitions, AlterPartition, AssignReplicasToDirs, IncrementalAlterConfigs,
AlterConfigs, DescribeConfigs, DeleteTopics, AlterPartitionReassignments and
ListPartitionReassignments (a move completed by AlterPartition, a cancel), ElectLeaders and the
broker lifecycle (a controlled
shutdown, fencing and unfencing by heartbeat, a refused re-registration, an offline log
directory, an unregistration, each moving partitions) against a stock controller of the newest pinned release put in the same state
(a standalone controller, node 1, three registered and unfenced brokers: 5 and 6 with one log
directory each, 7 with two).

One sequence of requests goes to both nodes, each request to the stock node and then to kwire;
the answers must be equal (topic ids compared as "set or not", and as the id the node gave when
a request names one), and so must the topic records each wrote to its log. Replica placement is
random on both sides, so a placed partition is compared by its shape: the number of its
replicas, its ISR being all of them, its leader being the first, and each replica's directory
being its broker's one directory (or unassigned for broker 7). The partition changes a broker's
lifecycle writes are compared for the manually assigned topics, in a fixed order. Both nodes
write a metadata snapshot after every committed batch: the stock node's newest one holds the
records kwire's controller writes for the image of the same log prefix.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
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
    newest_snapshot,
    registration,
    send,
)
from compat.harness import PARTITION, KafkaRelease, log_batches
from kwire.uuid import Uuid
from messages.generated.alter_configs_request import AlterableConfig as LegacyConfig
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_configs_request import AlterConfigsResource as LegacyResource
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from messages.generated.alter_partition_request import AlterPartitionRequest, BrokerState
from messages.generated.alter_partition_request import PartitionData as AlterData
from messages.generated.alter_partition_request import TopicData as AlterTopic
from messages.generated.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
)
from messages.generated.assign_replicas_to_dirs_request import PartitionData as AssignedPartition
from messages.generated.assign_replicas_to_dirs_request import TopicData as AssignedTopic
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.create_acls_request import AclCreation, CreateAclsRequest
from messages.generated.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from messages.generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from messages.generated.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_configs_request import DescribeConfigsRequest
from messages.generated.describe_configs_request import DescribeConfigsResource as DescribeResource
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.elect_leaders_request import TopicPartitions as ElectTopic
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.metadata import decode_record, encode_record
from messages.runtime import Message
from server.controller.controller import ControlManagers

pytestmark = pytest.mark.compat

DIRS = {5: (Uuid.from_longs(9, 5),), 6: (Uuid.from_longs(9, 6),), 7: (Uuid.from_longs(9, 71), Uuid.from_longs(9, 72))}
BROKERS = tuple(DIRS)
UNASSIGNED = Uuid.from_longs(0, 1)
"""``DirectoryId.UNASSIGNED``: the directory of a replica on a broker with several."""


@dataclass
class Side:
    """What one node told: the broker epochs it gave and the ids of the topics it created."""

    epochs: dict[int, int] = field(default_factory=dict)
    topic_ids: dict[str, Uuid] = field(default_factory=dict)
    local: dict[str, str] = field(default_factory=dict)
    """Text that differs between the nodes by setup alone (port, data directory) -> a label."""
    features: list[Any] = field(default_factory=list)
    """The features the brokers register with."""
    quiet: set[int] = field(default_factory=set)
    """Brokers the keep-alive heartbeats leave alone (shutting down, or gone)."""
    registering: int | None = None
    """The broker whose BrokerRegistration is being answered."""

    def id_label(self, topic_id: Uuid) -> str:
        if topic_id == Uuid():
            return "zero"
        names = [name for name, known in self.topic_ids.items() if known == topic_id]
        return f"id of {names[0]}" if names else "a new id"


def _topic(
    name: str, partitions: int = 1, rf: int = 1, *, configs: dict[str, str | None] | None = None,
    assignments: dict[int, list[int]] | None = None,
) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=b) for i, b in (assignments or {}).items()],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


def _create(*topics: CreatableTopic, validate_only: bool = False) -> Callable[[Side], Message]:
    return lambda _side: CreateTopicsRequest(topics=list(topics), timeout_ms=10_000, validate_only=validate_only)


def _grow(*topics: tuple[str, int, list[list[int]] | None], validate_only: bool = False) -> Callable[[Side], Message]:
    return lambda _side: CreatePartitionsRequest(
        topics=[
            CreatePartitionsTopic(
                name=name, count=count,
                assignments=None if given is None else [CreatePartitionsAssignment(broker_ids=b) for b in given],
            )
            for name, count, given in topics
        ],
        timeout_ms=10_000,
        validate_only=validate_only,
    )


def _alter(
    broker: int, topic: str, index: int, isr: list[int], *, leader_epoch: int = 0, partition_epoch: int,
    recovery: int = 0, epochs: dict[int, int] | None = None, broker_epoch: int | None = None, version: int = 3,
) -> Callable[[Side], Message]:
    """AlterPartition from ``broker`` for ``topic``-``index`` (topic id as this node gave it,
    a fixed unknown id for an unknown name); ISR members carry this node's broker epochs unless
    ``epochs`` overrides them, and the request this node's epoch of ``broker`` unless
    ``broker_epoch`` does. At v2 the ISR is sent without epochs."""

    def build(side: Side) -> Message:
        members = [BrokerState(broker_id=b, broker_epoch=(epochs or {}).get(b, side.epochs.get(b, -1))) for b in isr]
        return AlterPartitionRequest(
            broker_id=broker,
            broker_epoch=side.epochs[broker] if broker_epoch is None else broker_epoch,
            topics=[AlterTopic(
                topic_id=side.topic_ids.get(topic, Uuid.from_longs(5, 5)),
                partitions=[AlterData(
                    partition_index=index, leader_epoch=leader_epoch,
                    new_isr=isr if version < 3 else [], new_isr_with_epochs=members if version >= 3 else [],
                    leader_recovery_state=recovery, partition_epoch=partition_epoch,
                )],
            )],
        )

    return build


def _assign(broker: int, directory: Uuid, *replicas: tuple[str, int], broker_epoch: int | None = None) -> Callable[[Side], Message]:
    """AssignReplicasToDirs from ``broker``: ``replicas`` (topic, partition) into ``directory``."""

    def build(side: Side) -> Message:
        by_topic: dict[str, list[int]] = {}
        for topic, index in replicas:
            by_topic.setdefault(topic, []).append(index)
        return AssignReplicasToDirsRequest(
            broker_id=broker,
            broker_epoch=side.epochs[broker] if broker_epoch is None else broker_epoch,
            directories=[DirectoryData(id=directory, topics=[
                AssignedTopic(
                    topic_id=side.topic_ids.get(topic, Uuid.from_longs(5, 5)),
                    partitions=[AssignedPartition(partition_index=i) for i in indexes],
                )
                for topic, indexes in by_topic.items()
            ])],
        )

    return build


TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _configs(
    *resources: tuple[int, str, list[tuple[str, int, str | None]]], validate_only: bool = False
) -> Callable[[Side], Message]:
    """IncrementalAlterConfigs: (type, name, [(config, operation, value)])."""
    return lambda _side: IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=t, resource_name=n,
                configs=[AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in configs],
            )
            for t, n, configs in resources
        ],
        validate_only=validate_only,
    )


def _legacy(*resources: tuple[int, str, dict[str, str | None]]) -> Callable[[Side], Message]:
    """AlterConfigs: (type, name, {config: value})."""
    return lambda _side: AlterConfigsRequest(
        resources=[
            LegacyResource(
                resource_type=t, resource_name=n, configs=[LegacyConfig(name=k, value=v) for k, v in configs.items()]
            )
            for t, n, configs in resources
        ],
        validate_only=False,
    )


def _describe(
    *resources: tuple[int, str] | tuple[int, str, list[str]], synonyms: bool = True
) -> Callable[[Side], Message]:
    """DescribeConfigs: (type, name) for all configs, (type, name, [config]) for some."""
    return lambda _side: DescribeConfigsRequest(
        resources=[
            DescribeResource(resource_type=r[0], resource_name=r[1], configuration_keys=r[2] if len(r) > 2 else None)
            for r in resources
        ],
        include_synonyms=synonyms,
    )


def _lifecycle_heartbeat(
    broker: int, *, shut_down: bool = False, fence: bool = False, offline: tuple[Uuid, ...] = ()
) -> Callable[[Side], Message]:
    """A heartbeat of ``broker`` (caught up) at its latest epoch, reporting ``offline`` log
    directories; one that asks to shut down or to be fenced takes the broker out of the
    keep-alive heartbeats, a plain one puts it back."""

    def build(side: Side) -> Message:
        if shut_down or fence:
            side.quiet.add(broker)
        else:
            side.quiet.discard(broker)
        return BrokerHeartbeatRequest(
            broker_id=broker, broker_epoch=side.epochs[broker], current_metadata_offset=CAUGHT_UP,
            want_shut_down=shut_down, want_fence=fence, offline_log_dirs=list(offline),
        )

    return build


def _reregister(broker: int) -> Callable[[Side], Message]:
    """A new incarnation of ``broker`` (v4) naming its predecessor's epoch (a clean shutdown)."""

    def build(side: Side) -> Message:
        side.registering = broker
        request = registration(broker, side.features, incarnation=Uuid.from_longs(77, broker), dirs=DIRS[broker])
        request.previous_broker_epoch = side.epochs[broker]
        return request

    return build


def _unregister(broker: int) -> Callable[[Side], Message]:
    def build(side: Side) -> Message:
        side.quiet.add(broker)
        return UnregisterBrokerRequest(broker_id=broker)

    return build


PREFERRED, UNCLEAN = 0, 1


def _elect(kind: int, *topics: tuple[str, list[int]]) -> Callable[[Side], Message]:
    return lambda _side: ElectLeadersRequest(
        election_type=kind,
        topic_partitions=[ElectTopic(topic=name, partitions=indexes) for name, indexes in topics],
        timeout_ms=10_000,
    )


def _reassign(
    *topics: tuple[str, list[tuple[int, list[int] | None]]], allow_rf_change: bool = True
) -> Callable[[Side], Message]:
    """AlterPartitionReassignments: per topic, (partition, target replicas or None to cancel)."""
    return lambda _side: AlterPartitionReassignmentsRequest(
        timeout_ms=10_000,
        allow_replication_factor_change=allow_rf_change,
        topics=[
            ReassignableTopic(name=name, partitions=[
                ReassignablePartition(partition_index=index, replicas=replicas) for index, replicas in targets
            ])
            for name, targets in topics
        ],
    )


def _reassignments(topics: list[tuple[str, list[int]]] | None) -> Callable[[Side], Message]:
    """ListPartitionReassignments of the named partitions, or of all (None)."""
    return lambda _side: ListPartitionReassignmentsRequest(
        timeout_ms=10_000,
        topics=None if topics is None else [
            ListPartitionReassignmentsTopics(name=name, partition_indexes=indexes) for name, indexes in topics
        ],
    )


def _delete_names(*names: str) -> Callable[[Side], Message]:
    return lambda _side: DeleteTopicsRequest(topic_names=list(names), timeout_ms=10_000)


def _delete_states(*states: tuple[str | None, str | None]) -> Callable[[Side], Message]:
    """v6 topics: (name, None) by name, (None, topic) by the id this node gave ``topic``,
    (None, None) neither; an unknown topic's id is a fixed unknown id."""

    def build(side: Side) -> Message:
        return DeleteTopicsRequest(
            topics=[
                DeleteTopicState(name=name, topic_id=Uuid() if by_id is None else side.topic_ids.get(by_id, Uuid.from_longs(5, 5)))
                for name, by_id in states
            ],
            timeout_ms=10_000,
        )

    return build


def _cases() -> list[tuple[str, Callable[[Side], Message], int]]:
    big = {"cleanup.policy": "compact", "retention.ms": "1000", "min.insync.replicas": "2", "segment.bytes": "2000000"}
    return [
        ("create t1: 6 partitions, replication factor 3", _create(_topic("t1", 6, 3)), 7),
        ("create t1 again", _create(_topic("t1", 6, 3)), 7),
        ("create with configs", _create(_topic("configured", 2, 2, configs=big)), 7),
        ("create with defaults (-1, -1)", _create(_topic("defaults", -1, -1)), 7),
        ("create a.b", _create(_topic("a.b")), 7),
        ("create a_b (collides)", _create(_topic("a_b")), 7),
        ("invalid names", _create(_topic(""), _topic("bad name"), _topic("x" * 250), _topic("."), _topic("..")), 7),
        ("duplicate names", _create(_topic("dup"), _topic("dup"), _topic("single")), 7),
        ("__cluster_metadata", _create(_topic("__cluster_metadata")), 7),
        ("replication factor 0, -2 and 4", _create(_topic("rf0", 1, 0), _topic("rfm2", 1, -2), _topic("rf4", 1, 4)), 7),
        ("partitions 0 and -3", _create(_topic("p0", 0, 1), _topic("pm3", -3, 1)), 7),
        ("unknown config", _create(_topic("c1", configs={"no.such.config": "1"})), 7),
        ("bad config values", _create(
            _topic("c2", configs={"retention.ms": "abc"}),
            _topic("c3", configs={"segment.bytes": "100"}),
            _topic("c4", configs={"cleanup.policy": "foo"}),
            _topic("c5", configs={"compression.type": "bad"}),
            _topic("c6", configs={"min.cleanable.dirty.ratio": "2"}),
            _topic("c7", configs={"preallocate": "yes"}),
            _topic("c8", configs={"cleanup.policy": "compact,"}),
            _topic("c9", configs={"remote.storage.enable": "true"}),
            _topic("c10", configs={"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}),
        ), 7),
        ("null config value", _create(_topic("c11", configs={"retention.ms": None})), 7),
        ("manual assignment", _create(_topic("manual", -1, -1, assignments={0: [5, 6], 1: [6, 7], 2: [7, 5]})), 7),
        ("manual with a replication factor", _create(_topic("m1", -1, 2, assignments={0: [5, 6]})), 7),
        ("manual with a partition count", _create(_topic("m2", 1, -1, assignments={0: [5, 6]})), 7),
        ("manual with a gap", _create(_topic("m3", -1, -1, assignments={0: [5], 2: [6]})), 7),
        ("manual with an unknown broker", _create(_topic("m4", -1, -1, assignments={0: [5, 99]})), 7),
        ("manual naming a broker twice", _create(_topic("m5", -1, -1, assignments={0: [5, 5]})), 7),
        ("manual of uneven sizes", _create(_topic("m6", -1, -1, assignments={0: [5, 6], 1: [5]})), 7),
        ("manual, empty", _create(_topic("m7", -1, -1, assignments={0: []})), 7),
        ("validate only", _create(_topic("checked", 3, 2), validate_only=True), 7),
        ("too many partitions", _create(_topic("huge1", 6000, 1), _topic("huge2", 5000, 1)), 7),
        ("10,000 partitions: one record over the bound", _create(_topic("huge3", 10_000, 1)), 7),
        ("create v2", _create(_topic("v2topic", 2, 1)), 2),
        ("create v5", _create(_topic("v5topic", 2, 1, configs={"retention.ms": "5000"})), 5),
        ("grow t1 to 8", _grow(("t1", 8, None)), 3),
        ("grow manual to 5, given", _grow(("manual", 5, [[5, 7], [6, 5]])), 3),
        ("grow t1 to 8 again", _grow(("t1", 8, None)), 3),
        ("shrink t1 to 2", _grow(("t1", 2, None)), 3),
        ("grow an unknown topic", _grow(("nope", 3, None)), 3),
        ("grow a topic twice in one request", _grow(("defaults", 3, None), ("defaults", 4, None)), 3),
        ("grow with too few assignments", _grow(("configured", 5, [[5, 6]])), 3),
        ("grow with a replica count unlike the topic's", _grow(("configured", 3, [[5]])), 3),
        ("grow with an unknown broker", _grow(("configured", 3, [[5, 99]])), 3),
        ("grow, validate only", _grow(("v2topic", 4, None), validate_only=True), 3),
        ("grow by too many", _grow(("a.b", 12000, None)), 3),
        ("grow v0", _grow(("v5topic", 3, None)), 0),
        ("create isr: manual, min.insync.replicas 2", _create(_topic(
            "isr", -1, -1, assignments={0: [5, 6, 7], 1: [6, 7, 5]}, configs={"min.insync.replicas": "2"})), 7),
        ("shrink manual-0 to its leader", _alter(5, "manual", 0, [5], partition_epoch=0), 3),
        ("expand manual-0 again", _alter(5, "manual", 0, [5, 6], partition_epoch=1), 3),
        ("stale partition epoch", _alter(5, "manual", 0, [5], partition_epoch=0), 3),
        ("partition epoch ahead", _alter(5, "manual", 0, [5], partition_epoch=9), 3),
        ("leader epoch ahead", _alter(5, "manual", 0, [5], leader_epoch=4, partition_epoch=2), 3),
        ("not the leader", _alter(6, "manual", 0, [6], partition_epoch=2), 3),
        ("ISR without the leader", _alter(5, "manual", 0, [6], partition_epoch=2), 3),
        ("ISR with a non-replica", _alter(5, "manual", 0, [5, 7], partition_epoch=2), 3),
        ("ISR naming a broker twice", _alter(5, "manual", 0, [5, 5], partition_epoch=2), 3),
        ("ISR member at another broker epoch", _alter(5, "manual", 0, [5, 6], partition_epoch=2, epochs={6: 1}), 3),
        ("stale broker epoch of the sender", _alter(5, "manual", 0, [5], partition_epoch=2, broker_epoch=1), 3),
        ("unknown topic id", _alter(5, "never-created", 0, [5], partition_epoch=0), 3),
        ("unknown partition", _alter(5, "manual", 9, [5], partition_epoch=0), 3),
        ("recovering with two in sync", _alter(5, "manual", 0, [5, 6], partition_epoch=2, recovery=1), 3),
        ("nothing to change", _alter(5, "manual", 0, [5, 6], partition_epoch=2), 3),
        ("v2 shrink of manual-1", _alter(6, "manual", 1, [6], partition_epoch=0, version=2), 2),
        ("shrink isr-0 below min.insync.replicas", _alter(5, "isr", 0, [5], partition_epoch=0), 3),
        ("expand isr-0 to min.insync.replicas", _alter(5, "isr", 0, [5, 7], partition_epoch=1), 3),
        ("expand isr-0 fully", _alter(5, "isr", 0, [5, 6, 7], partition_epoch=2), 3),
        ("set a topic config", _configs((TOPIC, "manual", [("retention.ms", SET, "5000")])), 1),
        ("append to a list topic config", _configs((TOPIC, "manual", [("cleanup.policy", APPEND, "compact")])), 1),
        ("subtract from a list topic config", _configs((TOPIC, "manual", [("cleanup.policy", SUBTRACT, "delete")])), 1),
        ("append to a number", _configs((TOPIC, "manual", [("retention.ms", APPEND, "1")])), 1),
        ("delete a topic config", _configs((TOPIC, "manual", [("retention.ms", DELETE, None)])), 1),
        ("a bad topic config value", _configs((TOPIC, "manual", [("segment.bytes", SET, "1")])), 1),
        ("an unknown topic config", _configs((TOPIC, "manual", [("no.such", SET, "1")])), 0),
        ("configs of an unknown topic", _configs((TOPIC, "nope", [("retention.ms", SET, "1")])), 1),
        ("the default topic resource", _configs((TOPIC, "", [("retention.ms", SET, "1")])), 1),
        ("min.insync.replicas of a topic", _configs((TOPIC, "manual", [("min.insync.replicas", SET, "2")])), 1),
        ("a broker's config", _configs((BROKER, "5", [("log.retention.ms", SET, "1000")])), 1),
        ("the same value again", _configs((BROKER, "5", [("log.retention.ms", SET, "1000")])), 1),
        ("the controller's own config", _configs((BROKER, "1", [("log.retention.ms", SET, "1000")])), 1),
        ("an unregistered broker", _configs((BROKER, "99", [("log.retention.ms", SET, "1")])), 1),
        ("a broker name that is no number", _configs((BROKER, "abc", [("log.retention.ms", SET, "1")])), 1),
        ("a negative broker id", _configs((BROKER, "-3", [("log.retention.ms", SET, "1")])), 1),
        ("a cluster default", _configs((BROKER, "", [("log.cleaner.threads", SET, "2")])), 1),
        ("append to a broker list config", _configs((BROKER, "", [("ssl.cipher.suites", APPEND, "A,B")])), 1),
        ("broker-level min.insync.replicas", _configs((BROKER, "6", [("min.insync.replicas", SET, "2")])), 1),
        ("cluster-level min.insync.replicas removed", _configs((BROKER, "", [("min.insync.replicas", DELETE, None)])), 1),
        ("cluster-level min.insync.replicas set", _configs((BROKER, "", [("min.insync.replicas", SET, "1")])), 1),
        ("an unknown resource type", _configs((99, "x", [("a", SET, "b")])), 1),
        ("a resource twice", _configs(
            (TOPIC, "isr", [("retention.ms", SET, "1")]), (TOPIC, "isr", [("retention.ms", SET, "2")])), 1),
        ("several resources at once", _configs(
            (TOPIC, "isr", [("retention.ms", SET, "7000"), ("segment.ms", SET, "9000")]),
            (BROKER, "7", [("log.flush.interval.ms", SET, "100")]),
            (TOPIC, "nope", [("retention.ms", SET, "1")])), 1),
        ("validate only", _configs((TOPIC, "isr", [("retention.ms", SET, "8000")]), validate_only=True), 1),
        ("replace a topic's configs", _legacy((TOPIC, "isr", {"segment.ms": "10000"})), 2),
        ("replace a broker's configs", _legacy((BROKER, "5", {"log.flush.interval.ms": "5"})), 1),
        ("replace the configs of an unknown topic", _legacy((TOPIC, "nope", {"retention.ms": "1"})), 0),
        ("replace with a bad value", _legacy((TOPIC, "isr", {"retention.ms": "x"})), 2),
        ("replace a broker logger's configs", _legacy((BROKER_LOGGER, "1", {"kafka": "DEBUG"})), 2),
        ("describe topics with synonyms", _describe((TOPIC, "manual"), (TOPIC, "isr"), (TOPIC, "t1")), 4),
        ("describe a topic without synonyms, v1", _describe((TOPIC, "isr"), synonyms=False), 1),
        ("describe some configs of a topic", _describe((TOPIC, "isr", ["retention.ms", "segment.ms", "no.such"])), 4),
        ("describe bad and unknown topics", _describe((TOPIC, ""), (TOPIC, "a b"), (TOPIC, ".."), (TOPIC, "nope")), 4),
        ("describe the cluster defaults", _describe((BROKER, "")), 4),
        ("describe the controller's own configs", _describe((BROKER, "1")), 4),
        ("describe other brokers", _describe((BROKER, "5"), (BROKER, "abc"), (BROKER, " 1")), 4),
        ("describe broker loggers", _describe((BROKER_LOGGER, ""), (BROKER_LOGGER, "7"), (BROKER_LOGGER, "x")), 4),
        ("describe client metrics", _describe((CLIENT_METRICS, ""), (CLIENT_METRICS, "subscription")), 4),
        ("describe a group without a name and an unknown type", _describe((GROUP, ""), (99, "x")), 4),
        ("assign a replica of broker 7 to a directory", _assign(7, DIRS[7][0], ("manual", 1)), 0),
        ("assign it again", _assign(7, DIRS[7][0], ("manual", 1)), 0),
        ("assign a partition broker 7 does not replicate", _assign(7, DIRS[7][1], ("manual", 0)), 0),
        ("assign replicas of unknown topics and partitions", _assign(7, DIRS[7][1], ("nope", 0), ("manual", 9)), 0),
        ("assign at a stale broker epoch", _assign(7, DIRS[7][1], ("manual", 2), broker_epoch=1), 0),
        ("assign a led replica to an offline directory", _assign(7, Uuid.from_longs(9, 99), ("manual", 2)), 0),
        ("delete t1 by id, v6", _delete_states((None, "t1")), 6),
        ("delete unknown name and unknown id, v6", _delete_states(("nope", None), (None, "never-created")), 6),
        ("delete with neither name nor id", _delete_states((None, None)), 6),
        ("delete with name and id", lambda side: DeleteTopicsRequest(
            topics=[DeleteTopicState(name="configured", topic_id=side.topic_ids.get("configured", Uuid()))],
            timeout_ms=10_000), 6),
        ("delete a name twice, v5", _delete_names("dup2", "dup2"), 5),
        ("delete by name and by its id", _delete_states(("defaults", None), (None, "defaults")), 6),
        ("delete configured and a.b, v1", _delete_names("configured", "a.b"), 1),
        ("delete again, v4", _delete_names("configured"), 4),
        ("create t1 after its deletion", _create(_topic("t1", 3, 3)), 7),
        ("describe t1 after its deletion and creation", _describe((TOPIC, "t1"), (TOPIC, "configured")), 4),
        ("create a_b after a.b's deletion", _create(_topic("a_b")), 7),
        ("create moving: manual, four partitions",
         _create(_topic("moving", -1, -1, assignments={0: [5, 6], 1: [6, 5], 2: [5, 6], 3: [5, 6]})), 7),
        ("reassign: a move, a reorder, no change and refused targets", _reassign(
            ("moving", [(0, [6, 7]), (1, [5, 6]), (2, [5, 6]), (3, []), (3, [5, 99]), (3, [6, 6]), (9, [5])]),
            ("nope", [(0, [5])]),
        ), 1),
        ("reassign refusing a replication factor change", _reassign(
            ("moving", [(2, [7, 5, 6]), (3, [6, 5])]), allow_rf_change=False), 1),
        ("reassign moving-2 to 5 and 7, v0", _reassign(("moving", [(2, [5, 7])])), 0),
        ("list every reassignment", _reassignments(None), 0),
        ("list named partitions", _reassignments([("moving", [2, 0, 1, 9]), ("nope", [0])]), 0),
        ("list no topics", _reassignments([]), 0),
        ("reassign no topics", _reassign(), 1),
        ("replace moving-2's move by one back to 6 and 5", _reassign(("moving", [(2, [6, 5])])), 1),
        ("list the replaced move", _reassignments([("moving", [2])]), 0),
        ("cancel moving-2, and moving-1 which is not moving", _reassign(("moving", [(2, None), (1, None)])), 1),
        ("broker 7 joins moving-0's ISR: the move completes and leadership leaves 5",
         _alter(5, "moving", 0, [5, 6, 7], partition_epoch=1), 3),
        ("list after the move", _reassignments(None), 0),
        # last: a broker unfenced after a controlled shutdown keeps its registration's
        # in-controlled-shutdown mark (Kafka's too), so a placement after this would be chance
        ("broker 6 asks to shut down: its leadership moves", _lifecycle_heartbeat(6, shut_down=True), 2),
        ("broker 6 asks again: it may shut down", _lifecycle_heartbeat(6, shut_down=True), 2),
        ("broker 6 registers again while its session is valid", _reregister(6), 4),
        ("broker 6 catches up: unfenced, it leads the leaderless partitions", _lifecycle_heartbeat(6), 2),
        ("broker 5 asks to be fenced", _lifecycle_heartbeat(5, fence=True), 2),
        ("broker 5 is unfenced again", _lifecycle_heartbeat(5), 2),
        ("broker 7 reports its first directory offline: the partitions on it move",
         _lifecycle_heartbeat(7, offline=(DIRS[7][0],)), 2),
        ("broker 7 is unregistered", _unregister(7), 0),
        ("preferred leaders of manual and isr", _elect(PREFERRED, ("manual", [0, 1, 2, 3, 4, 9]), ("isr", [0, 1])), 2),
        ("preferred leaders again: not needed", _elect(PREFERRED, ("manual", [0, 1, 2, 3, 4])), 2),
        ("unclean leaders of isr", _elect(UNCLEAN, ("isr", [0, 1])), 2),
        ("leaders of an unknown topic, v1", _elect(PREFERRED, ("nope", [0])), 1),
        ("preferred leaders, v0", _elect(PREFERRED, ("manual", [0])), 0),
        ("an unknown election type", _elect(5, ("manual", [0])), 2),
        # without an authorizer the ACL RPCs answer SECURITY_DISABLED (their answers with one
        # are compat/test_security_rpcs.py's)
        ("CreateAcls without an authorizer", lambda _side: CreateAclsRequest(creations=[
            AclCreation(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
                        operation=3, permission_type=3)] * 2), 3),
        ("DescribeAcls without an authorizer", lambda _side: DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1), 3),
        ("DeleteAcls without an authorizer", lambda _side: DeleteAclsRequest(filters=[DeleteAclsFilter(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1)]), 3),
    ]


def _normalize(response: Any, side: Side) -> tuple[Any, ...]:
    name = type(response).__name__
    if name == "CreateTopicsResponse":
        results = []
        for topic in response.topics:
            if topic.error_code == 0 and topic.topic_id != Uuid():
                side.topic_ids.setdefault(topic.name, topic.topic_id)
            configs = None if topic.configs is None else sorted(
                (c.name, c.value, c.read_only, c.config_source, c.is_sensitive) for c in topic.configs
            )
            results.append((
                topic.name, int(topic.error_code), topic.error_message, topic.topic_id != Uuid(),
                topic.topic_config_error_code, topic.num_partitions, topic.replication_factor, configs,
            ))
        return name, sorted(results, key=repr)
    if name == "AlterPartitionResponse":
        return name, int(response.error_code), [
            (side.id_label(t.topic_id), [
                (p.partition_index, int(p.error_code), p.leader_id, p.leader_epoch, p.isr, p.leader_recovery_state,
                 p.partition_epoch) for p in t.partitions
            ]) for t in response.topics
        ]
    if name in ("IncrementalAlterConfigsResponse", "AlterConfigsResponse"):
        return name, sorted(
            ((r.resource_type, r.resource_name, int(r.error_code), r.error_message) for r in response.responses), key=repr
        )
    if name == "AssignReplicasToDirsResponse":
        return name, int(response.error_code), [
            (str(d.id), [(side.id_label(t.topic_id), [(p.partition_index, int(p.error_code)) for p in t.partitions])
                         for t in d.topics])
            for d in response.directories
        ]
    if name == "ElectLeadersResponse":
        return name, int(response.error_code), [
            (r.topic, [(p.partition_id, int(p.error_code), p.error_message) for p in r.partition_result])
            for r in response.replica_election_results
        ]
    if name == "AlterPartitionReassignmentsResponse":
        return name, int(response.error_code), response.error_message, response.allow_replication_factor_change, [
            (t.name, [(p.partition_index, int(p.error_code), p.error_message) for p in t.partitions])
            for t in response.responses
        ]
    if name == "ListPartitionReassignmentsResponse":
        return name, int(response.error_code), response.error_message, [
            (t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas) for p in t.partitions])
            for t in response.topics
        ]
    if name == "BrokerHeartbeatResponse":
        return name, int(response.error_code), response.is_caught_up, response.is_fenced, response.should_shut_down
    if name == "BrokerRegistrationResponse":
        if response.error_code == 0 and side.registering is not None:
            side.epochs[side.registering] = response.broker_epoch
        side.registering = None
        return name, int(response.error_code)
    if name == "DescribeConfigsResponse":

        def shown(value: str | None) -> str | None:
            for text, label in side.local.items():
                value = None if value is None else value.replace(text, label)
            return value

        return name, [
            (r.resource_type, r.resource_name, int(r.error_code), r.error_message, [
                (c.name, shown(c.value), c.read_only, c.config_source, c.is_sensitive, c.config_type, c.documentation,
                 [(y.name, shown(y.value), y.source) for y in c.synonyms])
                for c in r.configs
            ])
            for r in response.results
        ]
    if name == "CreatePartitionsResponse":
        return name, sorted(((r.name, int(r.error_code), r.error_message) for r in response.results), key=repr)
    if name == "DeleteTopicsResponse":
        results = sorted(
            ((r.name, side.id_label(r.topic_id), int(r.error_code), r.error_message) for r in response.responses), key=repr
        )
        return name, results
    if name in ("CreateAclsResponse", "DescribeAclsResponse", "DeleteAclsResponse"):
        return acl_answer(response)
    return name, int(response.error_code)


def _heartbeat_all(port: int, side: Side) -> None:
    for broker_id in BROKERS:
        if broker_id in side.quiet:
            continue
        trio.run(send, port, BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=side.epochs[broker_id], current_metadata_offset=CAUGHT_UP), 2)


def _topic_records(data: Path, side: Side) -> list[tuple[Any, ...]]:
    """The topic records of a node's log, placed partitions by their shape (module docstring)."""
    names = {topic_id: name for name, topic_id in side.topic_ids.items()}
    own_dir = {broker: dirs[0] if len(dirs) == 1 else UNASSIGNED for broker, dirs in DIRS.items()}
    out: list[tuple[Any, ...]] = []
    for batch in log_batches(data / PARTITION):
        if batch.is_control:
            continue
        start = len(out)
        broker_change = False
        for value in batch.iter_values():
            assert value is not None
            message, version = decode_record(value)
            kind = type(message).__name__
            if kind in _BROKER_CHANGES:
                broker_change = True
                out.append((kind, version))
            elif kind == "TopicRecord":
                out.append((kind, version, message.name, names.get(message.topic_id)))
            elif kind == "ConfigRecord":
                out.append((kind, version, message.resource_type, message.resource_name, message.name, message.value))
            elif kind == "PartitionChangeRecord":
                fields = message.to_json(version)
                fields["topicId"] = names.get(message.topic_id)
                out.append((kind, version, fields))
            elif kind == "ClearElrRecord":
                out.append((kind, version, message.topic_name))
            elif kind == "RemoveTopicRecord":
                out.append((kind, version, names.get(message.topic_id)))
            elif kind == "PartitionRecord":
                replicas = list(message.replicas)
                topic = names.get(message.topic_id)
                # placed replicas are random: kept are their count, the ISR being all of them, and
                # each directory being its broker's; a manual assignment is compared whole
                shape = (replicas, message.isr) if topic in ("manual", "moving") else (len(replicas), sorted(message.isr) == sorted(replicas))
                out.append((
                    kind, version, topic, message.partition_id, shape, message.leader == replicas[0],
                    message.leader_epoch, message.partition_epoch,
                    # no directories before metadata.version 3.7-IV2 (PartitionRecord v0)
                    sorted(d == own_dir[b] for b, d in zip(replicas, message.directories, strict=True))
                    if message.directories else None,
                    message.removing_replicas, message.adding_replicas, message.leader_recovery_state,
                    message.eligible_leader_replicas, message.last_known_elr,
                ))
        configs = [r for r in out[start:] if r[0] == "ConfigRecord"]
        if len({r[2:4] for r in configs}) > 1:
            # one request's configs of several resources: Kafka writes them in the order of a
            # HashMap<ConfigResource>, whose hash takes the resource type enum's identity hash,
            # so the order differs from one JVM run to the next; compared are the resources in
            # a fixed order, each resource's records in the order written
            grouped = sorted(configs, key=lambda r: r[2:4])
            out[start:] = [grouped.pop(0) if r[0] == "ConfigRecord" else r for r in out[start:]]
        if broker_change:
            # a broker's change moves the partitions it holds: comparable are those of the
            # manually assigned topics (placement is random), in a fixed order (Kafka takes them
            # from a hash map of random topic ids)
            kept = [r for r in out[start:] if r[0] != "PartitionChangeRecord" or r[2]["topicId"] in _MANUAL]
            changes = sorted((r for r in kept if r[0] == "PartitionChangeRecord"), key=repr)
            out[start:] = [changes.pop(0) if r[0] == "PartitionChangeRecord" else r for r in kept]
    return _sorted_removals(out)


_MANUAL = frozenset({"manual", "isr", "moving"})
"""The topics created with a manual assignment, the same on both nodes."""

_BROKER_CHANGES = frozenset({
    "RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "UnregisterBrokerRecord", "FenceBrokerRecord",
    "UnfenceBrokerRecord",
})
"""Broker records, kept in the comparison as (kind, version) to place the partition changes
written with them."""


def _sorted_removals(records: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``records`` with each run of RemoveTopicRecords sorted (the order of one DeleteTopics'
    removals follows a Java HashMap of random topic ids)."""
    out: list[tuple[Any, ...]] = []
    run: list[tuple[Any, ...]] = []
    for record in [*records, ("end",)]:
        if record[0] == "RemoveTopicRecord":
            run.append(record)
            continue
        out.extend(sorted(run, key=repr))
        run = []
        if record[0] != "end":
            out.append(record)
    return out


def _answer(port: int, request: Message, version: int, side: Side) -> Any:
    """The node's normalized answer. A stock controller applies committed configs to what it
    describes a moment after the commit (its metadata publishers run after the write's answer),
    so a DescribeConfigs answer is the one two requests in a row agree on (within 5 s)."""
    response = trio.run(send, port, request, version)
    answer = response if isinstance(response, str) else _normalize(response, side)
    deadline = time.monotonic() + 5
    while isinstance(request, DescribeConfigsRequest) and time.monotonic() < deadline:
        time.sleep(0.1)
        again = trio.run(send, port, request, version)
        if (again if isinstance(again, str) else _normalize(again, side)) == answer:
            break
        answer = again if isinstance(again, str) else _normalize(again, side)
    return answer


def _configs_tool(release: KafkaRelease, port: int, side: Side, *args: str) -> list[str]:
    """Stock ``kafka-configs --bootstrap-controller`` on the node at ``port``: its output lines,
    the setup's own text (port, data directory) replaced by labels."""
    out = release.run_tool("configs", ["--bootstrap-controller", f"localhost:{port}", "--describe", *args]).stdout
    for text, label in side.local.items():
        out = out.replace(text, label)
    return out.splitlines()


def test_topic_rpcs_answer_alike(newest_kafka: KafkaRelease, newest_leader_pair: dict[str, PairNode]) -> None:
    nodes = newest_leader_pair
    ports = {name: node.port for name, node in nodes.items()}
    finalized = {name: finalized_features(port) for name, port in ports.items()}
    assert finalized["stock"] == finalized["kwire"]
    features = broker_features(finalized["stock"])
    sides = {name: Side(local={str(node.data): "<data>", str(node.port): "<port>"}) for name, node in nodes.items()}
    for side in sides.values():
        side.features = features
    for name, port in ports.items():
        for broker_id in BROKERS:
            response = trio.run(send, port, registration(broker_id, features, dirs=DIRS[broker_id]), 4)
            assert not isinstance(response, str) and response.error_code == 0, response
            sides[name].epochs[broker_id] = response.broker_epoch
        _heartbeat_all(port, sides[name])  # caught up: unfenced
    differences: list[str] = []
    answered: list[tuple[str, tuple[Any, ...]]] = []
    for case, build, version in _cases():
        answers = {}
        for name, port in ports.items():
            _heartbeat_all(port, sides[name])  # keep every session alive
            answers[name] = _answer(port, build(sides[name]), version, sides[name])
        answered.append((case, answers["stock"]))
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    for name, node in nodes.items():
        assert node.proc.poll() is None, f"{name} died"
    outcomes = dict(answered)
    trace = "\n".join(f"{case}: {answer}" for case, answer in answered)
    # the sequence reached what it is about on the stock side
    created = outcomes["create t1: 6 partitions, replication factor 3"][1][0]
    assert created[1:3] == (0, None) and created[5:7] == (6, 3) and len(created[7]) >= 36, trace
    assert outcomes["create t1 again"][1][0][1] == 36, trace  # TOPIC_ALREADY_EXISTS
    shrunk = outcomes["shrink manual-0 to its leader"]
    assert shrunk[1] == 0 and shrunk[2][0][1] == [(0, 0, 5, 0, [5], 0, 1)], trace
    assert outcomes["stale partition epoch"][2][0][1][0][1] == 95, trace  # INVALID_UPDATE_VERSION
    assert outcomes["DescribeAcls without an authorizer"][1] == 54, trace  # SECURITY_DISABLED
    if os.environ.get("KWIRE_PRINT_TRACE"):
        print(trace)
    assert not differences, f"{len(differences)} cases differ:\n" + "\n".join(differences) + "\n" + trace
    # the logs are read before the brokers' sessions can lapse (the stock tool below takes
    # seconds per run, and an expiry would add fencing at a moment each side picks alone)
    records = {name: _topic_records(node.data, sides[name]) for name, node in nodes.items()}
    # the stock config tool describes both nodes alike
    for args in (("--entity-type", "topics", "--entity-name", "isr", "--all"),
                 ("--entity-type", "brokers", "--entity-name", "1", "--all"),
                 ("--entity-type", "brokers", "--entity-default")):
        lines = {name: _configs_tool(newest_kafka, port, sides[name], *args) for name, port in ports.items()}
        assert len(lines["stock"]) >= 2, lines["stock"]
        assert lines["kwire"] == lines["stock"], args
    assert sum(1 for r in records["stock"] if r[0] == "PartitionRecord") >= 10, records["stock"]
    if os.environ.get("KWIRE_PRINT_RECORDS"):
        for name in ports:
            print("==", name)
            for r in records[name]:
                print(r)
    assert records["kwire"] == records["stock"]
    elr = [r for r in records["stock"] if r[0] == "PartitionChangeRecord" and r[2].get("eligibleLeaderReplicas")]
    assert elr, "no ISR shrink below min.insync.replicas reached the log"
    # the reassignment started, was listed, completed through the ISR and was cancelled
    assert outcomes["list every reassignment"] == (
        "ListPartitionReassignmentsResponse", 0, None, [("moving", [(0, [6, 7, 5], [7], [5]), (2, [5, 7, 6], [7], [6])])]
    ), trace
    # a move replacing one in progress keeps the first move's adding replicas, now also being
    # removed: Kafka's changePartitionReassignment sets only a non-empty adding list (the fault
    # workload's admin moves one partition at a time for this reason)
    assert outcomes["list the replaced move"] == (
        "ListPartitionReassignmentsResponse", 0, None, [("moving", [(2, [6, 5, 7], [7], [7])])]
    ), trace
    completed = outcomes["broker 7 joins moving-0's ISR: the move completes and leadership leaves 5"]
    assert completed[2][0][1][0][:2] == (0, 108), trace  # NEW_LEADER_ELECTED
    assert outcomes["list after the move"] == ("ListPartitionReassignmentsResponse", 0, None, []), trace
    moves = [r[2] for r in records["stock"] if r[0] == "PartitionChangeRecord" and r[2]["topicId"] == "moving"]
    assert any(m.get("addingReplicas") == [7] for m in moves) and any(m.get("replicas") == [6, 7] for m in moves), moves
    # the broker lifecycle moved partitions on the stock side (so the comparison above covers it)
    shutdown = outcomes["broker 6 asks to shut down: its leadership moves"]
    assert shutdown[1:] == (0, True, False, False), trace
    assert outcomes["broker 6 asks again: it may shut down"][1:] == (0, True, True, True), trace
    moved = [r for r in records["stock"] if r[0] == "PartitionChangeRecord" and r[2].get("leader") == 6]
    assert moved, "no partition was given to broker 6 when it was unfenced"
    # unclean elections gave both leaderless partitions of isr a leader on the stock side
    assert outcomes["unclean leaders of isr"] == ("ElectLeadersResponse", 0, [("isr", [(0, 0, None), (1, 0, None)])]), trace
    gone = [r for r in records["stock"] if r[0] == "PartitionChangeRecord" and r[2]["topicId"] in _MANUAL
            and 6 not in r[2].get("isr", [6]) and r[2].get("leader") != 6]
    assert gone, "no manually assigned partition moved off broker 6"
    # broker 7's offline directory: its partition there changed before the registration did
    offline_at = records["stock"].index(("BrokerRegistrationChangeRecord", 2))
    assert records["stock"][offline_at - 1][0] == "PartitionChangeRecord", records["stock"][offline_at - 3:offline_at + 1]
    _check_snapshots(nodes["stock"].data / PARTITION, nodes["kwire"].data / PARTITION)


def _replayed_image(partition: Path, end_offset: int) -> list[bytes]:
    """The snapshot records (``ControlManagers.snapshot_records``) of kwire's controller after
    replaying a node's log below ``end_offset``."""
    controller = ControlManagers(bootstrap=())
    for batch in log_batches(partition):
        if batch.last_offset >= end_offset:
            break
        if not batch.is_control:
            for offset, value in enumerate(batch.iter_values(), batch.base_offset):
                controller.replay(value, offset)
    return [encode_record(record, version) for record, version in controller.snapshot_records()]


def _decoded(values: list[bytes]) -> list[str]:
    out = []
    for value in values:
        message, version = decode_record(value)
        out.append(f"{type(message).__name__} v{version} {json.dumps(message.to_json(version), sort_keys=True)}")
    return out


def _check_snapshots(stock: Path, own: Path, *, controllers: bool = True) -> None:
    """Metadata snapshots (KIP-630), both nodes writing one after every committed batch: the
    records of the stock controller's newest snapshot are the records kwire's controller writes
    for the image of the same log prefix (in another order inside a section: Kafka walks hash
    maps), metadata.version first; and kwire's own newest snapshot holds the image of its log
    prefix. ``controllers``: the controllers registered (KIP-919, metadata.version 3.7-IV0 on)."""
    end = max(b.last_offset for b in log_batches(stock)) + 1
    stock_end, stock_records, _ = newest_snapshot(stock, end)
    kwire_records = _replayed_image(stock, stock_end)
    assert len(stock_records) >= 40, _decoded(stock_records)
    stock_decoded, kwire_decoded = _decoded(stock_records), _decoded(kwire_records)
    assert stock_decoded[0].startswith("FeatureLevelRecord") and '"metadata.version"' in stock_decoded[0]
    assert kwire_decoded[0] == stock_decoded[0]
    kinds = Counter(line.split(" ", 1)[0] for line in stock_decoded)
    expected = {"RegisterBrokerRecord", "TopicRecord", "PartitionRecord", "ConfigRecord"}
    assert expected | ({"RegisterControllerRecord"} if controllers else set()) <= set(kinds)
    only_stock = sorted((Counter(stock_decoded) - Counter(kwire_decoded)).elements())
    only_kwire = sorted((Counter(kwire_decoded) - Counter(stock_decoded)).elements())
    assert not only_stock and not only_kwire, "\n".join(
        [f"stock only: {line}" for line in only_stock] + [f"kwire only: {line}" for line in only_kwire]
    )
    own_end = max(b.last_offset for b in log_batches(own)) + 1
    kwire_end, own_records, _ = newest_snapshot(own, own_end)
    assert own_records == _replayed_image(own, kwire_end)

