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

__all__ = ["EXCESSIVE_BATCH", "MAX_RECORDS_PER_USER_OP", "ControllerResult", "Record"]

Record = tuple[Message, int]
"""A metadata record and the version to encode it at (``ApiMessageAndVersion``)."""

MAX_RECORDS_PER_USER_OP = 10_000
"""The most records one request may write (``QuorumController.MAX_RECORDS_PER_USER_OP``: the
operations collect them in a ``BoundedList`` of this length)."""
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."
"""The POLICY_VIOLATION message of a request that overflows that list: Kafka's
``EventHandlerExceptionInfo`` turns the ``BoundedListTooLongException`` into it, and the whole
request fails with it, every topic or binding answered with the error."""


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
