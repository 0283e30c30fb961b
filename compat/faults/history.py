"""A client's history of metadata writes against a controller quorum, and its checker.

The workload (:class:`ConfigWrites`) is one client that, until stopped, sets the cluster-wide
broker default ``log.retention.ms`` to a new value each time (IncrementalAlterConfigs on the
``BROKER`` resource ``""``, which Kafka's ``ControllerApis`` serves from the controller listener
and ``ConfigurationControlManager`` turns into one ``ConfigRecord``). It sends each write to the
node that last answered as the active controller, and moves on to the next node when one
answers ``NOT_CONTROLLER`` or does not answer. Every write is kept as an :class:`Op` with the
times it was invoked and completed and its outcome, as Jepsen and etcd's robustness tests keep
their histories:

* ``ok``: the node answered ``NONE`` -- the controller acknowledged the record as committed
  (Kafka's ``QuorumController`` completes a write only once its offset is below the high
  watermark);
* ``failed``: the connection could not be opened, so nothing was sent;
* ``unknown``: anything else -- a timeout, a connection lost after the request was sent, or an
  error: the record may or may not have been committed. That includes ``NOT_CONTROLLER``,
  which Kafka's controller also answers to the writes it had appended when it loses
  leadership (``QuorumController`` fails its deferred writes on renouncing), and which the next
  leader may still commit.

:func:`check` takes the history and, per voter, the values of those ``ConfigRecord``\\ s in the
order of the committed log (:func:`committed_values`), and names every violation of what a
linearizable log of acknowledged writes promises:

* ``lost``: an acknowledged value missing from a voter's committed log;
* ``diverged``: voters whose committed sequences differ;
* ``duplicated``: a value committed twice;
* ``phantom``: a value committed that no write carried, or whose write was never sent;
* ``reordered``: two acknowledged writes, the first completed before the second was invoked,
  committed in the other order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import trio

from compat.harness import PARTITION, log_batches
from kwire.errors import Errors
from messages.generated.config_record import ConfigRecord
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.metadata import decode_record
from server.net.client import open_connection

CONFIG_NAME = "log.retention.ms"
"""The broker config the workload writes (a long, so every value is valid)."""
BROKER_RESOURCE = 4
FIRST_VALUE = 7_000_000_000
"""Values are ``FIRST_VALUE + n`` for the n-th write, so each is unique and none is a default."""


@dataclass
class Op:
    """One write: its value, when it was invoked and completed (``time.monotonic()`` seconds),
    its outcome (``ok``, ``failed``, ``unknown``), the node it went to and why it failed."""

    value: int
    node: int
    invoked_s: float
    completed_s: float = 0.0
    outcome: str = "unknown"
    detail: str = ""


class Findings:
    """A checker's verdict, whose findings are the list fields named in ``PROBLEMS``."""

    PROBLEMS: ClassVar[tuple[str, ...]] = ()

    @property
    def ok(self) -> bool:
        """Nothing found."""
        return not any(getattr(self, name) for name in self.PROBLEMS)

    def problems(self, most: int) -> str:
        """``"; <finding>: <its first most items>"`` for each finding, for a summary line."""
        return "".join(f"; {name}: {getattr(self, name)[:most]}" for name in self.PROBLEMS if getattr(self, name))


@dataclass
class Verdict(Findings):
    """What :func:`check` found; ``ok`` when nothing was."""

    PROBLEMS = ("lost", "diverged", "duplicated", "phantom", "reordered")

    acknowledged: int
    failed: int
    unknown: int
    unknown_committed: int
    lost: list[int] = field(default_factory=list)
    diverged: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    phantom: list[int] = field(default_factory=list)
    reordered: list[tuple[int, int]] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.acknowledged} acknowledged, {self.failed} failed, {self.unknown} unknown "
                f"({self.unknown_committed} of them committed)" + self.problems(10))


def check(ops: Sequence[Op], committed: Mapping[int, Sequence[int]]) -> Verdict:
    """Check a history against each voter's committed values (node id -> values in log
    order). See the module docstring for what each finding means."""
    by_value = {op.value: op for op in ops}
    verdict = Verdict(
        acknowledged=sum(op.outcome == "ok" for op in ops),
        failed=sum(op.outcome == "failed" for op in ops),
        unknown=sum(op.outcome == "unknown" for op in ops),
        unknown_committed=0,
    )
    sequences = {node: list(values) for node, values in committed.items()}
    first = min(sequences)
    reference = sequences[first]
    verdict.diverged = sorted(node for node, values in sequences.items() if values != reference)
    for values in sequences.values():
        seen: set[int] = set()
        for value in values:
            if value in seen and value not in verdict.duplicated:
                verdict.duplicated.append(value)
            seen.add(value)
            op = by_value.get(value)
            if (op is None or op.outcome == "failed") and value not in verdict.phantom:
                verdict.phantom.append(value)
        verdict.lost += sorted(op.value for op in ops if op.outcome == "ok" and op.value not in seen
                               and op.value not in verdict.lost)
    position = {value: i for i, value in enumerate(reference)}
    verdict.unknown_committed = sum(op.outcome == "unknown" and op.value in position for op in ops)
    acknowledged = sorted((op for op in ops if op.outcome == "ok" and op.value in position),
                          key=lambda op: position[op.value])
    # in log order, a write must not have completed before an earlier-committed one was invoked
    latest_invoked = -1.0
    latest_value = 0
    for op in acknowledged:
        if op.completed_s < latest_invoked:
            verdict.reordered.append((op.value, latest_value))
        if op.invoked_s > latest_invoked:
            latest_invoked, latest_value = op.invoked_s, op.value
    return verdict


def committed_messages(data: Path, high_watermark: int) -> Iterator[tuple[int, Any]]:
    """``(offset, record)`` of each data record of the metadata log under the log directory
    ``data`` below ``high_watermark``, decoded, in log order."""
    for batch in log_batches(data / PARTITION):
        if batch.is_control:
            continue
        for record in batch.iter_records():
            if record.offset < high_watermark and record.value is not None:
                yield record.offset, decode_record(record.value)[0]


def committed_values(data: Path, high_watermark: int) -> list[int]:
    """The values of the workload's ``ConfigRecord``\\ s in the metadata log under the log
    directory ``data``, below ``high_watermark``, in log order."""
    return [int(message.value) for _, message in committed_messages(data, high_watermark)
            if isinstance(message, ConfigRecord) and message.resource_type == BROKER_RESOURCE
            and message.resource_name == "" and message.name == CONFIG_NAME and message.value is not None]


async def send_once(host: str, port: int, request: Any, timeout_s: float, client_id: str) -> tuple[str, str, Any]:
    """Send ``request`` once, on a new connection, within ``timeout_s`` for the connection and
    again for the answer: ``("failed", why, None)`` when the connection could not be opened
    (nothing but ApiVersions was sent), ``("unknown", why, None)`` when the request was sent
    and no answer came (it may have been committed or not), else ``("answered", "", response)``."""
    try:
        with trio.fail_after(timeout_s):
            connection = await open_connection(host, port, client_id, request_timeout_ms=int(timeout_s * 1000))
    except Exception as exc:  # nothing but ApiVersions was sent
        return "failed", f"connect: {type(exc).__name__}", None
    try:
        async with connection:
            with trio.fail_after(timeout_s):
                return "answered", "", await connection.request(request)
    except Exception as exc:  # sent, and no answer
        return "unknown", type(exc).__name__, None


class ConfigWrites:
    """The workload: one write at a time, ``interval_s`` apart, to the nodes at
    ``addresses`` (node id -> ``(host, port)``), until :meth:`stop`. Run :meth:`run` in the
    thread (and network namespace) the client should use; ``ops`` is the history."""

    def __init__(self, addresses: Mapping[int, tuple[str, int]], *, interval_s: float = 0.05,
                 timeout_s: float = 2.0) -> None:
        self.addresses = dict(addresses)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.ops: list[Op] = []
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        trio.run(self._run)

    async def _run(self) -> None:
        nodes = sorted(self.addresses)
        target = nodes[0]
        while not self._stopped.is_set():
            op = Op(value=FIRST_VALUE + len(self.ops), node=target, invoked_s=time.monotonic())
            self.ops.append(op)
            await self._write(op)
            op.completed_s = time.monotonic()
            if op.outcome != "ok":
                target = nodes[(nodes.index(target) + 1) % len(nodes)]
            await trio.sleep(self.interval_s)

    async def _write(self, op: Op) -> None:
        host, port = self.addresses[op.node]
        request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name="",
            configs=[AlterableConfig(name=CONFIG_NAME, config_operation=0, value=str(op.value))])])
        outcome, op.detail, response = await send_once(host, port, request, self.timeout_s, "kwire-history")
        if response is None:
            op.outcome = outcome
            return
        error = response.responses[0].error_code if response.responses else int(Errors.UNKNOWN_SERVER_ERROR)
        if error == Errors.NONE:
            op.outcome = "ok"
        else:  # NOT_CONTROLLER, REQUEST_TIMED_OUT and the like: the write may still commit
            op.outcome, op.detail = "unknown", f"error code {error}"
