"""UpdateFeatures at the active controller (``server.controller.features``), the cases of
Kafka's ``FeatureControlManagerTest`` that kwire's controller meets, and ControllerRegistration
(``ControlManagers.register_controller``)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.controller_registration_request import (
    ControllerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import encode_record
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.features import ClusterSupport, UpgradeType, update_features

LOCAL = {
    "metadata.version": (1, 33),
    "kraft.version": (0, 1),
    "group.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1),
    "transaction.version": (0, 2),
}


def _update(
    updates: Mapping[str, tuple[int, UpgradeType]],
    *,
    metadata_level: int = 21,
    kraft_version: int = 0,
    controllers: Mapping[int, Mapping[str, tuple[int, int]]] | None = None,
    quorum_node_ids: frozenset[int] = frozenset(),
    validate_only: bool = False,
    finalized: Mapping[str, int] | None = None,
) -> tuple[list[tuple[object, int]], list[tuple[int, bool]]]:
    kraft_calls: list[tuple[int, bool]] = []
    records = update_features(
        updates,
        finalized={"metadata.version": metadata_level, **(finalized or {})},
        kraft_version=kraft_version,
        support=ClusterSupport(
            node_id=1,
            local=LOCAL,
            brokers={},
            controllers=controllers if controllers is not None else {1: LOCAL, 2: LOCAL, 3: LOCAL},
            quorum_node_ids=quorum_node_ids,
        ),
        validate_only=validate_only,
        upgrade_kraft=lambda level, only: kraft_calls.append((level, only)),
    )
    return records, kraft_calls  # type: ignore[return-value]


def _refused(updates: Mapping[str, tuple[int, UpgradeType]], **kwargs: object) -> ApiError:
    with pytest.raises(ApiError) as caught:
        _update(updates, **kwargs)  # type: ignore[arg-type]
    assert caught.value.error == Errors.INVALID_UPDATE_VERSION
    return caught.value


def test_a_kraft_version_upgrade_goes_to_the_raft_leader_and_writes_a_no_op() -> None:
    records, calls = _update({"kraft.version": (1, UpgradeType.UPGRADE)})
    assert calls == [(1, False)]
    assert [type(r).__name__ for r, _ in records] == ["NoOpRecord"]
    records, calls = _update({"kraft.version": (1, UpgradeType.UPGRADE)}, validate_only=True)
    assert calls == [(1, True)] and records == []


def test_metadata_version_and_other_features_write_feature_level_records() -> None:
    records, calls = _update({"metadata.version": (22, UpgradeType.UPGRADE), "group.version": (1, UpgradeType.UPGRADE)})
    assert calls == []
    assert records == [
        (FeatureLevelRecord(name="metadata.version", feature_level=22), 0),
        (FeatureLevelRecord(name="group.version", feature_level=1), 0),
    ]


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        ({"kraft.version": (1, UpgradeType.UNKNOWN)}, "The controller does not support the given upgrade type."),
        ({"group.version": (-1, UpgradeType.UPGRADE)}, "A feature version cannot be less than 0."),
        ({"kraft.version": (2, UpgradeType.UPGRADE)}, "Local controller 1 only supports versions 0-1"),
        ({"share.version": (1, UpgradeType.UPGRADE)}, "Local controller 1 does not support this feature."),
        ({"metadata.version": (20, UpgradeType.UPGRADE)}, "Can't downgrade the version of this feature without setting"),
        ({"group.version": (1, UpgradeType.SAFE_DOWNGRADE)}, "Can't downgrade to a newer version."),
        ({"kraft.version": (0, UpgradeType.SAFE_DOWNGRADE)}, None),  # same level: nothing to do
        # ELR 1 needs metadata.version 23 (4.0-IV1)
        ({"eligible.leader.replicas.version": (1, UpgradeType.UPGRADE)}, "depends on metadata.version level 23"),
        # below 3.7-IV0 downgrading across a level that changed metadata would lose it
        ({"metadata.version": (14, UpgradeType.SAFE_DOWNGRADE)}, "Refusing to perform the requested downgrade"),
    ],
)
def test_refusals_name_the_feature_and_the_reason(updates: Mapping[str, tuple[int, UpgradeType]], message: str | None) -> None:
    if message is None:
        records, calls = _update(updates)
        assert records == [] and calls == []
        return
    error = _refused(updates)
    assert message in (error.message or ""), error.message
    name, (level, _) = next(iter(updates.items()))
    if name != "metadata.version" or "Refusing" not in message:
        assert (error.message or "").startswith(f"Invalid update version {level} for feature {name}. ")


def test_from_3_7_every_static_voter_must_have_registered_and_support_the_level() -> None:
    # KIP-919: controller registrations are how the active controller knows its peers' ranges
    error = _refused({"group.version": (1, UpgradeType.UPGRADE)}, controllers={1: LOCAL, 2: LOCAL}, quorum_node_ids=frozenset({1, 2, 3}))
    assert (error.message or "").endswith("controller 3 has not registered, and may not support this feature")
    old = {**LOCAL, "group.version": (0, 0)}
    error = _refused({"group.version": (1, UpgradeType.UPGRADE)}, controllers={1: LOCAL, 2: old, 3: LOCAL})
    assert (error.message or "").endswith("Controller 2 does not support this feature.")
    # before 3.7-IV0 nobody registers, so nothing is checked beyond this controller
    records, _ = _update({"metadata.version": (14, UpgradeType.UPGRADE)}, metadata_level=13, controllers={}, quorum_node_ids=frozenset({1, 2, 3}))
    assert records == [(FeatureLevelRecord(name="metadata.version", feature_level=14), 0)]


def test_one_refused_update_fails_the_whole_request() -> None:
    calls: list[tuple[int, bool]] = []
    with pytest.raises(ApiError):
        update_features(
            {"kraft.version": (1, UpgradeType.UPGRADE), "group.version": (5, UpgradeType.UPGRADE)},
            finalized={"metadata.version": 21},
            kraft_version=0,
            support=ClusterSupport(node_id=1, local=LOCAL, brokers={}, controllers={}, quorum_node_ids=frozenset()),
            validate_only=False,
            upgrade_kraft=lambda level, only: calls.append((level, only)),
        )


def test_controller_registrations_are_written_replayed_and_refused_before_3_7() -> None:
    controller = ControlManagers(bootstrap=())
    request = ControllerRegistrationRequest(
        controller_id=2,
        incarnation_id=Uuid.random(),
        zk_migration_ready=False,
        listeners=[Listener(name="CONTROLLER", host="h2", port=9093, security_protocol=0)],
        features=[Feature(name="kraft.version", min_supported_version=0, max_supported_version=1)],
    )
    controller.replay(encode_record(FeatureLevelRecord(name="metadata.version", feature_level=14), 0))
    with pytest.raises(ApiError) as caught:
        controller.register_controller(request)
    assert caught.value.error == Errors.UNSUPPORTED_VERSION
    controller.replay(encode_record(FeatureLevelRecord(name="metadata.version", feature_level=15), 0))
    [(record, version)] = controller.register_controller(request)
    assert version == 0
    controller.replay(encode_record(record, 0))  # type: ignore[arg-type]
    registration = controller.controllers[2]
    assert registration.incarnation_id == request.incarnation_id
    assert registration.endpoints == (("CONTROLLER", "h2", 9093, 0),)
    assert registration.features == {"kraft.version": (0, 1)}
    controller.replay(encode_record(NoOpRecord(), 0))
    assert 2 in controller.controllers
    controller.reset([])  # a snapshot without it
    assert controller.controllers == {}
