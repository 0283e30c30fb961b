"""PartitionRecords replayed from their bytes (``ReplicationControlManager.replay_partition_value``):
the image they leave is the one the decoded record leaves, and every value outside the form
the bytes path reads is left to the decoder, which raises what it deserves."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire.uuid import Uuid
from kwire.wire import DecodeError
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.topic_record import TopicRecord
from messages.metadata import decode_record, encode_record
from server.controller.cluster import ReplayError
from server.controller.controller import ControlManagers
from server.controller.image import ReplicationControlManager

TOPIC = Uuid.from_longs(0xAB, 0xCD)
OTHER_TOPIC = Uuid.from_longs(0xAB, 0xCE)
BROKERS = st.integers(min_value=0, max_value=2000)


def _image() -> ReplicationControlManager:
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="orders", topic_id=TOPIC))
    return image


def _state(image: ReplicationControlManager, brokers: set[int]) -> dict[str, Any]:
    """Everything the image holds about partitions, through what it answers of ``brokers``."""
    return {
        "partitions": {topic_id: dict(topic.partitions) for topic_id, topic in image.topics.items()},
        "count": image.partition_count,
        "isr": {b: image.partitions_with_broker_in_isr(b) for b in brokers},
        "elr": {b: image.partitions_with_broker_in_elr(b) for b in brokers},
        "leaderless": image.partitions_without_leader(),
        "leads": {b: image.has_leaderships(b) for b in brokers},
        "imbalanced": image.imbalanced_partitions(),
        "reassigning": image.reassigning,
    }


def _decoded(value: bytes) -> ReplicationControlManager:
    image = _image()
    image.replay(decode_record(value)[0])
    return image


@st.composite
def _records(draw: st.DrawFn) -> tuple[PartitionRecord, int]:
    version = draw(st.integers(min_value=0, max_value=2))
    replicas = draw(st.lists(BROKERS, max_size=6, unique=True))
    isr = draw(st.one_of(st.just(list(replicas)), st.lists(st.sampled_from(replicas), unique=True) if replicas
                         else st.just([])))
    directories: list[Uuid] = []
    if version >= 1 and draw(st.booleans()):
        directories = [Uuid.from_longs(9, b) for b in replicas]
    record = PartitionRecord(
        partition_id=draw(st.integers(min_value=-1, max_value=5)), topic_id=TOPIC, replicas=replicas, isr=isr,
        leader=draw(st.sampled_from([-1, *replicas])), leader_epoch=draw(st.integers(-1, 2**31 - 1)),
        partition_epoch=draw(st.integers(-1, 2**31 - 1)), directories=directories,
        leader_recovery_state=draw(st.sampled_from([0, 0, 1])),
    )
    if version == 2:
        record.eligible_leader_replicas = draw(st.one_of(st.none(), st.lists(BROKERS, max_size=3)))
        record.last_known_elr = draw(st.one_of(st.none(), st.lists(BROKERS, max_size=3)))
    return record, version


@settings(max_examples=300, deadline=None)
@given(_records())
def test_a_record_replayed_from_its_bytes_leaves_the_image_its_decoding_does(drawn: tuple[PartitionRecord, int]) -> None:
    record, version = drawn
    value = encode_record(record, version)
    image = _image()
    assert image.replay_partition_value(value)
    brokers = {*record.replicas, *(record.eligible_leader_replicas or ()), *(record.last_known_elr or ())}
    assert _state(image, brokers) == _state(_decoded(value), brokers)


def test_an_isr_equal_to_the_replicas_is_the_replicas_tuple() -> None:
    image = _image()
    value = encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[300, 301, 302], isr=[300, 301, 302],
                                          leader=300, leader_epoch=0, partition_epoch=0), 1)
    assert image.replay_partition_value(value)
    partition = image.topics[TOPIC].partitions[0]
    assert partition.isr is partition.replicas
    again = _image()
    again._ints = image._ints
    assert again.replay_partition_value(value)
    assert all(a is b for a, b in zip(again.topics[TOPIC].partitions[0].replicas, partition.replicas, strict=True))


def test_a_second_record_of_a_partition_replaces_it_as_the_decoded_one_does() -> None:
    first = encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2], isr=[1, 2], leader=2,
                                          leader_epoch=0, partition_epoch=0), 0)
    second = encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[3, 4], isr=[4], leader=-1,
                                           leader_epoch=1, partition_epoch=1), 0)
    image = _image()
    assert image.replay_partition_value(first) and image.replay_partition_value(second)
    decoded = _decoded(first)
    decoded.replay(decode_record(second)[0])
    assert _state(image, {1, 2, 3, 4}) == _state(decoded, {1, 2, 3, 4})


def _left_to_the_decoder() -> list[tuple[str, bytes]]:
    base = PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
                           leader_epoch=0, partition_epoch=0, directories=[Uuid.from_longs(9, b) for b in (1, 2, 3)])
    good = encode_record(base, 1)
    reassigning = encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2, 3, 4], isr=[1, 2, 3],
                                                adding_replicas=[4], leader=1, leader_epoch=0, partition_epoch=0), 1)
    many = encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=list(range(200)), isr=[0],
                                         leader=0, leader_epoch=0, partition_epoch=0), 1)
    other_topic = encode_record(PartitionRecord(partition_id=0, topic_id=OTHER_TOPIC, replicas=[1], isr=[1], leader=1,
                                                leader_epoch=0, partition_epoch=0), 1)
    wrong_directories = bytearray(encode_record(PartitionRecord(
        partition_id=0, topic_id=TOPIC, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0, partition_epoch=0,
        directories=[Uuid.from_longs(9, 1)]), 1))
    unknown_tag = PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                                  partition_epoch=0)
    unknown_tag.unknown_tagged_fields = ((7, b"\x01"),)
    cases = [
        ("a reassignment", reassigning),
        ("200 replicas", many),
        ("an unknown topic", other_topic),
        ("one directory for three replicas", bytes(wrong_directories)),
        ("an unknown tagged field", encode_record(unknown_tag, 1)),
        ("a trailing byte", good + b"\0"),
        ("another frame version", b"\x02" + good[1:]),
        ("version 3", good[:2] + b"\x03" + good[3:]),
        ("ELR tags in version 1", good[:-1] + b"\x01\x01\x01\x00"),
    ]
    cases += [(f"cut at {n} bytes", good[:n]) for n in range(len(good))]
    return cases


@pytest.mark.parametrize(("why", "value"), _left_to_the_decoder(), ids=lambda c: c if isinstance(c, str) else "")
def test_values_outside_the_bytes_form_are_left_to_the_decoder(why: str, value: bytes) -> None:
    image = _image()
    before = _state(image, set(range(201)))
    assert not image.replay_partition_value(value), why
    assert _state(image, set(range(201))) == before


def test_the_controller_still_raises_for_what_the_bytes_path_leaves() -> None:
    controller = ControlManagers(bootstrap=[])
    controller.replay(encode_record(FeatureLevelRecord(name="metadata.version", feature_level=21), 0))
    controller.replay(encode_record(TopicRecord(name="orders", topic_id=TOPIC), 0))
    good = encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1], isr=[1], leader=1,
                                         leader_epoch=0, partition_epoch=0), 1)
    with pytest.raises(DecodeError):
        controller.replay(good[:-3])
    with pytest.raises(DecodeError, match="trailing"):
        controller.replay(good + b"\0")
    with pytest.raises(ReplayError, match="no topic"):
        controller.replay(encode_record(PartitionRecord(partition_id=0, topic_id=OTHER_TOPIC, replicas=[1], isr=[1],
                                                        leader=1, leader_epoch=0, partition_epoch=0), 1))
    assert controller.replication.partition_count == 0
    controller.replay(good)
    assert controller.replication.topics[TOPIC].partitions[0].replicas == (1,)
