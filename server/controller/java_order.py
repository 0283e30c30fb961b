"""The iteration orders of the Java collections Kafka's controller writes records from.

Where Kafka writes records, configs or replicas in the order a ``java.util.HashMap``, a
``HashSet<Integer>`` or its own ``TimelineHashMap`` iterates, kwire computes that order, so that
the same request gives the same log and the same answer as a Kafka controller (the
differential tests compare them byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

K = TypeVar("K")

__all__ = [
    "ConcurrentHashMapOrder",
    "java_hash_map_copy_order",
    "java_hash_map_order",
    "java_hash_order",
    "java_int_set_order",
    "java_record_hash",
    "java_string_hash",
    "java_table_size",
    "timeline_hash_map_order",
]


def java_hash_map_order(keys: list[str]) -> list[str]:
    """``keys`` (distinct) in the order a ``java.util.HashMap`` filled with them in this order
    iterates them: by bucket (the low bits of the spread ``String.hashCode``, for the table
    size that many keys grow it to), then by insertion. Kafka writes a request's configs in
    that order."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        code = java_string_hash(key)
        return (code ^ (code >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)


def java_hash_map_copy_order(keys: list[str]) -> list[str]:
    """``keys`` (distinct) in the order a copy, ``new HashMap<>(map)``, of a ``HashMap`` filled
    with them in this order iterates them. The copy takes the source's order and places it in a
    table sized for its entries (``HashMap.putMapEntries`` of Java 17, the JVM stock Kafka runs
    on here: ``tableSizeFor((int) (n / 0.75f + 1))``), which for up to five keys is smaller
    than the default 16 and so orders them otherwise than :func:`java_hash_map_order`. Kafka's
    ``BrokerRegistration`` keeps such a copy of a broker's supported features, and a snapshot's
    RegisterBrokerRecord lists them in its order."""
    if not keys:
        return []
    return java_hash_order(java_hash_map_order(keys), java_string_hash, java_table_size(int(len(keys) / 0.75 + 1)))


def java_hash_order(keys: Iterable[K], java_hash: Callable[[K], int], capacity: int = 16) -> list[K]:
    """``keys`` (distinct, in insertion order) in the order a ``java.util.HashMap`` iterates
    them: ``capacity`` is the table size it was created with (a power of two: 16 for
    ``new HashMap<>()``), doubled while the keys exceed three quarters of it; each key's bucket
    is the low bits of its spread ``hashCode`` (``java_hash``, unsigned 32-bit); a bucket keeps
    insertion order. Keys removed meanwhile are simply not passed."""
    ordered = list(keys)
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: K) -> int:
        code = java_hash(key) & 0xFFFFFFFF
        return (code ^ (code >> 16)) & (capacity - 1)

    return sorted(ordered, key=bucket)


def java_table_size(expected: int) -> int:
    """The table size ``new HashMap<>(expected)`` starts with (``HashMap.tableSizeFor``)."""
    size = 1
    while size < expected:
        size *= 2
    return size


def java_string_hash(key: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit value."""
    code = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        code = (31 * code + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return code


def timeline_hash_map_order(keys: list[str]) -> list[str]:
    """``keys`` (distinct, in insertion order) in the order Kafka's ``TimelineHashMap`` (the
    controller's config store) iterates them: slots of a table that starts at 2 and doubles
    before it would pass a load of 0.75, each key's slot the top bits of its hash times a
    fixed odd constant (``BaseHashTable.findSlot``), a slot's keys last inserted first (its
iterator takes them from the end)."""

    def slot(key: str, size: int) -> int:
        code = java_string_hash(key)
        signed = code - (1 << 32) if code >= 1 << 31 else code
        return ((signed * -7046029254386353131) % (1 << 64)) >> (65 - size.bit_length())

    table: list[list[str]] = [[], []]
    count = 0
    for key in keys:
        if (count + 1) * 0.75 > len(table):
            grown: list[list[str]] = [[] for _ in range(len(table) * 2)]
            for old in table:
                for moved in old:
                    grown[slot(moved, len(grown))].append(moved)
            table = grown
        table[slot(key, len(table))].append(key)
        count += 1
    return [key for keys_in_slot in table for key in reversed(keys_in_slot)]


def java_int_set_order(values: Iterable[int]) -> list[int]:
    """The distinct ``values`` in the order a ``java.util.HashSet<Integer>`` filled with them
    in this order iterates them: by ``value & (capacity - 1)``, then by insertion."""
    distinct = list(dict.fromkeys(values))
    capacity = 16
    while len(distinct) > capacity * 3 // 4:
        capacity *= 2
    return sorted(distinct, key=lambda v: (v ^ (v >> 16)) & (capacity - 1))


def java_record_hash(id_: int, epoch: int) -> int:
    """The ``hashCode`` of a Java record of an ``int`` and a ``long`` (``ObjectMethods``: 31 times
    the first component's hash plus the second's, ``Long.hashCode`` folding the halves), as a
    signed 32-bit value; Kafka's ``BrokerIdAndEpoch``."""
    folded = (epoch ^ ((epoch & 0xFFFFFFFFFFFFFFFF) >> 32)) & 0xFFFFFFFF
    value = (31 * (id_ & 0xFFFFFFFF) + folded) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ConcurrentHashMapOrder:
    """The iteration order of a ``java.util.concurrent.ConcurrentHashMap`` built with the default
    constructor: by bin (the spread hash's low bits for the table size, which starts at 16 and
    doubles once the map holds three quarters of it, never shrinking), then by insertion within
    a bin. Keys are tracked by their Java hash; a bin that a resize split keeps its insertion
    order here, where Java may reorder part of it (``ConcurrentHashMap.transfer``), and bins of
    more than 8 keys are not made trees: both need more keys than these orders are used for."""

    def __init__(self) -> None:
        self.capacity = 16
        self.size = 0

    def added(self, size: int) -> None:
        """The map now holds ``size`` keys, one more than before."""
        self.size = size
        while size >= self.capacity - (self.capacity >> 2):
            self.capacity *= 2

    def bin(self, java_hash: int) -> int:
        """The table bin of a key of ``java_hash``."""
        h = java_hash & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 0x7FFFFFFF & (self.capacity - 1)
