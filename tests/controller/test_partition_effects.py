"""The rules of ``server.controller.partition_effects`` one by one, as Kafka 4.4's
``ReplicationControlManager`` applies them: the layers a topic config's effective value comes
from, which broker may lead (``LeaderAcceptor``), ``generateLeaderAndIsrUpdates``, and what each
broker transition does to the partitions. ``test_broker_partition_effects.py`` drives the same
changes through heartbeats; these call the rules directly."""

from __future__ import annotations

import pytest

from kwire.uuid import Uuid
from messages.generated.config_record import ConfigRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.topic_record import TopicRecord
from server.controller.cluster import ClusterControlManager
from server.controller.image import (
    LOST_DIRECTORY,
    MIGRATING_DIRECTORY,
    NO_LEADER,
    NO_LEADER_CHANGE,
    UNASSIGNED_DIRECTORY,
    PartitionRegistration,
    ReplicationControlManager,
)
from server.controller.partition_change import RECOVERING, Election
from server.controller.partition_effects import (
    BrokerPartitionEffects,
    PartitionChanges,
    TopicConfigLayers,
    effective_min_isr,
    is_online_dir,
    leader_acceptable,
    leader_and_isr_updates,
)
from server.controller.result import Record
from tests.controller.fixtures import active_cluster, directory, partition_record

TOPIC = Uuid.from_longs(5, 5)
OTHER = Uuid.from_longs(6, 6)
MV = 21  # 3.9-IV0: directories, no eligible leader replicas
ELR_MV = 33  # 4.4-IV2
TOPIC_CONFIG, BROKER_CONFIG = 2, 4
Partition = tuple[list[int], list[int], int]


def _image(*partitions: Partition, name: str = "t", topic_id: Uuid = TOPIC, **fields: object) -> ReplicationControlManager:
    """Topic ``name`` with ``partitions`` as (replicas, ISR, leader); ``fields`` go to every
    PartitionRecord."""
    image = ReplicationControlManager()
    _add_topic(image, name, topic_id, *partitions, **fields)
    return image


def _add_topic(image: ReplicationControlManager, name: str, topic_id: Uuid, *partitions: Partition, **fields: object) -> None:
    image.replay(TopicRecord(name=name, topic_id=topic_id))
    for index, (replicas, isr, leader) in enumerate(partitions):
        image.replay(partition_record(topic_id, index, replicas, isr, leader, **fields))


def _config(image: ReplicationControlManager, kind: int, resource: str, name: str, value: str) -> None:
    image.replay(ConfigRecord(resource_type=kind, resource_name=resource, name=name, value=value))


def _effects(image: ReplicationControlManager, cluster: ClusterControlManager, *, elr: bool = False) -> BrokerPartitionEffects:
    return BrokerPartitionEffects(
        image, cluster, TopicConfigLayers(image, 0, {}), metadata_version=ELR_MV if elr else MV, elr_enabled=elr
    )


def _changes(records: list[Record]) -> list[tuple[int, int, list[int] | None, list[int] | None]]:
    """(partition, leader, ISR, ELR) of each PartitionChangeRecord."""
    out = []
    for record, _ in records:
        assert isinstance(record, PartitionChangeRecord)
        out.append((record.partition_id, record.leader, record.isr, record.eligible_leader_replicas))
    return out


def _partition(replicas: tuple[int, ...], directories: tuple[Uuid, ...]) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=replicas, directories=directories, isr=replicas, removing_replicas=(), adding_replicas=(),
        leader=replicas[0], leader_recovery_state=0, leader_epoch=0, partition_epoch=0, elr=(), last_known_elr=(),
    )


# ---------------------------------------------------------------- TopicConfigLayers


def test_a_topic_config_comes_from_the_topic_then_the_node_then_the_cluster_then_the_properties() -> None:
    image = _image(([1], [1], 1))
    layers = TopicConfigLayers(image, 0, {"log.retention.ms": "4"})
    assert layers.value("t", "retention.ms") == "4"
    _config(image, BROKER_CONFIG, "", "log.retention.ms", "3")
    assert TopicConfigLayers(image, 0, {"log.retention.ms": "4"}).value("t", "retention.ms") == "3"
    _config(image, BROKER_CONFIG, "0", "log.retention.ms", "2")
    assert TopicConfigLayers(image, 0, {"log.retention.ms": "4"}).value("t", "retention.ms") == "2"
    _config(image, TOPIC_CONFIG, "t", "retention.ms", "1")
    assert TopicConfigLayers(image, 0, {"log.retention.ms": "4"}).value("t", "retention.ms") == "1"


def test_without_any_layer_the_schema_default_applies() -> None:
    layers = TopicConfigLayers(_image(([1], [1], 1)), 0, {})
    assert layers.value("t", "retention.ms") == "604800000"
    assert layers.value("t", "min.insync.replicas") == "1"
    assert layers.value("t", "cleanup.policy") == "delete"


def test_only_this_nodes_dynamic_configs_count() -> None:
    image = _image(([1], [1], 1))
    _config(image, BROKER_CONFIG, "7", "log.retention.ms", "9")
    assert TopicConfigLayers(image, 0, {}).value("t", "retention.ms") == "604800000"
    assert TopicConfigLayers(image, 7, {}).value("t", "retention.ms") == "9"


def test_another_topics_configs_do_not_count() -> None:
    image = _image(([1], [1], 1))
    _add_topic(image, "u", OTHER, ([1], [1], 1))
    _config(image, TOPIC_CONFIG, "u", "retention.ms", "5")
    layers = TopicConfigLayers(image, 0, {})
    assert (layers.value("t", "retention.ms"), layers.value("u", "retention.ms")) == ("604800000", "5")


def test_broker_synonyms_in_hours_and_minutes_are_converted_to_milliseconds() -> None:
    image = _image(([1], [1], 1))
    _config(image, BROKER_CONFIG, "0", "log.roll.hours", "2")
    _config(image, BROKER_CONFIG, "", "log.retention.minutes", "3")
    layers = TopicConfigLayers(image, 0, {"log.roll.jitter.hours": "1"})
    assert layers.value("t", "segment.ms") == "7200000"
    assert layers.value("t", "retention.ms") == "180000"
    assert layers.value("t", "segment.jitter.ms") == "3600000"


def test_a_nearer_layer_wins_over_a_more_precise_synonym_further_away() -> None:
    image = _image(([1], [1], 1))
    _config(image, BROKER_CONFIG, "0", "log.retention.hours", "1")
    _config(image, BROKER_CONFIG, "", "log.retention.ms", "5")
    assert TopicConfigLayers(image, 0, {}).value("t", "retention.ms") == "3600000"


def test_within_one_layer_the_milliseconds_synonym_wins() -> None:
    layers = TopicConfigLayers(_image(([1], [1], 1)), 0, {
        "log.retention.hours": "1", "log.retention.minutes": "1", "log.retention.ms": "7",
    })
    assert layers.value("t", "retention.ms") == "7"


def test_a_name_that_is_not_a_topic_config_raises() -> None:
    with pytest.raises(KeyError):
        TopicConfigLayers(_image(([1], [1], 1)), 0, {}).value("t", "log.retention.ms")


@pytest.mark.parametrize(
    ("topic", "cluster", "static", "election"),
    [
        (None, None, None, Election.ONLINE),
        ("true", None, None, Election.UNCLEAN),
        ("TRUE", None, None, Election.UNCLEAN),
        ("false", None, None, Election.ONLINE),
        ("yes", None, None, Election.ONLINE),
        (None, "true", None, Election.UNCLEAN),
        ("false", "true", None, Election.ONLINE),
        (None, None, "true", Election.UNCLEAN),
        (None, "false", "true", Election.ONLINE),
    ],
)
def test_the_election_follows_the_effective_unclean_leader_election_enable(
    topic: str | None, cluster: str | None, static: str | None, election: Election
) -> None:
    image = _image(([1], [1], 1))
    if topic is not None:
        _config(image, TOPIC_CONFIG, "t", "unclean.leader.election.enable", topic)
    if cluster is not None:
        _config(image, BROKER_CONFIG, "", "unclean.leader.election.enable", cluster)
    properties = {} if static is None else {"unclean.leader.election.enable": static}
    assert TopicConfigLayers(image, 0, properties).election("t") is election


def test_an_untrimmed_true_is_not_an_unclean_election() -> None:
    image = _image(([1], [1], 1))
    _config(image, TOPIC_CONFIG, "t", "unclean.leader.election.enable", " true ")
    assert TopicConfigLayers(image, 0, {}).election("t") is Election.ONLINE


# ---------------------------------------------------------------- is_online_dir


@pytest.mark.parametrize(
    ("dir_", "online", "expected"),
    [
        (UNASSIGNED_DIRECTORY, (directory(1),), True),
        (MIGRATING_DIRECTORY, (directory(1),), True),
        (LOST_DIRECTORY, (directory(1),), False),
        (LOST_DIRECTORY, (), False),
        (directory(1), (directory(1), directory(1, 2)), True),
        (directory(1, 2), (directory(1),), False),
        (directory(9), (), True),
    ],
    ids=["unassigned", "migrating", "lost", "lost-without-dirs", "listed", "not-listed", "no-dirs-registered"],
)
def test_directory_online(dir_: Uuid, online: tuple[Uuid, ...], expected: bool) -> None:
    assert is_online_dir(dir_, online) is expected


# ---------------------------------------------------------------- leader_acceptable


def _acceptor_cluster() -> ClusterControlManager:
    """1 active, 2 fenced, 3 in controlled shutdown, 4 with two directories, 6 with none."""
    return active_cluster(
        1, 2, 3, 4, 6, fenced=(2,), shutting_down=(3,),
        log_dirs={4: (directory(4), directory(4, 2)), 6: ()},
    )


def test_an_active_broker_with_its_directory_online_may_lead() -> None:
    partition = _partition((1, 4), (directory(1), directory(4, 2)))
    cluster = _acceptor_cluster()
    assert leader_acceptable(cluster, partition, 1)
    assert leader_acceptable(cluster, partition, 4)


@pytest.mark.parametrize("broker_id", [2, 3, 5], ids=["fenced", "controlled-shutdown", "unregistered"])
def test_a_fenced_shutting_down_or_unregistered_broker_may_not_lead(broker_id: int) -> None:
    partition = _partition((broker_id, 1), (UNASSIGNED_DIRECTORY, directory(1)))
    assert not leader_acceptable(_acceptor_cluster(), partition, broker_id)


@pytest.mark.parametrize("broker_id", [2, 3], ids=["fenced", "controlled-shutdown"])
def test_the_broker_being_added_counts_as_active(broker_id: int) -> None:
    partition = _partition((broker_id, 1), (UNASSIGNED_DIRECTORY, directory(1)))
    assert leader_acceptable(_acceptor_cluster(), partition, broker_id, added=broker_id)
    assert not leader_acceptable(_acceptor_cluster(), partition, broker_id, added=1)


def test_an_unregistered_broker_may_not_lead_even_when_added() -> None:
    partition = _partition((5, 1), (UNASSIGNED_DIRECTORY, directory(1)))
    assert not leader_acceptable(_acceptor_cluster(), partition, 5, added=5)


def test_a_removed_broker_may_not_lead_even_when_also_added() -> None:
    partition = _partition((1, 4), (directory(1), directory(4)))
    cluster = _acceptor_cluster()
    assert not leader_acceptable(cluster, partition, 1, removed=(1,))
    assert not leader_acceptable(cluster, partition, 1, removed=(-1, 1), added=1)
    assert leader_acceptable(cluster, partition, 4, removed=(1,))


@pytest.mark.parametrize(
    ("dir_", "expected"),
    [
        (directory(4), True),
        (directory(4, 2), True),
        (directory(4, 3), False),
        (LOST_DIRECTORY, False),
        (UNASSIGNED_DIRECTORY, True),
        (MIGRATING_DIRECTORY, True),
    ],
    ids=["first-dir", "second-dir", "unknown-dir", "lost", "unassigned", "migrating"],
)
def test_a_replica_in_an_offline_directory_may_not_lead(dir_: Uuid, expected: bool) -> None:
    partition = _partition((4, 1), (dir_, directory(1)))
    assert leader_acceptable(_acceptor_cluster(), partition, 4) is expected


def test_a_broker_that_registered_no_directories_has_every_directory_online() -> None:
    partition = _partition((6, 1), (directory(6, 7), directory(1)))
    assert leader_acceptable(_acceptor_cluster(), partition, 6)
    lost = _partition((6, 1), (LOST_DIRECTORY, directory(1)))
    assert not leader_acceptable(_acceptor_cluster(), lost, 6)


# ---------------------------------------------------------------- leader_and_isr_updates


def _updates(image: ReplicationControlManager, cluster: ClusterControlManager, partitions: list[tuple[Uuid, int]], *,
             mv: int = MV, elr: bool = False, **brokers: int) -> list[Record]:
    return leader_and_isr_updates(
        partitions, image=image, cluster=cluster, configs=TopicConfigLayers(image, 0, {}),
        metadata_version=mv, elr_enabled=elr, **brokers,
    )


@pytest.mark.parametrize(("topic_id", "index"), [(OTHER, 0), (TOPIC, 3)], ids=["unknown-topic", "unknown-partition"])
def test_a_partition_missing_from_the_image_raises(topic_id: Uuid, index: int) -> None:
    image = _image(([1, 2], [1, 2], 1))
    with pytest.raises(RuntimeError, match="is not in the image"):
        _updates(image, active_cluster(1, 2), [(topic_id, index)], broker_to_remove=1)


def test_a_removed_leader_is_replaced_by_the_first_in_sync_replica_in_replica_order() -> None:
    image = _image(([1, 3, 2], [2, 1, 3], 1))
    records = _updates(image, active_cluster(1, 2, 3), [(TOPIC, 0)], broker_to_remove=1)
    # the ISR keeps its own order; the leader is the first of the replicas left in it
    assert _changes(records) == [(0, 3, [2, 3], None)]


def test_a_removed_follower_only_leaves_the_isr() -> None:
    image = _image(([1, 2, 3], [1, 2, 3], 1))
    records = _updates(image, active_cluster(1, 2, 3), [(TOPIC, 0)], broker_to_remove=3)
    assert _changes(records) == [(0, NO_LEADER_CHANGE, [1, 2], None)]


def test_without_eligible_leader_replicas_the_last_in_sync_replica_stays_in_the_isr() -> None:
    image = _image(([1, 2], [1], 1))
    records = _updates(image, active_cluster(1, 2), [(TOPIC, 0)], broker_to_remove=1)
    assert _changes(records) == [(0, NO_LEADER, None, None)]


@pytest.mark.parametrize(("mv", "version"), [(16, 0), (17, 1), (21, 1), (22, 1), (23, 2), (ELR_MV, 2)])
def test_the_record_version_follows_the_metadata_version(mv: int, version: int) -> None:
    image = _image(([1, 2], [1, 2], 1))
    records = _updates(image, active_cluster(1, 2), [(TOPIC, 0)], mv=mv, broker_to_remove=2)
    assert [v for _, v in records] == [version]


def test_the_broker_being_added_is_elected_although_still_fenced() -> None:
    image = _image(([1, 2], [1], NO_LEADER))
    cluster = active_cluster(1, 2, fenced=(1,))
    assert _updates(image, cluster, [(TOPIC, 0)]) == []
    assert _changes(_updates(image, cluster, [(TOPIC, 0)], broker_to_add=1)) == [(0, 1, None, None)]


def test_a_partition_that_needs_nothing_gets_no_record() -> None:
    image = _image(([1, 2], [1, 2], 1))
    assert _updates(image, active_cluster(1, 2), [(TOPIC, 0)], broker_to_add=2) == []


def test_an_unclean_topic_elects_a_replica_outside_the_isr_and_starts_recovery() -> None:
    image = _image(([1, 2], [1], 1))
    _config(image, TOPIC_CONFIG, "t", "unclean.leader.election.enable", "true")
    (record, _), = _updates(image, active_cluster(1, 2), [(TOPIC, 0)], broker_to_remove=1)
    assert isinstance(record, PartitionChangeRecord)
    assert (record.leader, record.isr, record.leader_recovery_state) == (2, [2], RECOVERING)


def test_a_clean_removal_makes_the_broker_an_eligible_leader_an_unclean_shutdown_does_not() -> None:
    image = _image(([1, 2, 3], [1, 3], 1))
    _config(image, TOPIC_CONFIG, "t", "min.insync.replicas", "2")
    cluster = active_cluster(1, 2, 3)
    removed = _updates(image, cluster, [(TOPIC, 0)], mv=ELR_MV, elr=True, broker_to_remove=3)
    assert _changes(removed) == [(0, NO_LEADER_CHANGE, [1], [3])]
    unclean = _updates(image, cluster, [(TOPIC, 0)], mv=ELR_MV, elr=True, unclean_shutdown_broker=3)
    assert _changes(unclean) == [(0, NO_LEADER_CHANGE, [1], None)]


def test_partitions_are_changed_in_the_order_given() -> None:
    image = _image(([1, 2], [1, 2], 1), ([2, 1], [2, 1], 2), ([1, 2], [1, 2], 1))
    records = _updates(image, active_cluster(1, 2), [(TOPIC, 2), (TOPIC, 0), (TOPIC, 1)], broker_to_remove=1)
    assert [p for p, *_ in _changes(records)] == [2, 0, 1]


# ---------------------------------------------------------------- BrokerPartitionEffects


def _two_topics() -> ReplicationControlManager:
    """Topic "b" (created first), then "a"; broker 3 is in some ISRs."""
    image = _image(([1, 3], [1, 3], 3), ([1, 2], [1, 2], 1), name="b", topic_id=OTHER)
    _add_topic(image, "a", TOPIC, ([3, 2], [2, 3], 2), ([2, 3], [2, 3], 3))
    return image


def test_a_removed_broker_leaves_every_isr_it_is_in_topics_in_creation_order() -> None:
    effects = _effects(_two_topics(), active_cluster(1, 2, 3))
    records = effects.broker_removed(3)
    assert [(r.topic_id, r.partition_id, r.leader, r.isr) for r, _ in records] == [  # type: ignore[attr-defined]
        (OTHER, 0, 1, [1]), (TOPIC, 0, NO_LEADER_CHANGE, [2]), (TOPIC, 1, 2, [2]),
    ]


def test_a_removed_broker_below_min_isr_becomes_an_eligible_leader() -> None:
    image = _image(([1, 2], [1, 2], 1), ([1, 2, 3], [1, 2, 3], 1))
    _config(image, BROKER_CONFIG, "", "min.insync.replicas", "2")
    records = _effects(image, active_cluster(1, 2, 3), elr=True).broker_removed(1)
    # partition 1 keeps two in-sync replicas: no ELR; partition 0 drops below two
    assert _changes(records) == [(0, 2, [2], [1]), (1, 2, [2, 3], None)]
    assert [v for _, v in records] == [2, 2]


def test_an_unfenced_broker_is_elected_where_it_is_in_sync_and_there_is_no_leader() -> None:
    image = _image(([1, 2], [1], NO_LEADER), ([2, 3], [3], NO_LEADER), ([1, 2], [1, 2], 2))
    records = _effects(image, active_cluster(1, 2, 3, fenced=(1, 3))).broker_unfenced(1)
    assert _changes(records) == [(0, 1, None, None)]


def test_an_unfenced_eligible_leader_replica_leads_and_becomes_the_isr() -> None:
    image = _image(([1, 2], [], NO_LEADER), eligible_leader_replicas=[1], last_known_elr=[2])
    _config(image, BROKER_CONFIG, "", "min.insync.replicas", "2")
    records = _effects(image, active_cluster(1, 2, fenced=(1, 2)), elr=True).broker_unfenced(1)
    (record, _), = records
    assert isinstance(record, PartitionChangeRecord)
    assert (record.leader, record.isr, record.eligible_leader_replicas, record.last_known_elr) == (1, [1], [], [])


def test_an_unclean_shutdown_with_eligible_leader_replicas_takes_the_broker_out_of_isr_and_elr() -> None:
    image = _image(([1, 2, 3], [1, 3], 1), ([1, 2, 3], [1], 1))
    image.replay(PartitionChangeRecord(topic_id=TOPIC, partition_id=1, eligible_leader_replicas=[3]))
    _config(image, BROKER_CONFIG, "", "min.insync.replicas", "2")
    effects = _effects(image, active_cluster(1, 2, 3), elr=True)
    # partition 0 through the ISR, partition 1 through the ELR; neither keeps broker 3
    assert _changes(effects.broker_shutdown(3, clean=False)) == [
        (0, NO_LEADER_CHANGE, [1], None), (1, NO_LEADER_CHANGE, None, []),
    ]
    # a clean shutdown is a removal: broker 3 stays an eligible leader where it was in sync
    assert _changes(effects.broker_shutdown(3, clean=True)) == [(0, NO_LEADER_CHANGE, [1], [3])]


def test_without_eligible_leader_replicas_any_shutdown_is_a_removal() -> None:
    image = _image(([1, 2, 3], [1, 3], 3))
    effects = _effects(image, active_cluster(1, 2, 3))
    assert effects.broker_shutdown(3, clean=False) == effects.broker_removed(3) != []
    assert _changes(effects.broker_shutdown(3, clean=True)) == [(0, 1, [1], None)]


def test_an_unregistered_broker_leaves_the_isrs_then_the_elrs() -> None:
    image = _image(([1, 2, 3], [1, 2, 3], 3), ([1, 2, 3], [1, 2], 1))
    image.replay(PartitionChangeRecord(topic_id=TOPIC, partition_id=1, eligible_leader_replicas=[3]))
    _config(image, BROKER_CONFIG, "", "min.insync.replicas", "3")
    records = _effects(image, active_cluster(1, 2, 3), elr=True).broker_unregistered(3)
    # partition 0 from the ISR pass; partition 1 from the ELR pass, where a removed broker
    # (unlike one that shut down uncleanly) is not taken out of the ELR: nothing changes
    assert _changes(records) == [(0, 1, [1, 2], [3])]


def test_an_unregistered_broker_without_eligible_leader_replicas() -> None:
    image = _image(([1, 2], [1, 2], 2), ([1, 3], [1], 1))
    records = _effects(image, active_cluster(1, 2, 3)).broker_unregistered(2)
    assert _changes(records) == [(0, 1, [1], None)]


def test_an_offline_directory_moves_the_partitions_of_that_broker_in_it() -> None:
    image = _image(([1, 2], [1, 2], 1), ([2, 1], [2, 1], 2), ([1, 2], [1, 2], 1))
    image.replay(PartitionChangeRecord(topic_id=TOPIC, partition_id=2, directories=[directory(1, 2), directory(2)]))
    cluster = active_cluster(1, 2, log_dirs={1: (directory(1), directory(1, 2))})
    records = _effects(image, cluster).directory_offline(1, directory(1))
    assert _changes(records) == [(0, 2, [2], None), (1, NO_LEADER_CHANGE, [2], None)]
    # partition 2 keeps broker 1's replica in its other directory; broker 2 has nothing there
    assert _effects(image, cluster).directory_offline(2, directory(1)) == []


def test_leaderships() -> None:
    effects = _effects(_image(([1, 2], [1, 2], 2), ([1, 2], [1], NO_LEADER)), active_cluster(1, 2))
    assert (effects.has_leaderships(1), effects.has_leaderships(2), effects.has_leaderships(3)) == (False, True, False)


# ---------------------------------------------------------------- PartitionChanges


def test_a_change_is_built_against_the_image_configs_and_metadata_version() -> None:
    image = _image(([1, 2, 3], [1, 2, 3], 1))
    _config(image, TOPIC_CONFIG, "t", "min.insync.replicas", "2")
    changes = PartitionChanges(image, active_cluster(1, 2, 3), TopicConfigLayers(image, 0, {}),
                               metadata_version=ELR_MV, elr_enabled=True)
    assert changes.record_version == 2
    change = changes.change(TOPIC, 0, election=Election.PREFERRED)
    assert (change.min_isr, change.elr_enabled, change.metadata_version, change.election) == (
        2, True, ELR_MV, Election.PREFERRED)
    assert change.partition is image.topics[TOPIC].partitions[0]
    assert (change.topic_id, change.partition_id) == (TOPIC, 0)


def test_a_change_accepts_leaders_as_the_removed_and_added_brokers_say() -> None:
    image = _image(([1, 2, 3], [1, 2, 3], 1))
    changes = PartitionChanges(image, active_cluster(1, 2, 3, fenced=(3,)), TopicConfigLayers(image, 0, {}),
                               metadata_version=MV, elr_enabled=False)
    change = changes.change(TOPIC, 0, removed=(1,), added=3)
    assert [change.acceptable_leader(b) for b in (1, 2, 3)] == [False, True, True]
    plain = changes.change(TOPIC, 0)
    assert [plain.acceptable_leader(b) for b in (1, 2, 3)] == [True, True, False]


@pytest.mark.parametrize(("mv", "version"), [(7, 0), (16, 0), (17, 1), (22, 1), (23, 2)])
def test_the_change_record_version(mv: int, version: int) -> None:
    image = _image(([1], [1], 1))
    changes = PartitionChanges(image, active_cluster(1), TopicConfigLayers(image, 0, {}), metadata_version=mv,
                               elr_enabled=False)
    assert changes.record_version == version


@pytest.mark.parametrize(
    ("configured", "replicas", "expected"),
    [(None, [1, 2, 3], 1), ("2", [1, 2, 3], 2), ("3", [1, 2, 3], 3), ("5", [1, 2, 3], 3), ("2", [1], 1)],
)
def test_the_effective_min_isr_is_at_most_the_replication_factor(
    configured: str | None, replicas: list[int], expected: int
) -> None:
    image = _image((replicas, replicas, replicas[0]))
    if configured is not None:
        _config(image, TOPIC_CONFIG, "t", "min.insync.replicas", configured)
    assert effective_min_isr(image.topics[TOPIC], TopicConfigLayers(image, 0, {})) == expected


def test_the_effective_min_isr_comes_through_the_broker_layers_and_partition_zero() -> None:
    image = _image(([1, 2, 3, 4], [1, 2, 3, 4], 1), ([1, 2], [1, 2], 1))
    _config(image, BROKER_CONFIG, "", "min.insync.replicas", "3")
    # the replication factor is partition 0's (four), not the smaller one of partition 1
    assert effective_min_isr(image.topics[TOPIC], TopicConfigLayers(image, 0, {})) == 3
    assert effective_min_isr(image.topics[TOPIC], TopicConfigLayers(image, 0, {"min.insync.replicas": "9"})) == 3
    _config(image, BROKER_CONFIG, "0", "min.insync.replicas", "2")
    assert effective_min_isr(image.topics[TOPIC], TopicConfigLayers(image, 0, {})) == 2
