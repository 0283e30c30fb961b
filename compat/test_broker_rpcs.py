"""The broker-facing lifecycle RPCs (KIP-631) against a stock controller of the newest pinned
release put in the same state (a standalone controller, node 1, formatted by the stock tool):
BrokerRegistration (v0-4, good and bad inputs), BrokerHeartbeat (v0-2, through fencing,
unfencing and shutdown), UnregisterBroker, AllocateProducerIds, and Envelope (KIP-590: bad envelopes, and
UnregisterBroker and DescribeQuorum forwarded in one).

One sequence of requests goes to both nodes, each request to the stock node and then to kwire;
the answers must be equal, and so must the broker records each wrote to its log (type, version
and every field). A broker epoch is the log offset of its registration, which differs between
the two logs, so an epoch is compared as "the k-th epoch this node gave the broker" and each
node's heartbeats carry the epoch that node gave.

A BrokerRegistration answer carries no message, so the text of each refusal is compared where
Kafka writes it, QuorumController's "registerBroker: event failed with ... Exception message:"
line (the stock node's controller logger is raised to INFO for the run): among them the
mixed-version refusals of a broker that cannot support a finalized level.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.differential import (
    CAUGHT_UP,
    DIR_A,
    PairNode,
    broker_features,
    finalized_features,
    registration,
    send,
)
from compat.harness import CLUSTER_ID, PARTITION, log_batches
from kwire.uuid import Uuid
from messages.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import Feature
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.fetch_request import FetchRequest
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.metadata import decode_record
from messages.protocol import decode_response, encode_request
from messages.runtime import Message

pytestmark = pytest.mark.compat

DIR_B, DIR_C = Uuid.from_longs(7, 1002), Uuid.from_longs(7, 1003)
OTHER_INCARNATION = Uuid.from_longs(0x77, 2)


@dataclass
class Side:
    """What one node told: the epochs each broker's successful registrations got, in order
    (heartbeats carry the latest)."""

    epochs: dict[int, list[int]]

    def latest(self, broker_id: int) -> int:
        return self.epochs[broker_id][-1] if broker_id in self.epochs else 1

    def label(self, broker_id: int, epoch: int) -> str:
        """``"epoch k"``: the k-th distinct epoch this node gave the broker."""
        seen = self.epochs.setdefault(broker_id, [])
        if epoch not in seen:
            seen.append(epoch)
        else:  # the latest is the one answered last
            seen.remove(epoch)
            seen.append(epoch)
        return f"epoch {sorted(seen).index(epoch) + 1}"


def _heartbeat(broker_id: int, offset: int, *, fence: bool = False, shut_down: bool = False,
               epoch: int | None = None, cordoned: list[Uuid] | None = None) -> Callable[[Side], Message]:
    def build(side: Side) -> Message:
        return BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=side.latest(broker_id) if epoch is None else epoch,
            current_metadata_offset=offset,
            want_fence=fence,
            want_shut_down=shut_down,
            cordoned_log_dirs=cordoned,
        )
    return build


def _allocate(broker_id: int, *, epoch: int | None = None) -> Callable[[Side], Message]:
    def build(side: Side) -> Message:
        return AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=side.latest(broker_id) if epoch is None else epoch)
    return build


PRINCIPAL = b"\x00\x00" + b"\x05User" + b"\x0aANONYMOUS" + b"\x00" + b"\x00"
"""A forwarded principal as a broker serializes User:ANONYMOUS (DefaultPrincipalData v0)."""
_INNER = {6400: (64, 0), 5502: (55, 2)}
"""Correlation id of a forwarded request -> its (api key, version), to read the answer."""


def _envelope(inner: bytes, principal: bytes | None = PRINCIPAL, address: bytes = b"\x7f\x00\x00\x01") -> Message:
    return EnvelopeRequest(request_data=inner, request_principal=principal, client_host_address=address)


def _envelope_cases() -> list[tuple[str, Callable[[Side], Message], int]]:
    unregister = encode_request(UnregisterBrokerRequest(broker_id=77), 0, 6400, "adminclient-1")
    describe_quorum = encode_request(DescribeQuorumRequest(), 2, 5502, "adminclient-1")
    fetch = encode_request(FetchRequest(cluster_id=CLUSTER_ID), 17, 1700, "adminclient-1")
    return [
        (f"envelope: {name}", (lambda _side, body=body: body), 0)
        for name, body in (
            ("forwarded UnregisterBroker 77", _envelope(unregister)),
            ("forwarded DescribeQuorum", _envelope(describe_quorum)),
            ("no principal", _envelope(unregister, principal=None)),
            ("principal of version 1", _envelope(unregister, principal=b"\x00\x01" + PRINCIPAL[2:])),
            ("truncated principal", _envelope(unregister, principal=PRINCIPAL[:-2])),
            ("a 3-byte client address", _envelope(unregister, address=b"\x01\x02\x03")),
            ("no request header", _envelope(b"\x00")),
            ("Fetch (not forwardable)", _envelope(fetch)),
            ("truncated forwarded body", _envelope(unregister[:-2])),
        )
    ]


def _cases(features: list[Feature]) -> list[tuple[str, Callable[[Side], Message], int]]:
    def fixed(body: Message) -> Callable[[Side], Message]:
        return lambda _side: body

    no_mv = [f for f in features if f.name != "metadata.version"]
    old_mv = [Feature(name="metadata.version", min_supported_version=1, max_supported_version=14), *no_mv]
    missing_one = [f for f in features if f.name not in ("kraft.version",)]
    mv_only = [f for f in features if f.name == "metadata.version"]
    no_kraft = [f if f.name != "kraft.version" else Feature(name="kraft.version", min_supported_version=0, max_supported_version=0)
                for f in features]
    return [
        # the mixed-version trap: brokers of older lines on a quorum finalized past them. A 3.6
        # broker lists metadata.version alone, up to 3.6-IV2 (14), in BrokerRegistration v1; one
        # of 4.x sending v0-v3 leaves out every feature whose minimum is 0 (KAFKA-17492), so the
        # controller checks those against the range 0-0 and names the first in its HashMap order.
        # Broker 8 is registered by none of the other cases; where a level lets it in (the
        # sequence runs at older metadata.versions too) it is unregistered after
        ("a broker of 3.6 (metadata.version 1-14, v1)", fixed(registration(8, [old_mv[0]], dirs=())), 1),
        ("a broker of 4.4 at v3 (features of minimum 0 left out)", fixed(registration(8, mv_only)), 3),
        ("a broker at kraft.version 0 on a kraft.version 1 quorum", fixed(registration(8, no_kraft)), 4),
        ("unregister 8", fixed(UnregisterBrokerRequest(broker_id=8)), 0),
        ("heartbeat before registration", _heartbeat(5, 0, epoch=1), 1),
        ("another cluster id", fixed(registration(5, features, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")), 4),
        ("migrating ZooKeeper broker", fixed(registration(5, features, migrating=True)), 4),
        ("no log dirs", fixed(registration(5, features, dirs=())), 4),
        ("reserved log dir", fixed(registration(5, features, dirs=(Uuid.from_longs(0, 2),))), 4),
        ("duplicate log dirs", fixed(registration(5, features, dirs=(DIR_A, DIR_A))), 4),
        ("no metadata.version", fixed(registration(5, no_mv)), 4),
        ("metadata.version range below the finalized one", fixed(registration(5, old_mv)), 4),
        ("a finalized feature not listed", fixed(registration(5, missing_one)), 4),
        ("v0 (no log dirs)", fixed(registration(5, features)), 0),
        ("v1 (no log dirs)", fixed(registration(5, features)), 1),
        ("register 5", fixed(registration(5, features)), 4),
        ("register 5 again, same incarnation", fixed(registration(5, features)), 4),
        ("register 5, another incarnation, no contact yet", fixed(registration(5, features, incarnation=OTHER_INCARNATION)), 3),
        ("heartbeat 5 at a stale epoch", _heartbeat(5, 0, epoch=0), 1),
        ("heartbeat 5, fenced, behind", _heartbeat(5, 0), 0),
        ("register 5 back to the first incarnation while its session is valid", fixed(registration(5, features)), 2),
        ("heartbeat 5 wanting to stay fenced", _heartbeat(5, CAUGHT_UP, fence=True), 1),
        ("heartbeat 5 caught up: unfenced", _heartbeat(5, CAUGHT_UP), 1),
        ("heartbeat 5 again", _heartbeat(5, CAUGHT_UP), 2),
        ("heartbeat 5 cordoning nothing", _heartbeat(5, CAUGHT_UP, cordoned=[]), 2),
        ("register 6 with 5's directory", fixed(registration(6, features, dirs=(DIR_B, DIR_A), incarnation=OTHER_INCARNATION)), 4),
        ("register 6", fixed(registration(6, features, dirs=(DIR_B, DIR_C), incarnation=OTHER_INCARNATION)), 4),
        ("heartbeat 5 asking to be fenced", _heartbeat(5, CAUGHT_UP, fence=True), 1),
        ("heartbeat 5 caught up again", _heartbeat(5, CAUGHT_UP), 1),
        ("heartbeat 5 shutting down, leading nothing", _heartbeat(5, CAUGHT_UP, shut_down=True), 1),
        ("producer ids for 6", _allocate(6), 0),
        ("more producer ids for 6", _allocate(6), 0),
        ("producer ids for 6 at a stale epoch", _allocate(6, epoch=3), 0),
        ("producer ids for 99 (unregistered)", _allocate(99, epoch=1), 0),
        ("heartbeat 6 shutting down while fenced", _heartbeat(6, 0, shut_down=True), 0),
        ("unregister 77 (unknown)", fixed(UnregisterBrokerRequest(broker_id=77)), 0),
        ("unregister 5", fixed(UnregisterBrokerRequest(broker_id=5)), 0),
        ("heartbeat 5 after its unregistration", _heartbeat(5, CAUGHT_UP), 1),
        *_envelope_cases(),
    ]


def _normalize(response: Any, broker_id: int | None, side: Side) -> tuple[Any, ...]:
    name = type(response).__name__
    if name == "BrokerRegistrationResponse":
        epoch = response.broker_epoch
        if epoch >= 0 and broker_id is not None:
            epoch = side.label(broker_id, epoch)
        return name, int(response.error_code), epoch
    if name == "AllocateProducerIdsResponse":
        return name, int(response.error_code), response.producer_id_start, response.producer_id_len
    if name == "EnvelopeResponse":
        data = response.response_data
        if data is None:
            return name, int(response.error_code), None
        correlation = int.from_bytes(data[:4], "big")
        header, inner = decode_response(data, *_INNER[correlation])
        inner_name = type(inner).__name__
        inner_fields = (int(inner.error_code), getattr(inner, "error_message", None))
        if inner_name == "DescribeQuorumResponse":  # the quorums differ: who leads, in which shape
            inner_fields = (int(inner.error_code), [(t.topic_name, len(t.partitions)) for t in inner.topics])
        return name, int(response.error_code), header.correlation_id, inner_name, inner_fields
    if name == "BrokerHeartbeatResponse":
        return name, int(response.error_code), response.is_caught_up, response.is_fenced, response.should_shut_down
    return name, int(response.error_code), response.error_message


_BROKER_RECORDS = ("RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "UnregisterBrokerRecord", "ProducerIdsRecord")


def _broker_records(data: Path, side: Side) -> list[tuple[str, int, dict[str, Any]]]:
    """The broker records of a node's log, each as (type, version, fields), epochs labelled."""
    out = []
    for batch in log_batches(data / PARTITION):
        if batch.is_control:
            continue
        for value in batch.iter_values():
            assert value is not None
            message, version = decode_record(value)
            name = type(message).__name__
            if name not in _BROKER_RECORDS:
                continue
            fields = message.to_json(version)
            fields["brokerEpoch"] = side.label(fields["brokerId"], fields["brokerEpoch"])
            out.append((name, version, fields))
    return out


REFUSAL_LINE = re.compile(
    r"(?<![A-Za-z])registerBroker: event failed with (\w+)(?: in \d+ microseconds)?\.(?: Exception message: (.*?))?"
    r"(?: \(org\.apache\.kafka\.controller\.QuorumController\))?$"
)
"""QuorumController's INFO line for a refused registration, as stock Kafka (with its processing
time and its logger's name) and kwire write it."""


def _registration_refusals(log: Path) -> list[tuple[str, str | None]]:
    """Each refused registration a node logged, as (exception name, Kafka's message): a
    BrokerRegistration answer carries only the error code, so the log is where the text is."""
    return [
        (match.group(1), match.group(2))
        for line in log.read_text(errors="replace").splitlines()
        if (match := REFUSAL_LINE.search(line))
    ]


def _log_controller_events(port: int) -> Any:
    """Have the node log its controller's INFO lines: IncrementalAlterConfigs of its
    broker-logger resource (the stock harness runs Kafka at WARN)."""
    return trio.run(send, port, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=8, resource_name="1",
        configs=[AlterableConfig(name="org.apache.kafka.controller.QuorumController", config_operation=0, value="INFO")],
    )]), 1)


def test_broker_lifecycle_rpcs_answer_alike(newest_leader_pair: dict[str, PairNode]) -> None:
    ports = {name: node.port for name, node in newest_leader_pair.items()}
    logged = {name: _log_controller_events(port) for name, port in ports.items()}
    assert [r.error_code for r in logged["stock"].responses] == [0], logged
    finalized = {name: finalized_features(port) for name, port in ports.items()}
    assert finalized["stock"] == finalized["kwire"] and "metadata.version" in finalized["stock"]
    cases = _cases(broker_features(finalized["stock"]))
    sides = {name: Side({}) for name in ports}
    differences: list[str] = []
    answered: list[tuple[str, tuple[Any, ...]]] = []
    started = time.monotonic()
    for case, build, version in cases:
        answers = {}
        for name, port in ports.items():
            body = build(sides[name])
            broker_id = getattr(body, "broker_id", None)
            response = trio.run(send, port, body, version)
            answers[name] = response if isinstance(response, str) else _normalize(response, broker_id, sides[name])
        answered.append((case, answers["stock"]))
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    # the sequence ran inside one session timeout, so no broker was fenced by expiry midway
    assert time.monotonic() - started < 9.0
    for name, node in newest_leader_pair.items():
        assert node.proc.poll() is None, f"{name} died"
    # the sequence reached what it is about on the stock side: a registration, an unfencing
    # and a shutdown granted
    outcomes = dict(answered)
    trace = "\n".join(f"{case}: {answer}" for case, answer in answered)
    if os.environ.get("KWIRE_PROBE_PRINT"):
        print(trace)
    assert outcomes["register 5"] == ("BrokerRegistrationResponse", 0, "epoch 1"), trace
    assert outcomes["heartbeat 5 caught up: unfenced"] == ("BrokerHeartbeatResponse", 0, True, False, False), trace
    assert outcomes["more producer ids for 6"] == ("AllocateProducerIdsResponse", 0, 1000, 1000), trace
    assert outcomes["heartbeat 5 shutting down, leading nothing"] == ("BrokerHeartbeatResponse", 0, True, True, True), trace
    assert not differences, f"{len(differences)} of {len(cases)} cases differ:\n" + "\n".join(differences) + "\n" + trace
    records = {name: _broker_records(node.data, sides[name]) for name, node in newest_leader_pair.items()}
    assert len(records["stock"]) >= 10, records["stock"]
    assert records["kwire"] == records["stock"]
    # the refusals' texts, from the logs: the same exception and message for each, in order
    refusals = {name: _registration_refusals(node.data.parent / "logs" / f"{name}.txt")
                for name, node in newest_leader_pair.items()}
    assert sum(name == "UnsupportedVersionException" for name, _ in refusals["stock"]) >= 4, refusals["stock"]
    assert refusals["kwire"] == refusals["stock"], "\n".join(
        f"stock {s}\nkwire {k}" for s, k in itertools.zip_longest(refusals["stock"], refusals["kwire"]))


def test_off_the_active_controller_broker_rpcs_answer_alike(newest_observer_pair: dict[str, PairNode]) -> None:
    """A node that is not the active controller (an observer of a quorum whose voters are not
    up) answers each broker RPC, bare or forwarded, as a stock one does: NOT_CONTROLLER."""
    ports = {name: node.port for name, node in newest_observer_pair.items()}
    features = [Feature(name="metadata.version", min_supported_version=1, max_supported_version=33)]
    unregister = encode_request(UnregisterBrokerRequest(broker_id=5), 0, 6400, "adminclient-1")
    cases: list[tuple[str, Message, int]] = [
        ("registration", registration(5, features), 4),
        ("heartbeat", BrokerHeartbeatRequest(broker_id=5, broker_epoch=3, current_metadata_offset=0), 1),
        ("producer ids", AllocateProducerIdsRequest(broker_id=5, broker_epoch=3), 0),
        ("unregistration", UnregisterBrokerRequest(broker_id=5), 0),
        ("forwarded unregistration", _envelope(unregister), 0),
    ]
    differences = []
    for case, body, version in cases:
        answers = {}
        for name, port in ports.items():
            response = trio.run(send, port, body, version)
            answers[name] = response if isinstance(response, str) else _normalize(response, None, Side({}))
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
        if case == "registration":
            assert answers["stock"][1] == 41, answers  # NOT_CONTROLLER: the case is about that
    assert not differences, "\n".join(differences)
