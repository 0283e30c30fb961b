"""UpdateFeatures at the active controller (Kafka's ``FeatureControlManager.updateFeatures`` and
``QuorumController.updateFeatures``, Kafka 4.4).

:func:`update_features` checks a whole request and returns the records to append (one atomic
batch) or the first error, which fails every update of the request. The updates are taken in
the order Kafka iterates them: ``QuorumController.updateFeatures`` puts the request's updates
into a ``java.util.HashMap``, so the order is that map's (bucket, then request order), not the
request's; it decides which refusal a request with several bad updates gets and the order of the
records of one that passes. Per feature, in order:

1. UpgradeType unknown -> INVALID_UPDATE_VERSION "The controller does not support the given
   upgrade type."
2. level < 0 -> INVALID_UPDATE_VERSION "A feature version cannot be less than 0."
3. Not supported by this controller, by a registered broker, or (metadata.version 3.7-IV0 and
   later, KIP-919) by every registered controller, or a static voter id without a registration
   -> INVALID_UPDATE_VERSION with the reason.
4. A lower level with UpgradeType UPGRADE, or a higher one with a downgrade type ->
   INVALID_UPDATE_VERSION.
5. metadata.version: a downgrade across a level that changed the metadata records ->
   INVALID_UPDATE_VERSION; else a FeatureLevelRecord.
6. kraft.version: an upgrade goes to the raft leader (``upgrade_kraft``, which raises
   :class:`ApiError` for its refusals) and a NoOpRecord is written; a downgrade to
   another level is refused.
7. Another feature: its level must exist and its dependencies hold against the levels this
   request leaves (``Feature.validateVersion``); a FeatureLevelRecord (level 0 removes it).

Messages carry Kafka's wording, prefixed "Invalid update version N for feature F." as
``invalidUpdateVersion`` builds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from kwire.errors import Errors
from messages.generated.api_versions_response import SupportedFeatureKey
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.no_op_record import NoOpRecord
from server.controller.errors import ApiError
from server.controller.java_order import java_hash_map_order
from server.controller.result import Record
from storage.features import (
    FEATURES,
    KRAFT_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
    METADATA_VERSIONS,
    metadata_changed_between,
    validate_feature_level,
)

__all__ = [
    "CONTROLLER_REGISTRATION_LEVEL",
    "CONTROLLER_UNREGISTRATION_LEVEL",
    "MAX_METADATA_VERSION_LEVEL",
    "ClusterSupport",
    "UpgradeType",
    "range_text",
    "supported_features",
    "update_features",
]

CONTROLLER_REGISTRATION_LEVEL = 15
"""metadata.version 3.7-IV0: controllers register (KIP-919) and answer DescribeCluster
(``MetadataVersion.isControllerRegistrationSupported``)."""

CONTROLLER_UNREGISTRATION_LEVEL = 33
"""metadata.version 4.4-IV2: a controller's registration can be removed (UnregisterController,
UnregisterControllerRecord; ``MetadataVersion.isControllerUnregistrationSupported``)."""



MAX_METADATA_VERSION_LEVEL = max(mv.level for mv in METADATA_VERSIONS if mv.production)
"""The newest production metadata.version kwire can format a cluster with."""


def supported_features() -> list[SupportedFeatureKey]:
    """``BrokerFeatures.defaultSupportedFeatures``, sorted by name: metadata.version 1 up to
    the newest production level, and every feature ``kwire storage format`` can finalize
    (kraft.version, group, transaction, share, streams, eligible.leader.replicas) from 0 to its
    newest level, so a cluster formatted with them accepts this node. Only kraft.version changes
    what the quorum layer does; the others are levels the controller keeps, not behaviour of
    this node."""
    keys = [
        SupportedFeatureKey(name=name, min_version=0, max_version=max(v.level for v in versions))
        for name, versions in FEATURES.items()
    ]
    keys.append(
        SupportedFeatureKey(
            name=METADATA_VERSION_FEATURE, min_version=1, max_version=MAX_METADATA_VERSION_LEVEL
        )
    )
    return sorted(keys, key=lambda k: k.name)


class UpgradeType(IntEnum):
    """``FeatureUpdate.UpgradeType``: the UpgradeType field of UpdateFeatures v1+."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def of(cls, code: int) -> UpgradeType:
        """The type of ``code``; UNKNOWN for a code Kafka does not define."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


def range_text(low: int, high: int) -> str:
    """``VersionRange.toString``: ``"3"``, ``"1-4"``, or ``"1+"`` for an open range."""
    if low == high:
        return str(low)
    return f"{low}+" if high == 32767 else f"{low}-{high}"


def _not_supported(level: int, what: str, supported: tuple[int, int] | None) -> str | None:
    """``QuorumFeatures.reasonNotSupported``; ``supported`` None is the DISABLED range 0-0."""
    low, high = supported if supported is not None else (0, 0)
    if low <= level <= high:
        return None
    if high == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {range_text(low, high)}"


def _invalid(feature: str, level: int, message: str) -> ApiError:
    return ApiError(
        Errors.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {feature}. {message}"
    )


@dataclass(frozen=True, slots=True)
class ClusterSupport:
    """Who must support a new feature level, each as name -> (min, max) supported level: this
    controller (``node_id``, ``local``), every registered broker and every registered
    controller (by id); ``quorum_node_ids`` are the static voter ids
    (``controller.quorum.voters``; empty for a dynamic quorum), each of which must have
    registered from metadata.version 3.7-IV0 on (``QuorumFeatures.quorumNodeIds``)."""

    node_id: int
    local: Mapping[str, tuple[int, int]]
    brokers: Mapping[int, Mapping[str, tuple[int, int]]]
    controllers: Mapping[int, Mapping[str, tuple[int, int]]]
    quorum_node_ids: frozenset[int]


def update_features(
    updates: Mapping[str, tuple[int, UpgradeType]],
    *,
    finalized: Mapping[str, int],
    kraft_version: int,
    support: ClusterSupport,
    validate_only: bool,
    upgrade_kraft: Callable[[int, bool], None],
) -> list[Record]:
    """The records of an UpdateFeatures request (``feature name -> (level, upgrade type)``) on a
    controller whose finalized levels are ``finalized`` (metadata.version among them, level 0
    omitted), whose quorum is at ``kraft_version`` and whose cluster is ``support``; empty for
    ``validate_only``. ``upgrade_kraft(level, validate_only)`` asks the raft leader to move
    kraft.version up.

    Raises :class:`ApiError` (INVALID_UPDATE_VERSION, or what ``upgrade_kraft``
    raises) for the first update that fails, in ``java.util.HashMap`` order."""
    metadata_level = finalized[METADATA_VERSION_FEATURE]
    proposed = dict(finalized)
    for name, (level, _) in updates.items():
        proposed[name] = level
    records: list[Record] = []
    for name in java_hash_map_order(list(updates)):
        level, upgrade_type = updates[name]
        if upgrade_type == UpgradeType.UNKNOWN:
            raise _invalid(name, level, "The controller does not support the given upgrade type.")
        if name == KRAFT_VERSION_FEATURE:
            current = kraft_version
        else:
            current = finalized.get(name, 0)
        if level < 0:
            raise _invalid(name, level, "A feature version cannot be less than 0.")
        reason = _reason_not_supported(name, level, metadata_level, support)
        if reason is not None:
            raise _invalid(name, level, reason)
        if level < current and upgrade_type == UpgradeType.UPGRADE:
            raise _invalid(
                name, level,
                "Can't downgrade the version of this feature without setting the upgrade type to "
                "either safe or unsafe downgrade.",
            )
        if level > current and upgrade_type != UpgradeType.UPGRADE:
            raise _invalid(name, level, "Can't downgrade to a newer version.")
        if name == METADATA_VERSION_FEATURE:
            records.append(_metadata_version_record(metadata_level, level, upgrade_type))
        elif name == KRAFT_VERSION_FEATURE:
            if upgrade_type == UpgradeType.UPGRADE:
                upgrade_kraft(level, validate_only)
                records.append((NoOpRecord(), 0))
            elif level != current:
                raise _invalid(name, level, "Can't downgrade the version of this feature.")
        else:
            try:
                validate_feature_level(name, level, proposed)
            except ValueError as exc:
                raise _invalid(name, level, str(exc)) from None
            records.append((FeatureLevelRecord(name=name, feature_level=level), 0))
    return [] if validate_only else records


def _reason_not_supported(name: str, level: int, metadata_level: int, support: ClusterSupport) -> str | None:
    """``FeatureControlManager.reasonNotSupported``: this controller, every registered broker,
    then (3.7-IV0+) every other registered controller and every static voter id."""
    reason = _not_supported(level, f"Local controller {support.node_id}", support.local.get(name))
    if reason is not None:
        return reason
    for broker_id in sorted(support.brokers):
        reason = _not_supported(level, f"Broker {broker_id}", support.brokers[broker_id].get(name))
        if reason is not None:
            return reason
    if metadata_level < CONTROLLER_REGISTRATION_LEVEL:
        return None
    found = {support.node_id}
    for controller_id in sorted(support.controllers):
        if controller_id == support.node_id:
            continue
        reason = _not_supported(level, f"Controller {controller_id}", support.controllers[controller_id].get(name))
        if reason is not None:
            return reason
        found.add(controller_id)
    for voter_id in sorted(support.quorum_node_ids):
        if voter_id not in found:
            return f"controller {voter_id} has not registered, and may not support this feature"
    return None


def _metadata_version_record(current: int, level: int, upgrade_type: UpgradeType) -> Record:
    """``FeatureControlManager.updateMetadataVersion``, for a level this controller supports
    (checked before: every supported level is a known one)."""
    if level < current and metadata_changed_between(level, current):
        detail = (
            "Unsafe metadata downgrade is not supported in this version."
            if upgrade_type == UpgradeType.UNSAFE_DOWNGRADE
            else "Refusing to perform the requested downgrade because it might delete metadata information."
        )
        raise ApiError(
            Errors.INVALID_UPDATE_VERSION,
            f"Unsupported metadata.version downgrade from {current} to {level}. {detail}",
        )
    return FeatureLevelRecord(name=METADATA_VERSION_FEATURE, feature_level=level), 0

