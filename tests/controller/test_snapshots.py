"""When a controller snapshots and what it writes (``server.controller.snapshots``, Kafka's
``SnapshotGenerator`` triggers and ``KafkaRaftClient.createSnapshot``'s header)."""

from __future__ import annotations

import pytest

from kwire.uuid import Uuid
from messages.generated.config_record import ConfigRecord
from messages.generated.topic_record import TopicRecord
from messages.metadata import decode_record
from messages.runtime import Message
from server.controller.controller import ControlManagers
from server.controller.snapshots import (
    SnapshotGenerator,
    SnapshotToWrite,
    SnapshotTriggers,
    image_snapshot,
)
from server.raft.control import voters_record
from server.raft.control_state import ControlRecordStateMachine
from server.raft.events import CommittedBatch
from server.raft.log import MemoryRaftLog
from server.raft.types import Endpoint, OffsetAndEpoch, ReplicaKey, VoterNode, VoterSet
from storage.control import ControlRecordType
from storage.records import SimpleRecord, build_batch
from storage.snapshot_format import read_snapshot_content
from tests.controller.fixtures import (
    RecordingLog,
    broker_record,
    controller_at,
    controller_record,
    directory,
    mv_record,
    partition_record,
    values,
)

MIB = 1024 * 1024
HOUR_MS = 3_600_000
VOTERS = VoterSet((
    VoterNode(ReplicaKey(3000, Uuid.from_longs(7, 1)), (Endpoint("CONTROLLER", "c0", 9093),), (0, 1)),
    VoterNode(ReplicaKey(3001, Uuid.from_longs(7, 2)), (Endpoint("CONTROLLER", "c1", 9093),), (0, 1)),
))


# ---------------------------------------------------------------------- triggers


def test_bytes_accumulate_until_the_byte_trigger() -> None:
    triggers = SnapshotTriggers(20 * MIB, HOUR_MS, now_ms=0)
    assert triggers.replayed(10 * MIB, 1) is None
    assert triggers.replayed(10 * MIB - 1, 2) is None
    assert triggers.bytes_since_last == 20 * MIB - 1
    assert triggers.replayed(1, 3) == f"we have replayed at least {20 * MIB} bytes"


def test_the_byte_trigger_keeps_firing_until_reset() -> None:
    triggers = SnapshotTriggers(100, 0, now_ms=0)
    assert triggers.replayed(150, 1) == "we have replayed at least 100 bytes"
    assert triggers.replayed(0, 2) == "we have replayed at least 100 bytes"
    triggers.reset(3)
    assert triggers.bytes_since_last == 0 and triggers.replayed(99, 4) is None


def test_the_time_trigger_fires_once_the_interval_has_passed_since_the_last_snapshot() -> None:
    triggers = SnapshotTriggers(20 * MIB, HOUR_MS, now_ms=1000)
    assert triggers.replayed(10, 1000 + HOUR_MS - 1) is None
    assert triggers.replayed(10, 1000 + HOUR_MS) == f"we have waited at least {HOUR_MS} ms"


def test_an_interval_of_0_turns_the_time_trigger_off() -> None:
    triggers = SnapshotTriggers(20 * MIB, 0, now_ms=0)
    assert triggers.replayed(10, 10 * 365 * 24 * HOUR_MS) is None
    assert triggers.max_interval_ms == 0


def test_the_byte_trigger_is_named_before_the_time_trigger() -> None:
    triggers = SnapshotTriggers(100, 10, now_ms=0)
    assert triggers.replayed(100, 50) == "we have replayed at least 100 bytes"


def test_time_alone_triggers_only_when_a_batch_is_replayed() -> None:
    triggers = SnapshotTriggers(100, 10, now_ms=0)
    # nothing is checked between batches: the next replayed batch, even an empty one, fires
    assert triggers.replayed(0, 500) == "we have waited at least 10 ms"


def test_a_reset_restarts_the_interval_from_its_time() -> None:
    triggers = SnapshotTriggers(100, 10, now_ms=0)
    assert triggers.replayed(1, 10) is not None
    triggers.reset(10)
    assert (triggers.bytes_since_last, triggers.last_snapshot_ms) == (0, 10)
    assert triggers.replayed(1, 19) is None
    assert triggers.replayed(1, 20) == "we have waited at least 10 ms"


# ---------------------------------------------------------------------- the snapshot's bytes


def _image() -> list[tuple[Message, int]]:
    return [
        mv_record(21),
        (broker_record(1, 5, log_dirs=[Uuid.from_longs(1, 1)]), 3),
        (controller_record(3000), 0),
        (TopicRecord(name="t", topic_id=Uuid.from_longs(9, 9)), 0),
        (ConfigRecord(resource_type=4, resource_name="", name="x", value="y"), 0),
    ]


def test_a_kraft_version_0_snapshot_has_only_the_header_before_the_records() -> None:
    data = image_snapshot(
        OffsetAndEpoch(120, 4), _image(), last_contained_log_timestamp=1_700_000, append_time_ms=1_800_000,
        kraft_version=0, voters=VOTERS,
    )
    content = read_snapshot_content(data)
    assert content.last_contained_log_timestamp == 1_700_000 and content.has_footer
    assert content.kraft_version == 0 and content.voters is None
    assert [r.type for r in content.control_records()] == [ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.SNAPSHOT_FOOTER]
    assert content.data_records() == values(_image())
    data_batch = content.batches[1]
    assert (data_batch.base_offset, data_batch.last_offset, data_batch.epoch) == (1, 5, 4)
    assert data_batch.append_timestamp == 1_800_000


def test_a_kraft_version_1_snapshot_carries_the_version_and_the_voters() -> None:
    data = image_snapshot(
        OffsetAndEpoch(120, 4), _image(), last_contained_log_timestamp=7, append_time_ms=8,
        kraft_version=1, voters=VOTERS,
    )
    content = read_snapshot_content(data)
    assert [r.type for r in content.control_records()] == [
        ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS,
        ControlRecordType.SNAPSHOT_FOOTER,
    ]
    assert content.kraft_version == 1 and content.voters == voters_record(VOTERS)
    assert [v.voter_id for v in content.voters.voters] == [3000, 3001]
    assert content.batches[1].base_offset == 3  # after the three header records
    assert content.data_records() == values(_image())


def test_every_batch_carries_the_snapshot_s_epoch() -> None:
    data = image_snapshot(OffsetAndEpoch(10, 9), [mv_record(21)], last_contained_log_timestamp=0, append_time_ms=0,
                          kraft_version=1, voters=VOTERS)
    assert {b.epoch for b in read_snapshot_content(data).batches} == {9}


def test_an_empty_image_is_a_header_and_a_footer() -> None:
    content = read_snapshot_content(
        image_snapshot(OffsetAndEpoch(0, 0), [], last_contained_log_timestamp=0, append_time_ms=0, kraft_version=0, voters=VOTERS)
    )
    assert content.data_records() == [] and content.has_footer and len(content.batches) == 2


@pytest.mark.parametrize("kraft_version", [0, 1])
def test_records_are_encoded_at_their_own_versions(kraft_version: int) -> None:
    image = _image()
    content = read_snapshot_content(image_snapshot(
        OffsetAndEpoch(5, 1), image, last_contained_log_timestamp=0, append_time_ms=0,
        kraft_version=kraft_version, voters=VOTERS,
    ))
    assert [decode_record(value) for value in content.data_records()] == image


def test_a_controller_s_snapshot_loads_into_a_fresh_controller() -> None:
    original = controller_at(21, (broker_record(2, 8, fenced=False, log_dirs=[Uuid.from_longs(2, 1)]), 3),
                             (controller_record(3001), 0))
    data = image_snapshot(OffsetAndEpoch(3, 2), original.snapshot_records(), last_contained_log_timestamp=0,
                          append_time_ms=0, kraft_version=1, voters=VOTERS)
    copy = ControlManagers(bootstrap=[])
    copy.reset(read_snapshot_content(data).data_records(), 2)
    assert copy.feature_levels == original.feature_levels and copy.controllers == original.controllers
    assert copy.cluster.registrations == original.cluster.registrations
    assert copy.cluster.register_offsets == {2: 2}


def test_the_image_record_estimate_counts_all_but_feature_levels_and_extra_config_entries() -> None:
    topic_id = Uuid.from_longs(9, 9)
    controller = controller_at(
        21,
        (broker_record(2, 8, fenced=False, log_dirs=[directory(2)]), 3),
        (broker_record(3, 9, fenced=False, log_dirs=[directory(3)]), 3),
        (controller_record(3001), 0),
        (TopicRecord(name="t", topic_id=topic_id), 0),
        *[(partition_record(topic_id, i, [2, 3], [2, 3], 2), 2) for i in range(40)],
        (ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1"), 0),
    )
    records = controller.snapshot_records()
    assert len(records) == 1 + 2 + 1 + 1 + 40 + 1  # metadata.version, brokers, controller, topic, ...
    assert controller.image_record_estimate() == len(records) - len(controller.feature_levels)


# ---------------------------------------------------------------------- the generator



def _committed(base_offset: int, count: int, epoch: int = 2, timestamp: int = 1234) -> CommittedBatch:
    records = [SimpleRecord(value, timestamp=timestamp) for value in values([mv_record(21)] * count)]
    data = bytes(build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch))
    return CommittedBatch(base_offset, base_offset + count - 1, epoch, False, data)


class _Generator:
    """A generator with a 1-byte trigger beside a standby controller and an in-memory log whose
    committed batches it is shown."""

    def __init__(self, level: int | None = 21) -> None:
        self.lines = RecordingLog()
        self.generator = SnapshotGenerator(7, 1, 0, now_ms=0, log=self.lines)
        self.controller = controller_at(level, (broker_record(2, 8, fenced=False, log_dirs=[Uuid.from_longs(2, 1)]), 3))
        self.log = MemoryRaftLog()
        self.control = ControlRecordStateMachine(VOTERS, 1)
        self.batches: list[CommittedBatch] = []
        for count in (2, 3):
            batch = _committed(self.log.log_end_offset, count)
            self.log.append(batch.data)
            self.batches.append(batch)
        self.log.flush()
        self.log.update_high_watermark(self.log.log_end_offset)

    def replayed(self, batch: CommittedBatch, *, hold: bool = False, now_ms: int = 50) -> SnapshotToWrite | None:
        return self.generator.replayed(now_ms, batch, self.controller, self.log, self.control, hold=hold)


def test_the_generator_snapshots_the_image_after_the_batch_that_fired_a_trigger() -> None:
    fixture = _Generator()
    snapshot = fixture.replayed(fixture.batches[1], now_ms=50)
    assert snapshot is not None and snapshot.snapshot_id == OffsetAndEpoch(5, 2)
    assert snapshot.image_records == fixture.controller.image_record_estimate()
    content = read_snapshot_content(snapshot.build())
    assert content.header.last_contained_log_timestamp == 1234
    assert content.kraft_version == 1 and content.voters is not None
    assert decode_record(content.data_records()[0])[0] == mv_record(21)[0]
    assert fixture.lines.lines == ["node 7: creating snapshot 00000000000000000005-0000000002 because "
                                   "we have replayed at least 1 bytes"]
    assert fixture.generator.triggers.bytes_since_last == 0, "counting starts again"


def test_a_held_batch_is_counted_and_the_trigger_stays_armed() -> None:
    fixture = _Generator()
    fixture.generator.triggers.max_bytes = len(fixture.batches[0].data) + 1
    assert fixture.replayed(fixture.batches[0], hold=True) is None
    assert fixture.generator.triggers.bytes_since_last == len(fixture.batches[0].data)
    assert fixture.replayed(fixture.batches[1], hold=True) is None, "fired, but the image is ahead"
    assert fixture.replayed(fixture.batches[1]) is not None, "the next batch that leaves none takes it"


def test_no_snapshot_without_a_metadata_version_or_inside_a_transaction() -> None:
    assert _Generator(level=None).replayed(_Generator().batches[1]) is None
    fixture = _Generator()
    fixture.controller.transaction_open = True
    assert fixture.replayed(fixture.batches[1]) is None and fixture.lines.lines == []


def test_no_snapshot_at_or_below_the_latest_one_or_the_log_start() -> None:
    fixture = _Generator()
    first = fixture.replayed(fixture.batches[1])
    assert first is not None
    fixture.log.create_snapshot(first.snapshot_id, first.build())
    assert fixture.replayed(fixture.batches[1]) is None, "a snapshot at that offset exists"
    assert fixture.replayed(fixture.batches[0]) is None, "a later snapshot exists"


def test_a_loaded_snapshot_counts_as_one_taken() -> None:
    fixture = _Generator()
    fixture.generator.triggers.max_bytes = 10 * MIB
    fixture.generator.triggers.max_interval_ms = 100
    assert fixture.replayed(fixture.batches[0], now_ms=99) is None
    fixture.generator.loaded(90)
    assert fixture.replayed(fixture.batches[1], now_ms=150) is None, "the interval runs from the load"
    assert fixture.replayed(fixture.batches[1], now_ms=190) is not None
