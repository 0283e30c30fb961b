"""The controller's plug-ins (``server.controller.plugins``, ``server.controller.placing``,
``server.node.plugins``): Kafka's two policies and the replica placer, called where Kafka calls
them, answered as Kafka answers, and a broken one answered with a clear error while the
controller keeps serving."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kwire.errors import Errors
from messages.generated.alter_configs_request import AlterableConfig as LegacyConfig
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_configs_request import AlterConfigsResource as LegacyResource
from messages.generated.config_record import ConfigRecord
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
from messages.generated.partition_record import PartitionRecord
from messages.generated.topic_record import TopicRecord
from messages.runtime import Message
from server.config import ConfigError
from server.controller.placement import (
    PlacementSpec,
    StripedReplicaPlacer,
    UsableBroker,
    place_replicas,
)
from server.controller.plugins import ControllerPlugins, PolicyViolationException
from server.node.plugins import check_plugins, load_plugins
from tests.controller.test_host import Harness, _config, _heartbeat, _registration

BROKERS = (5, 6, 7)


class Log:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        pass

    def error(self, msg: str, *args: Any) -> None:
        self.errors.append(msg % args)


class PolicyViolationError(Exception):
    """Named as a plug-in that does not import kwire would name its own."""


PolicyViolationError.__name__ = "PolicyViolationException"


class Recording:
    """A policy that records what it saw and refuses what ``refuse`` says (a message) or raises
    what ``crash`` says."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.configured: dict[str, str] | None = None
        self.closed = False
        self.refuse: Any = lambda request: None
        self.crash: Any = lambda request: None

    def configure(self, configs: dict[str, str]) -> None:
        self.configured = configs

    def validate(self, request: Any) -> None:
        self.seen.append(request)
        message = self.refuse(request)
        if message is not None:
            raise PolicyViolationError(message)
        self.crash(request)

    def close(self) -> None:
        self.closed = True


class ListPlacer:
    """A placer answering plain lists: broker 5 first, then the others in id order, or
    whatever ``answer`` returns."""

    def __init__(self) -> None:
        self.specs: list[PlacementSpec] = []
        self.answer: Any = None

    def place(self, spec: PlacementSpec, cluster: Any) -> Any:
        self.specs.append(spec)
        if self.answer is not None:
            return self.answer(spec)
        ids = sorted(b.id for b in cluster.usable_brokers())
        return [ids[:spec.num_replicas] for _ in range(spec.num_partitions)]


def _harness(plugins: ControllerPlugins) -> Harness:
    harness = Harness(config=_config(plugins=plugins))
    for broker in BROKERS:
        handle = object()
        harness.request(_registration(broker), 4, handle)
        epoch = harness.answer(handle).broker_epoch  # type: ignore[union-attr]
        harness.request(_heartbeat(broker, epoch, harness.core.high_watermark - 1), 1, object())
    return harness


def _ask(harness: Harness, body: Message, version: int) -> Any:
    handle = object()
    harness.request(body, version, handle)
    answer = harness.answer(handle)
    assert answer is not None
    return answer


def _topic(name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None,
           assignments: dict[int, list[int]] | None = None) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=b) for i, b in (assignments or {}).items()],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


def _create(harness: Harness, *topics: CreatableTopic, validate_only: bool = False) -> list[tuple[str, int, str | None]]:
    answer = _ask(harness, CreateTopicsRequest(topics=list(topics), timeout_ms=1000, validate_only=validate_only), 7)
    return [(t.name, t.error_code, t.error_message) for t in answer.topics]


def test_the_create_topic_policy_sees_kafkas_request_metadata_and_refuses_with_its_message() -> None:
    policy = Recording()
    policy.refuse = lambda r: f"{r.topic} is too small" if (r.num_partitions or len(r.replicas_assignments)) < 2 else None
    harness = _harness(ControllerPlugins(create_topic_policy=policy))
    assert _create(harness, _topic("small"), _topic("big", 3, 2, {"cleanup.policy": "compact"})) == [
        ("small", Errors.POLICY_VIOLATION, "small is too small"), ("big", 0, None)]
    assert _create(harness, _topic("manual", -1, -1, assignments={0: [6, 5], 1: [7, 6]})) == [("manual", 0, None)]
    assert _create(harness, _topic("dry"), validate_only=True) == [
        ("dry", Errors.POLICY_VIOLATION, "dry is too small")]
    small, big, manual, dry = policy.seen
    assert (big.topic, big.num_partitions, big.replication_factor, big.replicas_assignments, dict(big.configs)) == (
        "big", 3, 2, None, {"cleanup.policy": "compact"})
    assert (manual.num_partitions, manual.replication_factor, manual.replicas_assignments) == (
        None, None, {0: [6, 5], 1: [7, 6]})
    assert small.num_partitions == 1 and dry.topic == "dry"
    created = {r.name for r in harness.records() if isinstance(r, TopicRecord)}
    assert created == {"big", "manual"}


def test_a_topic_refused_before_the_policy_is_not_shown_to_it() -> None:
    policy = Recording()
    harness = _harness(ControllerPlugins(create_topic_policy=policy))
    assert _create(harness, _topic("x", 1, 4))[0][1] == Errors.INVALID_REPLICATION_FACTOR
    assert _create(harness, _topic("y", 1, 1, {"no.such.config": "1"}))[0][1] == Errors.INVALID_CONFIG
    assert policy.seen == []


def test_a_crashing_create_topic_policy_fails_its_topic_and_the_controller_keeps_serving() -> None:
    policy, log = Recording(), Log()

    def crash(request: Any) -> None:
        if request.topic == "boom":
            raise KeyError("oops")

    policy.crash = crash
    harness = _harness(ControllerPlugins(create_topic_policy=policy, names={"create.topic.policy.class.name": "p:P"},
                                         log=log))
    # that topic alone, without a message (ApiError.fromThrowable)
    assert _create(harness, _topic("fine"), _topic("boom")) == [("fine", 0, None), ("boom", Errors.UNKNOWN_SERVER_ERROR, None)]
    assert len(log.errors) == 1 and "create.topic.policy.class.name p:P failed" in log.errors[0]
    assert "KeyError: 'oops'" in log.errors[0]
    assert _create(harness, _topic("fine2")) == [("fine2", 0, None)]


def test_the_alter_config_policy_sees_the_altered_configs_as_kafka_passes_them() -> None:
    policy = Recording()
    policy.refuse = lambda r: "no compaction here" if r.configs.get("cleanup.policy") == "delete,compact" else None
    harness = _harness(ControllerPlugins(alter_config_policy=policy))
    # a CreateTopics with configs is an alteration of a new resource: the config policy sees it
    assert _create(harness, _topic("t", configs={"retention.ms": "1000", "segment.ms": "2000"})) == [("t", 0, None)]
    assert _create(harness, _topic("plain")) == [("plain", 0, None)]
    [created] = policy.seen
    assert (created.resource.type, created.resource.name, dict(created.configs)) == (
        "TOPIC", "t", {"retention.ms": "1000", "segment.ms": "2000"})
    # incremental: the resulting value of an APPEND; a DELETE as None
    incremental = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=2, resource_name="t", configs=[
            AlterableConfig(name="cleanup.policy", config_operation=2, value="compact"),
            AlterableConfig(name="retention.ms", config_operation=1, value=None)])], validate_only=False)
    answer = _ask(harness, incremental, 1)
    assert [(r.error_code, r.error_message) for r in answer.responses] == [(Errors.POLICY_VIOLATION, "no compaction here")]
    assert dict(policy.seen[-1].configs) == {"cleanup.policy": "delete,compact", "retention.ms": None}
    # legacy: the configs given, not the implicit deletion of segment.ms (KAFKA-14195)
    legacy = AlterConfigsRequest(resources=[
        LegacyResource(resource_type=2, resource_name="t", configs=[LegacyConfig(name="retention.ms", value="5")]),
        LegacyResource(resource_type=4, resource_name="", configs=[LegacyConfig(name="log.retention.ms", value="7")]),
    ], validate_only=False)
    answer = _ask(harness, legacy, 1)
    assert [r.error_code for r in answer.responses] == [0, 0]
    assert [(r.resource.type, r.resource.name, dict(r.configs)) for r in policy.seen[-2:]] == [
        ("TOPIC", "t", {"retention.ms": "5"}), ("BROKER", "", {"log.retention.ms": "7"})]


def test_a_crashing_alter_config_policy_fails_its_resource_only() -> None:
    policy, log = Recording(), Log()

    def crash(request: Any) -> None:
        if request.resource.type == "BROKER":
            raise ZeroDivisionError("division by zero")

    policy.crash = crash
    harness = _harness(ControllerPlugins(alter_config_policy=policy, log=log,
                                         names={"alter.config.policy.class.name": "p:P"}))
    assert _create(harness, _topic("t")) == [("t", 0, None)]
    request = IncrementalAlterConfigsRequest(resources=[
        AlterConfigsResource(resource_type=4, resource_name="", configs=[
            AlterableConfig(name="log.retention.ms", config_operation=0, value="9")]),
        AlterConfigsResource(resource_type=2, resource_name="t", configs=[
            AlterableConfig(name="retention.ms", config_operation=0, value="9")]),
    ], validate_only=False)
    answer = _ask(harness, request, 1)
    assert [(r.resource_type, r.error_code, r.error_message) for r in answer.responses] == [
        (4, Errors.UNKNOWN_SERVER_ERROR, None), (2, 0, None)]
    assert "ZeroDivisionError" in log.errors[0]
    assert any(isinstance(r, ConfigRecord) and r.name == "retention.ms" for r in harness.records())
    # on a new topic's configs it fails that topic alone, as validateAlterConfig does in Kafka
    policy.crash = lambda request: 1 // 0 if request.resource.name == "bad" else None
    assert _create(harness, _topic("good"), _topic("bad", configs={"retention.ms": "1"})) == [
        ("good", 0, None), ("bad", Errors.UNKNOWN_SERVER_ERROR, None)]


def test_kwires_own_exception_and_an_empty_refusal_answer_as_kafkas() -> None:
    policy = Recording()
    policy.crash = lambda r: (_ for _ in ()).throw(PolicyViolationException())
    harness = _harness(ControllerPlugins(create_topic_policy=policy))
    assert _create(harness, _topic("t")) == [("t", Errors.POLICY_VIOLATION, None)]


def test_a_plug_in_placer_places_new_topics_and_partitions() -> None:
    placer = ListPlacer()
    harness = _harness(ControllerPlugins(replica_placer=placer, names={"kwire.replica.placer.class": "x:ListPlacer"}))
    assert _create(harness, _topic("t", 2, 2)) == [("t", 0, None)]
    answer = _ask(harness, CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name="t", count=4, assignments=None)], timeout_ms=1000, validate_only=False), 3)
    assert [r.error_code for r in answer.results] == [0]
    assert placer.specs == [PlacementSpec(0, 2, 2), PlacementSpec(2, 2, 2)]
    parts = [(r.partition_id, list(r.replicas), r.leader) for r in harness.records() if isinstance(r, PartitionRecord)]
    assert parts == [(0, [5, 6], 5), (1, [5, 6], 5), (2, [5, 6], 5), (3, [5, 6], 5)]


@pytest.mark.parametrize(("answer", "error", "detail"), [
    (lambda spec: [[5]] * spec.num_partitions, Errors.INVALID_REPLICA_ASSIGNMENT, "partition 0 has 1 replica(s), not 2"),
    (lambda spec: [[5, 6]], Errors.INVALID_REPLICA_ASSIGNMENT, "1 partition(s) for the 3 asked for"),
    (lambda spec: [[5, 5]] * 3, Errors.INVALID_REPLICA_ASSIGNMENT, "partition 0 names a broker more than once: [5, 5]"),
    (lambda spec: [[5, 9]] * 3, Errors.INVALID_REPLICA_ASSIGNMENT, "partition 0 names broker(s) [9] that are not usable"),
    (lambda spec: [["5", 6]] * 3, Errors.INVALID_REPLICA_ASSIGNMENT, "partition 0: ['5', 6] is not a list of broker ids"),
    (lambda spec: 42, Errors.INVALID_REPLICA_ASSIGNMENT, "expected a TopicAssignment or a list of replica lists, got int"),
    (lambda spec: 1 // 0, Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 2 time(s): integer division or modulo by zero"),
])
def test_a_broken_placer_is_a_clear_error_and_the_controller_keeps_serving(answer: Any, error: Errors, detail: str) -> None:
    placer, log = ListPlacer(), Log()
    placer.answer = answer
    harness = _harness(ControllerPlugins(replica_placer=placer, names={"kwire.replica.placer.class": "x:Bad"}, log=log))
    [(_, code, message)] = _create(harness, _topic("t", 3, 2))
    assert code == error
    if error == Errors.INVALID_REPLICA_ASSIGNMENT:
        assert message == f"The replica placer x:Bad returned an invalid assignment: {detail}"
    else:
        assert message == detail and "ZeroDivisionError" in log.errors[0]
    placer.answer = None
    assert _create(harness, _topic("u", 3, 2)) == [("u", 0, None)]


def test_a_placer_refusing_by_kafkas_exception_name_is_invalid_replication_factor() -> None:
    class InvalidReplicationFactorException(Exception):  # noqa: N818 - Kafka's name
        pass

    def refuse(spec: PlacementSpec) -> Any:
        raise InvalidReplicationFactorException("only 3 racks")

    placer, log = ListPlacer(), Log()
    placer.answer = refuse
    harness = _harness(ControllerPlugins(replica_placer=placer, log=log))
    assert _create(harness, _topic("t", 1, 3)) == [
        ("t", Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 3 time(s): only 3 racks")]
    assert log.errors == []


def test_the_default_placer_draws_as_place_replicas_does() -> None:
    brokers = [UsableBroker(b, f"r{b % 3}", b % 5 == 0) for b in range(12)]

    class Describer:
        def __init__(self, seed: int) -> None:
            self.random = random.Random(seed)

        def usable_brokers(self) -> Any:
            return iter(brokers)

    for seed in range(5):
        placed = StripedReplicaPlacer().place(PlacementSpec(0, 40, 3), Describer(seed))  # type: ignore[arg-type]
        assert [list(p.replicas) for p in placed.assignments] == place_replicas(40, 3, brokers, random.Random(seed))


# ---------------------------------------------------------------------- loading


def test_the_node_loads_configures_and_closes_plugins() -> None:
    props = {"create.topic.policy.class.name": f"{__name__}:Recording",
             "alter.config.policy.class.name": f" {__name__}:Recording ",
             "kwire.replica.placer.class": f"{__name__}:ListPlacer", "node.id": "1"}
    plugins = load_plugins(props)
    policy = plugins.create_topic_policy
    assert isinstance(policy, Recording) and policy.configured == props
    assert isinstance(plugins.replica_placer, ListPlacer) and not plugins.default_placer
    plugins.close()
    assert policy.closed and isinstance(plugins.alter_config_policy, Recording) and plugins.alter_config_policy.closed
    default = load_plugins({"node.id": "1"})
    assert default.create_topic_policy is None and default.default_placer


@pytest.mark.parametrize(("value", "words"), [
    ("org.example.NoSmallTopics", "'org.example.NoSmallTopics' is not a Python class: it looks like a Java class name"),
    ("no_such_module_here:X", "cannot import module 'no_such_module_here'"),
    (f"{__name__}:Nothing", f"module '{__name__}' has no class 'Nothing'"),
    (f"{__name__}:ListPlacer", "has no method validate()"),
])
def test_a_wrong_plugin_name_stops_the_node_with_what_kwire_expects(value: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_plugins({"create.topic.policy.class.name": value})
    assert str(caught.value).startswith("create.topic.policy.class.name: ") and words in str(caught.value)
    assert "module:Class" in str(caught.value) or "import" in words or "has no class" in words


class FailsToConfigure(Recording):
    def configure(self, configs: dict[str, str]) -> None:
        raise ValueError("needs min.partitions")


class Counted(Recording):
    closed_count = 0

    def close(self) -> None:
        Counted.closed_count += 1


def test_a_plugin_whose_configure_raises_stops_the_node_and_the_built_ones_are_closed() -> None:
    with pytest.raises(ConfigError, match="could not be built and configured: ValueError: needs min.partitions"):
        load_plugins({"create.topic.policy.class.name": f"{__name__}:Counted",
                      "alter.config.policy.class.name": f"{__name__}:FailsToConfigure"})
    assert Counted.closed_count == 1


def test_a_slow_plugin_is_logged_with_its_duration_and_its_answer_still_counts() -> None:
    now = [0.0]
    policy, placer, log = Recording(), ListPlacer(), Log()

    def slow(request: Any) -> str | None:
        now[0] += 2.5  # the call held the controller 2.5 s by the injected clock
        return "too slow to say yes"

    policy.refuse = slow
    harness = _harness(ControllerPlugins(create_topic_policy=policy, replica_placer=placer, log=log,
                                         names={"create.topic.policy.class.name": "p:Slow"}, clock=lambda: now[0]))
    assert _create(harness, _topic("t", 2, 2)) == [("t", Errors.POLICY_VIOLATION, "too slow to say yes")]
    assert log.errors == ["create.topic.policy.class.name p:Slow took 2500 ms: the controller (and its quorum's "
                          "fetches and heartbeats) waited for it"]
    policy.refuse = lambda request: None
    assert _create(harness, _topic("t", 2, 2)) == [("t", 0, None)]
    assert len(log.errors) == 1
