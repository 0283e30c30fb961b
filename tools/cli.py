"""The ``kwire`` console script: ``kwire <command> [options]``.

Each command lives in its own module, imported only when that command runs, so a missing or
broken module affects that command alone. A command module provides:

* ``add_parser(subparsers)`` — adds its subcommand(s) to an argparse subparsers action
  (``dest="command"``, so ``args.command`` names the one chosen);
* ``run(args) -> int`` — the exit status.

A command whose module is not present prints why and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["COMMANDS", "main"]

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "server-start": ("tools.server_cmd", "run a KRaft controller from a server.properties file"),
    "run-standalone": (
        "tools.server_cmd",
        "format (on first use) and run a single standalone controller",
    ),
    "storage": ("tools.storage_cmd", "format and inspect metadata log directories"),
    "metadata-quorum": (
        "tools.metadata_quorum",
        "describe the KRaft quorum, as kafka-metadata-quorum.sh",
    ),
    "health": ("tools.health", "is the controller quorum healthy; may a controller restart now"),
    "dump-log": ("tools.dump_log", "print log segments and snapshots, as kafka-dump-log.sh"),
    "api-versions": ("tools.api_versions", "print the API versions and features a node advertises"),
    "dev-cluster": ("tools.dev_cluster", "run a local multi-node quorum for development"),
    "test-raft-server": (
        "tools.raft_server_load",
        "a controller whose leader writes a steady load, as Kafka's TestRaftServer",
    ),
    "failpoint": ("tools.failpoint_cmd", "arm, list and clear a running node's failpoints (tests only)"),
    "simulate": (
        "tools.simulate.command",
        "what-if runs of the controller against simulated brokers (placers, faults), with plots",
    ),
    "audit": ("tools.audit", "check a cluster's metadata logs (PySpark) and its brokers' replicas"),
}


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kwire",
        description="kwire: a KRaft controller quorum that speaks Kafka's protocol and formats.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _load(name: str) -> ModuleType | None:
    module_name = COMMANDS[name][0]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            print(
                f"kwire {name}: this command is not available: module {module_name} is not "
                "installed in this build",
                file=sys.stderr,
            )
        else:
            print(
                f"kwire {name}: this command cannot start: {module_name} needs the missing "
                f"module {exc.name!r}",
                file=sys.stderr,
            )
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kwire`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0].startswith("-") or args_list[0] not in COMMANDS:
        top = _top_parser()
        if not args_list:
            top.print_help(sys.stderr)
            return 2
        top.parse_args(args_list)  # prints help, or the "invalid choice" error, and exits
        return 2
    name = args_list[0]
    module = _load(name)
    if module is None:
        return 2
    add_parser = getattr(module, "add_parser", None)
    run = getattr(module, "run", None)
    if add_parser is None or run is None:
        print(
            f"kwire {name}: module {module.__name__} does not provide add_parser() and run()",
            file=sys.stderr,
        )
        return 2
    parser = argparse.ArgumentParser(prog="kwire")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_parser(sub)
    if name not in sub.choices:
        print(f"kwire {name}: module {module.__name__} does not define this command", file=sys.stderr)
        return 2
    args = parser.parse_args(args_list)
    result = run(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
