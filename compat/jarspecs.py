"""Kafka's own message specs, read straight out of a pinned release's jars.

kafka-clients holds ``common/message/*.json`` (requests, responses, headers and the KRaft control
records), kafka-metadata ``common/metadata/*.json`` (metadata records) and kafka-raft
``common/message/QuorumStateData.json``. Kafka's generator reads them with comments allowed, so
``//`` and ``/* */`` comments are stripped (outside strings) before parsing.

Each spec is paired with the Java class Kafka generated from it: ``<Name>Data`` for requests,
responses and headers (``org.apache.kafka.common.message.VoteRequestData``), ``<Name>`` otherwise
(``org.apache.kafka.common.message.LeaderChangeMessage``,
``org.apache.kafka.common.metadata.TopicRecord``, ``org.apache.kafka.raft.generated.QuorumStateData``),
found by looking for its ``JsonConverter`` in the jar that holds the spec.
"""

from __future__ import annotations

import functools
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat.kafka import KafkaUnavailable, kafka_jar

SPEC_JARS = ("kafka-clients", "kafka-metadata", "kafka-raft")

ABSENT: dict[str, dict[str, str]] = {
    "3.9.2": {
        "ClearElrRecord": "added with eligible leader replicas in Kafka 4.0 (KIP-966); a 4.x controller "
                          "writes it when a topic's min.insync.replicas is set",
        "UnregisterControllerRequest": "added in Kafka 4.x to remove a controller's KIP-919 registration "
                                       "(usable from metadata.version 4.4-IV2)",
        "UnregisterControllerResponse": "the answer to UnregisterControllerRequest, added with it",
        "UnregisterControllerRecord": "the record UnregisterController writes, added with it",
    },
}
"""Release -> kwire spec -> why that release has no such spec (kwire needs it to read the
newer release's logs); the spec tests check that each one is indeed absent."""
SPEC_DIRS = ("common/message/", "common/metadata/")


@dataclass(frozen=True)
class JarSpec:
    name: str
    jar: Path
    entry: str
    data: dict[str, Any]
    java_class: str | None


def strip_json_comments(text: str) -> str:
    """``text`` without ``//`` line comments and ``/* */`` block comments, leaving string
    literals (including escaped quotes) untouched. Newlines are kept so that JSON error positions
    still point at the right line."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ValueError("unterminated /* comment")
            out.append("\n" * text.count("\n", i, j))
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _java_class(names: set[str], spec_name: str) -> str | None:
    for suffix in ("Data", ""):
        hits = sorted(n for n in names if n.endswith(f"/{spec_name}{suffix}JsonConverter.class"))
        if len(hits) > 1:
            raise ValueError(f"{spec_name}: several JsonConverter classes {hits}")
        if hits:
            return hits[0][: -len("JsonConverter.class")].replace("/", ".")
    return None


@functools.cache
def jar_specs(version: str) -> dict[str, JarSpec]:
    """Every message spec in Kafka ``version``'s kafka-clients, kafka-metadata and kafka-raft
    jars, by spec name. Raises KafkaUnavailable when the jars are not fetched."""
    specs: dict[str, JarSpec] = {}
    for artifact in SPEC_JARS:
        jar = kafka_jar(version, artifact)
        with zipfile.ZipFile(jar) as zf:
            names = set(zf.namelist())
            for entry in sorted(names):
                if not entry.endswith(".json") or not entry.startswith(SPEC_DIRS):
                    continue
                if entry.count("/") != 2:
                    continue
                text = zf.read(entry).decode("utf-8")
                data = json.loads(strip_json_comments(text))
                name = data["name"]
                if name in specs:
                    raise ValueError(f"spec {name} in both {specs[name].jar} and {jar}")
                specs[name] = JarSpec(
                    name, jar, entry, data, _java_class(names, name)
                )
    if not specs:
        raise KafkaUnavailable(f"no message specs found in the Kafka {version} jars")
    return specs
