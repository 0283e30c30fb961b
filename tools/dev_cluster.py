"""``kwire dev-cluster``: a local N-node KRaft controller quorum, one process per node.

Usage::

    kwire dev-cluster [--nodes 3] [--dir ./dev-cluster] [--base-port 19093] [--fresh]
                      [--throughput RECORDS_PER_S [--record-size 256]] [--override key=value ...]
                      [--brokers N [--kafka-version VERSION]]

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
brokers cannot name a dynamic one (KIP-853).

The cluster itself is :class:`tools.local_cluster.DevCluster` (and
:class:`tools.stock_brokers.StockBrokers` for the brokers), which tests and benchmarks use as
libraries; this module parses the arguments and prints.
"""

from __future__ import annotations

import argparse
import json
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


def _brokers(root: Path, cluster: DevCluster, count: int, version: str | None, base_port: int) -> StockBrokers | None:
    """The cluster's stock brokers: those ``brokers.json`` records, else ``count`` new ones."""

    described = root / "brokers.json"
    if described.exists():
        saved = json.loads(described.read_text())
        if count not in (0, len(saved["brokers"])):
            raise DevClusterError(f"{root} holds {len(saved['brokers'])} brokers, not {count} (use --fresh)")
        nodes = [BrokerNode(b["id"], b["port"], root / f"broker-{b['id']}") for b in saved["brokers"]]
        return StockBrokers(root, saved["version"], nodes, cluster.host)
    if count <= 0:
        return None
    version = _broker_release(version)
    ports = {BROKER_ID_BASE + i: base_port + BROKER_PORT_OFFSET + i for i in range(count)}
    brokers = StockBrokers.create(
        root, version, cluster_id=cluster.cluster_id, bootstrap_controllers=cluster.bootstrap_controllers,
        ports=ports, host=cluster.host, quorum_voters=cluster.quorum_voters,
    )
    described.write_text(json.dumps(
        {"version": version, "brokers": [{"id": i, "port": p} for i, p in ports.items()]}, indent=2) + "\n")
    return brokers


def run(args: argparse.Namespace) -> int:
    from storage.errors import FormatError
    from tools import stock_kafka

    root = Path(args.dir).resolve()
    workload = None if args.throughput is None else (args.throughput, args.record_size)
    try:
        if args.fresh and root.exists():
            shutil.rmtree(root)
        if (root / "cluster.json").exists():
            cluster = DevCluster.open(root, workload=workload, overrides=args.override)
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
                                        overrides=args.override, release_version=release_version)
        base_port = min(n.port for n in cluster.nodes.values())
        brokers = _brokers(root, cluster, args.brokers, args.kafka_version, base_port)
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
