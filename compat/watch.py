"""Watchers that run beside a cluster under load in the long compat runs (the rolling upgrade,
the live controller swap), and what a metadata log tells afterwards.

* :class:`LeaderSampler`: every :data:`SAMPLE_S`, a Metadata request for one topic to the
  first broker that answers: how long each partition was without a live leader, the leader of
  each partition leader epoch, and every sample in which a broker that should be listed was
  not (a fenced broker drops out of every broker's Metadata answer).
* :class:`QuorumWatch`: every :data:`SAMPLE_S`, DescribeQuorum through the first controller
  that answers: the leader of each quorum epoch as it was seen, and the longest time no
  controller named a leader.
* :func:`leader_of_each_epoch` and :func:`registration_changes`: read from a metadata log
  directory after the run -- the leader each LeaderChangeMessage control record names, and
  every record that fenced, unregistered or re-registered a broker after it was first
  unfenced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import trio

from compat.harness import PARTITION, log_batches
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.metadata import decode_record
from storage.control import read_kraft_batch

__all__ = [
    "SAMPLE_S", "LeaderSampler", "QuorumWatch", "leader_of_each_epoch", "registration_changes", "topic_metadata",
]

SAMPLE_S = 0.25
"""Seconds between two samples of a watcher."""


class LeaderSampler:
    """Every :data:`SAMPLE_S`, a Metadata request for ``topic`` to the first of ``addresses()``
    (broker client listeners, ``host:port``) that answers; per partition the time without a
    live leader (leader -1, or a leader the answer does not list). ``epochs`` maps (partition,
    leader epoch) to the leader seen at that epoch. With ``brokers``, ``unlisted`` keeps
    (seconds since :meth:`start`, the ids of ``brokers`` missing) for every answer that did not
    list them all: Metadata lists only unfenced brokers (``MetadataCache``)."""

    def __init__(self, addresses: Callable[[], Sequence[str]], topic: str, brokers: Collection[int] = ()) -> None:
        self.addresses, self.topic, self.brokers = addresses, topic, frozenset(brokers)
        self.offline_since: dict[int, float] = {}
        self.longest: dict[int, float] = {}
        self.epochs: dict[tuple[int, int], int] = {}
        self.unlisted: list[tuple[float, frozenset[int]]] = []
        self.samples = self.unanswered = 0
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leaders", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        """Take one sample now."""
        now = time.monotonic()
        response = None
        for address in self.addresses():
            try:  # a broker stopping, starting or moved between release groups: the next
                response = trio.run(topic_metadata, address, self.topic)
                break
            except Exception:
                continue
        self.samples += 1
        if response is None:
            self.unanswered += 1
            return
        live = {b.node_id for b in response.brokers}
        if self.brokers - live:
            self.unlisted.append((now - self._started, frozenset(self.brokers - live)))
        for topic in response.topics:
            for p in topic.partitions:
                if p.leader_id >= 0:
                    self.epochs.setdefault((p.partition_index, p.leader_epoch), p.leader_id)
                if p.leader_id in live:
                    since = self.offline_since.pop(p.partition_index, None)
                    if since is not None:
                        self._note(p.partition_index, now - since)
                else:
                    self.offline_since.setdefault(p.partition_index, now)

    def _note(self, partition: int, seconds: float) -> None:
        self.longest[partition] = max(self.longest.get(partition, 0.0), seconds)

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; a partition still offline counts until now."""
        self._stop.set()
        self._thread.join(10)
        now = time.monotonic()
        for partition, since in self.offline_since.items():
            self._note(partition, now - since)

    @property
    def longest_offline_s(self) -> float:
        """The longest time any partition was without a live leader, in seconds."""
        return max(self.longest.values(), default=0.0)


async def topic_metadata(address: str, topic: str) -> Any:
    """The Metadata answer (``MetadataResponse``) of the broker at ``address`` (``host:port``)
    for ``topic``, within 2 s; raises what the connection raises, ``trio.TooSlowError`` late."""
    from messages.generated.metadata_request import MetadataRequest, MetadataRequestTopic
    from server.net.client import open_connection

    host, _, port = address.rpartition(":")
    with trio.fail_after(2.0):
        async with await open_connection(host, int(port), "kwire-watch", request_timeout_ms=2000) as conn:
            return await conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                      allow_auto_topic_creation=False))


class QuorumWatch:
    """Every :data:`SAMPLE_S`, DescribeQuorum through the first of ``addresses()`` (controller
    listeners, ``host:port``) that names a leader (``tools.quorum_client.describe``: its
    DescribeCluster names the active controller). ``epochs`` maps each leader epoch seen to
    its leader id, in the order seen; ``leaderless_s`` is the longest time between two
    samples that named a leader."""

    def __init__(self, addresses: Callable[[], Sequence[str]]) -> None:
        self.addresses = addresses
        self.epochs: dict[int, int] = {}
        self.samples = self.unanswered = 0
        self.leaderless_s = 0.0
        self._last_led = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quorum", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        """Take one sample now."""
        from tools.quorum_client import describe

        now = time.monotonic()
        self.samples += 1
        for address in self.addresses():
            try:
                p = trio.run(describe, address, 2.0).partition
            except Exception:  # a controller stopping or starting, or no leader yet: the next
                continue
            if p.leader_id >= 0:
                self.epochs.setdefault(p.leader_epoch, p.leader_id)
                self.leaderless_s = max(self.leaderless_s, now - self._last_led)
                self._last_led = now
                return
        self.unanswered += 1

    def start(self) -> None:
        self._last_led = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; a quorum still without a leader counts until now."""
        self._stop.set()
        self._thread.join(10)
        self.leaderless_s = max(self.leaderless_s, time.monotonic() - self._last_led)


def leader_of_each_epoch(data: Path, below: int) -> dict[int, int]:
    """Epoch -> leader id as the LeaderChangeMessage control records of the metadata log under
    the log directory ``data`` name them (each leader writes one at the start of its epoch,
    ``LeaderState.appendLeaderChangeMessage``), for the batches that end below offset
    ``below`` (e.g. the high watermark: committed)."""
    leaders: dict[int, int] = {}
    for batch in log_batches(data / PARTITION):
        if batch.is_control and batch.last_offset < below:
            for record in read_kraft_batch(batch).records:
                message = getattr(record, "message", None)
                if isinstance(message, LeaderChangeMessage):
                    leaders[batch.partition_leader_epoch] = message.leader_id
    return leaders


def registration_changes(data: Path, below: int) -> tuple[int, list[str]]:
    """Read the metadata log under the log directory ``data`` up to offset ``below``: returns
    the offset of its first batch and, for every broker once it was first unfenced, each
    record that changed its registration -- fenced it (``BrokerRegistrationChangeRecord``
    with fenced 1, ``FenceBrokerRecord``), put it in controlled shutdown, unregistered it or
    registered it again (a new incarnation) -- as ``"<offset>: <record>"``. A log that does
    not start at offset 0 (cut by a snapshot) cannot tell the whole history: the caller checks
    the first offset."""
    unfenced: set[int] = set()
    changes: list[str] = []
    first = -1
    for batch in log_batches(data / PARTITION):
        if first < 0:
            first = batch.base_offset
        if batch.is_control or batch.base_offset >= below:
            continue
        for delta, value in enumerate(batch.iter_values()):
            assert value is not None
            offset = batch.base_offset + delta
            if offset >= below:
                break
            record, _ = decode_record(value)
            if isinstance(record, BrokerRegistrationChangeRecord):
                broker = record.broker_id
                if record.fenced == -1:
                    unfenced.add(broker)
                if broker in unfenced and (record.fenced == 1 or record.in_controlled_shutdown == 1):
                    changes.append(f"{offset}: {record!r}")
            elif isinstance(record, UnfenceBrokerRecord):
                unfenced.add(record.id)
            elif isinstance(record, FenceBrokerRecord) and record.id in unfenced:
                changes.append(f"{offset}: {record!r}")
            elif isinstance(record, (RegisterBrokerRecord, UnregisterBrokerRecord)) and record.broker_id in unfenced:
                changes.append(f"{offset}: {record!r}")
    return first, changes
