"""``kwire health``: is the controller quorum healthy, and may a controller restart now?

Usage::

    kwire health --bootstrap-controller HOST:PORT[,HOST:PORT...] [--safe-to-restart ID]
        [--caught-up-ms MS] [--timeout-ms MS] [--command-config CLIENT.properties] [--json]

It asks the quorum as ``kafka-metadata-quorum --bootstrap-controller`` does (DescribeCluster to
find the active controller, then DescribeQuorum; :func:`tools.quorum_client.describe`), so it
works on Kafka controllers as well as kwire's. A voter is *caught up* when the leader saw it
reach the leader's log end offset within ``--caught-up-ms`` (default 5000) of the leader's own
reading (``lastCaughtUpTimestamp`` of DescribeQuorum, KIP-595; the leader reports its own entry
at its current time). Exit status:

* 0 — healthy: an active controller answered and every voter is caught up;
* 1 — degraded: an active controller answered, but a voter is not caught up;
* 2 — no quorum: no active controller answered within ``--timeout-ms`` (default 10000), or
  ``--command-config`` cannot be used (its client keys log in to a secured controller listener,
  as :mod:`tools.metadata_quorum` says).

``--safe-to-restart ID`` asks instead whether controller ``ID`` may be restarted now (a rolling
restart's check): yes (0) when the voters other than ``ID`` that are caught up still make a
majority of the voter set, so the quorum keeps committing while ``ID`` is down (an observer is
always safe); no (1) otherwise; 2 without a quorum. ``--json`` prints the whole assessment as
one JSON object; otherwise one line per finding.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from tools.client_config import PLAINTEXT, ClientSecurity, load_client_security

__all__ = ["Assessment", "ReplicaHealth", "add_parser", "assess", "run"]

HEALTHY, DEGRADED, NO_QUORUM = 0, 1, 2
STATUS_NAMES = {HEALTHY: "healthy", DEGRADED: "degraded", NO_QUORUM: "no quorum"}
DEFAULT_CAUGHT_UP_MS = 5000
DEFAULT_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class ReplicaHealth:
    """One replica as the leader reported it: offsets, the lag behind the high watermark
    (records), and how long ago it was last caught up (ms; None when never)."""

    replica_id: int
    directory_id: str
    log_end_offset: int
    lag: int
    caught_up_ms_ago: int | None
    caught_up: bool


@dataclass
class Assessment:
    """The quorum's health: ``status`` is :data:`HEALTHY`, :data:`DEGRADED` or
    :data:`NO_QUORUM`; ``problems`` say why it is not healthy; ``safe_to_restart`` answers
    ``--safe-to-restart`` (None when not asked)."""

    status: int
    cluster_id: str | None = None
    leader_id: int | None = None
    leader_epoch: int | None = None
    high_watermark: int | None = None
    voters: list[ReplicaHealth] = field(default_factory=list)
    observers: list[ReplicaHealth] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    safe_to_restart: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = STATUS_NAMES[self.status]
        return out


def _replica(state: Any, high_watermark: int, now_ms: int, caught_up_ms: int) -> ReplicaHealth:
    caught = state.last_caught_up_timestamp
    ago = None if caught < 0 else max(0, now_ms - caught)
    return ReplicaHealth(
        replica_id=state.replica_id,
        directory_id=str(state.replica_directory_id),
        log_end_offset=state.log_end_offset,
        lag=max(0, high_watermark - state.log_end_offset),
        caught_up_ms_ago=ago,
        caught_up=ago is not None and ago <= caught_up_ms,
    )


def assess(view: Any, *, caught_up_ms: int = DEFAULT_CAUGHT_UP_MS, restart_id: int | None = None) -> Assessment:
    """The health of the quorum a :class:`tools.quorum_client.QuorumView` describes. The
    leader's own timestamps are its clock's now (its entry is refreshed on every
    DescribeQuorum); without one, this machine's clock is used."""
    partition = view.partition
    leader_state = next((v for v in partition.current_voters if v.replica_id == partition.leader_id), None)
    now_ms = (
        leader_state.last_caught_up_timestamp
        if leader_state is not None and leader_state.last_caught_up_timestamp >= 0
        else int(time.time() * 1000)
    )
    hw = partition.high_watermark
    voters = [_replica(v, hw, now_ms, caught_up_ms) for v in partition.current_voters]
    observers = [_replica(o, hw, now_ms, caught_up_ms) for o in partition.observers]
    out = Assessment(
        status=HEALTHY, cluster_id=view.cluster_id, leader_id=partition.leader_id,
        leader_epoch=partition.leader_epoch, high_watermark=hw, voters=voters, observers=observers,
    )
    if partition.leader_id < 0:
        out.status = NO_QUORUM
        out.problems.append("no leader")
    for voter in voters:
        if not voter.caught_up:
            out.status = max(out.status, DEGRADED)
            since = "never caught up" if voter.caught_up_ms_ago is None else f"last caught up {voter.caught_up_ms_ago} ms ago"
            out.problems.append(f"voter {voter.replica_id} is not caught up: {since}, {voter.lag} records behind")
    if restart_id is not None:
        out.safe_to_restart = _restart_check(restart_id, voters)
    return out


def _restart_check(replica_id: int, voters: list[ReplicaHealth]) -> dict[str, Any]:
    majority = len(voters) // 2 + 1
    if all(v.replica_id != replica_id for v in voters):
        return {"id": replica_id, "safe": True, "reason": f"{replica_id} is not a voter"}
    remaining = [v.replica_id for v in voters if v.replica_id != replica_id and v.caught_up]
    safe = len(remaining) >= majority
    reason = (
        f"without {replica_id}, {len(remaining)} caught-up voter(s) {remaining} of {len(voters)}; "
        f"a majority is {majority}"
    )
    return {"id": replica_id, "safe": safe, "reason": reason}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "health", help="is the controller quorum healthy, and may a controller restart now",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap-controller", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        help="controllers to ask, as kafka-metadata-quorum's --bootstrap-controller")
    parser.add_argument("--safe-to-restart", type=int, metavar="ID",
                        help="exit 0 only if controller ID may restart now without losing a caught-up majority")
    parser.add_argument("--caught-up-ms", type=int, default=DEFAULT_CAUGHT_UP_MS, metavar="MS",
                        help=f"a voter caught up within this many ms counts as caught up (default {DEFAULT_CAUGHT_UP_MS})")
    parser.add_argument("--timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS, metavar="MS",
                        help=f"give up on finding an active controller after this long (default {DEFAULT_TIMEOUT_MS})")
    parser.add_argument("--json", action="store_true", help="print the assessment as one JSON object")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties: security.protocol, sasl.*, ssl.* (as Kafka's admin client)")


def _ask(bootstrap: str, timeout_s: float, security: ClientSecurity = PLAINTEXT) -> Any:
    """The quorum's view, or None when no active controller answered in time."""
    import trio

    from tools.quorum_client import QuorumToolError, describe

    try:
        return trio.run(describe, bootstrap, timeout_s, security)
    except (OSError, trio.TooSlowError, QuorumToolError):  # ConnectionError is an OSError
        return None


def run(args: argparse.Namespace) -> int:
    from server.config import ConfigError

    try:
        security = load_client_security(args.command_config)
    except ConfigError as exc:
        print(f"kwire health: --command-config {args.command_config}: {exc}", file=sys.stderr)
        return NO_QUORUM
    view = _ask(args.bootstrap_controller, args.timeout_ms / 1000, security)
    if view is None:
        result = Assessment(status=NO_QUORUM, problems=["no active controller answered"])
        if args.safe_to_restart is not None:
            result.safe_to_restart = {"id": args.safe_to_restart, "safe": False, "reason": "no quorum"}
    else:
        result = assess(view, caught_up_ms=args.caught_up_ms, restart_id=args.safe_to_restart)
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True))
    else:
        _print_text(result)
    if result.status == NO_QUORUM:
        return NO_QUORUM
    if result.safe_to_restart is not None:
        return HEALTHY if result.safe_to_restart["safe"] else DEGRADED
    return result.status


def _print_text(result: Assessment) -> None:
    out = sys.stdout
    print(f"Status: {STATUS_NAMES[result.status]}", file=out)
    if result.leader_id is not None:
        print(f"Leader: {result.leader_id} in epoch {result.leader_epoch}, high watermark {result.high_watermark}", file=out)
    for voter in result.voters:
        ago = "never" if voter.caught_up_ms_ago is None else f"{voter.caught_up_ms_ago} ms ago"
        print(f"Voter {voter.replica_id}: log end offset {voter.log_end_offset}, lag {voter.lag}, "
              f"last caught up {ago}{'' if voter.caught_up else ' (not caught up)'}", file=out)
    for problem in result.problems:
        print(f"Problem: {problem}", file=out)
    if result.safe_to_restart is not None:
        verdict = "safe" if result.safe_to_restart["safe"] else "not safe"
        print(f"Restart of {result.safe_to_restart['id']}: {verdict} ({result.safe_to_restart['reason']})", file=out)
