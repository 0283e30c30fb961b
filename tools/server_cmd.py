"""``kwire server-start`` and ``kwire run-standalone``: run a KRaft controller node.

``kwire server-start CONFIG [--override key=value ...]`` takes ``kafka-server-start.sh``'s
arguments: a server.properties file and ``--override`` pairs applied on top of it. The
metadata log directory must already be formatted (``kwire storage format``).

``kwire run-standalone --config F --data D [--override key=value ...]`` is what ``make run``
starts: ``D`` becomes ``metadata.log.dir`` and ``log.dirs``; on first use ``D`` is formatted as
``kafka-storage format --standalone`` does (a random cluster id, this node the single initial
voter at its first advertised controller listener, kraft.version 1;
:func:`tools.storage_format.format_standalone`); then the node serves.

Both log one line with the listener address once serving. SIGTERM or SIGINT stops the node
gracefully (a leader resigns and sends EndQuorumEpoch) and the command exits 0. Exit status 1
for a configuration, format or storage problem (the message on stderr). A write, fsync or
rename that fails on the metadata log directory while serving (a full disk, an I/O error) stops
the node at once, as Kafka halts on a log I/O error: one ``FATAL`` line naming the directory,
the operation and the error (:mod:`server.node.fatal`), and exit status 1.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]

log = logging.getLogger("kwire.server")


def add_parser(subparsers: Any) -> None:
    start = subparsers.add_parser(
        "server-start", help="run a KRaft controller from a server.properties file"
    )
    start.add_argument("config", metavar="server.properties")
    start.add_argument(
        "--override", action="append", default=[], metavar="key=value",
        help="a property that overrides the file's value (repeatable)",
    )
    standalone = subparsers.add_parser(
        "run-standalone", help="format (on first use) and run a single standalone controller"
    )
    standalone.add_argument("--config", required=True, metavar="server.properties")
    standalone.add_argument("--data", required=True, metavar="DIR",
                            help="the metadata log directory (formatted on first use)")
    standalone.add_argument(
        "--override", action="append", default=[], metavar="key=value",
        help="a property that overrides the file's value (repeatable)",
    )


async def serve_until_signalled(config: Any) -> None:
    """Run a node until SIGTERM/SIGINT, then stop it gracefully."""
    import trio

    from server.node import Node

    node = Node(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        log.info(
            "kwire node %d serving %s (cluster id %s, directory id %s)",
            config.node_id,
            ", ".join(f"{e.name}://{e.host}:{e.port}" for e in node.endpoints),
            node.cluster_id,
            node.directory_id,
        )

        async def on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("signal %s: stopping node %d", signal.Signals(signum).name, config.node_id)
                    await node.shutdown()
                    return

        nursery.start_soon(on_signal)
        # the node returns after shutdown(); then the signal task is done too
    log.info("node %d stopped", config.node_id)


def run(args: argparse.Namespace) -> int:
    import trio

    from server.config import ConfigError, load_config
    from server.node import NodeStartupError
    from server.node.fatal import name_fatal_level, run_or_halt
    from server.node.plugins import check_plugins
    from storage.errors import FormatError, StorageError
    from tools.storage_format import format_standalone

    name_fatal_level()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
    )
    overrides = list(args.override)
    try:
        if args.command == "run-standalone":
            data = str(Path(args.data).resolve())
            overrides += [f"metadata.log.dir={data}", f"log.dirs={data}"]
            config = load_config(args.config, overrides)
            format_standalone(config)
        else:
            config = load_config(args.config, overrides)
        check_plugins(config.raw)
        return run_or_halt(lambda: trio.run(serve_until_signalled, config), config, log)
    except (ConfigError, FormatError, StorageError, NodeStartupError, OSError) as exc:
        print(f"kwire {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
