"""The controller RPCs kwire answers outside the KRaft core, against a stock controller of the
newest pinned release put in the same state (a standalone controller, node 1, formatted by the
stock tool): UpdateFeatures (good and bad inputs, v0-2), ControllerRegistration and the
DescribeCluster that lists the registrations (KIP-919), and UnregisterController, which removes
one (metadata.version 4.4-IV2).

Each case goes to both nodes in turn; the answers (error codes, messages, per-feature results,
the registered controllers) must be equal. The downgrades cover where Kafka 4.4 refuses one:
metadata.version (safe or unsafe) across a level that changed the metadata records, which at
4.4-IV2 is every level below, kraft.version, an upgrade type that does not match the direction,
and requests with two bad updates, of which Kafka names the first in its HashMap order. kwire answers UpdateFeatures as Kafka 4.x does
(3.9.2 reports each feature's error under a top-level NONE and has no kraft.version upgrade;
compat/DEVIATIONS.md), so the stock side is the newest release.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from compat.differential import PairNode, send
from kwire.uuid import Uuid
from messages.generated.controller_registration_request import (
    ControllerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.unregister_controller_request import UnregisterControllerRequest
from messages.generated.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from messages.runtime import Message

pytestmark = pytest.mark.compat

REGISTRATION_TIMEOUT_S = 60.0


def _features(version: int, *updates: tuple[str, int, int], validate_only: bool = False) -> UpdateFeaturesRequest:
    keys = []
    for name, level, upgrade_type in updates:
        key = FeatureUpdateKey(feature=name, max_version_level=level)
        if version == 0:
            key.allow_downgrade = upgrade_type != 1
        else:
            key.upgrade_type = upgrade_type
        keys.append(key)
    return UpdateFeaturesRequest(timeout_ms=30_000, feature_updates=keys, validate_only=validate_only)


def _update_cases() -> list[tuple[str, Message, int]]:
    """Each case at v0, v1 and v2 (v0 has no UpgradeType: AllowDowngrade stands in for it)."""
    cases: list[tuple[str, Message, int]] = []
    for v in range(3):
        validate = v >= 1  # v0 has no ValidateOnly: its accepted cases change nothing anyway
        cases += [
            (f"v{v} group.version=9", _features(v, ("group.version", 9, 1)), v),
            (f"v{v} unknown feature", _features(v, ("no.such.feature", 1, 1)), v),
            (f"v{v} unknown feature to 0", _features(v, ("no.such.feature", 0, 1)), v),
            (f"v{v} negative level", _features(v, ("group.version", -1, 1)), v),
            (f"v{v} metadata.version down, upgrade type", _features(v, ("metadata.version", 7, 1)), v),
            (f"v{v} metadata.version down, unsafe", _features(v, ("metadata.version", 7, 3)), v),
            (f"v{v} metadata.version down, safe", _features(v, ("metadata.version", 21, 2), validate_only=validate), v),
            (f"v{v} metadata.version unchanged", _features(v, ("metadata.version", 33, 1), validate_only=validate), v),
            (f"v{v} group.version safe down to 0", _features(v, ("group.version", 0, 2), validate_only=validate), v),
            (f"v{v} one bad of two", _features(v, ("group.version", 0, 2), ("group.version.x", 1, 1)), v),
            (f"v{v} kraft.version=2", _features(v, ("kraft.version", 2, 1)), v),
            (f"v{v} kraft.version already 1", _features(v, ("kraft.version", 1, 1)), v),
            (f"v{v} kraft.version down to 0", _features(v, ("kraft.version", 0, 2)), v),
        ]
        if v >= 1:
            cases += [
                (f"v{v} unknown upgrade type", _features(v, ("group.version", 1, 7)), v),
                (f"v{v} upgrade to a lower level", _features(v, ("transaction.version", 0, 1)), v),
                (f"v{v} downgrade to a newer level", _features(v, ("group.version", 1, 2)), v),
                # downgrades: where Kafka refuses them and with which text. A request is checked
                # in the HashMap order of its updates, so of two bad updates the one Kafka
                # names does not depend on the request's order
                (f"v{v} two bad updates", _features(v, ("transaction.version", 0, 1), ("group.version", 2, 1)), v),
                (f"v{v} two bad updates, reversed", _features(v, ("group.version", 2, 1), ("transaction.version", 0, 1)), v),
                (f"v{v} metadata.version down one level, safe", _features(v, ("metadata.version", 32, 2)), v),
                (f"v{v} metadata.version down one level, unsafe", _features(v, ("metadata.version", 32, 3)), v),
                (f"v{v} metadata.version down below ELR's dependency, ELR kept",
                 _features(v, ("eligible.leader.replicas.version", 1, 1), ("metadata.version", 22, 2)), v),
                (f"v{v} group.version down to 0 and metadata.version down",
                 _features(v, ("group.version", 0, 2), ("metadata.version", 22, 2)), v),
                (f"v{v} eligible.leader.replicas.version safe down to 0",
                 _features(v, ("eligible.leader.replicas.version", 0, 2), validate_only=True), v),
                (f"v{v} transaction.version unsafe down to 1", _features(v, ("transaction.version", 1, 3), validate_only=True), v),
                (f"v{v} transaction.version and group.version down", _features(
                    v, ("transaction.version", 0, 2), ("group.version", 0, 2), validate_only=True), v),
                (f"v{v} kraft.version unsafe down to 0", _features(v, ("kraft.version", 0, 3)), v),
                (f"v{v} one feature twice, the second bad", _features(
                    v, ("group.version", 0, 2), ("group.version", 2, 1), validate_only=True), v),
                (f"v{v} one feature twice, the first bad", _features(
                    v, ("group.version", 2, 1), ("group.version", 0, 2), validate_only=True), v),
            ]
    return cases


def _normalize(response: Any) -> tuple[Any, ...]:
    results = sorted((r.feature, int(r.error_code), r.error_message) for r in getattr(response, "results", []))
    return int(response.error_code), response.error_message, results


def _registration(controller_id: int, port: int) -> ControllerRegistrationRequest:
    return ControllerRegistrationRequest(
        controller_id=controller_id,
        incarnation_id=Uuid.from_longs(0x5151, controller_id),
        zk_migration_ready=False,
        listeners=[Listener(name="CONTROLLER", host="elsewhere", port=port, security_protocol=0)],
        features=[Feature(name="kraft.version", min_supported_version=0, max_supported_version=1)],
    )


def _cluster(response: Any, ports: dict[int, int]) -> tuple[Any, ...]:
    """DescribeCluster with each node's own port written as "own"."""
    brokers = sorted(
        (b.broker_id, b.host, "own" if b.port in ports.values() else b.port)
        for b in response.brokers
    )
    return int(response.error_code), response.controller_id, brokers


def test_update_features_and_registrations_answer_alike(newest_leader_pair: dict[str, PairNode]) -> None:
    ports = {name: node.port for name, node in newest_leader_pair.items()}
    # both nodes register themselves (KIP-919) before DescribeCluster lists them
    for name, port in ports.items():
        _wait_registered(port, name)
    differences: list[str] = []
    cases = _update_cases()
    assert len(cases) >= 40
    for case, body, version in cases:
        answers = {name: _normalize(trio.run(send, port, body, version)) for name, port in ports.items()}
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    # another controller registers; both list it next to themselves
    registered = {name: trio.run(send, port, _registration(9, 19093), 0) for name, port in ports.items()}
    assert registered["stock"].error_code == 0, registered
    if registered["stock"] != registered["kwire"]:
        differences.append(f"ControllerRegistration:\n    stock {registered['stock']}\n    kwire {registered['kwire']}")
    listed = {}
    for name, port in ports.items():
        listed[name] = _wait_listed(port, 9)
    if listed["stock"] != listed["kwire"]:
        differences.append(f"DescribeCluster after a registration:\n    stock {listed['stock']}\n    kwire {listed['kwire']}")
    # it unregisters; again, and one never registered, are refused alike
    for case, controller_id in (("registered", 9), ("already unregistered", 9), ("never registered", 42)):
        answers = {name: trio.run(send, port, UnregisterControllerRequest(controller_id=controller_id), 0) for name, port in ports.items()}
        if case == "registered":
            assert answers["stock"].error_code == 0, answers
            for port in ports.values():
                _wait_unlisted(port, controller_id)
        if answers["stock"] != answers["kwire"]:
            differences.append(f"UnregisterController, {case}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    for name, node in newest_leader_pair.items():
        assert node.proc.poll() is None, f"{name} died"
    assert not differences, f"{len(differences)} cases differ:\n" + "\n".join(differences)


def _wait_registered(port: int, name: str) -> None:
    """Until DescribeCluster lists node 1 itself."""
    deadline = time.monotonic() + REGISTRATION_TIMEOUT_S
    while True:
        response = trio.run(send, port, DescribeClusterRequest(endpoint_type=2), 1)
        if not isinstance(response, str) and any(b.broker_id == 1 for b in response.brokers):
            return
        assert time.monotonic() < deadline, f"{name} did not register itself: {response}"
        time.sleep(0.2)  # poll interval


def _wait_listed(port: int, controller_id: int) -> tuple[Any, ...]:
    deadline = time.monotonic() + REGISTRATION_TIMEOUT_S
    while True:
        response = trio.run(send, port, DescribeClusterRequest(endpoint_type=2), 1)
        if any(b.broker_id == controller_id for b in response.brokers):
            return _cluster(response, {1: port})
        assert time.monotonic() < deadline, f"controller {controller_id} not listed: {response}"
        time.sleep(0.2)  # poll interval


def _wait_unlisted(port: int, controller_id: int) -> None:
    deadline = time.monotonic() + REGISTRATION_TIMEOUT_S
    while True:
        response = trio.run(send, port, DescribeClusterRequest(endpoint_type=2), 1)
        if all(b.broker_id != controller_id for b in response.brokers):
            return
        assert time.monotonic() < deadline, f"controller {controller_id} still listed: {response}"
        time.sleep(0.2)  # poll interval
