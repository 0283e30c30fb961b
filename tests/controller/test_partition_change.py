"""One partition change (``server.controller.partition_change``, Kafka 4.4's
``PartitionChangeBuilder``) and AlterPartition on top of it. Differential cases against a stock
controller are in ``compat/test_topic_rpcs.py``; these pin elections and ELR cases AlterPartition
alone does not reach."""

from __future__ import annotations

import pytest

from kwire.uuid import Uuid
from server.controller.image import NO_LEADER, NO_LEADER_CHANGE, PartitionRegistration
from server.controller.java_order import (
    java_int_set_order,
)
from server.controller.partition_change import (
    RECOVERED,
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


# ---------------------------------------------------------------- elections


def test_preferred_election_keeps_a_valid_leader_when_the_preferred_replica_is_out_of_sync() -> None:
    change = _change(_partition((1, 2, 3), (2, 3), 2), {1, 2, 3}, election=Election.PREFERRED)
    assert change.build() is None


def test_preferred_election_keeps_a_valid_leader_when_the_preferred_replica_is_down() -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 3), {2, 3}, election=Election.PREFERRED)
    assert change.build() is None


def test_preferred_election_keeps_a_valid_current_leader_before_the_other_replicas() -> None:
    change = _change(_partition((1, 2, 3), (1, 3, 2), 3), {3, 2}, election=Election.PREFERRED)
    change.target_isr = [3, 2]
    record = change.build()
    assert record is not None and record.leader == NO_LEADER_CHANGE and record.isr == [3, 2]


def test_preferred_election_falls_back_to_the_next_valid_replica_in_replica_order() -> None:
    change = _change(_partition((1, 2, 3), (1, 3, 2), 1), {3, 2}, election=Election.PREFERRED)
    record = change.build()
    assert record is not None and record.leader == 2 and record.isr is None


def test_preferred_election_without_a_valid_replica_leaves_no_leader() -> None:
    change = _change(_partition((1, 2), (1, 2), 1), set(), election=Election.PREFERRED)
    record = change.build()
    assert record is not None and record.leader == NO_LEADER and record.isr is None


def test_an_online_election_keeps_a_valid_leader_that_is_not_preferred() -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 3), {1, 2, 3})
    change.target_isr = [2, 3]
    record = change.build()
    assert record is not None and record.leader == NO_LEADER_CHANGE and record.isr == [2, 3]


def test_a_leader_in_the_isr_that_may_not_lead_is_replaced() -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 1), {2, 3})
    record = change.build()
    assert record is not None and record.leader == 2 and record.isr is None


def test_a_leaderless_partition_without_candidates_needs_no_record() -> None:
    assert _change(_partition((1, 2), (1,), NO_LEADER), {2}).build() is None


def test_an_unclean_election_prefers_an_in_sync_replica() -> None:
    change = _change(_partition((1, 2, 3), (1, 3), 1), {2, 3}, election=Election.UNCLEAN)
    change.target_isr = [3]
    record = change.build()
    assert record is not None and (record.leader, record.isr, record.leader_recovery_state) == (3, [3], -1)


def test_an_unclean_election_takes_the_first_live_replica_in_replica_order() -> None:
    change = _change(_partition((1, 3, 2), (1,), 1), {2, 3}, election=Election.UNCLEAN)
    change.target_isr = []
    record = change.build()
    assert record is not None and (record.leader, record.isr, record.leader_recovery_state) == (3, [3], RECOVERING)


def test_an_unclean_election_of_a_recovering_partition_does_not_set_recovery_again() -> None:
    partition = _partition((1, 2), (1,), 1, leader_recovery_state=RECOVERING)
    change = _change(partition, {2}, election=Election.UNCLEAN)
    change.target_isr = []
    record = change.build()
    assert record is not None and (record.leader, record.isr, record.leader_recovery_state) == (2, [2], -1)


def test_an_unclean_election_without_a_live_replica_leaves_no_leader() -> None:
    change = _change(_partition((1, 2), (1,), 1), set(), election=Election.UNCLEAN)
    change.target_isr = []
    record = change.build()
    assert record is not None and (record.leader, record.isr, record.leader_recovery_state) == (NO_LEADER, None, -1)


def test_a_new_leader_does_not_come_from_outside_the_target_replicas() -> None:
    change = _change(_partition((1, 2), (1, 2), 1), {2, 3})
    change.target_replicas = [1, 3]
    change.target_isr = [1]
    record = change.build()
    # 1 may not lead and 3 is not in sync: no leader, although 2 is alive and was in sync
    assert record is not None and record.leader == NO_LEADER and record.replicas == [1, 3]


# ---------------------------------------------------------------- eligible leader replicas


def test_the_isr_may_become_empty_only_with_eligible_leader_replicas() -> None:
    change = _change(_partition((1, 2), (1,), 1), {2})
    change.target_isr = []
    record = change.build()
    assert record is not None and record.isr is None and record.leader == NO_LEADER
    change = _change(_partition((1, 2), (1,), 1), {2}, min_isr=1, elr_enabled=True)
    change.target_isr = []
    record = change.build()
    assert record is not None and (record.isr, record.leader, record.eligible_leader_replicas) == ([], NO_LEADER, [1])


def test_eligible_leader_replicas_come_in_java_hash_set_order() -> None:
    change = _change(_partition((20, 3, 7), (20, 3, 7), 7), {3, 7, 20}, min_isr=3, elr_enabled=True)
    change.target_isr = [7]
    record = change.build()
    # a HashSet<Integer> of {20, 3} iterates 3 (bucket 3) before 20 (bucket 4)
    assert record is not None and record.eligible_leader_replicas == [3, 20]
    assert java_int_set_order([20, 3]) == [3, 20]


def test_replicas_that_shut_down_uncleanly_are_not_eligible_but_are_last_known() -> None:
    change = _change(
        _partition((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, min_isr=3, elr_enabled=True,
        unclean_shutdown_replicas=[3], use_last_known_leader=False,
    )
    change.target_isr = [1]
    record = change.build()
    assert record is not None and record.eligible_leader_replicas == [2] and record.last_known_elr == [3]


def test_the_last_known_elr_is_written_only_without_the_last_known_leader_rule() -> None:
    partition = _partition((1, 2, 3), (1, 2, 3), 1)
    kept = _change(partition, {1, 2, 3}, min_isr=3, elr_enabled=True, unclean_shutdown_replicas=[3])
    kept.target_isr = [1]
    record = kept.build()
    assert record is not None and record.eligible_leader_replicas == [2] and record.last_known_elr is None


def test_reaching_min_isr_empties_the_eligible_and_last_known_replicas() -> None:
    partition = _partition((1, 2, 3), (1,), 1, elr=(2,), last_known_elr=(3,))
    change = _change(partition, {1, 2, 3}, min_isr=2, elr_enabled=True, use_last_known_leader=False)
    change.target_isr = [1, 3]
    record = change.build()
    assert record is not None and (record.isr, record.eligible_leader_replicas, record.last_known_elr) == ([1, 3], [], [])


def test_with_eligible_leader_replicas_disabled_a_leftover_elr_is_cleared() -> None:
    partition = _partition((1, 2, 3), (1,), 1, elr=(2, 3))
    record = _change(partition, {1, 2, 3}).build()
    assert record is not None and record.eligible_leader_replicas == [] and record.isr is None


def test_an_unchanged_elr_below_min_isr_needs_no_record() -> None:
    partition = _partition((1, 2, 3), (1,), 1, elr=(2, 3))
    assert _change(partition, {1, 2, 3}, min_isr=2, elr_enabled=True).build() is None


def test_a_partition_that_loses_every_replica_remembers_its_last_leader() -> None:
    change = _change(_partition((1, 2), (1,), 1), set(), min_isr=1, elr_enabled=True, unclean_shutdown_replicas=[1])
    change.target_isr = []
    record = change.build()
    assert record is not None
    assert (record.leader, record.isr, record.eligible_leader_replicas, record.last_known_elr) == (NO_LEADER, [], None, [1])


def test_the_last_known_leader_comes_back_as_an_unclean_leader() -> None:
    partition = _partition((1, 2), (), NO_LEADER, last_known_elr=(1,))
    record = _change(partition, {1}, min_isr=1, elr_enabled=True).build()
    assert record is not None
    assert (record.leader, record.isr, record.leader_recovery_state, record.last_known_elr) == (1, [1], RECOVERING, [])


def test_the_last_known_leader_is_not_elected_without_the_rule_or_without_elr() -> None:
    partition = _partition((1, 2), (), NO_LEADER, last_known_elr=(1,))
    assert _change(partition, {1}, min_isr=1, elr_enabled=True, use_last_known_leader=False).build() is None
    assert _change(partition, {1}, elr_enabled=False).build() is None


# ---------------------------------------------------------------- leader recovery state


def test_a_leader_recovery_state_change_alone_is_a_record() -> None:
    change = _change(_partition((1, 2), (1,), 1, leader_recovery_state=RECOVERING), {1, 2})
    change.target_leader_recovery_state = RECOVERED
    record = change.build()
    assert record is not None and record.leader_recovery_state == RECOVERED
    assert (record.isr, record.leader, record.replicas) == (None, NO_LEADER_CHANGE, None)


# ---------------------------------------------------------------- reassignments


def _reassigning(isr: tuple[int, ...], leader: int, adding: tuple[int, ...], removing: tuple[int, ...],
                 replicas: tuple[int, ...] = (1, 2, 3, 4)) -> PartitionChange:
    return _change(_partition(replicas, isr, leader, adding_replicas=adding, removing_replicas=removing), set(replicas))


def test_a_reassignment_completes_once_every_adding_replica_is_in_sync() -> None:
    change = _reassigning((1, 2, 3), 2, adding=(4,), removing=(1,))
    change.target_isr = [1, 2, 3, 4]
    record = change.build()
    assert record is not None
    assert (record.replicas, record.isr, record.adding_replicas, record.removing_replicas) == ([2, 3, 4], [2, 3, 4], [], [])
    # replicas left the partition: the leader epoch is bumped by naming the same leader
    assert record.leader == 2
    assert record.directories == [Uuid.from_longs(b, 1) for b in (2, 3, 4)]


def test_a_completed_reassignment_moves_leadership_off_a_removed_leader() -> None:
    change = _reassigning((1, 2, 3), 1, adding=(4,), removing=(1,))
    change.target_isr = [1, 3, 4, 2]
    record = change.build()
    # the first remaining replica in replica order, not in ISR order
    assert record is not None and record.leader == 2 and record.isr == [3, 4, 2]


def test_a_reassignment_waits_for_every_adding_replica() -> None:
    change = _reassigning((1, 2), 1, adding=(3, 4), removing=(1, 2))
    change.target_isr = [1, 2, 3]
    record = change.build()
    assert record is not None and record.isr == [1, 2, 3] and record.replicas is None and record.adding_replicas is None


def test_a_shrinking_reassignment_waits_for_every_remaining_replica() -> None:
    change = _reassigning((1, 2, 4), 1, adding=(4,), removing=(1, 2))
    record = change.build()
    assert record is None  # 3 stays and is not in sync
    change = _reassigning((1, 2, 4), 1, adding=(4,), removing=(1, 2))
    change.target_isr = [1, 2, 3, 4]
    record = change.build()
    assert record is not None and record.replicas == [3, 4] and record.leader == 3


def test_a_reassignment_does_not_complete_into_an_empty_isr() -> None:
    change = _reassigning((1, 2), 1, adding=(), removing=(1, 2), replicas=(1, 2, 3))
    assert change.build() is None


def test_growing_the_replicas_does_not_bump_the_leader_epoch() -> None:
    change = _change(_partition((1, 2), (1, 2), 1), {1, 2, 3})
    change.target_replicas = [1, 2, 3]
    change.target_adding = [3]
    record = change.build()
    assert record is not None and record.leader == NO_LEADER_CHANGE
    assert (record.replicas, record.adding_replicas, record.removing_replicas) == ([1, 2, 3], [3], None)


# ---------------------------------------------------------------- fields per metadata.version


def test_directories_are_written_from_3_7_iv2_with_new_replicas_in_the_default_directory() -> None:
    partition = _partition((1, 2), (1, 2), 1)
    for mv, expected in ((16, None), (17, [Uuid.from_longs(1, 1), Uuid.from_longs(2, 1), Uuid.from_longs(0, 1)])):
        change = _change(partition, {1, 2, 3}, metadata_version=mv)
        change.target_replicas = [1, 2, 3]
        record = change.build()
        assert record is not None and record.replicas == [1, 2, 3] and record.directories == expected


def test_the_default_directory_provider_places_new_replicas() -> None:
    change = _change(_partition((1, 2), (1, 2), 1), {1, 2, 3}, default_directory=lambda b: Uuid.from_longs(b, 9))
    change.target_replicas = [3, 1]
    record = change.build()
    assert record is not None and record.directories == [Uuid.from_longs(3, 9), Uuid.from_longs(1, 1)]


def test_a_replica_directory_change_alone_is_a_record() -> None:
    change = _change(_partition((1, 2), (1, 2), 1), {1, 2})
    change.target_directories[2] = Uuid.from_longs(2, 2)
    record = change.build()
    assert record is not None and record.directories == [Uuid.from_longs(1, 1), Uuid.from_longs(2, 2)]
    assert (record.isr, record.replicas, record.leader) == (None, None, NO_LEADER_CHANGE)
    same = _change(_partition((1, 2), (1, 2), 1), {1, 2})
    same.target_directories[2] = Uuid.from_longs(2, 1)
    assert same.build() is None


def test_before_3_7_iv2_a_directory_change_is_no_record() -> None:
    change = _change(_partition((1, 2), (1, 2), 1), {1, 2}, metadata_version=16)
    change.target_directories[2] = Uuid.from_longs(2, 2)
    assert change.build() is None


@pytest.mark.parametrize("mv", [7, 11, 12, 17, 22, 23, MV])
def test_an_isr_expansion_never_bumps_the_leader_epoch(mv: int) -> None:
    change = _change(_partition((1, 2, 3), (1, 2), 1), {1, 2, 3}, metadata_version=mv)
    change.target_isr = [1, 2, 3]
    record = change.build()
    assert record is not None and record.leader == NO_LEADER_CHANGE


@pytest.mark.parametrize(("mv", "leader"), [(7, 1), (11, 1), (12, NO_LEADER_CHANGE), (MV, NO_LEADER_CHANGE)])
def test_an_isr_shrink_bumps_the_leader_epoch_only_before_3_6_iv0(mv: int, leader: int) -> None:
    change = _change(_partition((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, metadata_version=mv)
    change.target_isr = [1, 3]
    record = change.build()
    assert record is not None and record.leader == leader


def test_record_versions_by_metadata_version() -> None:
    assert [partition_change_record_version(v) for v in (7, 12, 16, 17, 21, 22, 23, 33)] == [0, 0, 0, 1, 1, 1, 2, 2]
