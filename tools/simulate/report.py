"""The report of ``kwire simulate``: ``summary.json`` (every figure and series of each run, from
simulated time and counts only, so byte-identical for the same seed), ``cpu.json`` (wall and
process CPU times, which vary from run to run), PNG plots and ``index.html`` showing them.

Plots (one column per placer when ``--compare`` ran two): ``leaders.png`` (leaders per broker
over time as a heat map, brokers grouped by rack, and leaders per rack), ``partitions.png``
(offline partitions, partitions led by a dead broker the controller has not fenced yet, and
under-replicated partitions over time), ``moves.png`` (leader changes per sample),
``controller.png`` (records the controllers committed and the process CPU their steps took, per
simulated second). Plotting needs matplotlib (``pip install 'kwire[simulate]'``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tools.simulate.fleet import FleetCluster

__all__ = ["PLOTS", "cpu_record", "run_record", "write_cpu", "write_plots", "write_summary"]

PLOTS = ("leaders.png", "partitions.png", "moves.png", "controller.png")


def run_record(label: str, cluster: FleetCluster, figures: dict[str, Any]) -> dict[str, Any]:
    """One run as ``summary.json`` holds it: the placer, the figures, the events and the
    series (one value per sample; ``leaders_per_broker`` one list per sample, brokers in id
    order, with their ids and racks beside)."""
    samples = cluster.samples
    return {
        "placer": label,
        "figures": figures,
        "events": [[t, what] for t, what in cluster.events_log],
        "brokers": [b.broker_id for b in cluster.brokers],
        "racks": [b.rack for b in cluster.brokers],
        "series": {
            "time_s": [s.time_s for s in samples],
            "offline": [s.offline for s in samples],
            "led_by_dead_broker": [s.led_by_dead for s in samples],
            "under_replicated": [s.under_replicated for s in samples],
            "leader_moves": [s.leader_moves for s in samples],
            "records_committed": [s.records for s in samples],
            "fenced_brokers": [s.fenced for s in samples],
            "alive_brokers": [s.alive for s in samples],
            "leaders_per_broker": [s.leaders for s in samples],
        },
    }


def cpu_record(label: str, cluster: FleetCluster, wall_s: float, process_cpu_s: float) -> dict[str, Any]:
    """One run's times (not deterministic): wall seconds, process CPU seconds, and per sample
    the process CPU seconds and the seconds spent in the controllers' steps."""
    return {
        "placer": label,
        "wall_s": round(wall_s, 3),
        "process_cpu_s": round(process_cpu_s, 3),
        "controller_steps_cpu_s": round(cluster.step_cpu_s, 3),
        "time_s": [s.time_s for s in cluster.samples],
        "controller_steps_cpu_s_per_sample": [round(s.controller_s, 6) for s in cluster.samples],
        "process_cpu_s_per_sample": [round(s.process_cpu_s, 6) for s in cluster.samples],
    }


def write_summary(out: Path, spec: dict[str, Any], runs: Sequence[dict[str, Any]]) -> Path:
    """``out/summary.json``: the spec and the runs (:func:`run_record`), keys in a fixed order."""
    path = out / "summary.json"
    path.write_text(_json({"spec": spec, "runs": list(runs)}) + "\n")
    return path


def _json(value: Any, indent: str = "") -> str:
    """``value`` as JSON, objects one key a line, lists on one line each (a series of a
    thousand brokers by 360 samples is 360 lines, not 360,000)."""
    if isinstance(value, dict) and value:
        inner = indent + " "
        items = ",\n".join(f"{inner}{json.dumps(key)}: {_json(item, inner)}" for key, item in value.items())
        return "{\n" + items + "\n" + indent + "}"
    if isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        inner = indent + " "
        return "[\n" + ",\n".join(inner + _json(item, inner) for item in value) + "\n" + indent + "]"
    return json.dumps(value, separators=(",", ":"))


def write_cpu(out: Path, cpus: Sequence[dict[str, Any]]) -> Path:
    """``out/cpu.json``: the runs' times (:func:`cpu_record`)."""
    path = out / "cpu.json"
    path.write_text(json.dumps({"runs": list(cpus)}, indent=1) + "\n")
    return path


def _events(ax: Any, run: dict[str, Any]) -> None:
    for t, _ in run["events"]:
        ax.axvline(t, color="0.6", linestyle=":", linewidth=0.8)


def write_plots(out: Path, runs: Sequence[dict[str, Any]], cpus: Sequence[dict[str, Any]]) -> list[Path]:
    """The PNGs (module docstring) and ``index.html``; returns the files written. Raises
    ImportError without matplotlib."""
    from matplotlib.figure import Figure

    columns = len(runs)
    written = []

    fig = Figure(figsize=(7 * columns, 8), layout="constrained")
    axes = fig.subplots(2, columns, squeeze=False, height_ratios=(3, 2))
    for col, run in enumerate(runs):
        series = run["series"]
        order = sorted(range(len(run["brokers"])), key=lambda i: (run["racks"][i] or "", run["brokers"][i]))
        matrix = [[row[i] for row in series["leaders_per_broker"]] for i in order]
        times = series["time_s"]
        heat = axes[0][col]
        if matrix and times:
            image = heat.imshow(matrix, aspect="auto", interpolation="nearest", cmap="viridis", origin="lower",
                                extent=(times[0] - 0.5, times[-1] + 0.5, -0.5, len(order) - 0.5))
            fig.colorbar(image, ax=heat, label="leaders")
        heat.set_title(f"{run['placer']}\nleaders per broker (brokers by rack, then id)")
        heat.set_ylabel("broker (index)")
        racks = sorted({r for r in run["racks"] if r is not None})
        lines = axes[1][col]
        for rack in racks:
            members = [i for i, r in enumerate(run["racks"]) if r == rack]
            lines.plot(times, [sum(row[i] for i in members) for row in series["leaders_per_broker"]], label=rack)
        _events(lines, run)
        lines.set_title("leaders per rack")
        lines.set_xlabel("simulated time (s)")
        lines.set_ylabel("partitions led")
        if racks:
            lines.legend(loc="best")
    written.append(_save(fig, out / "leaders.png"))

    fig = Figure(figsize=(7 * columns, 4.5), layout="constrained")
    axes = fig.subplots(1, columns, squeeze=False, sharey=True)
    for col, run in enumerate(runs):
        series, ax = run["series"], axes[0][col]
        ax.plot(series["time_s"], series["under_replicated"], label="under-replicated (ISR < replicas)")
        ax.plot(series["time_s"], series["led_by_dead_broker"], label="led by a dead, unfenced broker")
        ax.plot(series["time_s"], series["offline"], label="offline (no leader)")
        _events(ax, run)
        ax.set_title(f"{run['placer']}\npartitions")
        ax.set_xlabel("simulated time (s)")
        ax.legend(loc="upper right")
    written.append(_save(fig, out / "partitions.png"))

    fig = Figure(figsize=(7 * columns, 4), layout="constrained")
    axes = fig.subplots(1, columns, squeeze=False, sharey=True)
    for col, run in enumerate(runs):
        series, ax = run["series"], axes[0][col]
        ax.bar(series["time_s"], series["leader_moves"], width=1.0, color="tab:red")
        _events(ax, run)
        total = run["figures"]["leader_moves"]
        ax.set_title(f"{run['placer']}\nleader changes per sample ({total} in all)")
        ax.set_xlabel("simulated time (s)")
    written.append(_save(fig, out / "moves.png"))

    fig = Figure(figsize=(7 * columns, 6), layout="constrained")
    axes = fig.subplots(2, columns, squeeze=False, sharex=True)
    for col, (run, cpu) in enumerate(zip(runs, cpus, strict=True)):
        series = run["series"]
        axes[0][col].plot(series["time_s"], series["records_committed"], color="tab:purple")
        axes[0][col].set_yscale("symlog")
        axes[0][col].set_title(f"{run['placer']}\nrecords committed per sample")
        axes[1][col].plot(cpu["time_s"], cpu["process_cpu_s_per_sample"], color="tab:gray",
                          label="process CPU-s (controllers and simulated brokers)")
        axes[1][col].plot(cpu["time_s"], cpu["controller_steps_cpu_s_per_sample"], color="tab:orange",
                          label="CPU-s of the 3 controllers' steps")
        axes[1][col].set_title("CPU per sample (measured: cpu.json)")
        axes[1][col].legend(loc="upper right")
        axes[1][col].set_xlabel("simulated time (s)")
        for ax in axes[:, col]:
            _events(ax, run)
    written.append(_save(fig, out / "controller.png"))
    written.append(_write_index(out, runs, cpus))
    return written


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=90)
    return path


def _write_index(out: Path, runs: Sequence[dict[str, Any]], cpus: Sequence[dict[str, Any]]) -> Path:
    names = [html.escape(run["placer"]) for run in runs]
    rows = []
    for key in runs[0]["figures"]:
        cells = "".join(f"<td>{html.escape(json.dumps(run['figures'][key]))}</td>" for run in runs)
        rows.append(f"<tr><th>{html.escape(key)}</th>{cells}</tr>")
    cells = "".join(f"<td>{cpu['wall_s']} s wall, {cpu['process_cpu_s']} CPU-s</td>" for cpu in cpus)
    rows.append(f"<tr><th>run time (not in summary.json)</th>{cells}</tr>")
    events = "".join(
        f"<li>{html.escape(run['placer'])}: " + "; ".join(f"{t:g} s {html.escape(w)}" for t, w in run["events"]) + "</li>"
        for run in runs
    )
    images = "".join(f'<h2>{html.escape(name)}</h2><img src="{name}" alt="{name}">' for name in PLOTS)
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>kwire simulate</title>"
        "<style>body{font-family:sans-serif;margin:1em}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:left}table{border-collapse:collapse}img{max-width:100%}</style></head><body>"
        f"<h1>kwire simulate: {' vs '.join(names)}</h1><table><tr><th>figure</th>"
        + "".join(f"<th>{name}</th>" for name in names)
        + "</tr>" + "".join(rows) + f"</table><h2>events</h2><ul>{events}</ul>{images}"
        "<p>Figures and series: summary.json; times: cpu.json.</p></body></html>\n"
    )
    path = out / "index.html"
    path.write_text(page)
    return path


def spec_record(spec: Any) -> dict[str, Any]:
    """A :class:`~tools.simulate.fleet.FleetSpec` as summary.json holds it."""
    record = asdict(spec)
    record["properties"] = dict(sorted(spec.properties.items()))
    return record
