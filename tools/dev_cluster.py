"""``kwire dev-cluster``: a local N-node KRaft controller quorum, one process per node.

Usage::

    kwire dev-cluster [--nodes 3] [--dir ./dev-cluster] [--base-port 19093] [--fresh]
                      [--throughput RECORDS_PER_S [--record-size 256]] [--override key=value ...]
                      [--brokers N [--kafka-version VERSION] [--racks R]]
                      [--placer module:Class] [--create-topic-policy module:Class]
                      [--alter-config-policy module:Class]

On first use ``--dir`` gets one directory per node (``node-<id>/``: ``server.properties``,
``data/`` formatted as ``kafka-storage format --initial-controllers`` formats it -- a dynamic
quorum at kraft.version 1 with every node an initial voter -- and the node's ``stdout.log`` and
``server.log``) and ``cluster.json`` (cluster id, node ids, ports, directory ids). A later run
on the same directory starts the same cluster again. Node ids are 1..N, node ``i`` listens on
``CONTROLLER://localhost:<base-port + i - 1>``.

Each node runs ``kwire server-start``, or ``kwire test-raft-server --json`` with
``--throughput`` (the leader then writes a steady load and its nodes report commit latency in
``stdout.log``). The command prints how to reach the quorum and runs until SIGINT/SIGTERM, then
stops every node gracefully (SIGTERM; a leader resigns). A node that dies is reported, not
restarted.

``--brokers N`` adds N stock Kafka brokers of a pinned release (default the newest) with ids
101.., each in ``broker-<id>/`` with its client listener on ``PLAINTEXT://localhost:<base-port +
100 + i>`` (``brokers.json`` records them): they register with the kwire quorum and the command
prints their bootstrap servers once every one is running. ``--kafka-version`` picks any release
of ``kafka.releases`` in ``compat/kafka-versions.properties`` (3.3.2 .. 4.4.0), fetched from Maven
Central on first use; a new cluster is then formatted at that line's newest metadata.version
(``--release-version``), as a static quorum (``controller.quorum.voters``) before 3.9, whose
brokers cannot name a dynamic one (KIP-853). ``--racks R`` gives the brokers ``broker.rack``
``rack-a``, ``rack-b``, ... in turn (broker 101 on rack-a, 102 on rack-b, ...), fixed when the
brokers are created.

The controllers' plug-ins (``server.node.plugins``): ``--placer``, ``--create-topic-policy`` and
``--alter-config-policy`` set ``kwire.replica.placer.class``, ``create.topic.policy.class.name``
and ``alter.config.policy.class.name`` on every controller, as ``--override`` would, each a
Python class named ``module:Class``; a plug-in's own settings go in ``--override`` (e.g.
``kwire.placer.leaders.off.rack=rack-a``), which wins over the flags. The module is imported from
kwire's tree or from the directory the command runs in (the nodes get it on ``PYTHONPATH``), and
checked before any node starts. Plug-ins and overrides are given on each run: they are not
stored with the cluster.

The cluster itself is :class:`tools.local_cluster.DevCluster` (and
:class:`tools.stock_brokers.StockBrokers` for the brokers), which tests and benchmarks use as
libraries; this module parses the arguments and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tools.local_cluster import DEFAULT_BASE_PORT, DevCluster, DevClusterError
from tools.stock_brokers import BrokerNode, StockBrokerError, StockBrokers

BROKER_ID_BASE = 101
BROKER_PORT_OFFSET = 100
BROKER_START_TIMEOUT_S = 120.0
PLUGIN_FLAGS = {
    "placer": "kwire.replica.placer.class",
    "create_topic_policy": "create.topic.policy.class.name",
    "alter_config_policy": "alter.config.policy.class.name",
}
"""Each plug-in flag's destination and the controller key it sets."""

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("dev-cluster", help="run a local multi-node quorum for development")
    p.add_argument("--nodes", type=int, default=3, help="number of controllers (default 3)")
    p.add_argument("--dir", default="dev-cluster", help="where the nodes live (default ./dev-cluster)")
    p.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT,
                   help=f"node i listens on base-port + i - 1 (default {DEFAULT_BASE_PORT})")
    p.add_argument("--fresh", action="store_true", help="delete --dir first and format a new cluster")
    p.add_argument("--throughput", type=int, metavar="records/sec",
                   help="run kwire test-raft-server: the leader writes this many records per second")
    p.add_argument("--record-size", type=int, default=256, metavar="bytes",
                   help="record value size for --throughput (default 256)")
    p.add_argument("--override", action="append", default=[], metavar="key=value",
                   help="a property for every node (repeatable)")
    p.add_argument("--brokers", type=int, default=0, metavar="N",
                   help="also run N stock Kafka brokers on the quorum (ids 101..; needs make compat-jars)")
    p.add_argument("--kafka-version", default=None,
                   help="Kafka release of the brokers, any of kafka.releases in compat/kafka-versions.properties, "
                        "fetched on first use; the quorum is formatted at its line's metadata.version "
                        "(default: the newest pinned)")
    p.add_argument("--racks", type=int, default=0, metavar="R",
                   help="spread the brokers over R racks: broker.rack=rack-a, rack-b, ... in turn")
    plugins = p.add_argument_group("controller plug-ins", "Python classes named module:Class, importable "
                                   "from kwire or the current directory; their settings go in --override")
    plugins.add_argument("--placer", metavar="module:Class",
                         help="kwire.replica.placer.class (e.g. tools.examples.placers:LeadersOffRackPlacer)")
    plugins.add_argument("--create-topic-policy", metavar="module:Class",
                         help="create.topic.policy.class.name (Kafka's CreateTopicPolicy, in Python)")
    plugins.add_argument("--alter-config-policy", metavar="module:Class",
                         help="alter.config.policy.class.name (Kafka's AlterConfigPolicy, in Python)")


def rack_of(index: int) -> str:
    """The name ``--racks`` gives its ``index``-th rack (0 based): rack-a,
    rack-b, ..., rack-z, rack-aa, ..."""
    name = ""
    index += 1
    while index:
        index, digit = divmod(index - 1, 26)
        name = chr(ord("a") + digit) + name
    return f"rack-{name}"


def controller_overrides(args: argparse.Namespace) -> list[str]:
    """The controllers' ``key=value`` overrides: the plug-in flags', then ``--override``'s.
    Raises DevClusterError when a plug-in named does not import or lacks its method."""
    from server.config import ConfigError
    from server.config_values import parse_overrides
    from server.node.plugins import check_plugins

    overrides = [f"{key}={value}" for flag, key in PLUGIN_FLAGS.items() if (value := getattr(args, flag, None))]
    overrides += args.override
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # where the nodes find it too (DevCluster.python_path)
    try:
        check_plugins(parse_overrides(overrides))
    except ConfigError as exc:
        raise DevClusterError(f"controller plug-in: {exc}") from exc
    return overrides


def _broker_release(version: str | None) -> str:
    """The brokers' release: ``version`` (default: the newest pinned), a release of the matrix
    (``kafka.releases``), fetched into compat/.cache when it is not there yet. Raises
    DevClusterError for a release that is not pinned."""
    from tools import stock_kafka

    version = version or stock_kafka.PINNED_VERSIONS[-1]
    if version not in stock_kafka.MATRIX_RELEASES:
        raise DevClusterError(f"Kafka {version} is not pinned (kafka.releases: {', '.join(stock_kafka.MATRIX_RELEASES)})")
    if not stock_kafka.is_fetched(version):
        print(f"kwire dev-cluster: fetching Kafka {version} from Maven Central", file=sys.stderr, flush=True)
        stock_kafka.ensure_fetched(version)
    return version


def _brokers(root: Path, cluster: DevCluster, count: int, version: str | None, base_port: int,
             racks: int = 0) -> StockBrokers | None:
    """The cluster's stock brokers: those ``brokers.json`` records, else ``count`` new ones,
    spread over ``racks`` racks."""

    described = root / "brokers.json"
    if described.exists():
        saved = json.loads(described.read_text())
        if count not in (0, len(saved["brokers"])):
            raise DevClusterError(f"{root} holds {len(saved['brokers'])} brokers, not {count} (use --fresh)")
        if racks not in (0, saved.get("racks", 0)):
            raise DevClusterError(f"{root} holds brokers on {saved.get('racks', 0)} racks, not {racks} (use --fresh)")
        nodes = [BrokerNode(b["id"], b["port"], root / f"broker-{b['id']}") for b in saved["brokers"]]
        return StockBrokers(root, saved["version"], nodes, cluster.host)
    if count <= 0:
        return None
    version = _broker_release(version)
    ports = {BROKER_ID_BASE + i: base_port + BROKER_PORT_OFFSET + i for i in range(count)}
    rack = {BROKER_ID_BASE + i: {"broker.rack": rack_of(i % racks)} for i in range(count)} if racks > 0 else None
    brokers = StockBrokers.create(
        root, version, cluster_id=cluster.cluster_id, bootstrap_controllers=cluster.bootstrap_controllers,
        ports=ports, host=cluster.host, quorum_voters=cluster.quorum_voters, broker_properties=rack,
    )
    described.write_text(json.dumps(
        {"version": version, "racks": racks,
         "brokers": [{"id": i, "port": p, **({"rack": rack[i]["broker.rack"]} if rack else {})} for i, p in ports.items()]},
        indent=2) + "\n")
    return brokers


def _racks(root: Path) -> dict[int, str]:
    """Broker id -> rack, as ``brokers.json`` records them (none without ``--racks``)."""
    saved = json.loads((root / "brokers.json").read_text())
    return {b["id"]: b["rack"] for b in saved["brokers"] if "rack" in b}


def run(args: argparse.Namespace) -> int:
    from storage.errors import FormatError
    from tools import stock_kafka

    root = Path(args.dir).resolve()
    workload = None if args.throughput is None else (args.throughput, args.record_size)
    try:
        if args.racks < 0 or (args.racks and args.brokers <= 0 and not (root / "brokers.json").exists()):
            raise DevClusterError("--racks R needs --brokers N (the racks are the brokers')")
        overrides = controller_overrides(args)
        if args.fresh and root.exists():
            shutil.rmtree(root)
        if (root / "cluster.json").exists():
            cluster = DevCluster.open(root, workload=workload, overrides=overrides)
            if len(cluster.nodes) != args.nodes:
                print(f"kwire dev-cluster: {root} holds {len(cluster.nodes)} nodes, not "
                      f"{args.nodes} (use --fresh)", file=sys.stderr)
                return 1
        else:
            # Brokers of a release get a quorum at its line's metadata.version (static before 3.9).
            release_version = None
            if args.brokers > 0 and args.kafka_version is not None:
                release_version = stock_kafka.release_facts(_broker_release(args.kafka_version)).metadata_version
            cluster = DevCluster.create(root, args.nodes, base_port=args.base_port, workload=workload,
                                        overrides=overrides, release_version=release_version)
        cluster.python_path = [os.getcwd()]
        base_port = min(n.port for n in cluster.nodes.values())
        brokers = _brokers(root, cluster, args.brokers, args.kafka_version, base_port, args.racks)
    except (DevClusterError, FormatError, OSError) as exc:
        print(f"kwire dev-cluster: {exc}", file=sys.stderr)
        return 1
    except (stock_kafka.KafkaUnavailable, stock_kafka.KafkaCommandError) as exc:
        print(f"kwire dev-cluster: stock Kafka brokers need the pinned jars (make compat-jars): {exc}", file=sys.stderr)
        return 1

    stop_requested = False

    def request_stop(signum: int, _frame: Any) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        cluster.start()
        leader, epoch = cluster.wait_for_leader(60.0)
        if brokers is not None:
            brokers.start()
            brokers.wait_listed(set(brokers.nodes), BROKER_START_TIMEOUT_S)
    except (DevClusterError, StockBrokerError) as exc:
        print(f"kwire dev-cluster: {exc}", file=sys.stderr)
        if brokers is not None:
            brokers.stop()
        cluster.stop()
        return 1
    print(f"kwire dev-cluster: {len(cluster.nodes)} controllers, cluster id {cluster.cluster_id}, "
          f"leader {leader} in epoch {epoch}")
    for node in cluster.nodes.values():
        print(f"  node {node.node_id}  {cluster.address(node.node_id)}  pid {node.process and node.process.pid}"
              f"  data {node.data_dir}  log {node.log_path}")
    print("Reach it with:")
    if cluster.direct_describe and brokers is not None:
        # below metadata.version 3.7-IV0 controllers refuse tools' DescribeCluster (KIP-919)
        print(f"  kafka-metadata-quorum.sh --bootstrap-server {brokers.bootstrap_servers} describe --status")
    else:
        print(f"  kwire metadata-quorum --bootstrap-controller {cluster.bootstrap_controllers} describe --status")
        print(f"  kafka-metadata-quorum.sh --bootstrap-controller {cluster.address(leader)} describe --replication")
    if workload is not None:
        print(f"  workload reports (JSON lines): {root}/node-*/stdout.log")
    if brokers is not None:
        print(f"  {len(brokers.nodes)} stock Kafka {brokers.version} brokers, all running: "
              f"--bootstrap-server {brokers.bootstrap_servers}  (output: {root}/broker-*/stdout.log)")
        racks = _racks(root)
        if racks:
            print("  racks: " + ", ".join(f"{broker} {rack}" for broker, rack in racks.items()))
    for flag, key in PLUGIN_FLAGS.items():
        if getattr(args, flag, None):
            print(f"  {key}={getattr(args, flag)}")
    print("Ctrl-C stops every node.", flush=True)
    reported: set[int] = set()
    while not stop_requested:
        time.sleep(0.2)
        for node in cluster.nodes.values():
            if node.process is not None and not node.running and node.node_id not in reported:
                reported.add(node.node_id)
                print(f"kwire dev-cluster: node {node.node_id} exited with status "
                      f"{node.process.returncode}; see {node.log_path}", flush=True)
        for broker in [] if brokers is None else brokers.nodes.values():
            if broker.process is not None and not broker.running and -broker.broker_id not in reported:
                reported.add(-broker.broker_id)
                print(f"kwire dev-cluster: broker {broker.broker_id} exited with status "
                      f"{broker.process.returncode}; see {broker.stdout_path}", flush=True)
    print("kwire dev-cluster: stopping", flush=True)
    if brokers is not None:
        brokers.stop()
    cluster.stop()
    return 0
