"""The feature tables of a KRaft cluster: every ``MetadataVersion`` with a feature level, the
other features Kafka finalizes (``org.apache.kafka.server.common.Feature``) with their levels
and dependencies, and the checks ``kafka-storage format`` and ``UpdateFeatures`` run on them.

Pure data and functions, no I/O: the sans-IO controller (``server.controller``) reads them as
much as ``storage.bootstrap`` and ``kafka-storage format`` do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

METADATA_VERSION_FEATURE = "metadata.version"
KRAFT_VERSION_FEATURE = "kraft.version"


@dataclass(frozen=True, slots=True)
class MetadataVersion:
    """One ``MetadataVersion``: its feature level, its ``<release>-IV<n>`` name, and whether it
    is production-ready (at or below ``LATEST_PRODUCTION``)."""

    level: int
    release: str
    iv: int
    production: bool

    @property
    def name(self) -> str:
        """The ``<release>-IV<n>`` form, e.g. ``3.9-IV0`` (``MetadataVersion.version()``)."""
        return f"{self.release}-IV{self.iv}"

    def __str__(self) -> str:
        return self.name


# (level, release, IV) of every ``MetadataVersion`` with a feature level: 3.0-IV1 .. 3.3-IV2 as
# Kafka 3.9 has them (4.x starts at MINIMUM_VERSION 3.3-IV3, level 7), the rest as Kafka 4.4.0's
# enum has them. Production is 4.4.0's verdict: LATEST_PRODUCTION = 4.4-IV2 (level 33), 4.5-IV0
# unstable (Kafka 3.9.2 stops at 4.0-IV1 and its LATEST_PRODUCTION is 3.9-IV0, level 21).
# compat/test_storage_interop.py compares this table with every pinned release's jar.
_LATEST_PRODUCTION_LEVEL = 33
METADATA_VERSIONS: tuple[MetadataVersion, ...] = tuple(
    MetadataVersion(level, release, iv, level <= _LATEST_PRODUCTION_LEVEL)
    for level, release, iv in (
        (1, "3.0", 1), (2, "3.1", 0), (3, "3.2", 0),
        (4, "3.3", 0), (5, "3.3", 1), (6, "3.3", 2), (7, "3.3", 3),
        (8, "3.4", 0), (9, "3.5", 0), (10, "3.5", 1), (11, "3.5", 2),
        (12, "3.6", 0), (13, "3.6", 1), (14, "3.6", 2),
        (15, "3.7", 0), (16, "3.7", 1), (17, "3.7", 2), (18, "3.7", 3), (19, "3.7", 4),
        (20, "3.8", 0), (21, "3.9", 0),
        (22, "4.0", 0), (23, "4.0", 1), (24, "4.0", 2), (25, "4.0", 3),
        (26, "4.1", 0), (27, "4.1", 1), (28, "4.2", 0), (29, "4.2", 1), (30, "4.3", 0),
        (31, "4.4", 0), (32, "4.4", 1), (33, "4.4", 2), (34, "4.5", 0),
    )
)
MINIMUM_BOOTSTRAP_VERSION = METADATA_VERSIONS[3]  # 3.3-IV0 (MetadataVersion.MINIMUM_BOOTSTRAP_VERSION)
DEFAULT_RELEASE_VERSION = METADATA_VERSIONS[20]  # 3.9-IV0: KIP-853 dynamic quorums, no 4.x features
_BY_LEVEL = {mv.level: mv for mv in METADATA_VERSIONS}
LATEST_PRODUCTION = _BY_LEVEL[_LATEST_PRODUCTION_LEVEL]
_VERSION_TEXT = re.compile(r"^(\d+\.\d+)(?:-IV(\d+))?$")


_METADATA_CHANGED_LEVELS = frozenset({7, 8, 11, 13, 14, 15, 17, 23, 30, 32, 33})
"""metadata.version levels whose records differ from the level below
(``MetadataVersion.didMetadataChange`` in Kafka 4.4.0, which starts at level 7)."""


def metadata_changed_between(low: int, high: int) -> bool:
    """Whether a level in ``(low, high]`` changed the metadata records
    (``MetadataVersion.checkIfMetadataChanged``): a downgrade from ``high`` to ``low`` could
    then lose metadata."""
    return any(low < level <= high for level in _METADATA_CHANGED_LEVELS)


def metadata_version_from_level(level: int) -> MetadataVersion:
    """The MetadataVersion with feature level ``level`` (``MetadataVersion.fromFeatureLevel``).
    Raises ValueError for a level kwire does not know."""
    try:
        return _BY_LEVEL[level]
    except KeyError:
        raise ValueError(f"No MetadataVersion with feature level {level}") from None


def metadata_version_from_string(text: str) -> MetadataVersion:
    """``"3.9"`` (the release's last IV) or ``"3.7-IV2"`` (``MetadataVersion.fromVersionString``).
    Raises ValueError."""
    match = _VERSION_TEXT.match(text.strip())
    if match:
        release, iv = match.group(1), match.group(2)
        candidates = [mv for mv in METADATA_VERSIONS if mv.release == release]
        if iv is not None:
            candidates = [mv for mv in candidates if mv.iv == int(iv)]
        if candidates:
            return candidates[-1]
    raise ValueError(
        f"Unknown release version '{text}'. Supported versions are: "
        f"{MINIMUM_BOOTSTRAP_VERSION.name} to {_BY_LEVEL[_LATEST_PRODUCTION_LEVEL].name}"
    )


# ---------------------------------------------------------------------------------------------
# Features other than metadata.version (``org.apache.kafka.server.common.Feature`` and its
# ``FeatureVersion`` enums: KRaftVersion, TransactionVersion, GroupVersion,
# EligibleLeaderReplicasVersion, ShareVersion, StreamsVersion).


@dataclass(frozen=True, slots=True)
class FeatureVersion:
    """One level of a feature: the metadata.version level from which formatting picks it by
    default (``bootstrapMetadataVersion``) and the levels of other features it needs
    (``dependencies``)."""

    level: int
    bootstrap_metadata_level: int
    dependencies: tuple[tuple[str, int], ...] = ()


# Kafka 4.4.0's PRODUCTION_FEATURES, every level production-ready (latestProduction is each
# feature's highest level). Level 0 of each bootstraps at 4.4's MINIMUM_VERSION, 3.3-IV3 (7).
FEATURES: dict[str, tuple[FeatureVersion, ...]] = {
    "eligible.leader.replicas.version": (
        FeatureVersion(0, 7), FeatureVersion(1, 26, ((METADATA_VERSION_FEATURE, 23),)),
    ),
    "group.version": (FeatureVersion(0, 7), FeatureVersion(1, 22)),
    KRAFT_VERSION_FEATURE: (FeatureVersion(0, 7), FeatureVersion(1, 21)),
    "share.version": (FeatureVersion(0, 7), FeatureVersion(1, 28), FeatureVersion(2, 31)),
    "streams.version": (FeatureVersion(0, 7), FeatureVersion(1, 29)),
    "transaction.version": (FeatureVersion(0, 7), FeatureVersion(1, 24), FeatureVersion(2, 24)),
}
_MINIMUM_FEATURE_METADATA_LEVEL = 7  # MetadataVersion.MINIMUM_VERSION of Kafka 4.x (3.3-IV3)


def default_feature_level(name: str, metadata_version: MetadataVersion) -> int:
    """``Feature.defaultLevel(mv)``: the highest level of ``name`` whose bootstrap
    metadata.version is at or below ``metadata_version``; 0 when none is. Raises KeyError for
    an unknown feature."""
    level = 0
    for version in FEATURES[name]:
        if version.bootstrap_metadata_level <= metadata_version.level:
            level = version.level
    return level


def validate_feature_levels(levels: Mapping[str, int]) -> None:
    """``Feature.fromFeatureLevel`` + ``Feature.validateVersion`` for every feature of
    ``levels`` (which holds metadata.version too): each level exists and each dependency is met.
    Raises ValueError with Kafka's messages."""
    for name, level in sorted(levels.items()):
        if name != METADATA_VERSION_FEATURE:
            validate_feature_level(name, level, levels)


def validate_feature_level(name: str, level: int, levels: Mapping[str, int]) -> None:
    """``Feature.featureFromName(name).fromFeatureLevel(level)`` + ``Feature.validateVersion``
    against ``levels`` (name -> level, metadata.version among them): the feature and level
    exist, and the metadata.version and feature levels it depends on are met. Raises
    ValueError with Kafka's messages."""
    if name not in FEATURES:
        raise ValueError(f"Feature {name} not found.")
    version = next((v for v in FEATURES[name] if v.level == level), None)
    if version is None:
        raise ValueError(f"No feature:{name} with feature level {level}")
    metadata_level = levels.get(METADATA_VERSION_FEATURE)
    if level >= 1 and (metadata_level is None or metadata_level < _MINIMUM_FEATURE_METADATA_LEVEL):
        minimum = _BY_LEVEL[_MINIMUM_FEATURE_METADATA_LEVEL]
        raise ValueError(
            f"{name} could not be set to {level} because it depends on "
            f"{METADATA_VERSION_FEATURE}={minimum.level} ({minimum})"
        )
    for dependency, required in version.dependencies:
        if levels.get(dependency, 0) < required:
            raise ValueError(
                f"{name} could not be set to {level} because it depends on {dependency} level {required}"
            )
