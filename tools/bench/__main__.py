"""Command line of the benchmarks: ``python -m tools.bench [SECTION...] [--json OUT]
[--record FILE] [--quick]`` (the quorum section also takes ``--throughput [RATES]``,
``--no-failover`` and ``--report DIR``).

With no section, every registered section runs. Exit status 1 when a section fails (for
instance when a precondition such as byte identity with the reference does not hold). With
``--record FILE`` (``make bench``: ``BENCHMARKS.md``), what each section that succeeded printed
replaces its block in FILE (:mod:`tools.bench.record`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import TextIO

from tools.bench import record
from tools.bench.core import (
    Result,
    SectionError,
    environment,
    format_environment,
    format_table,
    write_json,
)
from tools.bench.quorum import CURVE
from tools.bench.registry import SECTIONS

REPO_DIR = Path(__file__).resolve().parents[2]


class _Tee(io.TextIOBase):
    """Writes go to ``out`` and are kept, to record what a section printed."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.kept = io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench",
        description="kwire benchmarks, side by side with their reference implementation.",
    )
    parser.add_argument("sections", nargs="*", metavar="SECTION",
                        help=f"sections to run (default: all of {', '.join(SECTIONS)})")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    parser.add_argument("--record", metavar="FILE",
                        help="replace each section's block in FILE (Markdown, e.g. BENCHMARKS.md) with what "
                             "it printed, dated, with the commit and machine")
    parser.add_argument("--quick", action="store_true",
                        help="few short runs (smoke checks; figures are rough)")
    parser.add_argument("--runs", type=int, help="timed runs per side (default 7, quick 3)")
    parser.add_argument("--min-time", type=float,
                        help="seconds per timed run (default 0.2, quick 0.02)")
    parser.add_argument("--profile", action="store_true",
                        help="sections that support it also print a cProfile of kwire's side")
    parser.add_argument("--throughput", nargs="?", const=CURVE, metavar="RATES",
                        help="quorum: run a load curve at these offered loads, records/s, comma-separated "
                             f"(default with the flag alone: {CURVE}; without the flag: "
                             "TestRaftServer's 20000 alone)")
    parser.add_argument("--tls", action="store_true",
                        help="quorum: run each load on SSL controller listeners too, both sides")
    parser.add_argument("--no-failover", action="store_true",
                        help="quorum: skip the failover rounds (SIGTERM and SIGKILL of the leader)")
    parser.add_argument("--report", metavar="DIR", type=Path,
                        help="quorum: write DIR/index.html with PNG plots of latency, CPU and committed rate "
                             "along the load curve, kwire beside Kafka (tools.bench.quorum_report)")
    parser.add_argument("--replica-sizes", metavar="SIZES",
                        help="replicas: data sizes to audit, comma-separated, e.g. 1G,10G (default 1G,10G,50G; "
                             "quick 8M)")
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    args = parser.parse_args(argv)
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for name, module in SECTIONS.items():
            print(f"{name}\t{module}")
        return 0
    env = environment()
    print(format_environment(env), flush=True)
    names = args.sections or list(SECTIONS)
    results: list[Result] = []
    failed: list[str] = []
    recorded: dict[str, str] = {}
    commit = record.commit_label(REPO_DIR) if args.record else ""
    command = shlex.join(["python", "-m", "tools.bench", *(argv if argv is not None else sys.argv[1:])])
    for name in names:
        print(f"== {name}", flush=True)
        t0 = time.monotonic()
        started = environment()
        tee = _Tee(sys.stdout)
        try:
            with contextlib.redirect_stdout(tee):
                section = importlib.import_module(SECTIONS[name])
                section_results = section.run(args)
                print(format_table(section_results))
                print(f"({name}: {time.monotonic() - t0:.1f} s; load average at its end "
                      f"{' '.join(f'{x:.2f}' for x in environment()['loadavg'])})", flush=True)
        except SectionError as exc:
            print(f"section {name} stopped: {exc}", file=sys.stderr)
            failed.append(name)
            continue
        except Exception:
            traceback.print_exc()
            failed.append(name)
            continue
        results.extend(section_results)
        header = f"{started['time_utc']}, commit `{commit}`, `{command}`  \n{format_environment(started)}"
        recorded[name] = record.block(name, header=header, output=tee.kept.getvalue())
    end = environment()
    env["loadavg_end"] = end["loadavg"]
    print("load average at the end: " + " ".join(f"{x:.2f}" for x in end["loadavg"]))
    if args.json:
        write_json(args.json, env, results)
    if args.record and recorded:
        record.update(Path(args.record), SECTIONS, recorded)
        print(f"recorded {', '.join(recorded)} in {args.record}")
    if failed:
        print(f"failed sections: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
