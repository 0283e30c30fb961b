"""Fetching a stock Kafka release from Maven Central and locating its jars and classes.

A release of :data:`tools.stock_releases.MATRIX_RELEASES` is fetched by
``compat/fetch-kafka.sh VERSION`` (:func:`ensure_fetched`) into
``compat/.cache/kafka-<version>/`` (:func:`kafka_home`): ``lib/`` (its runtime classpath),
``tools-lib/`` (a stand-in release's kafka-tools classpath), ``config/`` (the logging
configuration). :func:`classpath`, :func:`kafka_jar` and :func:`logging_flags` give what a JVM of
it needs; :func:`tool_class` finds which main class ``kafka-<tool>.sh`` runs (the tools moved from
core to the tools module, KIP-906). :mod:`tools.stock_kafka` re-exports every public name here.

Errors: a function taking a ``version`` raises ValueError for a release that is not pinned, and
:class:`~tools.stock_releases.KafkaUnavailable` when the jars it needs are missing.
"""

from __future__ import annotations

import functools
import os
import subprocess
import zipfile
from collections.abc import Iterable
from pathlib import Path

from tools.stock_releases import (
    CACHE_DIR,
    COMPAT_DIR,
    FETCH_HINT,
    KafkaUnavailable,
    _check_pinned,
    tools_version,
    version_tuple,
)

__all__ = [
    "FETCH_SCRIPT", "TOOL_CLASSES", "classpath", "dump_log_segments_class", "ensure_fetched",
    "has_class", "is_fetched", "jars", "kafka_home", "kafka_jar", "lib_dir", "logging_config",
    "logging_flags", "tool_class", "tool_release",
]


FETCH_SCRIPT = COMPAT_DIR / "fetch-kafka.sh"


def is_fetched(version: str) -> bool:
    """Whether ``version``'s jars (and, for a stand-in, its tools' jars) are in the cache."""
    home = kafka_home(version)
    if not (home / "lib.stamp").is_file() or not jars(version):
        return False
    if tools_version(version) != version and not (home / "tools-lib.stamp").is_file():
        return False
    return logging_config(version).is_file()


def ensure_fetched(version: str, *, timeout_s: float = 1800.0) -> Path:
    """Fetch ``version`` (a release of :data:`MATRIX_RELEASES`) from Maven Central into the cache
    with ``compat/fetch-kafka.sh VERSION`` unless it is there; returns :func:`kafka_home`. One
    fetch runs at a time (the script's lock); its output is kept for the error.
    Raises ValueError for a release that is not pinned, KafkaUnavailable when the fetch fails
    (Java, javac, mvn or the network missing: the script's words)."""
    home = kafka_home(version)
    if is_fetched(version):
        return home
    if not FETCH_SCRIPT.is_file():
        raise KafkaUnavailable(f"Kafka {version} is not fetched and {FETCH_SCRIPT} is missing")
    done = subprocess.run(["bash", str(FETCH_SCRIPT), version], capture_output=True, text=True, timeout=timeout_s,
                          check=False)
    if done.returncode != 0 or not is_fetched(version):
        raise KafkaUnavailable(f"fetching Kafka {version} failed: {done.stderr.strip()[-3000:]}")
    return home



def kafka_home(version: str) -> Path:
    """``compat/.cache/kafka-<version>`` (under :data:`CACHE_DIR`): holds ``lib/``, ``config/``
    and ``oracle/``. Raises ValueError for a release that is not pinned."""
    _check_pinned(version)
    return CACHE_DIR / f"kafka-{version}"


def lib_dir(version: str, *, tools: bool = False) -> Path:
    """``version``'s classpath directory; with ``tools``, the one its kafka-tools classes run
    from (``tools-lib/`` when the tools are a stand-in release's, else ``lib/``)."""
    if tools and tools_version(version) != version:
        return kafka_home(version) / "tools-lib"
    return kafka_home(version) / "lib"


def jars(version: str, *, tools: bool = False) -> list[Path]:
    """Every jar of ``version``'s runtime classpath (see :func:`lib_dir`), sorted by name;
    empty when the jars have not been fetched."""
    return sorted(lib_dir(version, tools=tools).glob("*.jar"))


def classpath(version: str, extra: Iterable[str | os.PathLike[str]] = (), *,
              tools: bool = False) -> str:
    """``version``'s runtime classpath (see :func:`lib_dir`) as one ``java -cp`` argument
    (entries joined by ``os.pathsep``); ``extra`` entries go first. Raises KafkaUnavailable when
    the jars have not been fetched."""
    found = jars(version, tools=tools)
    if not found:
        raise KafkaUnavailable(f"no jars under {lib_dir(version, tools=tools)}; {FETCH_HINT}")
    return os.pathsep.join([str(e) for e in extra] + [str(j) for j in found])


def kafka_jar(version: str, artifact: str) -> Path:
    """The jar of one Kafka module, e.g. ``kafka_jar("3.9.2", "kafka-clients")``; kafka-tools
    and kafka-tools-api come from the tools classpath. Raises KafkaUnavailable when it is
    missing."""
    tools = artifact.startswith("kafka-tools")
    wanted = tools_version(version) if tools else version
    path = lib_dir(version, tools=tools) / f"{artifact}-{wanted}.jar"
    if not path.is_file():
        raise KafkaUnavailable(f"{path} is missing; {FETCH_HINT}")
    return path


def logging_config(version: str, *, tools: bool = False) -> Path:
    """The logging configuration fetch-kafka.sh wrote for ``version``'s classpath (with
    ``tools``: its tools classpath): WARN and above to stderr."""
    release = tools_version(version) if tools else version
    name = "log4j2.properties" if version_tuple(release) >= (4,) else "log4j.properties"
    return kafka_home(version) / "config" / name


def logging_flags(version: str, *, tools: bool = False) -> list[str]:
    """The JVM flag that points the logging binding of ``version``'s classpath (with ``tools``:
    its tools classpath) at :func:`logging_config`."""
    config = logging_config(version, tools=tools)
    if config.name == "log4j2.properties":
        # Log4j 2 (KIP-653); a plain path, as a file: URL breaks on Windows-style paths.
        return [f"-Dlog4j2.configurationFile={config}"]
    return [f"-Dlog4j.configuration={config.as_uri()}"]



@functools.cache
def _class_index(version: str, tools: bool) -> frozenset[str]:
    names: set[str] = set()
    for jar in jars(version, tools=tools):
        with zipfile.ZipFile(jar) as zf:
            for entry in zf.namelist():
                if entry.endswith(".class") and "$" not in entry:
                    names.add(entry[: -len(".class")].replace("/", "."))
    return frozenset(names)


def has_class(version: str, class_name: str, *, tools: bool = False) -> bool:
    """Whether a top-level class ``class_name`` (e.g. ``kafka.tools.TestRaftServer``) is on
    ``version``'s classpath (with ``tools``: its tools classpath). The jars are indexed once per
    process; False when they have not been fetched."""
    return class_name in _class_index(version, tools)


# The main class of each Kafka command-line tool, newest location first: the tools moved from
# core (Scala, kafka.admin / kafka.tools) to the tools module (Java) one by one (KIP-906):
# MetadataQuorumCommand in 3.5, FeatureCommand in 3.6 (core keeps a copy until 3.7), TopicCommand
# in 3.7, ConsoleConsumer in 3.8, ConsoleProducer in 4.0, DumpLogSegments in 4.3 (KAFKA-14579).
TOOL_CLASSES: dict[str, tuple[str, ...]] = {
    "dump-log": ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "storage": ("kafka.tools.StorageTool",),
    "metadata-quorum": ("org.apache.kafka.tools.MetadataQuorumCommand", "kafka.admin.MetadataQuorumCommand"),
    "metadata-shell": ("org.apache.kafka.shell.MetadataShell",),
    "features": ("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"),
    "server": ("kafka.Kafka",),
    "test-raft-server": ("kafka.tools.TestRaftServer",),
    "topics": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "configs": ("kafka.admin.ConfigCommand",),
    "reassign-partitions": ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",),
    "leader-election": ("org.apache.kafka.tools.LeaderElectionCommand", "kafka.admin.LeaderElectionCommand"),
    "console-producer": ("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"),
    "console-consumer": ("org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka.tools.ConsoleConsumer"),
    "acls": ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
    "delegation-tokens": ("org.apache.kafka.tools.DelegationTokenCommand",),
    "producer-perf-test": ("org.apache.kafka.tools.ProducerPerformance",),
}


def _locate_tool(version: str, tool: str) -> tuple[str, bool]:
    candidates = TOOL_CLASSES[tool]
    places = [False] + ([True] if tools_version(version) != version else [])
    for tools in places:
        for name in candidates:
            if has_class(version, name, tools=tools):
                return name, tools
    raise KafkaUnavailable(f"none of {candidates} is on Kafka {version}'s classpath")


def tool_class(version: str, tool: str) -> str:
    """The main class that ``kafka-<tool>.sh`` runs for ``version`` (see TOOL_CLASSES), chosen
    by what the jars actually contain: the release's own classpath first, then its tools
    classpath. Raises KeyError for an unknown tool, KafkaUnavailable when no candidate exists."""
    return _locate_tool(version, tool)[0]


def tool_release(version: str, tool: str) -> str:
    """The Kafka release whose code runs ``tool`` for ``version``: ``version`` itself, or the
    stand-in tools release (for 4.4.0, DumpLogSegments and MetadataQuorumCommand are 4.3.1's)."""
    return tools_version(version) if _locate_tool(version, tool)[1] else version


def dump_log_segments_class(version: str) -> str:
    """``kafka.tools.DumpLogSegments`` up to 4.2, ``org.apache.kafka.tools.DumpLogSegments``
    from 4.3 (what ``kafka-dump-log.sh`` runs). Raises KafkaUnavailable as :func:`tool_class`."""
    return tool_class(version, "dump-log")
