"""``kwire failpoint set|list|clear``: arm, list and disarm a running node's failpoints
(``server.failpoints``) through its ``/failpoints`` endpoint beside ``/metrics`` (the node's
``kwire.prometheus.port``, started with ``kwire.unsafe.test.failpoints=true``).

    kwire failpoint set controller.heartbeat 'error(41)' --probability 0.5 --endpoint 127.0.0.1:9404
    kwire failpoint list --endpoint 127.0.0.1:9404 [--json]
    kwire failpoint clear [NAME] --endpoint 127.0.0.1:9404

Exit status 0 on success, 1 when the node refuses (bad name or action, failpoints off) or cannot
be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

__all__ = ["add_parser", "call", "run"]


def call(endpoint: str, method: str, name: str | None = None, body: dict[str, Any] | None = None,
         timeout_s: float = 10.0) -> Any:
    """``method`` on ``http://ENDPOINT/failpoints[/NAME]`` with the JSON ``body``: the decoded
    JSON answer; raises RuntimeError with the node's reason on a refusal (HTTP 4xx)."""
    url = f"http://{endpoint}/failpoints" + (f"/{name}" if name else "")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            reason = exc.reason
        raise RuntimeError(f"HTTP {exc.code}: {reason}") from exc


def add_parser(subparsers: Any) -> None:
    """``kwire failpoint``."""
    parser = subparsers.add_parser("failpoint", help="arm, list and clear a running node's failpoints")
    actions = parser.add_subparsers(dest="failpoint_command", metavar="ACTION", required=True)
    set_ = actions.add_parser("set", help="arm a failpoint")
    set_.add_argument("name", help="the point, e.g. controller.heartbeat (see `list`)")
    set_.add_argument("action", help="delay(MS), error(CODE), drop or halt")
    set_.add_argument("--probability", type=float, default=1.0, help="share of hits that fire (default 1)")
    list_ = actions.add_parser("list", help="list every point and what is armed")
    list_.add_argument("--json", action="store_true", help="print the node's JSON answer")
    clear = actions.add_parser("clear", help="disarm one point, or all")
    clear.add_argument("name", nargs="?", help="the point (default: all)")
    for sub in (set_, list_, clear):
        sub.add_argument("--endpoint", required=True, metavar="HOST:PORT",
                         help="the node's metrics address (kwire.prometheus.host:kwire.prometheus.port)")


def run(args: argparse.Namespace) -> int:
    """Run ``kwire failpoint``."""
    try:
        if args.failpoint_command == "set":
            answer = call(args.endpoint, "PUT", args.name, {"action": args.action, "probability": args.probability})
            entry = answer[args.name]
            print(f"{args.name}: {entry['action']} probability {entry['probability']}")
        elif args.failpoint_command == "clear":
            answer = call(args.endpoint, "DELETE", args.name)
            print(f"{args.name or 'all'}: {'cleared' if answer['cleared'] else 'was not armed'}")
        else:
            answer = call(args.endpoint, "GET")
            if args.json:
                print(json.dumps(answer, indent=2, sort_keys=True))
            else:
                for name, entry in answer.items():
                    armed = "off" if entry["action"] is None else (
                        f"{entry['action']} probability {entry['probability']} fired {entry['fired']}")
                    print(f"{name:24} {armed:40} {entry['where']}")
    except (RuntimeError, OSError) as exc:
        print(f"kwire failpoint: {exc}", file=sys.stderr)
        return 1
    return 0
