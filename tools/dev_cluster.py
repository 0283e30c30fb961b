"""``kwire dev-cluster``: a local N-node KRaft controller quorum, one process per node.

Usage::

    kwire dev-cluster [--nodes 3] [--dir ./dev-cluster] [--base-port 19093] [--fresh]
                      [--throughput RECORDS_PER_S [--record-size 256]] [--override key=value ...]

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

The cluster itself is :class:`tools.local_cluster.DevCluster`, which tests and benchmarks use as a
library; this module parses the arguments and prints.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tools.local_cluster import DEFAULT_BASE_PORT, DevCluster, DevClusterError

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


def run(args: argparse.Namespace) -> int:
    from storage.errors import FormatError

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
            cluster = DevCluster.create(root, args.nodes, base_port=args.base_port, workload=workload,
                                        overrides=args.override)
    except (DevClusterError, FormatError, OSError) as exc:
        print(f"kwire dev-cluster: {exc}", file=sys.stderr)
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
    except DevClusterError as exc:
        print(f"kwire dev-cluster: {exc}", file=sys.stderr)
        cluster.stop()
        return 1
    print(f"kwire dev-cluster: {len(cluster.nodes)} controllers, cluster id {cluster.cluster_id}, "
          f"leader {leader} in epoch {epoch}")
    for node in cluster.nodes.values():
        print(f"  node {node.node_id}  {cluster.address(node.node_id)}  pid {node.process and node.process.pid}"
              f"  data {node.data_dir}  log {node.log_path}")
    print("Reach it with:")
    print(f"  kwire metadata-quorum --bootstrap-controller {cluster.bootstrap_controllers} describe --status")
    print(f"  kafka-metadata-quorum.sh --bootstrap-controller {cluster.address(leader)} describe --replication")
    if workload is not None:
        print(f"  workload reports (JSON lines): {root}/node-*/stdout.log")
    print("Ctrl-C stops every node.", flush=True)
    reported: set[int] = set()
    while not stop_requested:
        time.sleep(0.2)
        for node in cluster.nodes.values():
            if node.process is not None and not node.running and node.node_id not in reported:
                reported.add(node.node_id)
                print(f"kwire dev-cluster: node {node.node_id} exited with status "
                      f"{node.process.returncode}; see {node.log_path}", flush=True)
    print("kwire dev-cluster: stopping", flush=True)
    cluster.stop()
    return 0
