"""The differential request sequences at each release line's newest metadata.version: a stock
controller of the newest pinned release and a kwire node, both formatted by the stock
``kafka-storage format --release-version LEVEL`` at the same level, are sent the broker
lifecycle sequence of compat/test_broker_rpcs.py (with the text each node logs for a refused
registration) followed by the UpdateFeatures cases of
compat/test_controller_rpcs.py on one pair, and the topic sequence of compat/test_topic_rpcs.py
on another; their answers must be equal, and so must the records each wrote
(compared as those tests compare them) and, for the topic sequence, the image in the stock
node's newest snapshot.

What the level changes is what ``MetadataVersion`` gates: the RegisterBrokerRecord version
(v1 before 3.4-IV0's v2 ... v3 with log directories from 3.7-IV2), BrokerRegistrationChangeRecord
for fencing (3.3-IV2), PartitionRecord / PartitionChangeRecord v0 before directory assignment
(3.7-IV2) and v2 with eligible leader replicas (4.0-IV1, KIP-966), and whether a broker's log
directories are checked at all. Below 3.9-IV0 a quorum cannot be formatted standalone
(kraft.version 1 needs 3.9-IV0), so both nodes are the single voter of a static quorum there.

Which levels run is ``$KWIRE_MV_DIFFERENTIAL``: unset, the cover :data:`COVER` (``make test``);
``all``, the newest metadata.version of every release of the matrix, oldest first (``make
nightly``); or comma-separated levels of the matrix. ``$KWIRE_MV_DIFFERENTIAL_TABLE`` names a
file each run appends its rows to (level, sequence, requests sent, equal answers, records
compared, records equal, the versions of the records ``MetadataVersion`` gates in the stock log).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from compat import test_broker_rpcs as broker_rpcs
from compat import test_controller_rpcs as controller_rpcs
from compat import test_topic_rpcs as topic_rpcs
from compat.differential import (
    PairNode,
    broker_features,
    finalized_features,
    registration,
    send,
    start_pair,
)
from compat.harness import PARTITION, KafkaRelease, metadata_records
from compat.kafka import MATRIX_RELEASES, release_facts, version_tuple
from messages.runtime import Message
from storage.features import metadata_version_from_string

pytestmark = pytest.mark.compat

MV_ENV = "KWIRE_MV_DIFFERENTIAL"
TABLE_ENV = "KWIRE_MV_DIFFERENTIAL_TABLE"
COVER = "3.6-IV2"
"""The level ``make test`` runs: before directory assignment and ELR (PartitionRecord v0,
RegisterBrokerRecord v2, no log directory checks), the other side of the gates from the
newest level the plain differential tests run at."""


def matrix_levels() -> tuple[str, ...]:
    """The newest metadata.version of every release of the matrix, oldest first, each once."""
    levels: list[str] = []
    for version in sorted(MATRIX_RELEASES, key=version_tuple):
        level = release_facts(version).metadata_version
        if level not in levels:
            levels.append(level)
    return tuple(levels)


def chosen_levels() -> tuple[str, ...]:
    """The levels ``$KWIRE_MV_DIFFERENTIAL`` names (module docstring). Raises ValueError for a
    level that is no release's newest."""
    wanted = os.environ.get(MV_ENV, "").strip()
    every = matrix_levels()
    if not wanted:
        return (COVER,)
    if wanted == "all":
        return every
    chosen = tuple(v.strip() for v in wanted.split(",") if v.strip())
    unknown = [v for v in chosen if v not in every]
    if unknown:
        raise ValueError(f"${MV_ENV} names {unknown}, not the newest metadata.version of a release: {every}")
    return chosen


def _level_tuple(level: str) -> tuple[int, int, int]:
    """``3.6-IV2`` -> (3, 6, 2), to order levels."""
    release, _, iv = level.partition("-IV")
    major, minor = release.split(".")
    return int(major), int(minor), int(iv)


@dataclass
class Tally:
    """One sequence at one level: requests sent, answers equal, records compared and equal."""

    level: str
    sequence: str
    sent: int = 0
    equal_answers: int = 0
    records: int = 0
    equal_records: bool = False
    differences: list[str] = field(default_factory=list)

    def row(self) -> str:
        return (f"| {self.level} | {self.sequence} | {self.sent} | {self.equal_answers} | {self.records} | "
                f"{'yes' if self.equal_records else 'NO'} |")


def _compare(tally: Tally, case: str, answers: dict[str, Any]) -> None:
    tally.sent += 1
    if answers["stock"] == answers["kwire"]:
        tally.equal_answers += 1
    else:
        tally.differences.append(f"{case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")


def _compare_records(tally: Tally, records: dict[str, list[Any]]) -> None:
    tally.records = len(records["stock"])
    tally.equal_records = records["kwire"] == records["stock"]
    if not tally.equal_records:
        first = next((i for i, (a, b) in enumerate(zip(records["stock"], records["kwire"], strict=False)) if a != b),
                     min(len(records["stock"]), len(records["kwire"])))
        tally.differences.append(
            f"records differ from #{first} ({len(records['stock'])} stock, {len(records['kwire'])} kwire):\n"
            + "\n".join(f"    stock {r}" for r in records["stock"][first:first + 3]) + "\n"
            + "\n".join(f"    kwire {r}" for r in records["kwire"][first:first + 3])
        )


def _broker_sequence(level: str, nodes: dict[str, PairNode]) -> Tally:
    """compat/test_broker_rpcs.py's sequence: registrations v0-v4 good and bad, heartbeats
    through fencing and shutdown, producer ids, unregistration, Envelopes."""
    tally = Tally(level, "broker lifecycle")
    ports = {name: node.port for name, node in nodes.items()}
    for port in ports.values():
        broker_rpcs._log_controller_events(port)
    finalized = {name: finalized_features(port) for name, port in ports.items()}
    _compare(tally, "finalized features (ApiVersions)", finalized)
    # both nodes run at the level asked for
    assert finalized["stock"]["metadata.version"] == metadata_version_from_string(level).level, finalized
    sides = {name: broker_rpcs.Side({}) for name in ports}
    started = time.monotonic()
    for case, build, version in broker_rpcs._cases(broker_features(finalized["stock"])):
        answers = {}
        for name, port in ports.items():
            body = build(sides[name])
            response = trio.run(send, port, body, version)
            answers[name] = (response if isinstance(response, str)
                             else broker_rpcs._normalize(response, getattr(body, "broker_id", None), sides[name]))
        _compare(tally, case, answers)
    # inside one session timeout: no broker fenced by expiry at a moment each side picks alone
    assert time.monotonic() - started < 9.0
    _compare_records(tally, {name: broker_rpcs._broker_records(node.data, sides[name]) for name, node in nodes.items()})
    # the refused registrations' texts, which only the logs carry
    _compare(tally, "registration refusals (logged texts)",
             {name: broker_rpcs._registration_refusals(node.data.parent / "logs" / f"{name}.txt")
              for name, node in nodes.items()})
    return tally


def _feature_records(data: Path) -> list[tuple[str, int]]:
    """The FeatureLevelRecords of a node's log (the bootstrap ones its activation wrote, then
    the updates), as (feature, level)."""
    return [(fields["name"], fields["featureLevel"]) for message, version in metadata_records(data)
            if type(message).__name__ == "FeatureLevelRecord" for fields in (message.to_json(version),)]


def _features_sequence(level: str, nodes: dict[str, PairNode]) -> Tally:
    """compat/test_controller_rpcs.py's UpdateFeatures cases (v0-2), after the broker sequence
    (broker 6 still registered, with ranges up to this level): an upgrade of metadata.version
    past the level is refused for it, the feature checks are the level's."""
    tally = Tally(level, "UpdateFeatures")
    for case, body, version in controller_rpcs._update_cases():
        answers = {}
        for name, node in nodes.items():
            response = trio.run(send, node.port, body, version)
            answers[name] = response if isinstance(response, str) else controller_rpcs._normalize(response)
        _compare(tally, case, answers)
    _compare_records(tally, {name: _feature_records(node.data) for name, node in nodes.items()})
    return tally


def _topic_sequence(level: str, nodes: dict[str, PairNode]) -> Tally:
    """compat/test_topic_rpcs.py's sequence on three registered, unfenced brokers: CreateTopics,
    CreatePartitions, AlterPartition, configs, AssignReplicasToDirs, DeleteTopics,
    reassignments, the broker lifecycle moving partitions, ElectLeaders, ACLs."""
    tally = Tally(level, "topics")
    ports = {name: node.port for name, node in nodes.items()}
    features = broker_features(finalized_features(ports["stock"]))
    sides = {name: topic_rpcs.Side(local={str(node.data): "<data>", str(node.port): "<port>"})
             for name, node in nodes.items()}
    for name, port in ports.items():
        sides[name].features = features
        for broker_id in topic_rpcs.BROKERS:
            request = registration(broker_id, features, dirs=topic_rpcs.DIRS[broker_id])
            response = trio.run(send, port, request, 4)
            assert not isinstance(response, str) and response.error_code == 0, (name, response)
            sides[name].epochs[broker_id] = response.broker_epoch
        topic_rpcs._heartbeat_all(port, sides[name])  # caught up: unfenced
    cases: list[tuple[str, Callable[[topic_rpcs.Side], Message], int]] = topic_rpcs._cases()
    for case, build, version in cases:
        answers = {}
        for name, port in ports.items():
            topic_rpcs._heartbeat_all(port, sides[name])  # keep every session alive
            answers[name] = topic_rpcs._answer(port, build(sides[name]), version, sides[name])
        _compare(tally, case, answers)
    records = {name: topic_rpcs._topic_records(node.data, sides[name]) for name, node in nodes.items()}
    _compare_records(tally, records)
    # the stock node's newest snapshot is the image kwire's controller builds from its log
    try:
        topic_rpcs._check_snapshots(nodes["stock"].data / PARTITION, nodes["kwire"].data / PARTITION,
                                    controllers=_level_tuple(level) >= (3, 7, 0))
    except AssertionError as exc:
        tally.equal_records = False
        tally.differences.append(f"snapshot image: {exc}")
    return tally


def _record_versions(data: Path) -> dict[str, set[int]]:
    """The versions of each record type in a node's log."""
    seen: dict[str, set[int]] = {}
    for message, version in metadata_records(data):
        seen.setdefault(type(message).__name__, set()).add(version)
    return seen


@pytest.mark.parametrize("level", chosen_levels())
def test_sequences_answer_alike_at_each_metadata_version(newest_kafka: KafkaRelease, tmp_path: Path, level: str) -> None:
    static = _level_tuple(level) < (3, 9, 0)
    format_args = ["--release-version", level]
    tallies: list[Tally] = []
    versions: dict[str, set[int]] = {}
    for sequence, runs in (("brokers", (_broker_sequence, _features_sequence)), ("topics", (_topic_sequence,))):
        with start_pair(newest_kafka, tmp_path / sequence, "leader", format_args=format_args,
                        static_quorum=static) as nodes:
            for run in runs:
                tallies.append(run(level, nodes))
            for name, node in nodes.items():
                assert node.proc.poll() is None, f"{name} died"
            for kind, found in _record_versions(nodes["stock"].data).items():
                versions.setdefault(kind, set()).update(found)
    gated = ", ".join(f"{kind} v{'/'.join(map(str, sorted(versions.get(kind, ()))))}"
                      for kind in ("RegisterBrokerRecord", "PartitionRecord", "PartitionChangeRecord"))
    rows = "\n".join(f"{t.row()} {gated} |" for t in tallies)
    print(rows)
    table = os.environ.get(TABLE_ENV)
    if table:
        with open(table, "a", encoding="utf-8") as out:
            out.write(rows + "\n")
    for tally in tallies:
        assert tally.sent >= 30, tally
    differences = [f"[{t.sequence}] {d}" for t in tallies for d in t.differences]
    assert not differences, f"{level}: {len(differences)} differences:\n" + "\n".join(differences)
