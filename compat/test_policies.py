"""Kafka's controller policies, differentially: a stock controller of the newest pinned release
running two Java policies (compat/oracle/src/kwire/policy/, built beside the codec oracle) and
kwire running their Python twins (compat/example_policies.py) answer one sequence of
CreateTopics (placed, manual, default-sized, with configs, validateOnly), CreatePartitions,
IncrementalAlterConfigs (SET, APPEND, DELETE, ValidateOnly) and AlterConfigs, and policies
that throw (the create-topic policy on a topic; the config policy on a created topic's configs
and on a broker's) with the same codes and messages. The refusals spell out every field of the
request the policy was shown, so equal messages mean both controllers called the policies at
the same points with the same requests; ``policy.min.partitions`` reaches both through
``configure``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.differential import (
    CAUGHT_UP,
    PairNode,
    broker_features,
    finalized_features,
    registration,
    send,
    start_pair,
)
from compat.harness import KafkaRelease
from compat.kafka import lib_dir, oracle_dir
from kwire.uuid import Uuid
from messages.generated.alter_configs_request import AlterableConfig as LegacyConfig
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_configs_request import AlterConfigsResource as LegacyResource
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from messages.generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.runtime import Message

pytestmark = pytest.mark.compat

BROKERS = (5, 6, 7)
JAVA_SOURCES = Path(__file__).parent / "oracle" / "src" / "kwire" / "policy"
SETTINGS = "policy.min.partitions=2\n"
PLUGINS = {
    "stock": "create.topic.policy.class.name=kwire.policy.MinPartitionsPolicy\n"
             "alter.config.policy.class.name=kwire.policy.NoCompactionPolicy\n",
    "kwire": "create.topic.policy.class.name=compat.example_policies:MinPartitionsPolicy\n"
             "alter.config.policy.class.name=compat.example_policies:NoCompactionPolicy\n",
}


def policy_classes(version: str, scratch: Path) -> Path:
    """Where the Java policies' classes are: the codec oracle's build (compat/fetch-kafka.sh
    compiles them with it), else compiled here into ``scratch`` (an oracle built before they
    existed)."""
    built = oracle_dir(version)
    if (built / "kwire" / "policy" / "MinPartitionsPolicy.class").is_file():
        return built
    sources = sorted(str(p) for p in JAVA_SOURCES.glob("*.java"))
    subprocess.run(["javac", "-nowarn", "--release", "17", "-encoding", "UTF-8", "-cp", f"{lib_dir(version)}/*",
                    "-d", str(scratch), *sources], check=True)
    return scratch


@pytest.fixture
def policy_pair(newest_kafka: KafkaRelease, tmp_path: Path) -> Iterator[dict[str, PairNode]]:
    classes = policy_classes(newest_kafka.version, tmp_path / "classes")
    with start_pair(newest_kafka, tmp_path / "pair", "leader", SETTINGS, side_extra=PLUGINS,
                    stock_classpath=[classes]) as nodes:
        yield nodes


def _topic(name: str, partitions: int = 2, rf: int = 2, configs: dict[str, str] | None = None,
           assignments: dict[int, list[int]] | None = None) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=b) for i, b in (assignments or {}).items()],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


def _create(*topics: CreatableTopic, validate_only: bool = False) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=list(topics), timeout_ms=5000, validate_only=validate_only)


def _incremental(resource_type: int, name: str, *ops: tuple[str, int, str | None],
                 validate_only: bool = False) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=validate_only)


def _legacy(resource_type: int, name: str, configs: dict[str, str]) -> AlterConfigsRequest:
    return AlterConfigsRequest(resources=[LegacyResource(
        resource_type=resource_type, resource_name=name,
        configs=[LegacyConfig(name=k, value=v) for k, v in configs.items()])], validate_only=False)


SET, DELETE, APPEND = 0, 1, 2
TOPIC, BROKER = 2, 4
CASES: list[tuple[str, Message, int]] = [
    ("a topic of 3 partitions", _create(_topic("ok", 3)), 7),
    ("a topic of 1 partition", _create(_topic("few", 1, configs={"retention.ms": "60000"})), 7),
    ("a manual topic of 1 partition", _create(_topic("manual-few", -1, -1, assignments={0: [6, 5]})), 7),
    ("a manual topic of 2 partitions", _create(_topic("manual", -1, -1, assignments={0: [6, 5], 1: [7, 6]})), 7),
    ("the default partition count (1)", _create(_topic("defaulted", -1, -1)), 7),
    ("validateOnly: 1 partition", _create(_topic("dry", 1, 3), validate_only=True), 7),
    ("validateOnly: 2 partitions", _create(_topic("dry", 2, 3), validate_only=True), 7),
    ("a compacted topic (the config policy runs first)", _create(_topic("compacted", 1, configs={"cleanup.policy": "compact"})), 7),
    ("one request, one topic refused", _create(_topic("two-a"), _topic("two-b", 1)), 7),
    ("the config policy throws on one topic", _create(_topic("three-a"), _topic("three-b", configs={"max.message.bytes": "0"})), 7),
    ("more partitions: no policy applies", CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name="ok", count=4, assignments=None)], timeout_ms=5000, validate_only=False), 3),
    ("SET retention.ms", _incremental(TOPIC, "ok", ("retention.ms", SET, "5000")), 1),
    ("APPEND compact: shown the resulting value", _incremental(
        TOPIC, "ok", ("cleanup.policy", APPEND, "compact"), ("retention.ms", DELETE, None)), 1),
    ("APPEND compact, ValidateOnly", _incremental(TOPIC, "ok", ("cleanup.policy", APPEND, "compact"), validate_only=True), 1),
    ("a broker config the policy accepts", _incremental(BROKER, "", ("log.retention.ms", SET, "100000")), 1),
    ("a broker config the policy throws on", _incremental(BROKER, "", ("message.max.bytes", SET, "0")), 1),
    ("legacy: compact", _legacy(TOPIC, "ok", {"cleanup.policy": "compact", "segment.ms": "100000"}), 1),
    ("legacy: the implicit deletions are not shown", _legacy(TOPIC, "ok", {"segment.ms": "200000"}), 1),
    ("legacy: the policy throws", _legacy(BROKER, "5", {"message.max.bytes": "0"}), 1),
    ("the create-topic policy throws on one topic", _create(_topic("four"), _topic("crash")), 7),
]


def _normalized(response: Any) -> Any:
    if isinstance(response, str):
        return response
    name = type(response).__name__
    if name == "CreateTopicsResponse":
        return [(t.name, t.error_code, t.error_message, t.num_partitions if t.error_code == 0 else None)
                for t in response.topics]
    if name == "CreatePartitionsResponse":
        return [(r.name, r.error_code, r.error_message) for r in response.results]
    return sorted((r.resource_type, r.resource_name, r.error_code, r.error_message) for r in response.responses)


def _heartbeat_all(port: int, epochs: dict[int, int]) -> None:
    for broker, epoch in epochs.items():
        trio.run(send, port, BrokerHeartbeatRequest(broker_id=broker, broker_epoch=epoch,
                                                    current_metadata_offset=CAUGHT_UP), 2)


def test_policies_answer_alike(policy_pair: dict[str, PairNode]) -> None:
    ports = {name: node.port for name, node in policy_pair.items()}
    features = broker_features(finalized_features(ports["stock"]))
    epochs: dict[str, dict[int, int]] = {}
    for name, port in ports.items():
        epochs[name] = {}
        for broker in BROKERS:
            answer = trio.run(send, port, registration(broker, features, dirs=(Uuid.from_longs(9, broker),)), 4)
            assert not isinstance(answer, str) and answer.error_code == 0, answer
            epochs[name][broker] = answer.broker_epoch
        _heartbeat_all(port, epochs[name])
    answered: dict[str, dict[str, Any]] = {}
    for case, request, version in CASES:
        answered[case] = {}
        for name, port in ports.items():
            _heartbeat_all(port, epochs[name])
            answered[case][name] = _normalized(trio.run(send, port, request, version))
    trace = "\n".join(f"{case}:\n    stock {a['stock']}\n    kwire {a['kwire']}" for case, a in answered.items())
    print(trace)
    stock: Callable[[str], Any] = lambda case: answered[case]["stock"]  # noqa: E731
    # the stock side did what each case is about
    assert stock("a topic of 3 partitions") == [("ok", 0, None, 3)], trace
    assert stock("a topic of 1 partition") == [("few", 44, (
        "Topic few refused: numPartitions=1, replicationFactor=2, replicasAssignments=null, "
        "configs={retention.ms=60000}; at least 2 partitions required."), None)], trace
    assert "replicasAssignments={0=[6, 5]}" in stock("a manual topic of 1 partition")[0][2], trace
    assert stock("validateOnly: 1 partition")[0][1] == 44 and stock("validateOnly: 2 partitions")[0][1] == 0, trace
    assert stock("a compacted topic (the config policy runs first)")[0][2] == (
        "No compaction: TOPIC compacted {cleanup.policy=compact}"), trace
    assert stock("APPEND compact: shown the resulting value") == [
        (2, "ok", 44, "No compaction: TOPIC ok {cleanup.policy=delete,compact, retention.ms=null}")], trace
    assert stock("a broker config the policy throws on") == [(4, "", -1, None)], trace
    assert stock("the config policy throws on one topic") == [("three-a", 0, None, 2), ("three-b", -1, None, None)], trace
    assert stock("legacy: compact")[0][3] == "No compaction: TOPIC ok {cleanup.policy=compact, segment.ms=100000}", trace
    assert stock("legacy: the implicit deletions are not shown") == [(2, "ok", 0, None)], trace
    assert stock("legacy: the policy throws") == [(4, "5", -1, None)], trace
    assert stock("the create-topic policy throws on one topic") == [("four", 0, None, 2), ("crash", -1, None, None)], trace
    differences = [case for case, a in answered.items() if a["stock"] != a["kwire"]]
    assert not differences, f"{len(differences)} cases differ: {differences}\n{trace}"
    for name, node in policy_pair.items():
        assert node.proc.poll() is None, f"{name} died"
