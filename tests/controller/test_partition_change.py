"""One partition change (``server.controller.partition_change``, Kafka 4.4's
``PartitionChangeBuilder``) and AlterPartition on top of it. Differential cases against a stock
controller are in ``compat/test_topic_rpcs.py``; these pin elections and ELR cases AlterPartition
alone does not reach."""

from __future__ import annotations

from kwire.uuid import Uuid
from server.controller.image import NO_LEADER, NO_LEADER_CHANGE, PartitionRegistration
from server.controller.java_order import (
    java_int_set_order,
)
from server.controller.partition_change import (
    RECOVERING,
    Election,
    PartitionChange,
    partition_change_record_version,
)

TOPIC = Uuid.from_longs(1, 1)
MV = 33


def _partition(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, **kw: object) -> PartitionRegistration:
    fields: dict[str, object] = dict(
        replicas=replicas,
        directories=tuple(Uuid.from_longs(r, 1) for r in replicas),
        isr=isr,
        removing_replicas=(),
        adding_replicas=(),
        leader=leader,
        leader_recovery_state=0,
        leader_epoch=3,
        partition_epoch=7,
        elr=(),
        last_known_elr=(),
    )
    fields.update(kw)
    return PartitionRegistration(**fields)  # type: ignore[arg-type]


def _change(partition: PartitionRegistration, alive: set[int], **kw: object) -> PartitionChange:
    fields: dict[str, object] = dict(min_isr=1, elr_enabled=False, metadata_version=MV)
    fields.update(kw)
    return PartitionChange(partition, TOPIC, 0, lambda b: b in alive, **fields)  # type: ignore[arg-type]


def test_an_isr_shrink_keeps_the_leader_and_its_epoch() -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 1), {1, 2, 3})
    change.target_isr = [1, 2]
    record = change.build()
    assert record is not None and record.isr == [1, 2] and record.leader == NO_LEADER_CHANGE


def test_before_3_6_an_isr_shrink_bumps_the_leader_epoch() -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, metadata_version=11)
    change.target_isr = [1, 2]
    record = change.build()
    assert record is not None and record.leader == 1


def test_no_change_is_no_record() -> None:
    assert _change(_partition((1, 2), (1, 2), 1), {1, 2}).build() is None


def test_a_leader_that_left_the_isr_is_replaced_by_the_first_valid_replica() -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 1), {2, 3})
    change.target_isr = [2, 3]
    record = change.build()
    assert record is not None and record.leader == 2 and record.isr == [2, 3]


def test_preferred_election_moves_leadership_back() -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 2), {1, 2, 3}, election=Election.PREFERRED)
    record = change.build()
    assert record is not None and record.leader == 1 and record.isr is None


def test_no_valid_leader_without_unclean_election() -> None:
    change = _change(_partition((1, 2), (1,), 1), {2})
    change.target_isr = []
    record = change.build()
    assert record is not None and record.leader == NO_LEADER


def test_unclean_election_takes_any_live_replica_and_starts_recovery() -> None:
    change = _change(_partition((1, 2), (1,), 1), {2}, election=Election.UNCLEAN)
    change.target_isr = []
    record = change.build()
    assert record is not None and record.leader == 2 and record.isr == [2]
    assert record.leader_recovery_state == RECOVERING


def test_below_min_isr_the_dropped_replicas_become_eligible_leaders() -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, min_isr=2, elr_enabled=True)
    change.target_isr = [1]
    record = change.build()
    assert record is not None and record.isr == [1] and record.eligible_leader_replicas == [2, 3]
    partition = _partition((1, 2, 3), (1,), 1, elr=(2, 3))
    change = _change(partition, {1, 2, 3}, min_isr=2, elr_enabled=True)
    change.target_isr = [1, 2]
    record = change.build()
    assert record is not None and record.eligible_leader_replicas == []


def test_an_eligible_leader_replica_leads_when_the_isr_is_empty() -> None:
    partition = _partition((1, 2, 3), (1,), 1, elr=(2, 3))
    change = _change(partition, {2, 3}, min_isr=2, elr_enabled=True)
    change.target_isr = []
    record = change.build()
    assert record is not None and record.leader == 2 and record.isr == [2]
    # the old ISR member 1 joins the ELR too: only replicas named as shut down uncleanly stay out
    assert record.eligible_leader_replicas == [1, 3]


def test_java_int_set_order_and_record_versions() -> None:
    assert java_int_set_order([103, 5, 21, 5]) == [5, 21, 103]  # 5 and 21 share bucket 5: insertion order
    assert java_int_set_order([21, 5]) == [21, 5]
    assert [partition_change_record_version(v) for v in (16, 17, 22, 23)] == [0, 1, 1, 2]
