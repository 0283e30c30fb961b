"""Plans of single-voter changes (KIP-853) that never leave the quorum without a caught-up
majority, and their execution through the admin RPCs only (DescribeQuorum, AddRaftVoter,
RemoveRaftVoter), so that they work on kwire and Kafka controllers alike.

Two plans:

* :func:`plan_replacement`: a voter whose disk was lost comes back with the same node id and a
  new directory id (the KIP-856 scenario, which Kafka delivers through KIP-853): wait until the
  new replica fetches as a caught-up observer, remove the old replica key, add the new one.
  (The voter set cannot hold one id twice, so the removal comes first.)
* :func:`plan_reassignment`: any target voter set (the AlterQuorum of the KIP-595 draft) as a
  sequence of single changes: every new voter is added first, then each replaced replica key is
  removed and its new one added, then the voters to drop are removed, the leader last.

A plan is computed from the quorum's current state, so running it again after an interruption
resumes it: what was done is no longer in the plan. Before every removal, :func:`execute`
checks that the voters left would hold a caught-up majority (a voter is caught up when the
leader saw it reach its log end within ``max_lag_ms``; the leader always is) and refuses
otherwise. Before every addition it waits until the new replica fetches as an observer that has
reached the high watermark.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kwire.uuid import ZERO_UUID, Uuid
from tools.client_config import PLAINTEXT, ClientSecurity
from tools.quorum_client import (
    QuorumToolError,
    QuorumView,
    add_raft_voter,
    describe,
    remove_raft_voter,
)

__all__ = [
    "DEFAULT_CATCH_UP_TIMEOUT_MS",
    "DEFAULT_MAX_LAG_MS",
    "Step",
    "TargetVoter",
    "caught_up_voters",
    "describe_when_led",
    "endpoints_text",
    "execute",
    "plan_reassignment",
    "plan_replacement",
]

DEFAULT_MAX_LAG_MS = 10_000
"""How long ago a voter may last have reached the leader's log end and still count as caught
up (Kafka's tools judge by ``lastCaughtUpTimestamp`` the same way)."""
DEFAULT_CATCH_UP_TIMEOUT_MS = 300_000
"""How long :func:`execute` waits for a new replica to catch up as an observer."""

Endpoints = tuple[tuple[str, str, int], ...]
"""``(listener, host, port)`` of a voter."""


def endpoints_text(endpoints: Endpoints) -> str:
    """``NAME://host:port, ...`` as Kafka's tools print endpoints (IPv6 hosts in brackets)."""
    return ", ".join(f"{name}://{f'[{host}]' if ':' in host else host}:{port}" for name, host, port in endpoints)


@dataclass(frozen=True)
class TargetVoter:
    """A voter of the wanted set, or the controller add-controller reads from its
    configuration: replica key and endpoints (``(listener, host, port)``, in
    ``controller.listener.names`` order)."""

    voter_id: int
    directory_id: Uuid
    endpoints: Endpoints


@dataclass(frozen=True)
class Step:
    """One single-voter change: ``add`` (with ``endpoints``) or ``remove``."""

    kind: str
    voter_id: int
    directory_id: Uuid
    endpoints: Endpoints = ()

    def describe(self) -> str:
        """A line for the operator (and ``--dry-run``)."""
        if self.kind == "add":
            where = endpoints_text(self.endpoints)
            directory = "the new directory id" if self.directory_id == ZERO_UUID else f"directory id {self.directory_id}"
            return (
                f"wait until controller {self.voter_id} ({directory}) has caught up "
                f"as an observer, then add it as a voter with endpoints: {where}"
            )
        return f"remove voter {self.voter_id} with directory id {self.directory_id}"

    def to_json(self) -> dict[str, object]:
        """``{"kind", "controllerId", "directoryId", "endpoints"}``."""
        return {
            "kind": self.kind,
            "controllerId": self.voter_id,
            "directoryId": str(self.directory_id),
            "endpoints": [{"listener": n, "host": h, "port": p} for n, h, p in self.endpoints],
        }


def _voter_keys(view: QuorumView) -> list[tuple[int, Uuid]]:
    return [(v.replica_id, v.replica_directory_id) for v in view.partition.current_voters]


def caught_up_voters(view: QuorumView, now_ms: int, max_lag_ms: int = DEFAULT_MAX_LAG_MS) -> set[int]:
    """The ids of the voters that reached the leader's log end within ``max_lag_ms`` of
    ``now_ms`` (wall-clock ms), the leader always included."""
    p = view.partition
    return {
        v.replica_id
        for v in p.current_voters
        if v.replica_id == p.leader_id or (v.last_caught_up_timestamp >= 0 and now_ms - v.last_caught_up_timestamp <= max_lag_ms)
    }


def plan_replacement(view: QuorumView, new: TargetVoter) -> list[Step]:
    """Replace the voter with ``new``'s id by ``new`` (a new directory id). Empty when ``new``
    is already the voter (done). Raises QuorumToolError when no voter has that id."""
    keys = _voter_keys(view)
    if (new.voter_id, new.directory_id) in keys:
        return []
    old = [d for i, d in keys if i == new.voter_id]
    if not old:
        raise QuorumToolError(f"controller {new.voter_id} is not a voter: use add-controller to add it")
    return [Step("remove", new.voter_id, old[0]), Step("add", new.voter_id, new.directory_id, new.endpoints)]


def plan_reassignment(view: QuorumView, target: Sequence[TargetVoter]) -> list[Step]:
    """Single changes from the current voter set to ``target``: additions of new ids first,
    then each replica key replaced (remove, add), then the removals, the leader's last.
    Empty when the voter set is ``target`` already. Raises QuorumToolError for an empty or
    duplicated target."""
    if not target:
        raise QuorumToolError("the target voter set is empty")
    if len({t.voter_id for t in target}) != len(target):
        raise QuorumToolError("the target voter set names an id twice")
    current = dict(_voter_keys(view))
    wanted = {t.voter_id: t for t in target}
    adds = [Step("add", t.voter_id, t.directory_id, t.endpoints) for t in target if t.voter_id not in current]
    replaced: list[Step] = []
    for t in target:
        if t.voter_id in current and current[t.voter_id] != t.directory_id:
            replaced += [Step("remove", t.voter_id, current[t.voter_id]), Step("add", t.voter_id, t.directory_id, t.endpoints)]
    leader = view.partition.leader_id
    dropped = sorted((i for i in current if i not in wanted), key=lambda i: (i == leader, i))
    removes = [Step("remove", i, current[i]) for i in dropped]
    return adds + replaced + removes


def _check_removal(view: QuorumView, step: Step, now_ms: int, max_lag_ms: int) -> None:
    remaining = [i for i, _ in _voter_keys(view) if i != step.voter_id]
    caught_up = caught_up_voters(view, now_ms, max_lag_ms) & set(remaining)
    majority = len(remaining) // 2 + 1
    if not remaining or len(caught_up) < majority:
        raise QuorumToolError(
            f"refusing to remove voter {step.voter_id}: of the {len(remaining)} voters left, "
            f"{len(caught_up)} ({sorted(caught_up)}) caught up within {max_lag_ms} ms, fewer than "
            f"the majority of {majority}"
        )


LEADER_WAIT_S = 60.0
"""How long :func:`execute` waits for a leader between steps (a removed leader resigns)."""


async def describe_when_led(
    bootstrap: str, clock: Callable[[], float] = time.monotonic, security: ClientSecurity = PLAINTEXT,
) -> QuorumView:
    """DescribeQuorum once the quorum has a leader (again), within LEADER_WAIT_S. Raises as
    :func:`tools.quorum_client.describe` when there is still none."""
    import trio

    deadline = clock() + LEADER_WAIT_S
    while True:
        try:
            return await describe(bootstrap, security=security)
        except (QuorumToolError, OSError, trio.TooSlowError):
            if clock() > deadline:
                raise
        await trio.sleep(0.2)  # poll interval


async def _answers(endpoints: Endpoints, security: ClientSecurity) -> bool:
    """Every endpoint ``(listener, host, port)`` answers ApiVersions."""
    import trio

    from kwire.negotiation import ApiVersionsError
    from server.net.client import KafkaConnectionError
    from tools.api_versions import describe as api_versions

    for _listener, host, port in endpoints:
        try:
            await api_versions(f"{host}:{port}", "kwire-metadata-quorum", 5000, security)
        except (KafkaConnectionError, OSError, ApiVersionsError, trio.TooSlowError):
            return False
    return True


async def _wait_observer(
    bootstrap: str, step: Step, timeout_s: float, clock: Callable[[], float], security: ClientSecurity,
) -> None:
    import trio

    deadline = clock() + timeout_s
    while True:
        view = await describe_when_led(bootstrap, clock, security)
        p = view.partition
        for o in p.observers:
            if (o.replica_id, o.replica_directory_id) == (step.voter_id, step.directory_id) and o.log_end_offset >= p.high_watermark:
                # the leader asks the new voter for its ApiVersions before adding it: a node
                # fetches before its own listener takes requests (a stock controller does)
                if await _answers(step.endpoints, security):
                    return
        if clock() > deadline:
            raise QuorumToolError(
                f"controller {step.voter_id} (directory id {step.directory_id}) did not catch up as an "
                f"observer within {timeout_s:.0f} s: start it with controller.quorum.bootstrap.servers"
            )
        await trio.sleep(0.5)  # poll interval


async def execute(
    bootstrap: str,
    steps: Sequence[Step],
    *,
    max_lag_ms: int = DEFAULT_MAX_LAG_MS,
    catch_up_timeout_ms: int = DEFAULT_CATCH_UP_TIMEOUT_MS,
    max_steps: int | None = None,
    report: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    security: ClientSecurity = PLAINTEXT,
) -> QuorumView:
    """Carry out ``steps`` in order through ``bootstrap`` (see the module docstring), telling
    ``report`` of each, and stop after ``max_steps`` of them if given; returns the quorum as it
    is afterwards; every connection logs in as ``security`` says. Raises QuorumToolError (an
    unsafe removal, a replica that does not catch up), VoterChangeError (the leader refused),
    OSError / ``trio.TooSlowError`` (no answer)."""
    for step in steps[:max_steps]:
        if step.kind == "remove":
            view = await describe_when_led(bootstrap, clock, security)
            _check_removal(view, step, int(time.time() * 1000), max_lag_ms)
            report(f"removing voter {step.voter_id} with directory id {step.directory_id}")
            await remove_raft_voter(bootstrap, step.voter_id, step.directory_id, security=security)
        else:
            report(f"waiting for controller {step.voter_id} (directory id {step.directory_id}) to catch up")
            await _wait_observer(bootstrap, step, catch_up_timeout_ms / 1000, clock, security)
            report(f"adding voter {step.voter_id} with directory id {step.directory_id}")
            await add_raft_voter(bootstrap, step.voter_id, step.directory_id, step.endpoints, security=security)
    return await describe_when_led(bootstrap, clock, security)
