"""``kwire simulate``: a what-if run of the node's own controller quorum against a fleet of
simulated brokers, on one virtual clock from one seed (``tools.simulate.fleet``, ``fleet_spec``), reported as
figures and plots (``tools.simulate.report``)::

    kwire simulate --brokers 1000 --partitions 100000 --scenario zonal-outage --racks 3 \\
        --seed 1 --out sim-out --placer tools.examples.placers:LeadersOffRackPlacer \\
        --config kwire.placer.leaders.off.rack=rack-a \\
        --compare server.controller.placement:StripedReplicaPlacer

``--placer`` and ``--compare`` name placers as ``kwire.replica.placer.class`` does
(``module:Class``; default kwire's ``StripedReplicaPlacer``); ``--config KEY=VALUE`` sets any
server.properties key of the simulated controllers (the placers' own settings, or the node's
timers such as ``leader.imbalance.check.interval.seconds``). ``--compare`` runs the same seed
again with the second placer; the plots put the two side by side.

Writes ``OUT/summary.json`` (byte-identical for the same arguments), ``OUT/cpu.json`` (wall and
CPU times), the PNGs and ``OUT/index.html``, and prints a one-screen summary (``--json``: the
summary's figures as JSON on stdout). Exit status 0; 1 when the controller refused the run's
topic creation (a placer that raises or answers an invalid assignment: its error and message
are printed); 2 for a bad argument, property or plug-in.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from server.config import ConfigError
from server.node.plugins import REPLICA_PLACER
from tools.simulate.fleet import FleetCluster
from tools.simulate.fleet_scenarios import SCENARIOS, figures, run_fleet
from tools.simulate.fleet_spec import FleetSpec, PlacementFailed
from tools.simulate.report import (
    cpu_record,
    run_record,
    spec_record,
    write_cpu,
    write_plots,
    write_summary,
)

__all__ = ["add_parser", "run", "simulate"]

DEFAULT_PLACER = "StripedReplicaPlacer (default)"


def add_parser(subparsers: Any) -> None:
    """``kwire simulate``."""
    parser = subparsers.add_parser(
        "simulate", help="what-if runs of the controller against simulated brokers, with plots",
        description="Run the node's own controller quorum against a fleet of simulated brokers under a "
                    "scenario, on one virtual clock from one seed; write summary.json (the same for the "
                    "same arguments), cpu.json, PNG plots and index.html into --out.",
    )
    parser.add_argument("--brokers", type=int, required=True, help="simulated brokers")
    parser.add_argument("--partitions", type=int, required=True, help="partitions, in topics of 1,000")
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    parser.add_argument("--out", type=Path, required=True, help="directory for summary.json, the plots, index.html")
    parser.add_argument("--racks", type=int, default=1, help="racks the brokers are spread over (default 1)")
    parser.add_argument("--duration-s", type=int, default=360, help="simulated seconds (default 360)")
    parser.add_argument("--replication-factor", type=int, default=3, help="of every partition (default 3)")
    parser.add_argument("--placer", metavar="MODULE:CLASS", help="kwire.replica.placer.class of the run")
    parser.add_argument("--compare", metavar="MODULE:CLASS",
                        help="run again with this placer on the same seed and plot both")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a server.properties key of the simulated controllers (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--fault-at-s", type=int, default=60, help="when the scenario's fault starts (default 60)")
    parser.add_argument("--no-plots", action="store_true", help="write summary.json and cpu.json only")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _properties(pairs: list[str]) -> dict[str, str]:
    properties = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"--config {pair!r}: expected KEY=VALUE")
        properties[key.strip()] = value.strip()
    return properties


def simulate(
    spec: FleetSpec, placers: list[str | None], out: Path, *, progress: bool = False, plots: bool = True
) -> dict[str, Any]:
    """Run ``spec`` once per placer (None: the default) and write the report into ``out``;
    returns the summary (as summary.json holds it) with ``plots`` (the files written, or the
    reason there are none; ``plots`` False: none). Raises ValueError, ConfigError,
    PlacementFailed."""
    out.mkdir(parents=True, exist_ok=True)
    runs, cpus = [], []
    for placer in placers:
        properties = dict(spec.properties)
        if placer is not None:
            properties[REPLICA_PLACER] = placer
        run_spec = dataclasses.replace(spec, properties=properties)
        label = placer or DEFAULT_PLACER
        wall, cpu = time.perf_counter(), time.process_time()

        def report(cluster: FleetCluster, label: str = label, wall: float = wall) -> None:
            if progress:
                print(f"  {label}: {cluster.now / 1000:.0f}/{spec.duration_s} simulated s, "
                      f"{time.perf_counter() - wall:.0f} s", file=sys.stderr, flush=True)

        cluster = run_fleet(run_spec, report)
        runs.append(run_record(label, cluster, figures(cluster)))
        cpus.append(cpu_record(label, cluster, time.perf_counter() - wall, time.process_time() - cpu))
    write_summary(out, spec_record(spec), runs)
    write_cpu(out, cpus)
    written = ["no plots asked for"]
    if plots:
        try:
            written = [str(path) for path in write_plots(out, runs, cpus)]
        except ImportError:
            written = ["no plots: matplotlib is not installed (pip install 'kwire[simulate]')"]
    return {"spec": spec_record(spec), "runs": runs, "cpu": cpus, "plots": written}


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{key.removeprefix('rack-')}={item}" for key, item in value.items())
    return "-" if value is None else str(value)


def _screen(result: dict[str, Any], out: Path) -> str:
    spec = result["spec"]
    lines = [f"kwire simulate: {spec['scenario']}, {spec['brokers']} brokers on {spec['racks']} rack(s), "
             f"{spec['partitions']} partitions, seed {spec['seed']}, {spec['duration_s']} simulated s"]
    runs = result["runs"]
    rows = [("", [run["placer"] for run in runs])]
    rows += [(key, [_text(run["figures"][key]) for run in runs]) for key in runs[0]["figures"]]
    rows.append(("wall s (cpu.json)", [str(cpu["wall_s"]) for cpu in result["cpu"]]))
    key_width = max(len(key) for key, _ in rows)
    widths = [max(len(values[i]) for _, values in rows) for i in range(len(runs))]
    for key, values in rows:
        lines.append(f"{key:{key_width}}  " + "  ".join(f"{v:>{w}}" for v, w in zip(values, widths, strict=True)))
    lines.append(f"report: {out / 'index.html'} (figures: {out / 'summary.json'})")
    if not result["plots"][0].endswith(".png"):
        lines.append(result["plots"][0])
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``kwire simulate`` (module docstring); the exit status."""
    try:
        spec = FleetSpec(
            brokers=args.brokers, partitions=args.partitions, scenario=args.scenario, seed=args.seed,
            racks=args.racks, duration_s=args.duration_s, replication_factor=args.replication_factor,
            properties=_properties(args.config), fault_at_s=args.fault_at_s,
        )
        placers = [args.placer] + ([args.compare] if args.compare else [])
        result = simulate(spec, placers, args.out, progress=not args.quiet and not args.json, plots=not args.no_plots)
    except (ValueError, ConfigError) as exc:
        print(f"kwire simulate: {exc}", file=sys.stderr)
        return 2
    except PlacementFailed as exc:
        print(f"kwire simulate: the controller refused the run's topic creation: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"spec": result["spec"], "runs": [
            {"placer": r["placer"], "figures": r["figures"], "events": r["events"]} for r in result["runs"]
        ], "out": str(args.out)}, indent=1))
    else:
        print(_screen(result, args.out))
    return 0
