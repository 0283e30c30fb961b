"""Formatting log directories, as ``kafka-storage format`` does, and checking them at start-up.

Mirrors ``org.apache.kafka.metadata.storage.Formatter``, ``MetaPropertiesEnsemble`` (loading
and verifying every directory's meta.properties) and ``raft.DynamicVoter(s)`` (the
``--initial-controllers`` syntax). What formatting writes into each directory that has no
meta.properties yet (``log.dirs`` plus ``metadata.log.dir``)::

    <dir>/bootstrap.checkpoint        storage.bootstrap: metadata.version, then every other
                                      feature at a level > 0 (given, else the release
                                      version's default), sorted by name
    <dir>/meta.properties             version=1, cluster.id, node.id, directory.id
    and, in the metadata log directory of a dynamic quorum (--standalone / --initial-controllers):
    <dir>/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint
                                      [SnapshotHeader(now), KRaftVersion(1), Voters] [SnapshotFooter]

Directory types and the line printed for each (``Formatter.DirectoryType``)::

    data directory                      a log.dirs entry other than metadata.log.dir
    metadata directory                  metadata.log.dir, static quorum (--no-initial-controllers
                                        or controller.quorum.voters)
    dynamic metadata voter directory    metadata.log.dir of a node in the initial voters; its
                                        directory.id is the one given for that voter
    dynamic metadata directory          metadata.log.dir of a node outside the initial voters

kraft.version is 1 with initial voters, 0 without; it never appears in bootstrap.checkpoint.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kwire.topics import METADATA_PARTITION_DIR
from kwire.uuid import Uuid
from messages.generated.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from storage.bootstrap import bootstrap_records, write_bootstrap_checkpoint
from storage.errors import FormatError, KafkaStorageError
from storage.features import (
    DEFAULT_RELEASE_VERSION,
    FEATURES,
    KRAFT_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
    MINIMUM_BOOTSTRAP_VERSION,
    MetadataVersion,
    default_feature_level,
    metadata_version_from_level,
    validate_feature_levels,
)
from storage.fileio import fsync_dir, io_errors
from storage.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    generate_directory_id,
    is_reserved_directory_id,
    read_meta_properties,
    write_meta_properties,
)
from storage.scram_args import ScramArgumentError, parse_scram_argument
from storage.snapshots import BOOTSTRAP_SNAPSHOT_ID, write_snapshot

SUPPORTED_FEATURES = tuple(sorted(FEATURES))
"""Features other than metadata.version that formatting accepts (``Feature.PRODUCTION_FEATURES``
of Kafka 4.4), sorted by name as Kafka lists them in its error message."""


# ---------------------------------------------------------------------------------------------
# --initial-controllers


@dataclass(frozen=True, slots=True)
class DynamicVoter:
    """One ``id@host:port:directoryId`` entry (``DynamicVoter``); IPv6 hosts in brackets."""

    node_id: int
    host: str
    port: int
    directory_id: Uuid

    @classmethod
    def parse(cls, text: str) -> DynamicVoter:
        """Raises FormatError with Kafka's messages."""
        rest = text.strip()
        at = rest.find("@")
        if at < 0:
            raise FormatError("No @ found in dynamic voter string.")
        if at == 0:
            raise FormatError("Invalid @ at beginning of dynamic voter string.")
        try:
            node_id = int(rest[:at], 10)
        except ValueError:
            raise FormatError("Failed to parse node id in dynamic voter string.") from None
        if node_id < 0:
            raise FormatError(f"Invalid negative node id {node_id} in dynamic voter string.")
        rest = rest[at + 1 :]
        if not rest:
            raise FormatError("No hostname found after node id.")
        if rest.startswith("["):
            end = rest.find("]")
            if end < 0:
                raise FormatError("Hostname began with left bracket, but no right bracket was found.")
            host, rest = rest[1:end], rest[end + 1 :]
        else:
            colon = rest.find(":")
            if colon < 0:
                raise FormatError("No colon following hostname could be found.")
            host, rest = rest[:colon], rest[colon:]
        if not rest.startswith(":"):
            raise FormatError("Port section must start with a colon.")
        rest = rest[1:]
        colon = rest.find(":")
        if colon < 0:
            raise FormatError("No colon following port could be found.")
        try:
            port = int(rest[:colon], 10)
        except ValueError:
            raise FormatError("Failed to parse port in dynamic voter string.") from None
        if not 0 <= port <= 65535:
            raise FormatError(f"Invalid port {port} in dynamic voter string.")
        try:
            directory_id = Uuid.from_string(rest[colon + 1 :])
        except ValueError:
            raise FormatError("Failed to parse directory ID in dynamic voter string.") from None
        return cls(node_id, host, port, directory_id)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}:{self.directory_id}"


def parse_dynamic_voters(text: str) -> list[DynamicVoter]:
    """A comma-separated list (``DynamicVoters.parse``). Raises FormatError for a syntax
    error, an empty list or a node id given twice."""
    voters: list[DynamicVoter] = []
    seen: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        voter = DynamicVoter.parse(part)
        if voter.node_id in seen:
            raise FormatError(f"Node id {voter.node_id} was specified more than once.")
        seen.add(voter.node_id)
        voters.append(voter)
    if not voters:
        raise FormatError("No voters given.")
    return voters


def voters_record(voters: Sequence[DynamicVoter], controller_listener_name: str) -> VotersRecord:
    """The VotersRecord of an initial voter set (``DynamicVoters.toVoterSet`` +
    ``VoterSet.toVotersRecord``): by node id, one endpoint named after the controller listener
    (upper-cased, ``ListenerName.normalised``), kraft.version support [0, 1]."""
    return VotersRecord(
        voters=[
            Voter(
                voter_id=v.node_id,
                voter_directory_id=v.directory_id,
                endpoints=[Endpoint(name=controller_listener_name.upper(), host=v.host, port=v.port)],
                kraft_version_feature=KRaftVersionFeature(min_supported_version=0, max_supported_version=1),
            )
            for v in sorted(voters, key=lambda v: v.node_id)
        ]
    )


# ---------------------------------------------------------------------------------------------
# the ensemble of meta.properties files


@dataclass(slots=True)
class MetaPropertiesEnsemble:
    """Every directory's meta.properties state (``MetaPropertiesEnsemble``): ``empty`` holds the
    directories without the file, ``errors`` maps each unreadable or malformed one to its
    message, ``props`` maps the rest to their contents; directories are paths as given."""

    empty: set[str] = field(default_factory=set)
    errors: dict[str, str] = field(default_factory=dict)
    props: dict[str, MetaProperties] = field(default_factory=dict)
    metadata_log_dir: str | None = None

    @classmethod
    def load(cls, directories: Sequence[str], metadata_log_dir: str | None = None) -> MetaPropertiesEnsemble:
        """Read ``meta.properties`` in each directory (duplicates once, in sorted order;
        ``MetaPropertiesEnsemble.Loader.load``). A FormatError or KafkaStorageError from one
        directory is recorded in ``errors``, not raised. Raises FormatError when
        ``directories`` is empty."""
        if not directories:
            raise FormatError("You must specify at least one log directory.")
        ensemble = cls(metadata_log_dir=metadata_log_dir)
        for directory in sorted(set(directories)):
            try:
                meta = read_meta_properties(directory)
            except (FormatError, KafkaStorageError) as exc:
                ensemble.errors[directory] = str(exc)
                continue
            if meta is None:
                ensemble.empty.add(directory)
            else:
                ensemble.props[directory] = meta
        return ensemble

    @property
    def cluster_id(self) -> str | None:
        """The cluster.id of the first directory, in sorted order, whose file has one; None
        when none has."""
        for meta in self.props.values():
            if meta.cluster_id is not None:
                return meta.cluster_id
        return None

    def verify(
        self,
        expected_cluster_id: str | None,
        expected_node_id: int | None,
        *,
        require_at_least_one_valid: bool = False,
        require_metadata_log_dir: bool = False,
    ) -> None:
        """Check the loaded files agree (``MetaPropertiesEnsemble.verify``): one cluster.id and one
        node id (the expected ones when given, else the first found), v1 files carrying both,
        directory ids neither reserved nor repeated, the metadata log directory (if set) not
        among ``errors``; optionally at least one readable file and a metadata log directory
        set. Raises FormatError with Kafka's message for the first violation."""
        if require_at_least_one_valid and not self.props:
            raise FormatError("No readable meta.properties files found.")
        seen: dict[Uuid, str] = {}
        for directory, meta in sorted(self.props.items()):
            path = os.path.join(directory, META_PROPERTIES_FILE)
            if meta.cluster_id is None:
                if meta.version == 1:
                    raise FormatError(f"cluster.id was not specified in the v1 file: {path}")
            elif expected_cluster_id is None:
                expected_cluster_id = meta.cluster_id
            elif meta.cluster_id != expected_cluster_id:
                raise FormatError(
                    f"Invalid cluster.id in: {path}. Expected {expected_cluster_id}, but read {meta.cluster_id}"
                )
            if meta.node_id is None:
                if meta.version == 1:
                    raise FormatError(f"node.id was not specified in {path}")
            elif expected_node_id is None:
                expected_node_id = meta.node_id
            elif meta.node_id != expected_node_id:
                raise FormatError(
                    f"Stored node id {meta.node_id} doesn't match previous node id {expected_node_id} "
                    f"in {path}. If you moved your data, make sure your configured node id matches. If "
                    "you intend to create a new node, you should remove all data in your data directories."
                )
            if meta.directory_id is not None:
                if is_reserved_directory_id(meta.directory_id):
                    raise FormatError(f"Invalid reserved directory ID {meta.directory_id} found in {directory}")
                previous = seen.get(meta.directory_id)
                if previous is not None:
                    raise FormatError(
                        f"Duplicate directory ID {meta.directory_id} found. It was the ID of {previous}, "
                        f"but also of {directory}"
                    )
                seen[meta.directory_id] = directory
        if require_metadata_log_dir and self.metadata_log_dir is None:
            raise FormatError("No metadata log directory was specified.")
        if self.metadata_log_dir is not None and self.metadata_log_dir in self.errors:
            raise FormatError(
                f"Encountered I/O error in metadata log directory {self.metadata_log_dir}. Cannot continue."
            )


def check_formatted(
    metadata_log_dir: str, node_id: int, log_dirs: Sequence[str] = ()
) -> MetaProperties:
    """What a node checks before it starts (``KafkaRaftServer.initializeLogDirs``): every
    directory readable and consistent, formatted for this node, the metadata log directory
    among them with a directory id. Returns the metadata log directory's properties.

    Raises FormatError, e.g. for an unformatted directory or another node's data."""
    directories = sorted({*log_dirs, metadata_log_dir})
    ensemble = MetaPropertiesEnsemble.load(directories, metadata_log_dir)
    if metadata_log_dir in ensemble.empty:
        raise FormatError(
            f"No meta.properties found in the metadata log directory {metadata_log_dir} (have you "
            "run `kwire storage format` to format the directory?)"
        )
    ensemble.verify(None, node_id, require_at_least_one_valid=True, require_metadata_log_dir=True)
    if ensemble.empty:
        raise FormatError(
            f"No meta.properties found in {sorted(ensemble.empty)[0]} (have you run `kwire storage "
            "format` to format the directory?)"
        )
    meta = ensemble.props[metadata_log_dir]  # not empty, and verify() refused an error
    if meta.version != 1:
        raise FormatError(
            f"The metadata log directory {metadata_log_dir} is formatted for a legacy (ZooKeeper) "
            "cluster, not for KRaft."
        )
    if meta.directory_id is None:
        raise FormatError(f"meta.properties in {metadata_log_dir} has no directory.id")
    return meta


# ---------------------------------------------------------------------------------------------
# formatting


class DirectoryType(enum.Enum):
    """The kind of a directory being formatted (``Formatter.DirectoryType``); each value is the
    description printed in ``Formatting <description> <dir> with metadata.version <mv>.``"""

    LOG_DIRECTORY = "data directory"
    STATIC_METADATA_DIRECTORY = "metadata directory"
    DYNAMIC_METADATA_NON_VOTER_DIRECTORY = "dynamic metadata directory"
    DYNAMIC_METADATA_VOTER_DIRECTORY = "dynamic metadata voter directory"

    @property
    def is_dynamic_metadata_directory(self) -> bool:
        """True for the two metadata-log-directory types of a dynamic (KIP-853) quorum, which
        also get the bootstrap snapshot ``00000000000000000000-0000000000.checkpoint``."""
        return self in (
            DirectoryType.DYNAMIC_METADATA_NON_VOTER_DIRECTORY,
            DirectoryType.DYNAMIC_METADATA_VOTER_DIRECTORY,
        )


@dataclass(frozen=True, slots=True)
class FormatResult:
    """What was written: per formatted directory its type and meta.properties; the
    kraft.version in effect; the metadata.version bootstrapped; the lines printed."""

    formatted: dict[str, tuple[DirectoryType, MetaProperties]]
    kraft_version: int
    metadata_version: MetadataVersion
    lines: list[str]


def _effective_kraft_version(features: Mapping[str, int], dynamic: bool) -> int:
    configured = features.get(KRAFT_VERSION_FEATURE)
    if configured is None:
        return 1 if dynamic else 0
    if configured == 0 and dynamic:
        raise FormatError(
            "Cannot set kraft.version to 0 if KIP-853 configuration is present. Try removing the "
            "--feature flag for kraft.version."
        )
    if configured != 0 and not dynamic:
        raise FormatError(
            f"Cannot set kraft.version to {configured} unless KIP-853 configuration is present. "
            "Try removing the --feature flag for kraft.version."
        )
    return configured


SCRAM_LEVEL = 11
"""metadata.version 3.5-IV2, the first whose bootstrap may hold SCRAM credentials."""


def format_directories(
    *,
    cluster_id: str | None,
    node_id: int,
    directories: Sequence[str],
    metadata_log_dir: str | None,
    controller_listener_name: str | None,
    release_version: MetadataVersion | None = None,
    features: Mapping[str, int] | None = None,
    add_scram: Sequence[str] = (),
    initial_controllers: Sequence[DynamicVoter] | None = None,
    ignore_formatted: bool = False,
    unstable_feature_versions: bool = False,
    now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    out: Callable[[str], None] = print,
) -> FormatResult:
    """Format every directory that has no meta.properties (``Formatter.run``).

    ``directories`` are ``log.dirs`` plus ``metadata.log.dir``; ``initial_controllers`` is the
    parsed ``--initial-controllers`` (or the single voter ``--standalone`` makes);
    ``add_scram`` the ``--add-scram`` arguments (``storage.scram_args``), whose credentials
    follow the feature levels in the bootstrap records. Raises
    FormatError with Kafka's messages -- a missing argument, an unsupported version or feature,
    an already formatted directory without ``ignore_formatted``, directories of another cluster
    or node -- and KafkaStorageError when writing fails."""
    if node_id < 0:
        raise FormatError("You must specify a valid non-negative node ID.")
    if cluster_id is None:
        raise FormatError("You must specify the cluster id.")
    dirs = sorted(set(directories))
    if not dirs:
        raise FormatError("You must specify at least one directory to format")
    if controller_listener_name is None:
        raise FormatError("You must specify the name of the initial controller listener.")
    if metadata_log_dir is None:
        raise FormatError("You must specify the metadata log directory.")
    if metadata_log_dir not in dirs:
        raise FormatError(
            f"The specified metadata log directory, {metadata_log_dir} was not one of the given "
            f"directories: [{', '.join(dirs)}]"
        )
    levels = dict(features or {})
    if METADATA_VERSION_FEATURE in levels:
        if release_version is not None:
            raise FormatError(
                "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."
            )
        try:
            release_version = metadata_version_from_level(levels.pop(METADATA_VERSION_FEATURE))
        except ValueError as exc:
            raise FormatError(str(exc)) from None
    release = release_version or DEFAULT_RELEASE_VERSION
    if release.level < MINIMUM_BOOTSTRAP_VERSION.level:
        raise FormatError(f"metadata.version {release} is too old to be supported.")
    if not release.production and not unstable_feature_versions:
        raise FormatError(f"metadata.version {release} is not yet stable.")
    for name in levels:
        if name not in SUPPORTED_FEATURES:
            raise FormatError(
                f"Unsupported feature: {name}. Supported features are: {', '.join(SUPPORTED_FEATURES)}"
            )
        if levels[name] < 0:
            raise FormatError(f"Invalid level {levels[name]} for feature {name}")
    voters = list(initial_controllers) if initial_controllers else None
    kraft_version = _effective_kraft_version(levels, voters is not None)
    # Formatter.calculateEffectiveFeatureLevels: the release version's default for every
    # feature not given, then every level checked with the full map (cross-feature dependencies)
    effective = {name: levels.get(name, default_feature_level(name, release)) for name in SUPPORTED_FEATURES}
    effective[KRAFT_VERSION_FEATURE] = kraft_version
    effective[METADATA_VERSION_FEATURE] = release.level
    try:
        validate_feature_levels(effective)
    except ValueError as exc:
        raise FormatError(str(exc)) from None
    records = bootstrap_records(release, effective)
    if add_scram:
        if release.level < SCRAM_LEVEL:
            raise FormatError("SCRAM is only supported in metadata.version 3.5-IV2 or later.")
        try:
            records += [(parse_scram_argument(argument), 0) for argument in add_scram]
        except ScramArgumentError as exc:
            raise FormatError(str(exc)) from None

    ensemble = MetaPropertiesEnsemble.load(dirs, metadata_log_dir)
    ensemble.verify(cluster_id, node_id)
    if ensemble.props and not ignore_formatted:
        first = sorted(ensemble.props)[0]
        raise FormatError(
            f"Log directory {first} is already formatted. Use --ignore-formatted to ignore this "
            "directory and format the others."
        )
    lines: list[str] = []

    def emit(line: str) -> None:
        lines.append(line)
        out(line)

    for directory in sorted(ensemble.errors):
        emit(f"I/O error trying to read log directory {directory}. Ignoring...")
    if ensemble.errors and not ensemble.empty and not ensemble.props:
        raise FormatError("No available log directories to format.")
    formatted: dict[str, tuple[DirectoryType, MetaProperties]] = {}
    if not ensemble.empty:
        emit("All of the log directories are already formatted.")
        return FormatResult(formatted, kraft_version, release, lines)
    taken = {m.directory_id for m in ensemble.props.values() if m.directory_id is not None}
    by_id = {v.node_id: v for v in voters or []}
    for directory in sorted(ensemble.empty):
        if directory != metadata_log_dir:
            dtype = DirectoryType.LOG_DIRECTORY
        elif voters is None:
            dtype = DirectoryType.STATIC_METADATA_DIRECTORY
        elif node_id in by_id:
            dtype = DirectoryType.DYNAMIC_METADATA_VOTER_DIRECTORY
        else:
            dtype = DirectoryType.DYNAMIC_METADATA_NON_VOTER_DIRECTORY
        if dtype is DirectoryType.DYNAMIC_METADATA_VOTER_DIRECTORY:
            directory_id = by_id[node_id].directory_id
        else:
            directory_id = generate_directory_id(taken)
        taken.add(directory_id)
        formatted[directory] = (dtype, MetaProperties(1, cluster_id, node_id, directory_id))
    for directory, (dtype, meta) in formatted.items():
        emit(f"Formatting {dtype.value} {directory} with {METADATA_VERSION_FEATURE} {release}.")
        path = Path(directory)
        with io_errors(f"creating {directory}"):
            path.mkdir(parents=True, exist_ok=True)
        fsync_dir(path.parent if path.parent != path else path)
        now = now_ms()
        write_bootstrap_checkpoint(path, records, now)
        if dtype.is_dynamic_metadata_directory:
            assert voters is not None
            partition_dir = path / METADATA_PARTITION_DIR
            with io_errors(f"creating {partition_dir}"):
                partition_dir.mkdir(exist_ok=True)
            fsync_dir(path)
            write_snapshot(
                partition_dir,
                BOOTSTRAP_SNAPSHOT_ID,
                last_contained_log_timestamp=now,
                records=[],
                append_time_ms=now,
                kraft_version=kraft_version,
                voters=voters_record(voters, controller_listener_name),
            )
        write_meta_properties(path, meta)
    return FormatResult(formatted, kraft_version, release, lines)
