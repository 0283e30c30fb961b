"""Section ``codec``: encode and decode throughput of kwire's generated codecs against
kafka-python 3.x's schema-generated protocol classes, on the same messages: both are pure Python
and driven by Kafka's message schemas, so the ratio measures the generated code.

Messages (each built once on both sides with the same field values):

* VoteRequest v2, one topic, one partition, directory ids and pre-vote set. kafka-python ships no
  Vote schema, so its class is built by kafka-python's own machinery from *our* spec file
  ``messages/specs/VoteRequest.json`` (``ApiMessage`` subclass with ``load_json='messages.specs'``).
* DescribeQuorumResponse v2, one partition with 5 voters and 10 observers, 5 nodes with a
  listener each (kafka-python's own class and schema).
* FetchResponse v17, one partition of ``__cluster_metadata`` with ``CurrentLeader`` (a tagged
  field) set and a real, CRC-valid v2 record batch of about 1 MiB as its records (kafka-python's
  own class and schema).

Preconditions, checked before anything is timed (a failure stops the section with the reason):
both sides encode the message to identical bytes; each side decodes those bytes back to a message
that re-encodes to the same bytes; the fields both sides read from their decoded objects agree.

What is timed: ``encode`` is ``obj.encode(version)`` to ``bytes`` (kafka-python: a ``bytearray``
from its pooled buffer). ``decode`` is ``Cls.decode(data, version)`` followed by reading every
field present at that version (the same :func:`_touch_*` function for both sides, since both use
Kafka's field names in snake_case), so neither side can win by being lazy.

What each side does with a FetchResponse's records (1 MiB here): kwire decodes them to a read-only
view of the input, as Kafka's MemoryRecords is a slice of the receive buffer, and its encode
copies them once, into the result; kafka-python copies them out of the input on decode and into
its buffer, then out of it, on encode. The context row ``decode + owned records`` makes kwire copy
them too (``bytes(records)``; on kafka-python's side that returns its bytes as they are), so the
copy-bound comparison stays in view. kwire also takes decoded Uuids from a table of the ids it has
seen (``kwire.uuid.intern_uuid``); in these messages, as in a running quorum, every id repeats.
"""

from __future__ import annotations

import cProfile
import functools
import io
import pstats
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwire.topics import METADATA_TOPIC_NAME
from tools.bench.core import Result, SectionError, Settings, measure_pair

SECTION = "codec"
REFERENCE = "kafka-python"

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"
RECORD_VALUE_BYTES = 256
FETCH_RECORDS_TARGET_BYTES = 1 << 20


@dataclass(slots=True)
class Case:
    """One message, built on both sides."""

    name: str
    version: int
    shape: str
    kwire_obj: Any
    kwire_cls: Any
    ref_obj: Any
    ref_cls: Any
    touch: Callable[[Any], object]
    leaves: Callable[[Any], list[Any]]


# ---------------------------------------------------------------------------------------------
# field readers: the same code runs on kwire and kafka-python objects


def _touch_vote(m: Any) -> object:
    last: object = m.cluster_id, m.voter_id
    for t in m.topics:
        last = t.topic_name
        for p in t.partitions:
            last = (p.partition_index, p.replica_epoch, p.replica_id, p.replica_directory_id,
                    p.voter_directory_id, p.last_offset_epoch, p.last_offset, p.pre_vote)
    return last


def _leaves_vote(m: Any) -> list[Any]:
    out: list[Any] = [m.cluster_id, m.voter_id]
    for t in m.topics:
        out.append(t.topic_name)
        for p in t.partitions:
            out += [p.partition_index, p.replica_epoch, p.replica_id, _u(p.replica_directory_id),
                    _u(p.voter_directory_id), p.last_offset_epoch, p.last_offset, p.pre_vote]
    return out


def _touch_quorum(m: Any) -> object:
    last: object = m.error_code, m.error_message
    for t in m.topics:
        last = t.topic_name
        for p in t.partitions:
            last = (p.partition_index, p.error_code, p.error_message, p.leader_id,
                    p.leader_epoch, p.high_watermark)
            for r in p.current_voters:
                last = (r.replica_id, r.replica_directory_id, r.log_end_offset,
                        r.last_fetch_timestamp, r.last_caught_up_timestamp)
            for r in p.observers:
                last = (r.replica_id, r.replica_directory_id, r.log_end_offset,
                        r.last_fetch_timestamp, r.last_caught_up_timestamp)
    for n in m.nodes:
        last = n.node_id
        for listener in n.listeners:
            last = listener.name, listener.host, listener.port
    return last


def _leaves_quorum(m: Any) -> list[Any]:
    out: list[Any] = [m.error_code, m.error_message]
    for t in m.topics:
        out.append(t.topic_name)
        for p in t.partitions:
            out += [p.partition_index, p.error_code, p.error_message, p.leader_id,
                    p.leader_epoch, p.high_watermark]
            for r in list(p.current_voters) + list(p.observers):
                out += [r.replica_id, _u(r.replica_directory_id), r.log_end_offset,
                        r.last_fetch_timestamp, r.last_caught_up_timestamp]
    for n in m.nodes:
        out.append(n.node_id)
        for listener in n.listeners:
            out += [listener.name, listener.host, listener.port]
    return out


def _touch_fetch(m: Any) -> object:
    last: object = m.throttle_time_ms, m.error_code, m.session_id
    for t in m.responses:
        last = t.topic_id
        for p in t.partitions:
            leader = p.current_leader
            last = (p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                    p.log_start_offset, leader.leader_id, leader.leader_epoch,
                    p.aborted_transactions, p.preferred_read_replica, len(p.records))
    for n in m.node_endpoints:
        last = n.node_id, n.host, n.port, n.rack
    return last


def _leaves_fetch(m: Any) -> list[Any]:
    out: list[Any] = [m.throttle_time_ms, m.error_code, m.session_id]
    for t in m.responses:
        out.append(_u(t.topic_id))
        for p in t.partitions:
            leader = p.current_leader
            out += [p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                    p.log_start_offset, leader.leader_id, leader.leader_epoch,
                    list(p.aborted_transactions or []), p.preferred_read_replica,
                    bytes(p.records)]
    out.append(len(m.node_endpoints or []))
    return out


def _u(value: Any) -> bytes:
    """A uuid from either side as its 16 bytes (kwire: ``Uuid``, a bytes; kafka-python: UUID)."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    return bytes(value)


# ---------------------------------------------------------------------------------------------
# the messages


def _uuid_pair(n: int) -> tuple[Any, uuid.UUID]:
    from kwire.uuid import Uuid

    raw = (0x5A17 + n).to_bytes(8, "big") + (0xC0FFEE * (n + 1)).to_bytes(8, "big")
    return Uuid(raw), uuid.UUID(bytes=raw)


def _vote_case() -> Case:
    from kafka.protocol.api_message import ApiMessage

    from messages.generated import vote_request as k

    class VoteRequest(ApiMessage, load_json="messages.specs"):  # type: ignore[call-arg,misc]
        """kafka-python's generated-class machinery fed with kwire's VoteRequest spec."""

    replica_dir, ref_replica_dir = _uuid_pair(1)
    voter_dir, ref_voter_dir = _uuid_pair(2)
    fields: dict[str, Any] = dict(partition_index=0, replica_epoch=42, replica_id=1,
                                  last_offset_epoch=41, last_offset=1_234_567, pre_vote=True)
    kw = k.VoteRequest(
        cluster_id=CLUSTER_ID, voter_id=2,
        topics=[k.TopicData(topic_name=METADATA_TOPIC_NAME, partitions=[k.PartitionData(
            replica_directory_id=replica_dir, voter_directory_id=voter_dir, **fields)])])
    R = VoteRequest
    ref = R(cluster_id=CLUSTER_ID, voter_id=2, topics=[R.TopicData(
        topic_name=METADATA_TOPIC_NAME, partitions=[R.TopicData.PartitionData(
            replica_directory_id=ref_replica_dir, voter_directory_id=ref_voter_dir, **fields)])])
    return Case("VoteRequest", 2, "1 topic x 1 partition, pre-vote, directory ids",
                kw, k.VoteRequest, ref, R, _touch_vote, _leaves_vote)


def _quorum_case(voters: int = 5, observers: int = 10) -> Case:
    from kafka.protocol.admin.cluster import DescribeQuorumResponse as R

    from messages.generated import describe_quorum_response as k

    now_ms = 1_763_600_000_000

    def replica(i: int) -> dict[str, Any]:
        return dict(replica_id=i, log_end_offset=9_000_000 - i,
                    last_fetch_timestamp=now_ms - i, last_caught_up_timestamp=now_ms - 10 * i)

    voter_ids = list(range(1, voters + 1))
    observer_ids = list(range(100, 100 + observers))
    dirs = {i: _uuid_pair(i) for i in voter_ids + observer_ids}
    part: dict[str, Any] = dict(partition_index=0, error_code=0, error_message=None,
                                leader_id=1, leader_epoch=42, high_watermark=8_999_990)
    RP = R.TopicData.PartitionData
    kw = k.DescribeQuorumResponse(
        error_code=0, error_message=None,
        topics=[k.TopicData(topic_name=METADATA_TOPIC_NAME, partitions=[k.PartitionData(
            current_voters=[k.ReplicaState(replica_directory_id=dirs[i][0], **replica(i))
                            for i in voter_ids],
            observers=[k.ReplicaState(replica_directory_id=dirs[i][0], **replica(i))
                       for i in observer_ids],
            **part)])],
        nodes=[k.Node(node_id=i, listeners=[k.Listener(
            name="CONTROLLER", host=f"controller-{i}.kwire.internal", port=9093)])
            for i in voter_ids])
    ref = R(
        error_code=0, error_message=None,
        topics=[R.TopicData(topic_name=METADATA_TOPIC_NAME, partitions=[RP(
            current_voters=[RP.ReplicaState(replica_directory_id=dirs[i][1], **replica(i))
                            for i in voter_ids],
            observers=[RP.ReplicaState(replica_directory_id=dirs[i][1], **replica(i))
                       for i in observer_ids],
            **part)])],
        nodes=[R.Node(node_id=i, listeners=[R.Node.Listener(
            name="CONTROLLER", host=f"controller-{i}.kwire.internal", port=9093)])
            for i in voter_ids])
    return Case("DescribeQuorumResponse", 2,
                f"1 partition, {voters} voters + {observers} observers, {voters} nodes",
                kw, k.DescribeQuorumResponse, ref, R, _touch_quorum, _leaves_quorum)


@functools.cache
def record_batch(target_bytes: int = FETCH_RECORDS_TARGET_BYTES) -> tuple[bytes, int]:
    """A CRC-valid uncompressed v2 batch of 256 B records no larger than ``target_bytes``, and
    its record count (the most that fit). Record ``i``'s value is the bytes ``(i + j) & 0xFF``.
    Built by ``storage.records`` and checked by kafka-python's batch reader; built once per
    process."""
    from kafka.record.default_records import DefaultRecordBatch

    from storage.batch_builder import build_batch
    from storage.record_codec import SimpleRecord

    ramp = bytes(range(256)) * (RECORD_VALUE_BYTES // 256 + 2)

    def build(n: int) -> bytes:
        return build_batch(
            [SimpleRecord(value=ramp[i & 0xFF:(i & 0xFF) + RECORD_VALUE_BYTES],
                          timestamp=1_763_600_000_000 + i) for i in range(n)],
            base_offset=1_000_000, partition_leader_epoch=42)

    # a record's size only grows with its offset and timestamp deltas: step down by whole
    # records from an estimate made with the smallest, then back up while the next one fits
    smallest = len(build(2)) - len(build(1))
    n = (target_bytes - len(build(1))) // smallest + 1
    batch = build(n)
    while len(batch) > target_bytes:
        n -= -(-(len(batch) - target_bytes) // smallest)
        batch = build(n)
    while len(bigger := build(n + 1)) <= target_bytes:
        n, batch = n + 1, bigger
    if not DefaultRecordBatch(bytearray(batch)).validate_crc():
        raise SectionError("storage.records built a batch whose CRC kafka-python rejects")
    return batch, n


def _fetch_case(version: int = 17) -> Case:
    from kafka.protocol.consumer.fetch import FetchResponse as R

    from kwire.uuid import METADATA_TOPIC_ID
    from messages.generated import fetch_response as k

    records, count = record_batch()
    part: dict[str, Any] = dict(
        partition_index=0, error_code=0, high_watermark=1_000_000 + count,
        last_stable_offset=1_000_000 + count, log_start_offset=0,
        aborted_transactions=[], preferred_read_replica=-1, records=records)
    kw = k.FetchResponse(
        throttle_time_ms=0, error_code=0, session_id=0,
        responses=[k.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[
            k.PartitionData(current_leader=k.LeaderIdAndEpoch(leader_id=1, leader_epoch=42),
                            **part)])])
    RT = R.FetchableTopicResponse
    ref = R(
        throttle_time_ms=0, error_code=0, session_id=0,
        responses=[RT(topic_id=uuid.UUID(bytes=bytes(METADATA_TOPIC_ID)), partitions=[
            RT.PartitionData(
                current_leader=RT.PartitionData.LeaderIdAndEpoch(leader_id=1, leader_epoch=42),
                **part)])])
    return Case("FetchResponse", version,
                f"1 partition, CurrentLeader tagged, 1 v2 batch of {count} x "
                f"{RECORD_VALUE_BYTES} B records ({len(records)} B)",
                kw, k.FetchResponse, ref, R, _touch_fetch, _leaves_fetch)


def cases() -> list[Case]:
    return [_vote_case(), _quorum_case(), _fetch_case()]


# ---------------------------------------------------------------------------------------------
# preconditions


def _first_difference(a: bytes, b: bytes) -> str:
    n = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    lo = max(0, n - 8)
    return (f"kwire {len(a)} B, {REFERENCE} {len(b)} B; first difference at byte {n}: "
            f"kwire ...{a[lo:n + 8].hex(' ')}... vs {REFERENCE} ...{b[lo:n + 8].hex(' ')}...")


def check_case(case: Case) -> bytes:
    """The bytes both sides encode ``case`` to; raises SectionError saying why when the two
    sides disagree on the bytes, on a round trip, or on the decoded field values."""
    v = case.version
    kb = case.kwire_obj.encode(v)
    rb = bytes(case.ref_obj.encode(version=v))
    if kb != rb:
        why = [f"{case.name} v{v}: encodings differ ({_first_difference(kb, rb)})"]
        for label, data in (("kwire", kb), (REFERENCE, rb)):
            try:
                kl = case.leaves(case.kwire_cls.decode(data, v))
                rl = case.leaves(case.ref_cls.decode(data, version=v))
                diff = [(i, x, y) for i, (x, y) in enumerate(zip(kl, rl, strict=False))
                        if x != y][:5]
                why.append(f"decoding the {label} bytes, fields differ at {diff}")
            except Exception as exc:  # a diagnosis only: report whatever the decoders say
                why.append(f"decoding the {label} bytes failed: {exc!r}")
        raise SectionError("; ".join(why))
    kd = case.kwire_cls.decode(kb, v)
    rd = case.ref_cls.decode(kb, version=v)
    if kd != case.kwire_obj or kd.encode(v) != kb:
        raise SectionError(f"{case.name} v{v}: kwire does not round-trip its own bytes")
    # kafka-python's decoder fills the slots without running __init__, so a decoded message has
    # no _header slot and its encode() raises AttributeError until one is set.
    rd._header = None
    if bytes(rd.encode(version=v)) != kb:
        raise SectionError(f"{case.name} v{v}: {REFERENCE} does not round-trip the bytes")
    kl, rl = case.leaves(kd), case.leaves(rd)
    if kl != rl:
        diff = [(i, x, y) for i, (x, y) in enumerate(zip(kl, rl, strict=False)) if x != y][:5]
        raise SectionError(f"{case.name} v{v}: decoded fields differ: {diff}")
    return kb


# ---------------------------------------------------------------------------------------------
# timing


def _ops(case: Case, data: bytes) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    v = case.version
    kobj, robj, kcls, rcls, touch = (case.kwire_obj, case.ref_obj, case.kwire_cls,
                                     case.ref_cls, case.touch)
    ops: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "encode": (lambda: kobj.encode(v), lambda: robj.encode(version=v)),
        "decode": (lambda: touch(kcls.decode(data, v)),
                   lambda: touch(rcls.decode(data, version=v))),
    }
    if case.name == "FetchResponse":
        ops[CONTEXT_OP] = (lambda: _owned_records(touch, kcls.decode(data, v)),
                           lambda: _owned_records(touch, rcls.decode(data, version=v)))
    return ops


CONTEXT_OP = "decode + owned records"


def _owned_records(touch: Callable[[Any], object], m: Any) -> object:
    """Read every field, then hold the records as ``bytes`` of one's own."""
    touch(m)
    return [bytes(p.records) for t in m.responses for p in t.partitions]


def _reference_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafka-python")
    except PackageNotFoundError:
        return "?"


def run(args: Any) -> list[Result]:
    settings = Settings.from_args(args)
    ref_name = f"{REFERENCE} {_reference_version()}"
    results: list[Result] = []
    for case in cases():
        data = check_case(case)
        for op, (kop, rop) in _ops(case, data).items():
            kstat, rstat = measure_pair(kop, rop, settings)
            assert rstat is not None
            conditions = (
                f"{case.name} v{case.version}, {case.shape}, {len(data)} B/msg; "
                f"bytes identical; {settings.runs} runs/side interleaved, "
                f"{kstat.loops}/{rstat.loops} calls per run (kwire/ref), median (best), gc on, "
                f"CPU share {kstat.median_cpu_share:.0%}/{rstat.median_cpu_share:.0%}"
                + ("; decode reads every field" if op != "encode" else "")
                + ("; context row: both sides end with the records as bytes of their own"
                   if op == CONTEXT_OP else "")
            )
            results.append(Result(
                section=SECTION,
                what=f"{case.name} v{case.version} {op}",
                unit="msg/s",
                kwire=kstat.rate(), kwire_best=kstat.rate(best=True),
                reference=rstat.rate(), reference_best=rstat.rate(best=True),
                reference_name=ref_name,
                conditions=conditions,
                bytes_per_op=len(data),
                extra={"kwire_ns": kstat.per_op_ns, "reference_ns": rstat.per_op_ns,
                       "kwire_cpu_share": kstat.cpu_share,
                       "reference_cpu_share": rstat.cpu_share},
            ))
        if getattr(args, "profile", False):
            print(profile_case(case, data))
    return results


def profile_case(case: Case, data: bytes, seconds: float = 0.5, top: int = 12) -> str:
    """cProfile of kwire's encode and decode of ``case`` (for finding where the time goes)."""
    out = io.StringIO()
    for op, (kop, _) in _ops(case, data).items():
        loops = max(1, int(seconds * 1e9 / max(1.0, _estimate_ns(kop))))
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(loops):
            kop()
        prof.disable()
        out.write(f"--- kwire {case.name} v{case.version} {op}: {loops} calls\n")
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _estimate_ns(op: Callable[[], object]) -> float:
    import time

    t0 = time.perf_counter_ns()
    for _ in range(10):
        op()
    return (time.perf_counter_ns() - t0) / 10
