"""ElectLeaders, the preferred-leader rebalance and the periodic unclean election
(``server.controller.elections``). The answers
and records are compared with a stock controller's in ``compat/test_topic_rpcs.py``; these pin
the rules."""

from __future__ import annotations

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.config_record import ConfigRecord
from messages.generated.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from server.controller.cluster import ClusterControlManager
from server.controller.elections import (
    PREFERRED,
    UNCLEAN,
    balance_partition_leaders,
    elect_leaders,
    elect_unclean_leaders,
)
from server.controller.image import ReplicationControlManager
from server.controller.partition_effects import (
    TopicConfigLayers,
)

TOPIC = Uuid.from_longs(1, 1)


def _setup(fenced: tuple[int, ...] = ()) -> tuple[ClusterControlManager, ReplicationControlManager]:
    """Brokers 1-3 (``fenced`` ones fenced); topic "t": partition 0 led by its preferred
    replica, 1 led by its second, 2 with no leader and only its preferred replica in sync."""
    cluster = ClusterControlManager("c", 9000)
    for broker_id in (1, 2, 3):
        cluster.replay(RegisterBrokerRecord(
            broker_id=broker_id, broker_epoch=broker_id, incarnation_id=Uuid.from_longs(broker_id, 0),
            fenced=broker_id in fenced, log_dirs=[Uuid.from_longs(broker_id, 1)],
        ), broker_id)
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="t", topic_id=TOPIC))
    for index, (replicas, isr, leader) in enumerate((([1, 2], [1, 2], 1), ([1, 2], [1, 2], 2), ([3, 2], [3], -1))):
        image.replay(PartitionRecord(
            partition_id=index, topic_id=TOPIC, replicas=replicas, isr=isr, leader=leader,
            directories=[Uuid.from_longs(b, 1) for b in replicas],
        ))
    return cluster, image


def _elect(cluster: ClusterControlManager, image: ReplicationControlManager, kind: int, partitions: list[int] | None) -> tuple[list, list]:
    request = ElectLeadersRequest(
        election_type=kind, topic_partitions=None if partitions is None else [TopicPartitions(topic="t", partitions=partitions)]
    )
    records, response = elect_leaders(
        request, 2, image=image, cluster=cluster, configs=TopicConfigLayers(image, 0, {}), metadata_version=21,
        elr_enabled=False,
    )
    results = [(p.partition_id, p.error_code) for r in response.replica_election_results for p in r.partition_result]
    return [(r.partition_id, r.leader) for r, _ in records], results


def test_a_preferred_election_moves_leadership_to_the_first_replica() -> None:
    cluster, image = _setup(fenced=(3,))
    records, results = _elect(cluster, image, PREFERRED, [0, 1, 2, 7])
    assert records == [(1, 1)]
    assert results == [
        (0, Errors.ELECTION_NOT_NEEDED), (1, Errors.NONE), (2, Errors.PREFERRED_LEADER_NOT_AVAILABLE),
        (7, Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_all_partitions_leave_out_those_that_need_no_election() -> None:
    cluster, image = _setup(fenced=(3,))
    _, results = _elect(cluster, image, PREFERRED, None)
    assert results == [(1, Errors.NONE), (2, Errors.PREFERRED_LEADER_NOT_AVAILABLE)]


def test_an_unclean_election_takes_any_live_replica_when_none_is_in_sync() -> None:
    cluster, image = _setup(fenced=(3,))
    records, results = _elect(cluster, image, UNCLEAN, [0, 2])
    assert results == [(0, Errors.ELECTION_NOT_NEEDED), (2, Errors.NONE)]
    assert records == [(2, 2)]


def test_the_rebalance_elects_preferred_leaders_up_to_its_bound() -> None:
    cluster, image = _setup(fenced=(3,))
    configs = TopicConfigLayers(image, 0, {})
    records = balance_partition_leaders(
        image=image, cluster=cluster, configs=configs, metadata_version=21, elr_enabled=False, max_elections=1000
    )
    assert [(r.partition_id, r.leader) for r, _ in records] == [(1, 1)]
    assert balance_partition_leaders(
        image=image, cluster=cluster, configs=configs, metadata_version=21, elr_enabled=False, max_elections=0
    ) == []


def test_the_periodic_unclean_election_runs_only_for_topics_that_allow_it() -> None:
    """``maybeElectUncleanLeaders``: partition 2 of "t" has no leader and its only in-sync
    replica (3) is fenced; broker 2 may lead it only once "t" has unclean.leader.election.enable,
    as a topic config or as the node's static default."""
    cluster, image = _setup(fenced=(3,))

    def unclean(configs: TopicConfigLayers, max_elections: int = 1000) -> list[tuple[int, int]]:
        records = elect_unclean_leaders(
            image=image, cluster=cluster, configs=configs, metadata_version=21, elr_enabled=False,
            max_elections=max_elections,
        )
        return [(r.partition_id, r.leader) for r, _ in records]

    assert unclean(TopicConfigLayers(image, 0, {})) == []
    assert unclean(TopicConfigLayers(image, 0, {"unclean.leader.election.enable": "true"})) == [(2, 2)]
    image.replay(ConfigRecord(resource_type=2, resource_name="t", name="unclean.leader.election.enable", value="true"))
    assert unclean(TopicConfigLayers(image, 0, {})) == [(2, 2)]
    assert unclean(TopicConfigLayers(image, 0, {}), max_elections=0) == []



def test_a_partition_said_to_keep_its_leader_builds_no_change() -> None:
    """The rebalance skips a partition without building its change when ``keeps_its_leader``
    says so: over random partitions (reassignments, ELR, lost directories, fenced and
    shutting-down brokers, min.insync.replicas), every partition it holds for builds no record,
    and it holds for many."""
    import random

    from server.controller.elections import _Elector
    from server.controller.partition_change import Election

    rng = random.Random(11)
    held = 0
    for _ in range(300):
        cluster = ClusterControlManager("c", 9000)
        for broker_id in range(1, 6):
            cluster.replay(RegisterBrokerRecord(
                broker_id=broker_id, broker_epoch=broker_id, incarnation_id=Uuid.from_longs(broker_id, 0),
                fenced=rng.random() < 0.3, in_controlled_shutdown=rng.random() < 0.1,
                log_dirs=[Uuid.from_longs(broker_id, 1)],
            ), broker_id)
        image = ReplicationControlManager()
        image.replay(TopicRecord(name="t", topic_id=TOPIC))
        image.replay(ConfigRecord(resource_type=2, resource_name="t", name="min.insync.replicas",
                                  value=str(rng.randint(1, 3))))
        for index in range(8):
            replicas = rng.sample(range(1, 6), 3)
            isr = [r for r in replicas if rng.random() < 0.7]
            out = [r for r in replicas if r not in isr]
            image.replay(PartitionRecord(
                partition_id=index, topic_id=TOPIC, replicas=replicas, isr=isr,
                leader=rng.choice([*isr, *replicas, -1]),
                eligible_leader_replicas=[r for r in out if rng.random() < 0.3],
                last_known_elr=[rng.choice(replicas)] if rng.random() < 0.1 else [],
                adding_replicas=[replicas[-1]] if rng.random() < 0.1 else [],
                directories=[Uuid.from_longs(b, 1) if rng.random() < 0.9 else Uuid.from_longs(0, 2) for b in replicas],
            ))
        for elr_enabled in (False, True):
            elector = _Elector(image, cluster, TopicConfigLayers(image, 0, {}), metadata_version=23,
                               elr_enabled=elr_enabled)
            for index in range(8):
                if elector.keeps_its_leader(TOPIC, index):
                    held += 1
                    assert elector.elected(TOPIC, index, Election.PREFERRED) is None, (
                        image.topics[TOPIC].partitions[index], elr_enabled)
    assert held > 300


def test_a_rebalance_pass_goes_a_slice_at_a_time_and_elects_what_one_walk_would() -> None:
    """Slices of a pass elect exactly what one walk of every imbalanced partition does, in the
    same order, each looking at no more than its bound; a partition balanced again or gone
    since the pass began is passed over."""
    from server.controller.elections import BalanceWalk, imbalanced_partitions

    def setup() -> tuple[ClusterControlManager, ReplicationControlManager]:
        cluster = ClusterControlManager("c", 9000)
        for broker_id in (1, 2, 3):
            cluster.replay(RegisterBrokerRecord(
                broker_id=broker_id, broker_epoch=broker_id, incarnation_id=Uuid.from_longs(broker_id, 0),
                fenced=broker_id == 3, log_dirs=[Uuid.from_longs(broker_id, 1)],
            ), broker_id)
        image = ReplicationControlManager()
        image.replay(TopicRecord(name="t", topic_id=TOPIC))
        for index in range(60):  # every third led by its second replica while its first (1) may lead
            replicas = [3, 2] if index % 3 else [1, 2]
            image.replay(PartitionRecord(
                partition_id=index, topic_id=TOPIC, replicas=replicas, isr=replicas, leader=2,
                directories=[Uuid.from_longs(b, 1) for b in replicas],
            ))
        return cluster, image

    cluster, image = setup()
    context = dict(image=image, cluster=cluster, configs=TopicConfigLayers(image, 0, {}), metadata_version=21,
                   elr_enabled=False)
    whole = [(r.partition_id, r.leader) for r, _ in balance_partition_leaders(**context, max_elections=1000)]
    assert whole == [(i, 1) for i in range(0, 60, 3)]

    cluster, image = setup()
    context = dict(image=image, cluster=cluster, configs=TopicConfigLayers(image, 0, {}), metadata_version=21,
                   elr_enabled=False)
    walk = BalanceWalk(imbalanced_partitions(image))
    image.replay(PartitionChangeRecord(partition_id=3, topic_id=TOPIC, leader=1))  # balanced again
    sliced: list[tuple[int, int]] = []
    while not walk.done:
        before = walk.at
        records = balance_partition_leaders(**context, max_elections=1000, walk=walk, max_examined=7)
        assert 0 < walk.at - before <= 7
        sliced += [(r.partition_id, r.leader) for r, _ in records]
    assert sliced == [p for p in whole if p[0] != 3]

    cluster, image = setup()
    context = dict(image=image, cluster=cluster, configs=TopicConfigLayers(image, 0, {}), metadata_version=21,
                   elr_enabled=False)
    walk = BalanceWalk(imbalanced_partitions(image))
    image.replay(RemoveTopicRecord(topic_id=TOPIC))  # gone
    assert balance_partition_leaders(**context, max_elections=1000, walk=walk) == [] and walk.done
