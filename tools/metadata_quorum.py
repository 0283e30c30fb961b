"""``kwire metadata-quorum``: what ``kafka-metadata-quorum.sh`` prints, plus ``--json``.

Usage::

    kwire metadata-quorum --bootstrap-controller HOST:PORT describe --status [--json]
    kwire metadata-quorum --bootstrap-controller HOST:PORT describe --replication
        [--human-readable] [--json]
    kwire metadata-quorum --bootstrap-controller HOST:PORT --command-config CONTROLLER.properties
        add-controller [--dry-run] [--json]
    kwire metadata-quorum --bootstrap-controller HOST:PORT remove-controller
        --controller-id ID --controller-directory-id DIRECTORY_ID [--dry-run] [--json]
    kwire metadata-quorum --bootstrap-controller HOST:PORT --command-config NEW.properties
        replace-controller [--format] [--dry-run] [--json]
    kwire metadata-quorum --bootstrap-controller HOST:PORT reassign
        --voters ID@HOST:PORT:DIRECTORY_ID,... [--listener NAME] [--dry-run] [--json]

Like Kafka's MetadataQuorumCommand with ``--bootstrap-controller`` (KIP-919), it asks the
bootstrap controller for the controllers (DescribeCluster, EndpointType 2), then asks the active
controller for the quorum (DescribeQuorum on ``__cluster_metadata-0``), through
:func:`tools.quorum_client.describe`; this module parses the arguments and prints. The text
output is the same as Kafka's tool, byte for byte: ``--status`` pads each label to 24
characters; ``--replication`` left-aligns every cell, pads it to its column's width and follows
it with a tab.

``add-controller`` reads the joining controller's own configuration (``--command-config``) as
Kafka's tool does: ``node.id``, ``process.roles`` with ``controller``, the metadata directory
(``metadata.log.dir``, else the first of ``log.dirs``) and the directory id in its
meta.properties, and the endpoints of ``controller.listener.names`` (``advertised.listeners``
over ``listeners``; no host means ``localhost``); it sends AddRaftVoter. ``remove-controller``
sends RemoveRaftVoter. Both print Kafka's line (``Added controller ...``, ``Removed KRaft
controller ...``, or ``DRY RUN of ...`` without sending anything), and Kafka's messages on
errors (exit 1).

``replace-controller`` (a voter whose disk was lost) and ``reassign`` (a whole new voter set)
are kwire's own: they plan single-voter changes that keep a caught-up majority and carry them
out through the same admin RPCs (:mod:`tools.voter_changes`), so they work on Kafka
controllers too. ``--dry-run`` prints the plan; running again after an interruption resumes.

Every connection logs in as ``--command-config``'s client keys say, as Kafka's admin client
takes them from that file (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
``ssl.truststore.*``, ...; :mod:`tools.client_config`): a controller listener that is SSL,
SASL_PLAINTEXT or SASL_SSL is reached the way ``kafka-metadata-quorum.sh --command-config``
reaches it. For add-controller and replace-controller the same file is also the new
controller's configuration, whose listener-prefixed keys the client ignores, as Kafka's does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from typing import Any

from kwire.uuid import ZERO_UUID, Uuid
from messages.generated.describe_quorum_response import (
    Node,
    PartitionData,
    ReplicaState,
)
from tools.client_config import ClientSecurity, load_client_security
from tools.quorum_client import (
    QuorumToolError,
    QuorumView,
    add_raft_voter,
    describe,
    remove_raft_voter,
)
from tools.voter_changes import (
    DEFAULT_CATCH_UP_TIMEOUT_MS,
    DEFAULT_MAX_LAG_MS,
    TargetVoter,
    endpoints_text,
)

# -------------------------------------------------------------------------------------------
# formatting (pure)


def _endpoint_text(name: str, host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{name}://{host}:{port}"


def _node_text(replica: ReplicaState, nodes: dict[int, Node]) -> str:
    directory = replica.replica_directory_id
    dir_text = "null" if directory == ZERO_UUID else f'"{directory}"'
    text = f'{{"id": {replica.replica_id}, "directoryId": {dir_text}'
    node = nodes.get(replica.replica_id)
    if node is not None and node.listeners:
        endpoints = ", ".join(
            f'"{_endpoint_text(lst.name, lst.host, lst.port)}"' for lst in node.listeners
        )
        text += f", \"endpoints\": [{endpoints}]"
    return text + "}"


def _leader_state(partition: PartitionData) -> ReplicaState:
    for voter in partition.current_voters:
        if voter.replica_id == partition.leader_id:
            return voter
    raise QuorumToolError(
        f"the leader {partition.leader_id} is not among the current voters"
    )


def _max_lag(partition: PartitionData) -> tuple[int, int]:
    """(MaxFollowerLag, MaxFollowerLagTimeMs) as Kafka's tool computes them."""
    if not partition.current_voters:
        raise QuorumToolError("the quorum has no current voters")
    leader = _leader_state(partition)
    lagging = min(partition.current_voters, key=lambda v: v.log_end_offset)
    lag = leader.log_end_offset - lagging.log_end_offset
    if lagging is leader:
        lag_time = 0
    elif leader.last_caught_up_timestamp != -1 and lagging.last_caught_up_timestamp != -1:
        lag_time = leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
    else:
        lag_time = -1
    return lag, lag_time


def format_status(view: QuorumView) -> str:
    """The text of ``describe --status``."""
    p = view.partition
    nodes = {n.node_id: n for n in view.nodes}
    lag, lag_time = _max_lag(p)
    rows = [
        ("ClusterId:", view.cluster_id),
        ("LeaderId:", p.leader_id),
        ("LeaderEpoch:", p.leader_epoch),
        ("HighWatermark:", p.high_watermark),
        ("MaxFollowerLag:", lag),
        ("MaxFollowerLagTimeMs:", lag_time),
        ("CurrentVoters:", "[" + ", ".join(_node_text(v, nodes) for v in p.current_voters) + "]"),
        ("CurrentObservers:", "[" + ", ".join(_node_text(o, nodes) for o in p.observers) + "]"),
    ]
    return "\n".join(f"{label:<24}{value}" for label, value in rows)


def _timestamp_cell(value: int, human_readable: bool, now_ms: int) -> str:
    if value == -1 or not human_readable:
        return str(value)
    return f"{now_ms - value} ms ago"


def replication_rows(view: QuorumView, human_readable: bool, now_ms: int) -> list[list[str]]:
    """The rows of ``describe --replication``: the leader, the other voters, the observers."""
    p = view.partition
    leader = _leader_state(p)
    ordered = [(leader, "Leader")]
    ordered += [(v, "Follower") for v in p.current_voters if v is not leader]
    ordered += [(o, "Observer") for o in p.observers]
    return [
        [
            str(r.replica_id),
            str(r.replica_directory_id),
            str(r.log_end_offset),
            str(leader.log_end_offset - r.log_end_offset),
            _timestamp_cell(r.last_fetch_timestamp, human_readable, now_ms),
            _timestamp_cell(r.last_caught_up_timestamp, human_readable, now_ms),
            status,
        ]
        for r, status in ordered
    ]


REPLICATION_HEADER = [
    "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
    "LastCaughtUpTimestamp", "Status",
]


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Kafka's ToolsUtils.prettyPrintTable: each cell padded to its column, then a tab."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["".join(f"{cell:<{widths[i]}}\t" for i, cell in enumerate(r)) for r in [header, *rows]]
    return "\n".join(lines)


def format_replication(view: QuorumView, human_readable: bool, now_ms: int) -> str:
    return format_table(REPLICATION_HEADER, replication_rows(view, human_readable, now_ms))


def _replica_json(r: ReplicaState, role: str, leader_leo: int) -> dict[str, Any]:
    return {
        "nodeId": r.replica_id,
        "directoryId": str(r.replica_directory_id),
        "logEndOffset": r.log_end_offset,
        "lag": leader_leo - r.log_end_offset,
        "lastFetchTimestamp": r.last_fetch_timestamp,
        "lastCaughtUpTimestamp": r.last_caught_up_timestamp,
        "status": role,
    }


def status_json(view: QuorumView) -> dict[str, Any]:
    p = view.partition
    lag, lag_time = _max_lag(p)
    nodes = {n.node_id: n for n in view.nodes}

    def node(r: ReplicaState) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": r.replica_id,
            "directoryId": None if r.replica_directory_id == ZERO_UUID
            else str(r.replica_directory_id),
        }
        n = nodes.get(r.replica_id)
        if n is not None and n.listeners:
            entry["endpoints"] = [_endpoint_text(x.name, x.host, x.port) for x in n.listeners]
        return entry

    return {
        "clusterId": view.cluster_id,
        "leaderId": p.leader_id,
        "leaderEpoch": p.leader_epoch,
        "highWatermark": p.high_watermark,
        "maxFollowerLag": lag,
        "maxFollowerLagTimeMs": lag_time,
        "currentVoters": [node(v) for v in p.current_voters],
        "currentObservers": [node(o) for o in p.observers],
    }


def replication_json(view: QuorumView) -> list[dict[str, Any]]:
    p = view.partition
    leader = _leader_state(p)
    out = [_replica_json(leader, "Leader", leader.log_end_offset)]
    out += [_replica_json(v, "Follower", leader.log_end_offset)
            for v in p.current_voters if v is not leader]
    out += [_replica_json(o, "Observer", leader.log_end_offset) for o in p.observers]
    return out


# -------------------------------------------------------------------------------------------
# add-controller / remove-controller


def controller_to_add(path: str, *, unformatted_ok: bool = False) -> TargetVoter:
    """Read ``path`` (a controller's server.properties) as Kafka's MetadataQuorumCommand does;
    raises QuorumToolError with its messages. With ``unformatted_ok``, a metadata directory not
    formatted yet gives the zero UUID as its directory id."""
    import javaproperties

    from server.config import ConfigError, parse_listeners
    from storage.errors import KafkaStorageError
    from storage.meta_properties import read_meta_properties

    try:
        with open(path, encoding="utf-8") as fh:
            props = dict(javaproperties.load(fh))
    except OSError as exc:
        raise QuorumToolError(f"cannot read {path}: {exc}") from exc
    if "node.id" not in props:
        raise QuorumToolError("node.id not found in configuration file. Is this a valid controller configuration file?")
    node_id = int(props["node.id"])
    if node_id < 0:
        raise QuorumToolError("node.id was negative in configuration file. Is this a valid controller configuration file?")
    if "controller" not in props.get("process.roles", ""):
        raise QuorumToolError(
            "process.roles did not contain 'controller' in configuration file. Is this a valid controller "
            "configuration file?"
        )
    if "metadata.log.dir" in props:
        directory = props["metadata.log.dir"]
    elif "log.dirs" in props:
        directory = props["log.dirs"].strip().split(",")[0]
    else:
        raise QuorumToolError(
            "Neither metadata.log.dir nor log.dirs were found. Is this a valid controller configuration file?"
        )
    try:
        meta = read_meta_properties(directory)
    except KafkaStorageError as exc:
        raise QuorumToolError(f"Unable to read meta.properties from {directory}: {exc}") from exc
    if meta is None and not unformatted_ok:
        raise QuorumToolError(f"Unable to read meta.properties from {directory}")
    directory_id = ZERO_UUID if meta is None else meta.directory_id
    if directory_id is None:
        raise QuorumToolError(f"No directory id found in {directory}")
    try:
        listeners = {x.name: x for x in parse_listeners("listeners", props.get("listeners", ""))}
        listeners.update({x.name: x for x in parse_listeners("advertised.listeners", props.get("advertised.listeners", ""))})
    except ConfigError as exc:
        raise QuorumToolError(str(exc)) from exc
    if "controller.listener.names" not in props:
        raise QuorumToolError("controller.listener.names was not found. Is this a valid controller configuration file?")
    endpoints: list[tuple[str, str, int]] = []
    for name in props["controller.listener.names"].split(","):
        name = name.strip().upper()
        listener = listeners.get(name)
        if listener is None:
            raise QuorumToolError(f"Cannot find information about controller listener name: {name}")
        endpoint = (listener.name, listener.host or "localhost", listener.port)
        if endpoint not in endpoints:
            endpoints.append(endpoint)
    return TargetVoter(node_id, directory_id, tuple(endpoints))


def format_add(controller: TargetVoter, dry_run: bool) -> str:
    """Kafka's add-controller line."""
    return (
        f"{'DRY RUN of adding' if dry_run else 'Added'} controller {controller.voter_id} "
        f"with directory id {controller.directory_id} and endpoints: {endpoints_text(controller.endpoints)}"
    )


def format_remove(controller_id: int, directory_id: Uuid, dry_run: bool) -> str:
    """Kafka's remove-controller line (two spaces after "removing"/"Removed", as Kafka prints)."""
    return f"{'DRY RUN of removing ' if dry_run else 'Removed '} KRaft controller {controller_id} with directory id {directory_id}"


def _security(args: argparse.Namespace) -> ClientSecurity:
    """How the tool's connections log in (``--command-config``). Raises QuorumToolError."""
    from server.config import ConfigError

    try:
        return load_client_security(args.command_config)
    except ConfigError as exc:
        raise QuorumToolError(f"--command-config {args.command_config}: {exc}") from exc


def _voter_change(args: argparse.Namespace) -> int:
    import trio

    if args.quorum_command == "add-controller":
        if args.command_config is None:
            raise QuorumToolError(
                "You must supply the configuration file of the controller you are adding when using add-controller."
            )
        controller = controller_to_add(args.command_config)
        if not args.dry_run:
            trio.run(partial(
                add_raft_voter, args.bootstrap_controller, controller.voter_id, controller.directory_id,
                controller.endpoints, security=_security(args),
            ))
        document: dict[str, Any] = {
            "command": "add-controller", "dryRun": args.dry_run, "controllerId": controller.voter_id,
            "directoryId": str(controller.directory_id),
            "endpoints": [{"listener": n, "host": h, "port": p} for n, h, p in controller.endpoints],
        }
        text = format_add(controller, args.dry_run)
    else:
        if args.controller_id < 0:
            raise QuorumToolError(f"Invalid negative --controller-id: {args.controller_id}")
        try:
            directory_id = Uuid.from_string(args.controller_directory_id)
        except ValueError as exc:
            raise QuorumToolError(f"Failed to parse --controller-directory-id: {exc}") from exc
        if not args.dry_run:
            trio.run(partial(remove_raft_voter, args.bootstrap_controller, args.controller_id, directory_id,
                             security=_security(args)))
        document = {
            "command": "remove-controller", "dryRun": args.dry_run, "controllerId": args.controller_id,
            "directoryId": str(directory_id),
        }
        text = format_remove(args.controller_id, directory_id, args.dry_run)
    print(json.dumps(document) if args.json else text)
    return 0


def _planned_change(args: argparse.Namespace) -> int:
    import trio

    from storage.errors import FormatError
    from storage.format import parse_dynamic_voters
    from tools.voter_changes import describe_when_led, execute, plan_reassignment, plan_replacement

    security = _security(args)
    view = trio.run(partial(describe_when_led, args.bootstrap_controller, security=security))
    if args.quorum_command == "replace-controller":
        if args.command_config is None:
            raise QuorumToolError(
                "You must supply the configuration file of the replacing controller when using replace-controller."
            )
        if args.format and not args.dry_run:
            _format_observer(args.command_config, view.cluster_id)
        new = controller_to_add(args.command_config, unformatted_ok=args.format and args.dry_run)
        steps = plan_replacement(view, new)
    else:
        try:
            voters = parse_dynamic_voters(args.voters)
        except FormatError as exc:
            raise QuorumToolError(f"--voters: {exc}") from exc
        listener = args.listener.upper()
        target = [TargetVoter(v.node_id, v.directory_id, ((listener, v.host, v.port),)) for v in voters]
        steps = plan_reassignment(view, target)
    lines = [f"{i}. {step.describe()}" for i, step in enumerate(steps, 1)] or ["nothing to do: the voter set is already the target"]
    if args.dry_run:
        if args.json:
            print(json.dumps({"command": args.quorum_command, "dryRun": True, "steps": [s.to_json() for s in steps]}))
        else:
            print("\n".join(["DRY RUN of:", *lines]))
        return 0
    report = (lambda _line: None) if args.json else print
    after = trio.run(
        lambda: execute(
            args.bootstrap_controller, steps, max_lag_ms=args.max_lag_ms,
            catch_up_timeout_ms=args.catch_up_timeout_ms, max_steps=args.max_steps, report=report,
            security=security,
        )
    )
    if args.max_steps is not None and args.max_steps < len(steps) and not args.json:
        print(f"stopped after {args.max_steps} of {len(steps)} steps: run the command again to continue")
    voters_now = [(v.replica_id, str(v.replica_directory_id)) for v in after.partition.current_voters]
    if args.json:
        print(json.dumps({
            "command": args.quorum_command, "dryRun": False, "steps": [s.to_json() for s in steps],
            "voters": [{"controllerId": i, "directoryId": d} for i, d in voters_now],
            "leaderId": after.partition.leader_id, "leaderEpoch": after.partition.leader_epoch,
        }))
    else:
        print("voters now: " + ", ".join(f"{i} ({d})" for i, d in voters_now))
    return 0


def _format_observer(path: str, cluster_id: str) -> None:
    """Format the replacing controller's directories, if they are not yet, as
    ``kwire storage format --no-initial-controllers`` with the quorum's cluster id."""
    from server.config import ConfigError, load_config
    from storage.errors import FormatError, KafkaStorageError
    from tools.storage_cmd import format_command

    try:
        format_command(load_config(path), cluster_id=cluster_id, no_initial_controllers=True, ignore_formatted=True)
    except (ConfigError, FormatError, KafkaStorageError, OSError) as exc:
        raise QuorumToolError(f"formatting for {path}: {exc}") from exc


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "metadata-quorum", help="describe and change the KRaft quorum, as kafka-metadata-quorum.sh"
    )
    parser.add_argument("--bootstrap-controller", required=True, metavar="HOST:PORT")
    parser.add_argument(
        "--command-config", metavar="FILE",
        help="client properties (security.protocol, sasl.*, ssl.*, as Kafka's admin client); for "
        "add-controller and replace-controller also the configuration of the controller to add",
    )
    commands = parser.add_subparsers(dest="quorum_command", required=True)
    d = commands.add_parser("describe", help="describe the metadata quorum")
    what = d.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true")
    what.add_argument("--replication", action="store_true")
    d.add_argument("--human-readable", action="store_true")
    d.add_argument("--json", action="store_true", help="print JSON instead of text")
    a = commands.add_parser("add-controller", help="Add a controller to the KRaft controller cluster")
    r = commands.add_parser("remove-controller", help="Remove a controller from the KRaft controller cluster")
    r.add_argument("--controller-id", "-i", type=int, required=True, help="The id of the controller to remove.")
    r.add_argument(
        "--controller-directory-id", "-d", required=True, help="The directory ID of the controller to remove."
    )
    rp = commands.add_parser(
        "replace-controller",
        help="replace a voter whose disk was lost by the same node id with a new directory id "
        "(the controller of --command-config), keeping a caught-up majority",
    )
    rp.add_argument("--format", action="store_true", help="format the new controller's directories first if needed")
    ra = commands.add_parser("reassign", help="move the voter set to --voters by safe single-voter changes")
    ra.add_argument("--voters", required=True, metavar="ID@HOST:PORT:DIRECTORY_ID,...")
    ra.add_argument("--listener", default="CONTROLLER", help="the listener name of the --voters endpoints")
    for sub in (a, r, rp, ra):
        sub.add_argument("--dry-run", action="store_true", help="print what would be done (the plan), change nothing")
        sub.add_argument("--json", action="store_true", help="print JSON instead of text")
    for sub in (rp, ra):
        sub.add_argument("--max-lag-ms", type=int, default=DEFAULT_MAX_LAG_MS,
                         help="how recently a voter must have caught up to count toward a safe majority")
        sub.add_argument("--catch-up-timeout-ms", type=int, default=DEFAULT_CATCH_UP_TIMEOUT_MS,
                         help="how long to wait for a new controller to catch up as an observer")
        sub.add_argument("--max-steps", type=int, metavar="N",
                         help="carry out at most N steps of the plan, then stop (run again to go on)")


def run(args: argparse.Namespace) -> int:
    import trio

    if args.quorum_command in ("add-controller", "remove-controller", "replace-controller", "reassign"):
        try:
            if args.quorum_command in ("replace-controller", "reassign"):
                return _planned_change(args)
            return _voter_change(args)
        except (QuorumToolError, OSError, trio.TooSlowError) as exc:
            print(str(exc) or type(exc).__name__, file=sys.stderr)
            return 1
    try:
        view = trio.run(partial(describe, args.bootstrap_controller, security=_security(args)))
    except (QuorumToolError, OSError, trio.TooSlowError) as exc:
        print(str(exc) or type(exc).__name__, file=sys.stderr)
        return 1
    if args.status:
        print(json.dumps(status_json(view)) if args.json else format_status(view))
    else:
        now_ms = int(time.time() * 1000)
        if args.json:
            print(json.dumps(replication_json(view)))
        else:
            print(format_replication(view, args.human_readable, now_ms))
    return 0
