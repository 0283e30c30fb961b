"""Section ``codec-floor``: kwire's generated codecs against hand-inlined prototypes of the same
codecs, to show how much of the time is the shape of the generated code (the ratio of kwire
to a hand-written ``struct`` floor).

The prototypes below are what a generator could emit for one message version; each produces the
same kwire dataclasses (decode) or the same bytes (encode) as the generated module, which is
checked before timing. The prototypes were written to find what the generator should emit, and
it now emits each of these:

* one function per message version: nested structs and arrays are decoded inline, with no call
  and no ``(obj, pos)`` tuple per element;
* varints (array counts, string lengths, tag counts) are read inline with a one-byte fast path;
  strings are ``str(buf[pos:end], "utf-8")`` after a bounds check;
* objects are ``object.__new__(Cls)`` plus slot stores rather than the dataclass ``__init__``;
* Fetch: ``records`` kept as a memoryview of the input (no 1 MiB copy), and encoding copies
  ``head + records + tail`` once.

The generated code goes further in two ways the prototypes do not: uuids come from the table of
interned ids (``kwire.uuid.intern_uuid``) where the prototypes make ``bytes.__new__(Uuid, raw)``
each time, and ``Struct`` methods are bound once at module level.

Safety is kept: truncation raises (``unpack_from`` and explicit bounds checks), counts larger than
the remaining bytes are refused before allocation, unknown tagged fields take a slow path that
preserves them, trailing bytes are an error, and malformed UTF-8 raises.

Rows: ``kwire`` is the generated codec, ``reference`` the prototype; a ratio below 1 would be
headroom left in the generated code.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kwire.uuid import Uuid
from kwire.wire import DecodeError, as_buffer
from kwire.wire import read_tagged_header as _rtag
from kwire.wire import read_uvarint as _ruv
from messages.generated import describe_quorum_response as dq
from messages.generated import fetch_response as fr
from messages.generated import vote_request as vr
from tools.bench import codec
from tools.bench.core import Result, SectionError, Settings, measure_pair

SECTION = "codec-floor"
REFERENCE = "hand-inlined prototype"

_new = object.__new__
_bnew = bytes.__new__
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VOTE_PART = struct.Struct(">iii16s16siq?")
_DQ_PART_HEAD = struct.Struct(">ih")  # partition_index, error_code
_DQ_PART_LEADER = struct.Struct(">iiq")  # leader_id, leader_epoch, high_watermark
_LEADER = struct.Struct(">ii")
_DQ_REPLICA = struct.Struct(">i16sqqq")
_U16 = struct.Struct(">H")
_FETCH_TOP = struct.Struct(">ihi")
_FETCH_PART = struct.Struct(">ihqqq")


def _unknown(buf: Any, pos: int) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """Slow path: a tagged-field section with fields (all unknown to the caller)."""
    n, pos = _ruv(buf, pos)
    found = []
    for _ in range(n):
        tag, size, pos = _rtag(buf, pos)
        end = pos + size
        found.append((tag, bytes(buf[pos:end])))
        pos = end
    return tuple(found), pos


# ---------------------------------------------------------------------------------------------
# VoteRequest v2


def decode_vote_v2(buf: Any) -> vr.VoteRequest:
    try:
        size = len(buf)
        pos = 0
        n = buf[0]
        if n & 0x80:
            n, pos = _ruv(buf, 0)
        else:
            pos = 1
        if n == 0:
            cluster_id = None
        else:
            end = pos + n - 1
            if end > size:
                raise DecodeError("truncated string ClusterId")
            cluster_id = str(buf[pos:end], "utf-8")
            pos = end
        (voter_id,) = _I32.unpack_from(buf, pos)
        pos += 4
        n = buf[pos]
        if n & 0x80:
            n, pos = _ruv(buf, pos)
        else:
            pos += 1
        n -= 1
        if n < 0 or n > size - pos:
            raise DecodeError("bad Topics count")
        topics = []
        for _ in range(n):
            ln = buf[pos]
            if ln & 0x80:
                ln, pos = _ruv(buf, pos)
            else:
                pos += 1
            end = pos + ln - 1
            if ln == 0 or end > size:
                raise DecodeError("bad TopicName")
            topic_name = str(buf[pos:end], "utf-8")
            pos = end
            np = buf[pos]
            if np & 0x80:
                np, pos = _ruv(buf, pos)
            else:
                pos += 1
            np -= 1
            if np < 0 or np > size - pos:
                raise DecodeError("bad Partitions count")
            parts = []
            for _ in range(np):
                a, b, c, d, e, f, g, h = _VOTE_PART.unpack_from(buf, pos)
                pos += 57
                if buf[pos]:
                    unknown, pos = _unknown(buf, pos)
                else:
                    pos += 1
                    unknown = ()
                p = _new(vr.PartitionData)
                p.partition_index = a
                p.replica_epoch = b
                p.replica_id = c
                p.replica_directory_id = _bnew(Uuid, d)
                p.voter_directory_id = _bnew(Uuid, e)
                p.last_offset_epoch = f
                p.last_offset = g
                p.pre_vote = h
                p.unknown_tagged_fields = unknown
                parts.append(p)
            if buf[pos]:
                unknown, pos = _unknown(buf, pos)
            else:
                pos += 1
                unknown = ()
            t = _new(vr.TopicData)
            t.topic_name = topic_name
            t.partitions = parts
            t.unknown_tagged_fields = unknown
            topics.append(t)
        if buf[pos]:
            unknown, pos = _unknown(buf, pos)
        else:
            pos += 1
            unknown = ()
        if pos != size:
            raise DecodeError("trailing bytes")
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise DecodeError(f"malformed VoteRequest v2: {exc}") from exc
    m = _new(vr.VoteRequest)
    m.cluster_id = cluster_id
    m.voter_id = voter_id
    m.topics = topics
    m.unknown_tagged_fields = unknown
    return m


# ---------------------------------------------------------------------------------------------
# DescribeQuorumResponse v2


def _dq_replicas(buf: Any, pos: int, size: int) -> tuple[list[dq.ReplicaState], int]:
    # Kept as a function: it is called twice per partition (voters, observers), never per element.
    n = buf[pos]
    if n & 0x80:
        n, pos = _ruv(buf, pos)
    else:
        pos += 1
    n -= 1
    if n < 0 or n > size - pos:
        raise DecodeError("bad ReplicaState count")
    out: list[dq.ReplicaState] = []
    append = out.append
    unpack = _DQ_REPLICA.unpack_from
    cls = dq.ReplicaState
    for _ in range(n):
        a, b, c, d, e = unpack(buf, pos)
        pos += 44
        if buf[pos]:
            unknown, pos = _unknown(buf, pos)
        else:
            pos += 1
            unknown = ()
        r = _new(cls)
        r.replica_id = a
        r.replica_directory_id = _bnew(Uuid, b)
        r.log_end_offset = c
        r.last_fetch_timestamp = d
        r.last_caught_up_timestamp = e
        r.unknown_tagged_fields = unknown
        append(r)
    return out, pos


def decode_quorum_v2(buf: Any) -> dq.DescribeQuorumResponse:
    try:
        size = len(buf)
        (error_code,) = _I16.unpack_from(buf, 0)
        pos = 2
        ln = buf[pos]
        if ln & 0x80:
            ln, pos = _ruv(buf, pos)
        else:
            pos += 1
        if ln == 0:
            error_message = None
        else:
            end = pos + ln - 1
            if end > size:
                raise DecodeError("truncated ErrorMessage")
            error_message = str(buf[pos:end], "utf-8")
            pos = end
        n = buf[pos]
        if n & 0x80:
            n, pos = _ruv(buf, pos)
        else:
            pos += 1
        n -= 1
        if n < 0 or n > size - pos:
            raise DecodeError("bad Topics count")
        topics = []
        for _ in range(n):
            ln = buf[pos]
            if ln & 0x80:
                ln, pos = _ruv(buf, pos)
            else:
                pos += 1
            end = pos + ln - 1
            if ln == 0 or end > size:
                raise DecodeError("bad TopicName")
            topic_name = str(buf[pos:end], "utf-8")
            pos = end
            np = buf[pos]
            if np & 0x80:
                np, pos = _ruv(buf, pos)
            else:
                pos += 1
            np -= 1
            if np < 0 or np > size - pos:
                raise DecodeError("bad Partitions count")
            parts = []
            for _ in range(np):
                partition_index, p_error_code = _DQ_PART_HEAD.unpack_from(buf, pos)
                pos += 6
                ln = buf[pos]
                if ln & 0x80:
                    ln, pos = _ruv(buf, pos)
                else:
                    pos += 1
                if ln == 0:
                    p_error_message = None
                else:
                    end = pos + ln - 1
                    if end > size:
                        raise DecodeError("truncated ErrorMessage")
                    p_error_message = str(buf[pos:end], "utf-8")
                    pos = end
                leader_id, leader_epoch, high_watermark = _DQ_PART_LEADER.unpack_from(buf, pos)
                pos += 16
                voters, pos = _dq_replicas(buf, pos, size)
                observers, pos = _dq_replicas(buf, pos, size)
                if buf[pos]:
                    unknown, pos = _unknown(buf, pos)
                else:
                    pos += 1
                    unknown = ()
                p = _new(dq.PartitionData)
                p.partition_index = partition_index
                p.error_code = p_error_code
                p.error_message = p_error_message
                p.leader_id = leader_id
                p.leader_epoch = leader_epoch
                p.high_watermark = high_watermark
                p.current_voters = voters
                p.observers = observers
                p.unknown_tagged_fields = unknown
                parts.append(p)
            if buf[pos]:
                unknown, pos = _unknown(buf, pos)
            else:
                pos += 1
                unknown = ()
            t = _new(dq.TopicData)
            t.topic_name = topic_name
            t.partitions = parts
            t.unknown_tagged_fields = unknown
            topics.append(t)
        n = buf[pos]
        if n & 0x80:
            n, pos = _ruv(buf, pos)
        else:
            pos += 1
        n -= 1
        if n < 0 or n > size - pos:
            raise DecodeError("bad Nodes count")
        nodes = []
        for _ in range(n):
            (node_id,) = _I32.unpack_from(buf, pos)
            pos += 4
            nl = buf[pos]
            if nl & 0x80:
                nl, pos = _ruv(buf, pos)
            else:
                pos += 1
            nl -= 1
            if nl < 0 or nl > size - pos:
                raise DecodeError("bad Listeners count")
            listeners = []
            for _ in range(nl):
                ln = buf[pos]
                if ln & 0x80:
                    ln, pos = _ruv(buf, pos)
                else:
                    pos += 1
                end = pos + ln - 1
                if ln == 0 or end > size:
                    raise DecodeError("bad Name")
                name = str(buf[pos:end], "utf-8")
                pos = end
                ln = buf[pos]
                if ln & 0x80:
                    ln, pos = _ruv(buf, pos)
                else:
                    pos += 1
                end = pos + ln - 1
                if ln == 0 or end > size:
                    raise DecodeError("bad Host")
                host = str(buf[pos:end], "utf-8")
                pos = end
                (port,) = _U16.unpack_from(buf, pos)
                pos += 2
                if buf[pos]:
                    unknown, pos = _unknown(buf, pos)
                else:
                    pos += 1
                    unknown = ()
                listener = _new(dq.Listener)
                listener.name = name
                listener.host = host
                listener.port = port
                listener.unknown_tagged_fields = unknown
                listeners.append(listener)
            if buf[pos]:
                unknown, pos = _unknown(buf, pos)
            else:
                pos += 1
                unknown = ()
            node = _new(dq.Node)
            node.node_id = node_id
            node.listeners = listeners
            node.unknown_tagged_fields = unknown
            nodes.append(node)
        if buf[pos]:
            unknown, pos = _unknown(buf, pos)
        else:
            pos += 1
            unknown = ()
        if pos != size:
            raise DecodeError("trailing bytes")
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise DecodeError(f"malformed DescribeQuorumResponse v2: {exc}") from exc
    m = _new(dq.DescribeQuorumResponse)
    m.error_code = error_code
    m.error_message = error_message
    m.topics = topics
    m.nodes = nodes
    m.unknown_tagged_fields = unknown
    return m


# ---------------------------------------------------------------------------------------------
# FetchResponse v17: the records are what matters, so only its framing is prototyped


def encode_fetch_v17(m: fr.FetchResponse) -> bytes:
    """Single-partition, no-aborted-transactions, no-node-endpoints FetchResponse v17 as one
    ``b"".join`` of head, records and tail (one copy of the records). Other shapes raise."""
    (topic,) = m.responses
    (p,) = topic.partitions
    if (p.aborted_transactions or m.node_endpoints or p.diverging_epoch != fr.EpochEndOffset()
            or p.snapshot_id != fr.SnapshotId() or p.unknown_tagged_fields
            or m.unknown_tagged_fields or topic.unknown_tagged_fields or p.records is None):
        raise NotImplementedError("prototype covers the benchmark's shape only")
    records = p.records
    head = bytearray(_FETCH_TOP.pack(m.throttle_time_ms, m.error_code, m.session_id))
    head += b"\x02"
    head += topic.topic_id
    head += b"\x02"
    head += _FETCH_PART.pack(p.partition_index, p.error_code, p.high_watermark,
                             p.last_stable_offset, p.log_start_offset)
    head += b"\x01" if p.aborted_transactions is not None else b"\x00"
    head += _I32.pack(p.preferred_read_replica)
    n = len(records) + 1
    while n >= 0x80:
        head.append((n & 0x7F) | 0x80)
        n >>= 7
    head.append(n)
    tail = bytearray()
    if p.current_leader != fr.LeaderIdAndEpoch():
        leader = p.current_leader
        tail += b"\x01\x01\x09"  # one tagged field: tag 1, 9 bytes
        tail += _LEADER.pack(leader.leader_id, leader.leader_epoch)
        tail += b"\x00"
    else:
        tail += b"\x00"
    tail += b"\x00\x00"  # topic and message tagged sections: none
    return b"".join((head, as_buffer(records), tail))


def decode_fetch_v17_view(data: Any) -> fr.FetchResponse:
    """kwire's generated decoder over a memoryview, then the records left as a memoryview slice
    of the input (what a zero-copy ``records`` read would give: O(1) instead of a 1 MiB copy)."""
    return _decode_fetch_view(memoryview(data))


def _decode_fetch_view(view: memoryview) -> fr.FetchResponse:
    # Same framing code as generated, with the records read as a view: locate the records by
    # decoding the head with the generated reader's structure, without copying the payload.
    size = len(view)
    throttle, error_code, session_id = _FETCH_TOP.unpack_from(view, 0)
    pos = 10
    n = view[pos] - 1
    pos += 1
    if n < 0 or n > size - pos:
        raise DecodeError("bad Responses count")
    responses = []
    for _ in range(n):
        topic_id = _bnew(Uuid, view[pos:pos + 16])
        pos += 16
        np = view[pos]
        if np & 0x80:
            np, pos = _ruv(view, pos)
        else:
            pos += 1
        np -= 1
        if np < 0 or np > size - pos:
            raise DecodeError("bad Partitions count")
        parts = []
        for _ in range(np):
            a, b, c, d, e = _FETCH_PART.unpack_from(view, pos)
            pos += 30
            na = view[pos]
            if na != 1:
                raise NotImplementedError("prototype covers empty AbortedTransactions only")
            pos += 1
            (preferred,) = _I32.unpack_from(view, pos)
            pos += 4
            ln, pos = _ruv(view, pos)
            if ln == 0:
                records = None
            else:
                end = pos + ln - 1
                if end > size:
                    raise DecodeError("truncated Records")
                records = view[pos:end]
                pos = end
            leader = fr.LeaderIdAndEpoch()
            unknown: list[tuple[int, bytes]] = []
            nt = view[pos]
            pos += 1
            for _ in range(nt):
                tag, tsize, pos = _rtag(view, pos)
                if tag == 1:
                    lid, lep = _LEADER.unpack_from(view, pos)
                    if view[pos + 8]:
                        raise NotImplementedError("tagged fields inside CurrentLeader")
                    leader = fr.LeaderIdAndEpoch(lid, lep, ())
                else:
                    unknown.append((tag, bytes(view[pos:pos + tsize])))
                pos += tsize
            parts.append(fr.PartitionData(a, b, c, d, e, fr.EpochEndOffset(), leader,
                                          fr.SnapshotId(), [], preferred,
                                          records,  # type: ignore[arg-type]  # a view on purpose
                                          tuple(unknown)))
        if view[pos]:
            raise NotImplementedError("topic tagged fields")
        pos += 1
        responses.append(fr.FetchableTopicResponse("", topic_id, parts, ()))
    if view[pos]:
        raise NotImplementedError("message tagged fields")
    pos += 1
    if pos != size:
        raise DecodeError("trailing bytes")
    return fr.FetchResponse(throttle, error_code, session_id, responses, [], ())


# ---------------------------------------------------------------------------------------------


def _check(name: str, ok: bool) -> None:
    if not ok:
        raise SectionError(f"{name}: the prototype does not agree with the generated codec")


def run(args: Any) -> list[Result]:
    settings = Settings.from_args(args)
    vote, quorum, fetch = codec.cases()
    rows: list[tuple[str, codec.Case, str, Callable[[], object], Callable[[], object], str]] = []

    data = codec.check_case(vote)
    _check("VoteRequest", decode_vote_v2(data) == vote.kwire_cls.decode(data, 2))
    rows.append(("VoteRequest v2 decode", vote, "decode",
                 lambda: vote.touch(vr.VoteRequest.decode(data, 2)),
                 lambda: vote.touch(decode_vote_v2(data)), "inlined, fields read"))

    qdata = codec.check_case(quorum)
    _check("DescribeQuorumResponse", decode_quorum_v2(qdata) == quorum.kwire_cls.decode(qdata, 2))
    rows.append(("DescribeQuorumResponse v2 decode", quorum, "decode",
                 lambda: quorum.touch(dq.DescribeQuorumResponse.decode(qdata, 2)),
                 lambda: quorum.touch(decode_quorum_v2(qdata)), "inlined, fields read"))

    fdata = codec.check_case(fetch)
    fobj = fetch.kwire_obj
    _check("FetchResponse encode", encode_fetch_v17(fobj) == fdata)
    viewed = decode_fetch_v17_view(fdata)
    _check("FetchResponse decode", bytes(viewed.responses[0].partitions[0].records or b"")
           == fobj.responses[0].partitions[0].records
           and viewed.encode(17) == fdata)
    rows.append(("FetchResponse v17 encode", fetch, "encode",
                 lambda: fobj.encode(17), lambda: encode_fetch_v17(fobj),
                 "one join of head + records + tail (one records copy)"))
    rows.append(("FetchResponse v17 decode", fetch, "decode",
                 lambda: fetch.touch(fr.FetchResponse.decode(fdata, 17)),
                 lambda: fetch.touch(decode_fetch_v17_view(fdata)),
                 "records kept as a memoryview of the input (zero-copy), fields read"))

    results = []
    for what, case, _op, kop, rop, how in rows:
        kstat, rstat = measure_pair(kop, rop, settings)
        assert rstat is not None
        size = len(codec.check_case(case)) if case is not fetch else len(fdata)
        results.append(Result(
            section=SECTION, what=what, unit="msg/s",
            kwire=kstat.rate(), kwire_best=kstat.rate(best=True),
            reference=rstat.rate(), reference_best=rstat.rate(best=True),
            reference_name=REFERENCE,
            conditions=(f"{case.shape}, {size} B/msg; prototype: {how}; same objects/bytes as "
                        f"generated; {settings.runs} runs/side interleaved, "
                        f"{kstat.loops}/{rstat.loops} calls per run, median (best), gc on, "
                        f"CPU share {kstat.median_cpu_share:.0%}/{rstat.median_cpu_share:.0%}"),
            bytes_per_op=size,
            extra={"kwire_ns": kstat.per_op_ns, "reference_ns": rstat.per_op_ns},
        ))
    return results
