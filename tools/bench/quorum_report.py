"""The quorum section's report: ``DIR/index.html`` with PNG plots beside it, static (no
JavaScript), to open from the file system, as :mod:`compat.faults.report` draws a fault run.

``python -m tools.bench quorum --throughput --report DIR`` keeps the section's rows as
``DIR/quorum.json`` (:func:`save`) and draws them (:func:`write_report`); ``python -m
tools.bench.quorum_report DIR [--from-json OUT]`` draws them again, or draws the rows a
``python -m tools.bench quorum --json OUT`` run wrote. Per listener (PLAINTEXT, and SSL with
``--tls``), along the offered load (records/s, log scale), one panel per
``controller.quorum.append.linger.ms``, kwire beside Kafka:

* ``latency-<listener>.png``: commit latency p50 and p99, ms (Kafka's TestRaftServer prints no
  p50: its p75 stands in, drawn dashed and named so; its histogram tops out at 250 ms, drawn
  as a line);
* ``cpu-<listener>.png``: CPU seconds of the three processes per million committed records
  (log scale: it falls by two orders of magnitude along the curve);
* ``committed-<listener>.png``: committed records/s against the load offered, the line of
  keeping up drawn beside.

A side that produced no figures at a load has no point there; the table under the plots says
why.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

ROWS_FILE = "quorum.json"
COLOURS = {"kwire": "#1f4e9c", "kafka": "#d2691e"}
WIDTH_IN, HEIGHT_IN, DPI = 11.0, 4.0, 90
KAFKA_HISTOGRAM_TOP_MS = 250.0
"""TestRaftServer's latency histogram spans 0-250 ms (``tools.bench.quorum``)."""


def save(directory: Path, rows: Sequence[dict[str, Any]], failovers: Sequence[dict[str, Any]] = (), *,
         environment: str = "", command: str = "") -> Path:
    """Write the section's rows (:class:`tools.bench.quorum.Row` as dicts) and failover rows
    (:class:`tools.bench.failover.FailoverRow` as dicts) as ``directory/quorum.json``, with the
    machine line and the command that measured them."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ROWS_FILE
    data = {"environment": environment, "command": command, "rows": list(rows), "failovers": list(failovers)}
    path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    return path


def rows_from_results(results_json: Path) -> dict[str, Any]:
    """The rows a ``python -m tools.bench ... --json OUT`` run of the quorum section kept in its
    results (each figure's ``extra`` holds both sides' rows), as :func:`save` writes them."""
    data = json.loads(results_json.read_text(encoding="utf-8"))
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for result in data.get("results", []):
        if result.get("section") != "quorum":
            continue
        for key in ("kwire_row", "reference_row"):
            row = result.get("extra", {}).get(key)
            if row is not None:
                rows[(row["implementation"], row["listener"], row["load"], row["linger_ms"])] = row
    env = data.get("environment", {})
    load = " ".join(f"{x:.2f}" for x in env.get("loadavg", []))
    end = " ".join(f"{x:.2f}" for x in env.get("loadavg_end", []))
    text = (f"{env.get('implementation', '')} {env.get('python', '')} | {env.get('cpu', '')} x{env.get('cpus', '')}"
            f" | load average {load} at the start, {end} at the end | {env.get('time_utc', '')}")
    return {"environment": text, "command": f"(rows of {results_json.name})", "rows": list(rows.values()),
            "failovers": []}


def _side(row: dict[str, Any]) -> str:
    return "kwire" if row["implementation"] == "kwire" else "kafka"


def _panels(rows: Sequence[dict[str, Any]], title: str) -> tuple[Figure, list[Any], list[int]]:
    lingers = sorted({r["linger_ms"] for r in rows}, reverse=True)
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    axes = [fig.add_subplot(1, len(lingers), i + 1) for i in range(len(lingers))]
    fig.suptitle(title, fontsize=10)
    return fig, axes, lingers


def _series(rows: Sequence[dict[str, Any]], implementation: str, linger: int, field: str) -> tuple[list[int], list[float]]:
    points = sorted((r["load"], r[field]) for r in rows
                    if r["implementation"] == implementation and r["linger_ms"] == linger
                    and r.get("error") is None and r.get(field) is not None)
    return [p[0] for p in points], [float(p[1]) for p in points]


def _finish(fig: Figure, axes: list[Any], lingers: list[int], ylabel: str, path: Path) -> None:
    for ax, linger in zip(axes, lingers, strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(  # 2 and 5 of each decade only
            lambda value, _pos: f"{value:,g}" if f"{value:.0e}"[0] in "25" else ""))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_xlabel("offered load, records/s")
        ax.set_title(f"linger {linger} ms", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel(ylabel)
    fig.subplots_adjust(left=0.08, right=0.98, top=0.86, bottom=0.14, wspace=0.2)
    fig.savefig(path)


def plot_latency(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Commit latency p50 (Kafka: p75) and p99 along the load, one panel per linger."""
    fig, axes, lingers = _panels(rows, title)
    for ax, linger in zip(axes, lingers, strict=True):
        for implementation in dict.fromkeys(r["implementation"] for r in rows):
            colour = COLOURS[_side({"implementation": implementation})]
            low = "p50" if implementation == "kwire" else "p75"
            for field, style in ((low, "-" if low == "p50" else "--"), ("p99", ":")):
                xs, ys = _series(rows, implementation, linger, field)
                if xs:
                    ax.plot(xs, ys, style, marker="o", color=colour, label=f"{implementation} {field}")
        if any(r["implementation"] != "kwire" for r in rows):
            ax.axhline(KAFKA_HISTOGRAM_TOP_MS, color="#999", lw=0.8, ls="-.",
                       label="top of Kafka's histogram (249+: at or beyond)")
    _finish(fig, axes, lingers, "commit latency, ms", path)


def plot_cpu(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """CPU seconds of the three nodes per million committed records along the load."""
    fig, axes, lingers = _panels(rows, title)
    for ax, linger in zip(axes, lingers, strict=True):
        for implementation in dict.fromkeys(r["implementation"] for r in rows):
            xs, ys = _series(rows, implementation, linger, "cpu_s_per_million")
            if xs:
                ax.plot(xs, ys, "-", marker="o", color=COLOURS[_side({"implementation": implementation})],
                        label=implementation)
    _finish(fig, axes, lingers, "CPU-s per million records", path)


def plot_committed(rows: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Committed records/s against the offered load, with the line of keeping up."""
    fig, axes, lingers = _panels(rows, title)
    loads = sorted({r["load"] for r in rows})
    for ax, linger in zip(axes, lingers, strict=True):
        ax.plot(loads, loads, "-", color="#999", lw=0.8, label="offered")
        for implementation in dict.fromkeys(r["implementation"] for r in rows):
            xs, ys = _series(rows, implementation, linger, "records_per_s")
            if xs:
                ax.plot(xs, ys, "-", marker="o", color=COLOURS[_side({"implementation": implementation})],
                        label=implementation)
    _finish(fig, axes, lingers, "committed records/s", path)


PLOTS = (("latency", plot_latency, "commit latency p50 (Kafka: p75, dashed) and p99 (dotted), ms"),
         ("cpu", plot_cpu, "CPU-s of the three nodes per million committed records"),
         ("committed", plot_committed, "committed records/s against the offered load"))


def _img(name: str, alt: str) -> str:
    """An ``<img>`` with the plots' pixel size, so that the page lays out alike whether or not
    the image loads."""
    width, height = round(WIDTH_IN * DPI), round(HEIGHT_IN * DPI)
    return f'<img src="{html.escape(name)}" width="{width}" height="{height}" alt="{html.escape(alt)}">'


def _table(rows: Sequence[dict[str, Any]]) -> str:
    head = ("implementation", "listener", "linger ms", "load rec/s", "p50 ms", "p75 ms", "p99 ms", "p999 ms",
            "committed rec/s", "skipped", "CPU-s/M rec", "note")
    out = ["<table class=rows><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]

    def cell(value: Any, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    for r in sorted(rows, key=lambda r: (r["listener"], -r["linger_ms"], r["load"], _side(r))):
        note = f"error: {r['error']}" if r.get("error") else r.get("note", "")
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
            r["implementation"], r["listener"], r["linger_ms"], f"{r['load']:,}", cell(r.get("p50"), ".1f"),
            cell(r.get("p75"), ".1f"), cell(r.get("p99"), ".1f"), cell(r.get("p999"), ".1f"),
            cell(r.get("records_per_s"), ",.0f"), cell(r.get("skipped"), ","), cell(r.get("cpu_s_per_million"), ".2f"),
            note)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _failover_table(failovers: Sequence[dict[str, Any]]) -> str:
    out = ["<table class=rows><tr><th>implementation</th><th>signal to first commit, ms (each round)</th>"
           "<th>error</th></tr>"]
    for f in failovers:
        rounds = "; ".join(f"{r.get('signal_name')} {r.get('recovery_ms')}" for r in f.get("rounds", []))
        out.append(f"<tr><td>{html.escape(str(f.get('implementation')))}</td><td>{html.escape(rounds)}</td>"
                   f"<td>{html.escape(str(f.get('error') or ''))}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def write_report(directory: Path) -> Path:
    """Draw ``directory/quorum.json`` (:func:`save`) and write ``directory/index.html``; returns
    its path. Raises FileNotFoundError when the rows file is missing."""
    data = json.loads((directory / ROWS_FILE).read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = data["rows"]
    parts = [_HEAD, "<h1>Quorum bench: the load curve</h1>",
             f"<p>Command: <code>{html.escape(data.get('command', ''))}</code><br>"
             f"Machine: {html.escape(data.get('environment', ''))}</p>",
             "<p>Three nodes on loopback, the leader writing records of 256 B at each offered load (Kafka's"
             " TestRaftServer workload). kwire's latencies are exact over the measured window; Kafka's are its"
             " TestRaftServer metrics (no p50, histogram capped at 250 ms).</p>"]
    for listener in dict.fromkeys(r["listener"] for r in rows):
        chosen = [r for r in rows if r["listener"] == listener]
        parts.append(f"<h2>{html.escape(listener)} listeners</h2>")
        for kind, plot, what in PLOTS:
            name = f"{kind}-{listener.lower()}.png"
            plot(chosen, directory / name, f"{what} ({listener})")
            parts.append(_img(name, f"{what}, {listener}"))
    parts.append("<h2>Every row</h2>")
    parts.append(_table(rows))
    if data.get("failovers"):
        parts.append("<h2>Failover</h2>")
        parts.append(_failover_table(data["failovers"]))
    parts.append("</body></html>\n")
    index = directory / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    return index


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kwire quorum bench</title>
<style>
body { font-family: sans-serif; margin: 1em; }
table.rows { border-collapse: collapse; font-size: 0.85em; } table.rows td, table.rows th { border: 1px solid #ccc; padding: 2px 6px; }
img { display: block; margin: 0.4em 0; }
</style></head><body>"""


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.bench.quorum_report DIR [--from-json OUT]``: draw DIR's rows again, or
    first the rows of a runner's ``--json`` output."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench.quorum_report", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="where quorum.json is (or goes) and index.html is written")
    parser.add_argument("--from-json", type=Path, metavar="OUT",
                        help="take the rows from a `python -m tools.bench quorum --json OUT` run")
    args = parser.parse_args(argv)
    if args.from_json is not None:
        data = rows_from_results(args.from_json)
        save(args.directory, data["rows"], data["failovers"], environment=data["environment"],
             command=data["command"])
    print(write_report(args.directory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
