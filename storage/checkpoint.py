"""Kafka's checkpoint text files (``CheckpointFile`` / ``CheckpointReadBuffer``): the format
shared by ``leader-epoch-checkpoint`` (:mod:`storage.leader_epoch`) and the broker's offset
checkpoints (:mod:`storage.offset_checkpoint`). UTF-8, ``\\n`` line ends::

    0                      version
    2                      number of entries
    <field> <field> ...    one entry per line, fields separated by a space

Bytes only: reading and writing the files is the callers' business.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.errors import InconsistentStateError

CHECKPOINT_VERSION = 0
"""The one version of both file kinds (``LeaderEpochCheckpointFile.CURRENT_VERSION``,
``OffsetCheckpointFile.CURRENT_VERSION``)."""


def encode_checkpoint_lines(entries: Sequence[Sequence[object]]) -> bytes:
    """The whole file for ``entries`` in the given order: version line, count line, each
    entry's fields joined by a space, every line ending in ``\\n`` (``CheckpointFile.write``)."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [" ".join(str(field) for field in entry) for entry in entries]
    return ("\n".join(lines) + "\n").encode("utf-8")


def decode_checkpoint_lines(data: bytes, location: str, fields: int) -> list[list[str]]:
    """The entries of a checkpoint file's bytes, each as its ``fields`` strings
    (``CheckpointReadBuffer.read``). An empty file, or one with only the version line, holds
    none. ``location`` names the file in error messages. Raises InconsistentStateError for
    text that is not UTF-8, another version, a malformed line, or a count that does not match
    the entries."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InconsistentStateError(f"{location} is not UTF-8") from exc
    lines = text.splitlines()
    if not lines:
        return []
    version = _int_line(lines[0], location)
    if version != CHECKPOINT_VERSION:
        raise InconsistentStateError(
            f"Unrecognised version:{version}, expected version: {CHECKPOINT_VERSION} in "
            f"checkpoint file at: {location}"
        )
    if len(lines) < 2:
        return []
    expected = _int_line(lines[1], location)
    entries = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != fields:
            raise InconsistentStateError(f"Malformed line in checkpoint file ({location}): {line!r}")
        entries.append(parts)
    if len(entries) != expected:
        raise InconsistentStateError(
            f"Expected [{expected}] entries in checkpoint file [{location}], but found only "
            f"[{len(entries)}]"
        )
    return entries


def parse_int(text: str, location: str, line: object) -> int:
    """``text`` as an int, else InconsistentStateError naming ``line`` of ``location``."""
    try:
        return int(text)
    except ValueError as exc:
        raise InconsistentStateError(f"Malformed line in checkpoint file ({location}): {line!r}") from exc


def _int_line(line: str, location: str) -> int:
    return parse_int(line.strip(), location, line)
