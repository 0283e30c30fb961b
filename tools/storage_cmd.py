"""``kwire storage``: format and inspect log directories, as ``kafka-storage.sh`` does.

Mirrors ``kafka.tools.StorageTool``::

    kwire storage random-uuid
    kwire storage format --config server.properties --cluster-id ID
                         [--standalone | --initial-controllers SPEC | --no-initial-controllers]
                         [--ignore-formatted] [--release-version 3.9] [--feature name=level ...]
    kwire storage info --config server.properties

``format`` writes ``meta.properties`` and ``bootstrap.checkpoint`` into every directory of
``log.dirs`` and ``metadata.log.dir`` that has none, and with ``--standalone`` or
``--initial-controllers`` the bootstrap voter snapshot (see :mod:`storage.format`). A controller
without ``controller.quorum.voters`` must be given one of the three quorum options. Errors are
printed on stderr with exit status 1, as the Kafka tool does.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from kwire.uuid import Uuid
from server.config import ConfigError, KRaftConfig, load_config
from storage.errors import FormatError, KafkaStorageError
from storage.features import MetadataVersion, metadata_version_from_string
from storage.format import DynamicVoter, format_directories, parse_dynamic_voters
from storage.meta_properties import META_PROPERTIES_FILE, read_meta_properties

__all__ = ["add_parser", "format_command", "info_command", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "storage",
        help="format and inspect metadata log directories",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="storage_command", metavar="SUBCOMMAND", required=True)

    info = commands.add_parser("info", help="Get information about the Kafka log directories on this node.")
    info.add_argument("--config", "-c", required=True, help="The Kafka configuration file to use.")

    fmt = commands.add_parser("format", help="Format the Kafka log directories on this node.")
    fmt.add_argument("--config", "-c", required=True, help="The Kafka configuration file to use.")
    fmt.add_argument("--cluster-id", "-t", required=True, help="The cluster ID to use.")
    fmt.add_argument(
        "--ignore-formatted", "-g", action="store_true",
        help="Skip over already formatted directories rather than failing.",
    )
    fmt.add_argument(
        "--release-version", "-r",
        help="The release version to use for the initial feature settings, e.g. 3.9 or 3.9-IV0.",
    )
    fmt.add_argument(
        "--feature", "-f", action="append", default=[], metavar="NAME=LEVEL",
        help="The setting to use for a specific feature, e.g. kraft.version=1.",
    )
    fmt.add_argument(
        "--add-scram", "-S", action="append", default=[], metavar="MECHANISM=[KEY=VALUE,...]",
        help="A SCRAM credential to bootstrap, e.g. 'SCRAM-SHA-256=[name=alice,password=alice-secret]' or "
        "'SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"N3E=\",saltedpassword=\"YCE=\"]'.",
    )
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument(
        "--standalone", "-s", action="store_true",
        help="Used to initialize a controller as a single-node dynamic quorum.",
    )
    quorum.add_argument(
        "--no-initial-controllers", "-N", action="store_true",
        help="Used to initialize a server without a dynamic quorum topology.",
    )
    quorum.add_argument(
        "--initial-controllers", "-I", metavar="ID@HOST:PORT:DIRECTORY_ID,...",
        help="Used to initialize a server with a specific dynamic quorum topology. The same "
        "values must be used to format all nodes.",
    )

    commands.add_parser("random-uuid", help="Print a random UUID.")
    return parser


class CommandError(Exception):
    """A failure reported as one line on stderr with exit status 1 (``TerseFailure``)."""


def _parse_features(items: list[str]) -> dict[str, int]:
    features: dict[str, int] = {}
    for item in items:
        name, sep, level = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise CommandError(f"Can't parse feature={item!r}. The argument must be of the form feature=level.")
        try:
            features[name] = int(level.strip())
        except ValueError:
            raise CommandError(f"Can't parse feature={item!r}. The level must be an integer.") from None
    return features


def _standalone_voter(config: KRaftConfig) -> DynamicVoter:
    """``StorageTool.createStandaloneDynamicVoters``: this node at its first advertised
    controller listener (no host -> localhost) with a fresh directory id."""
    if not config.is_controller:
        raise CommandError("You can only use --standalone on a controller.")
    endpoints = config.controller_endpoints()
    if not endpoints:
        raise CommandError("No controller listeners found.")
    first = endpoints[0]
    return DynamicVoter(config.node_id, first.host or "localhost", first.port, Uuid.random())


def format_command(
    config: KRaftConfig,
    *,
    cluster_id: str,
    standalone: bool = False,
    initial_controllers: str | None = None,
    no_initial_controllers: bool = False,
    ignore_formatted: bool = False,
    release_version: str | None = None,
    features: list[str] | None = None,
    add_scram: list[str] | None = None,
    out: TextIO | None = None,
) -> int:
    """``StorageTool.runFormatCommand``. Raises CommandError, FormatError, KafkaStorageError."""
    stream = out or sys.stdout
    voters: list[DynamicVoter] | None = None
    if initial_controllers is not None:
        voters = parse_dynamic_voters(initial_controllers)
    if standalone:
        voters = [_standalone_voter(config)]
    if not no_initial_controllers and config.is_controller and not config.controller_quorum_voters and not voters:
        raise CommandError(
            "Because controller.quorum.voters is not set on this controller, you must specify one of the "
            "following: --standalone, --initial-controllers, or --no-initial-controllers."
        )
    version: MetadataVersion | None = None
    version_text = release_version or config.raw.get("inter.broker.protocol.version")
    if version_text:
        try:
            version = metadata_version_from_string(version_text)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    unstable = str(config.raw.get("unstable.feature.versions.enable", "false")).strip().lower() == "true"
    directories = sorted({*config.log_dirs, config.metadata_log_dir})

    def emit(line: str) -> None:
        stream.write(line + "\n")

    format_directories(
        cluster_id=cluster_id,
        node_id=config.node_id,
        directories=directories,
        metadata_log_dir=config.metadata_log_dir,
        controller_listener_name=config.controller_listener_names[0],
        release_version=version,
        features=_parse_features(features or []),
        add_scram=add_scram or [],
        initial_controllers=voters,
        ignore_formatted=ignore_formatted,
        unstable_feature_versions=unstable,
        out=emit,
    )
    return 0


def info_command(config: KRaftConfig, out: TextIO | None = None) -> int:
    """``StorageTool.infoCommand``: which directories exist, what they hold, what is wrong."""
    stream = out or sys.stdout
    directories = sorted({*config.log_dirs, config.metadata_log_dir})
    problems: list[str] = []
    found: list[str] = []
    previous = None
    for directory in directories:
        if not os.path.isdir(directory):
            problems.append(f"{directory} does not exist" if not os.path.exists(directory) else f"{directory} is not a directory")
            continue
        found.append(directory)
        if not os.path.exists(os.path.join(directory, META_PROPERTIES_FILE)):
            problems.append(f"{directory} is not formatted.")
            continue
        try:
            current = read_meta_properties(directory)
        except (FormatError, KafkaStorageError) as exc:
            problems.append(f"Error loading {os.path.join(directory, META_PROPERTIES_FILE)}: {exc}")
            continue
        assert current is not None
        if previous is None:
            previous = current
        elif previous.cluster_id != current.cluster_id:
            problems.append("Mismatched cluster IDs between storage directories.")
        elif previous.node_id != current.node_id:
            problems.append("Mismatched node IDs between storage directories.")
    if previous is not None and previous.version == 0:
        problems.append(
            "The kafka configuration file appears to be for a cluster in KRaft mode, but the "
            "directories are formatted for legacy mode."
        )
    if found:
        stream.write("Found log directory:\n" if len(found) == 1 else "Found log directories:\n")
        for directory in found:
            stream.write(f"  {directory}\n")
        stream.write("\n")
    if previous is not None:
        props = previous.to_properties()
        stream.write("Found metadata: {" + ", ".join(f"{k}={props[k]}" for k in sorted(props)) + "}\n\n")
    if problems:
        stream.write("Found problem:\n" if len(problems) == 1 else "Found problems:\n")
        for problem in problems:
            stream.write(f"  {problem}\n")
        stream.write("\n")
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    if args.storage_command == "random-uuid":
        print(Uuid.random())
        return 0
    try:
        config = load_config(args.config)
        if args.storage_command == "info":
            return info_command(config)
        return format_command(
            config,
            cluster_id=args.cluster_id,
            standalone=args.standalone,
            initial_controllers=args.initial_controllers,
            no_initial_controllers=args.no_initial_controllers,
            ignore_formatted=args.ignore_formatted,
            release_version=args.release_version,
            features=args.feature,
            add_scram=args.add_scram,
        )
    except (CommandError, FormatError, KafkaStorageError, ConfigError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 1
