"""The records of ``kwire test-raft-server``'s load: their format, making and reading them.

Each record value is a real metadata record of ``record_size`` bytes carrying the marker
``<epoch>.<counter>.<node id>.`` padded with ``x``: a ``ConfigRecord`` for the cluster-wide broker
default :data:`WORKLOAD_CONFIG_NAME` whose value is the marker (``config``), or a ``NoOpRecord``
(KIP-835) with the marker in a tagged field the record does not define (``no-op``, tag
:data:`PAYLOAD_TAG`). :func:`record_template` encodes one with room for the marker,
:func:`workload_values` writes markers into it, :func:`parse_workload_record` reads a decoded
record back. The generator that appends them is :mod:`tools.raft_server_load`.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = [
    "PAYLOAD_TAG",
    "RECORD_TYPES",
    "WORKLOAD_CONFIG_NAME",
    "parse_workload_record",
    "parse_workload_value",
    "record_template",
    "workload_value",
    "workload_values",
]


WORKLOAD_CONFIG_NAME = "kwire.test.raft.workload"
RECORD_TYPES = ("config", "no-op")
PAYLOAD_TAG = 0
"""The tag of a ``no-op`` record's payload (NoOpRecord v0 defines no tagged field)."""
BROKER_RESOURCE_TYPE = 4


def record_template(record_size: int, record_type: str = "config") -> tuple[bytes, int, int]:
    """An encoded workload record of ``record_type`` (:data:`RECORD_TYPES`) whose total length is
    ``record_size`` bytes, and the ``(start, length)`` of its padding, in which a marker may be
    written in place. Raises ValueError when ``record_size`` is too small to hold the record
    framing or ``record_type`` is unknown."""
    from messages.generated.config_record import ConfigRecord
    from messages.generated.no_op_record import NoOpRecord
    from messages.metadata import encode_record

    if record_type not in RECORD_TYPES:
        raise ValueError(f"--record-type {record_type!r} is not one of {', '.join(RECORD_TYPES)}")

    def encoded(length: int) -> bytes:
        if record_type == "no-op":
            return encode_record(NoOpRecord(unknown_tagged_fields=((PAYLOAD_TAG, b"x" * length),)), 0)
        record = ConfigRecord(
            resource_type=BROKER_RESOURCE_TYPE, resource_name="", name=WORKLOAD_CONFIG_NAME,
            value="x" * length,
        )
        return encode_record(record, 0)

    overhead = len(encoded(0))
    length = record_size - overhead
    # the padding's length varint grows with the length: adjust until exact
    while length >= 0 and len(encoded(length)) > record_size:
        length -= 1
    if length < 40 or len(encoded(length)) != record_size:
        raise ValueError(f"--record-size {record_size} is too small (at least {overhead + 41})")
    data = encoded(length)
    # the padding ends the record (a ConfigRecord's value is followed by its empty tagged fields)
    start = len(data) - length - (1 if record_type == "config" else 0)
    assert data[start:start + length] == b"x" * length
    return data, start, length


def workload_value(template: tuple[bytes, int, int], epoch: int, counter: int, node_id: int) -> bytes:
    """The record value for ``(epoch, counter)`` written by ``node_id``."""
    return workload_values(template, epoch, counter, 1, node_id)[0]


def workload_values(
    template: tuple[bytes, int, int], epoch: int, first: int, count: int, node_id: int
) -> tuple[bytes, ...]:
    """The values of counters ``first`` .. ``first + count - 1`` (:func:`workload_value` of each),
    made together: the generator's share of a leader's CPU at 240,000 records/s."""
    values: list[bytes] = []
    counter, end = first, first + count
    while counter < end:
        # counters of one digit count share a marker length, so one format makes each value
        digits = len(str(counter))
        group_end = min(end, 10 ** digits)
        form = _value_form(template, epoch, digits, node_id)
        values += [form % c for c in range(counter, group_end)]
        counter = group_end
    return tuple(values)


@functools.lru_cache(maxsize=16)
def _value_form(template: tuple[bytes, int, int], epoch: int, digits: int, node_id: int) -> bytes:
    """The ``%``-format that makes the value of any counter of ``digits`` digits: the template
    with the marker ``epoch.<counter>.node_id.`` at its place (computed once per epoch and digit
    count, not once per append)."""
    data, start, length = template
    head, tail = data[:start], data[start:]
    marker_length = len(b"%d.%s.%d." % (epoch, b"0" * digits, node_id))
    if marker_length > length:
        raise ValueError("record too small for its marker")
    prefix = (head + b"%d." % epoch).replace(b"%", b"%%")
    suffix = (b".%d." % node_id + tail[marker_length:]).replace(b"%", b"%%")
    return prefix + b"%d" + suffix


def parse_workload_value(value: str) -> tuple[int, int, int]:
    """``(epoch, counter, node_id)`` from a workload record's marker (a ConfigRecord's value)."""
    epoch, counter, node_id, _ = value.split(".", 3)
    return int(epoch), int(counter), int(node_id)


def parse_workload_record(record: Any) -> tuple[int, int, int] | None:
    """``(epoch, counter, node_id)`` of a decoded metadata record written by the workload (either
    :data:`RECORD_TYPES`), None for any other record."""
    from messages.generated.config_record import ConfigRecord
    from messages.generated.no_op_record import NoOpRecord

    if isinstance(record, ConfigRecord) and record.name == WORKLOAD_CONFIG_NAME and record.value is not None:
        return parse_workload_value(record.value)
    if isinstance(record, NoOpRecord):
        payload = dict(record.unknown_tagged_fields).get(PAYLOAD_TAG)
        if payload is not None:
            return parse_workload_value(payload.decode("ascii", "replace"))
    return None
