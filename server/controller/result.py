"""What a controller operation produces: its records and its answer.

* :data:`Record`: one metadata record to append, as ``(message, record version)``; the
  version is the one the operation chose for the metadata.version in force (Kafka's
  ``ApiMessageAndVersion``).
* :class:`ControllerResult`: the records an operation appends as one batch and the result its
  answer is built from once they commit (Kafka's ``ControllerResult``), plus what the host must
  do around them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from messages.runtime import Message

__all__ = ["ControllerResult", "Record"]

Record = tuple[Message, int]
"""A metadata record and the version to encode it at (``ApiMessageAndVersion``)."""


@dataclass(frozen=True, slots=True)
class ControllerResult:
    """``records`` go to the log as one batch; the answer is built from ``response`` once the
    batch commits (at once when there are none). ``on_commit`` is told the batch's last offset
    when it commits (a controlled shutdown's end offset); ``kraft_upgrade`` is a kraft.version
    level the raft leader appends as a control batch before the records (UpdateFeatures)."""

    records: Sequence[Record] = ()
    response: Any = None
    on_commit: Callable[[int], None] | None = field(default=None, compare=False)
    kraft_upgrade: int | None = None
