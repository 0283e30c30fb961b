"""A fault run's report: ``DIR/index.html`` with PNG plots beside it, static (no JavaScript), to
open from the file system.

A run's quorums are kept as JSON records (:func:`record`, saved by :func:`save` as
``DIR/quorum-<n>-<configuration>.json``); :func:`write_report` draws every record in ``DIR``,
so that runs of one seed on several configurations (``python -m compat.faults --configs kwire
--report DIR`` then ``--configs stock-4.4.0 --report DIR``) share one page, their quorums of
the same seed and nemeses side by side. Per quorum:

* ``*-latency.png``: each client operation's latency (completed minus invoked) at the time it
  was invoked, by outcome -- ``ok`` (acknowledged), ``failed`` (nothing sent), ``unknown``
  (sent, no answer or an error) -- for the config writes of :mod:`compat.faults.history`
  and, in runs with brokers, the admin requests of :mod:`compat.faults.cluster`; every
  nemesis window shaded and named (darker while the nemesis held, lighter from the heal until
  every voter caught up);
* ``*-throughput.png``: completed operations per second, by outcome;
* ``*-roles.png``: each node's role over time as :mod:`compat.faults.sampler` saw it (leader,
  follower, electing -- a candidate, prospective or unattached node, which knows no leader --
  or down: no answer);
* ``*-offsets.png``: the high watermark each node answered with while it led, and each voter's
  log end offset in the leader's view.

Per configuration, ``recovery-<configuration>.png``: each round's recovery time (heal to every
voter caught up) and election time per nemesis; with more than one configuration, one figure
with the configurations side by side per nemesis (``recovery.png``).
"""

from __future__ import annotations

import contextlib
import datetime
import html
import json
import re
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

OUTCOME_COLOURS = {"ok": "#2a9d4b", "failed": "#d62728", "unknown": "#ff9f1c"}
ROLE_COLOURS = {"leader": "#1f4e9c", "follower": "#8fb8e8", "candidate": "#ff7f0e", "prospective": "#f2c14e",
                "unattached": "#9a9a9a", "resigned": "#8e5ea2", "electing": "#e5d8a0", "down": "#b0302b"}
ROLE_LABELS = {"leader": "leader", "follower": "follower", "candidate": "candidate", "prospective": "prospective",
               "unattached": "unattached", "resigned": "resigned",
               "electing": "no leader known (not logged)", "down": "down (no answer in 0.5 s)"}
LOGGED_ROLES = {"Leader": "leader", "Follower": "follower", "Candidate": "candidate", "Prospective": "prospective",
                "Unattached": "unattached", "Resigned": "resigned"}
"""The raft states as a node logs its transitions: Kafka's ``QuorumState`` ("Completed
transition to CandidateState(...)", "... to Leader(...)") and kwire's ``RaftTarget`` ("node 1:
Candidate in epoch 3")."""
_TRANSITION = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\].*?"
                         r"(?:Completed transition to (\w+?)(?:State)?\(|node \d+: (\w+) in epoch \d+)")


def logged_transitions(out: Path) -> list[tuple[float, str]]:
    """``(wall-clock seconds, role)`` of each raft state transition a node logged to ``out``
    (its stdout and stderr, local time stamps as both Kafka's and kwire's logging write them)."""
    found = []
    for line in out.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _TRANSITION.match(line)
        if match:
            role = LOGGED_ROLES.get(match.group(2) or match.group(3))
            if role is not None:
                stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                found.append((stamp, role))
    return found
WIDTH_IN, DPI = 11.0, 90


def record(run: Any, configuration: str, *, seed: int | None = None, plan: Sequence[str] = (), index: int = 1,
           error: str = "", not_applicable: dict[str, str] | None = None) -> dict[str, Any]:
    """A quorum's run (:class:`compat.faults.rounds.Run`) as a JSON-able dict: the rounds, the
    client operations as ``[kind, invoked_s, completed_s, outcome]`` and the sampler's samples
    as ``[at_s, node, role, leader, epoch, high_watermark, {node: log_end_offset}]``, times in
    seconds from the run's first event, and each node's logged raft transitions as ``[at_s,
    node, role]`` (:func:`logged_transitions`, while the nodes' output is still under the
    quorum's root). ``not_applicable`` maps each nemesis asked for that the quorum could not
    take to why (a failpoint nemesis on stock Kafka: ``compat.faults.failpoints.NOT_IN_STOCK``);
    the page says so beside the quorum."""
    wall_minus_monotonic = time.time() - time.monotonic()
    ops = [["config", op.invoked_s, op.completed_s, op.outcome] for op in run.ops]
    ops += [[f"admin {op.kind}", op.invoked_s, op.completed_s, op.outcome] for op in run.admin_ops]
    samples = list(getattr(run, "samples", []))
    starts = [o[1] for o in ops] + [s.at_s for s in samples] + [r.started_s for r in run.rounds]
    t0 = min(starts) if starts else 0.0
    end = max([o[2] for o in ops if o[2]] + [s.at_s for s in samples] + [r.ended_s for r in run.rounds] + [t0])
    verdict = run.verdict.summary() if run.verdict is not None else ""
    cluster = run.cluster.summary() if getattr(run, "cluster", None) is not None else ""
    return {
        "configuration": configuration, "seed": seed, "index": index, "plan": list(plan) or [r.nemesis for r in run.rounds],
        "not_applicable": dict(not_applicable or {}), "error": error, "verdict": verdict, "ok": bool(not error and run.verdict is not None and run.verdict.ok
                   and (getattr(run, "cluster", None) is None or run.cluster.ok)),
        "controller_workload": cluster, "duration_s": round(end - t0, 3),
        "nodes": sorted(run.quorum.ports), "kwire_ids": sorted(run.quorum.kwire_ids),
        "release": run.quorum.kafka.version,
        "rounds": [{"nemesis": r.nemesis, "leader": r.leader, "epoch": r.epoch,
                    "started_s": round(r.started_s - t0, 3),
                    "ended_s": round((r.ended_s or end) - t0, 3), "figures": dict(r.figures),
                    "finished": bool(r.ended_s)} for r in run.rounds],
        "ops": [[kind, round(a - t0, 4), round((b or end) - t0, 4), outcome] for kind, a, b, outcome in ops],
        "samples": [[round(s.at_s - t0, 3), s.node, s.role, s.leader, s.epoch, s.high_watermark,
                     {str(k): v for k, v in s.log_end_offsets.items()}] for s in samples],
        "transitions": [[round(wall - wall_minus_monotonic - t0, 3), node, role] for node in sorted(run.quorum.ports)
                        if (run.quorum.root / f"{node}.out").exists()
                        for wall, role in logged_transitions(run.quorum.root / f"{node}.out")],
    }


def save(rec: dict[str, Any], directory: Path) -> Path:
    """Write ``rec`` as ``directory/quorum-<index>-<configuration>.json`` (seed in the name
    when known)."""
    directory.mkdir(parents=True, exist_ok=True)
    seed = "" if rec.get("seed") is None else f"s{rec['seed']}-"
    path = directory / f"quorum-{seed}{rec['index']}-{_slug(rec['configuration'])}.json"
    path.write_text(json.dumps(rec, separators=(",", ":")), encoding="utf-8")
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text)


def load(directory: Path) -> list[dict[str, Any]]:
    """Every record saved in ``directory``, by seed, index and configuration."""
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("quorum-*.json"))]
    return sorted(records, key=lambda r: (r.get("seed") or 0, r["index"], r["configuration"]))


def _shade(ax: Any, rec: dict[str, Any], label: bool) -> None:
    """Shade each round: darker from its start to the heal, lighter from the heal to its end
    (the heal is ``recovered_s`` before the end); its nemesis named at the top."""
    for n, r in enumerate(rec["rounds"]):
        start, end = r["started_s"], r["ended_s"]
        healed = end - r["figures"].get("recovered_s", 0.0) if r["finished"] else end
        colour = ("#7b61ff", "#00a6a6")[n % 2]
        ax.axvspan(start, max(start, healed), color=colour, alpha=0.18, lw=0)
        if healed < end:
            ax.axvspan(healed, end, color=colour, alpha=0.07, lw=0)
        if label:  # above the axes, slanted, so that short windows side by side stay legible
            ax.text(start, 1.02, r["nemesis"], transform=ax.get_xaxis_transform(), rotation=30, va="bottom",
                    ha="left", fontsize=8, color="#222")


def _figure(height: float) -> tuple[Figure, Any]:
    fig = Figure(figsize=(WIDTH_IN, height + 0.7), dpi=DPI)
    return fig, fig.add_subplot(1, 1, 1)


def _finish(fig: Figure, ax: Any, rec: dict[str, Any], title: str, path: Path) -> None:
    ax.set_xlim(0, max(rec.get("x_max_s", rec["duration_s"]), 1.0))
    ax.set_xlabel("seconds since the run's first event")
    ax.set_title(f"{rec['configuration']} (seed {rec.get('seed')}, quorum {rec['index']}): {title}", fontsize=10,
                 pad=58)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, borderaxespad=0)
    ax.grid(True, alpha=0.3)
    # the same margins in every plot of a quorum, so that their time axes line up on the page
    height = fig.get_figheight()
    fig.subplots_adjust(left=0.13, right=0.77, top=1 - 1.0 / height, bottom=0.5 / height)
    fig.savefig(path)


def plot_latency(rec: dict[str, Any], path: Path) -> None:
    fig, ax = _figure(3.6)
    _shade(ax, rec, label=True)
    for kind, marker in (("config", "o"), ("admin", "^")):
        for outcome, colour in OUTCOME_COLOURS.items():
            points = [(o[1], max(o[2] - o[1], 1e-4) * 1000) for o in rec["ops"]
                      if o[0].startswith(kind) and o[3] == outcome]
            if points:
                xs, ys = zip(*points, strict=True)
                name = "config write" if kind == "config" else "admin request"
                ax.scatter(xs, ys, s=7, marker=marker, color=colour, label=f"{name}: {outcome} ({len(points)})",
                           alpha=0.8, lw=0)
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    _finish(fig, ax, rec, "operation latency by outcome", path)


def plot_throughput(rec: dict[str, Any], path: Path) -> None:
    fig, ax = _figure(2.8)
    _shade(ax, rec, label=True)
    seconds = int(rec["duration_s"]) + 1
    bottom = [0] * seconds
    for outcome, colour in OUTCOME_COLOURS.items():
        counts = [0] * seconds
        for o in rec["ops"]:
            if o[3] == outcome:
                counts[min(int(o[2]), seconds - 1)] += 1
        if any(counts):
            ax.bar(range(seconds), counts, bottom=bottom, width=1.0, align="edge", color=colour, label=outcome)
            bottom = [a + b for a, b in zip(bottom, counts, strict=True)]
    ax.set_ylabel("completed ops / s")
    _finish(fig, ax, rec, "completed operations per second", path)


def role_spans(rec: dict[str, Any], node: int) -> list[tuple[float, float, str]]:
    """``(start_s, end_s, role)`` of ``node`` from its first sample on: ``down`` while the
    sampler got no answer from it, ``leader`` while it answered DescribeQuorum as leader, else
    the state it last logged (:func:`logged_transitions`,
    which shows a candidacy shorter than a sample), else the role its answers showed."""
    events = sorted([(s[0], 0, s[2]) for s in rec["samples"] if s[1] == node]
                    + [(t[0], 1, t[2]) for t in rec.get("transitions", []) if t[1] == node])
    first = next((at for at, kind, _ in events if kind == 0), None)
    sampled = logged = ""
    spans: list[tuple[float, float, str]] = []
    for at, kind, role in events:
        if kind == 0:
            sampled = role
        else:
            logged = role
        shown = sampled if sampled in ("down", "leader") else logged or sampled
        if first is None or at < first or not shown:
            continue
        if spans and spans[-1][2] == shown:
            continue
        if spans:
            spans[-1] = (spans[-1][0], at, spans[-1][2])
        spans.append((at, at, shown))
    if spans:
        spans[-1] = (spans[-1][0], max(rec["duration_s"], spans[-1][0]), spans[-1][2])
    return spans


def seen_roles(rec: dict[str, Any]) -> set[str]:
    return {role for node in rec["nodes"] for _, _, role in role_spans(rec, node)}


def plot_roles(rec: dict[str, Any], path: Path) -> None:
    nodes = rec["nodes"]
    fig, ax = _figure(1.2 + 0.45 * len(nodes))
    _shade(ax, rec, label=True)
    for row, node in enumerate(nodes):
        for role, colour in ROLE_COLOURS.items():
            bars = [(a, b - a) for a, b, r in role_spans(rec, node) if r == role]
            if bars:
                ax.broken_barh(bars, (row - 0.35, 0.7), color=colour)
    seen = seen_roles(rec)
    for role, colour in ROLE_COLOURS.items():  # the legend: the raft roles and down always, "electing" when seen
        if role != "electing" or role in seen:
            ax.bar(0, 0, color=colour, label=ROLE_LABELS[role])
    kinds = set(rec["kwire_ids"])
    ax.set_yticks(range(len(nodes)), [f"node {n} ({'kwire' if n in kinds else 'stock'})" for n in nodes])
    ax.set_ylim(-0.6, len(nodes) - 0.4)
    logged = "as logged, " if rec.get("transitions") else ""
    _finish(fig, ax, rec, f"each node's role ({logged}down: no answer to the 250 ms sampler)", path)


def plot_offsets(rec: dict[str, Any], path: Path) -> None:
    fig, ax = _figure(3.0)
    _shade(ax, rec, label=True)
    leading = [s for s in rec["samples"] if s[2] == "leader"]
    for node in rec["nodes"]:
        hw = [(s[0], s[5]) for s in leading if s[1] == node and s[5] >= 0]
        if hw:
            xs, ys = zip(*hw, strict=True)
            ax.plot(xs, ys, ".", ms=3, color=f"C{node % 10}", label=f"high watermark, node {node} leading")
    for node in rec["nodes"]:
        leo = [(s[0], s[6][str(node)]) for s in leading if s[6].get(str(node), -1) >= 0]
        if leo:
            xs, ys = zip(*leo, strict=True)
            ax.plot(xs, ys, "-", lw=0.8, alpha=0.6, color=f"C{node % 10}",
                    label=f"log end offset of voter {node} (leader's view)")
    ax.set_ylabel("offset")
    _finish(fig, ax, rec, "high watermark per node (as leader) and voters' log end offsets", path)


def plot_recovery(records: Sequence[dict[str, Any]], path: Path) -> None:
    """Recovery and election times per nemesis, one bar group per nemesis, one bar per
    configuration and figure (each round a dot, the bar its median); "n/a" where a configuration
    could not take the nemesis (a failpoint nemesis on stock Kafka)."""
    configs = sorted({r["configuration"] for r in records})
    times: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for rec in records:
        for r in rec["rounds"]:
            for figure in ("recovered_s", "election_s"):
                if figure in r["figures"]:
                    times[(rec["configuration"], r["nemesis"], figure)].append(r["figures"][figure])
    missing = {(rec["configuration"], n): why for rec in records for n, why in rec.get("not_applicable", {}).items()}
    nemeses = sorted({n for _, n, _ in times} | {n for _, n in missing})
    fig, ax = _figure(3.6)
    slots = [(c, f) for c in configs for f in ("recovered_s", "election_s")]
    width = 0.8 / max(len(slots), 1)
    palette = ["#1f4e9c", "#8fb8e8", "#b0302b", "#f2a09b", "#2a9d4b", "#a8dbb5"]
    for k, (config, figure) in enumerate(slots):
        xs = [i + (k - (len(slots) - 1) / 2) * width for i in range(len(nemeses))]
        values = [times.get((config, n, figure), []) for n in nemeses]
        heights = [sorted(v)[len(v) // 2] if v else 0 for v in values]
        ax.bar(xs, heights, width=width, color=palette[k % len(palette)],
               label=f"{config}: {'recovery (heal to caught up)' if figure == 'recovered_s' else 'election'}")
        for x, v in zip(xs, values, strict=True):
            ax.plot([x] * len(v), v, "k.", ms=3)
        for x, n in zip(xs, nemeses, strict=True):
            if figure == "recovered_s" and (config, n) in missing:  # no bar: say why
                ax.text(x, 0, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color="#555")
    ax.set_xticks(range(len(nemeses)), nemeses, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_title("recovery and election time per nemesis (bar: median, dots: rounds): " + ", ".join(configs),
                 fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


PLOTS = (("latency", plot_latency), ("throughput", plot_throughput), ("roles", plot_roles), ("offsets", plot_offsets))


def write_report(directory: Path) -> Path:
    """Draw every record in ``directory`` and write ``directory/index.html``; returns its path."""
    records = load(directory)
    parts = [_HEAD, "<h1>Fault runs</h1>",
             f"<p>{len(records)} quorum(s); nemeses run: {html.escape(', '.join(nemeses_run(records)) or 'none')}."
             " Shading: a nemesis window (darker while it held, lighter from the heal until every voter"
             " caught up).</p>"]
    # a stock quorum of the same seed and nemeses, less those it cannot take, sits beside kwire's
    groups: dict[tuple[Any, frozenset[str]], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        groups[(rec.get("seed"), frozenset(rec["plan"]) | frozenset(rec.get("not_applicable", {})))].append(rec)
    for (seed, _), group in groups.items():
        plan = max((r["plan"] for r in group), key=len)
        parts.append(f"<h2>seed {seed}: {html.escape(', '.join(plan))}</h2><table class=side><tr>")
        longest = max(r["duration_s"] for r in group)
        for rec in group:  # one time axis for the quorums side by side
            rec["x_max_s"] = longest
            parts.append(f"<td>{_quorum_html(rec, directory)}</td>")
        parts.append("</tr></table>")
    parts.append("<h2>Recovery per nemesis</h2>")
    by_config: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_config[rec["configuration"]].append(rec)
    if len(by_config) > 1:
        plot_recovery(records, directory / "recovery.png")
        parts.append(_img(directory, "recovery.png", "recovery time per nemesis, configurations side by side"))
    for config, recs in sorted(by_config.items()):
        name = f"recovery-{_slug(config)}.png"
        plot_recovery(recs, directory / name)
        parts.append(f"<h3>{html.escape(config)}</h3>" + _img(directory, name, f"recovery time per nemesis, {config}"))
    parts.append("</body></html>\n")
    index = directory / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    return index


def nemeses_run(records: Sequence[dict[str, Any]]) -> list[str]:
    """Every nemesis a round of ``records`` ran, in first-run order."""
    return list(dict.fromkeys(r["nemesis"] for rec in records for r in rec["rounds"]))


def png_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` in pixels from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _img(directory: Path, name: str, alt: str) -> str:
    """An ``<img>`` of ``directory/name`` with its pixel size, so that the page lays out alike
    whether or not the image loads."""
    width, height = png_size(directory / name)
    return f'<img src="{html.escape(name)}" width="{width}" height="{height}" alt="{html.escape(alt)}">'


def _quorum_html(rec: dict[str, Any], directory: Path) -> str:
    stem = f"q-s{rec.get('seed')}-{rec['index']}-{_slug(rec['configuration'])}"
    out = [f"<h3>{html.escape(rec['configuration'])} (Kafka {html.escape(rec['release'])}, quorum {rec['index']}):"
           f" <span class={'ok' if rec['ok'] else 'bad'}>{'passed' if rec['ok'] else 'FAILED'}</span></h3>"]
    if rec["error"]:
        out.append(f"<pre>{html.escape(rec['error'])}</pre>")
    out.append(f"<p>history: {html.escape(rec['verdict'] or '(not checked)')}</p>")
    if rec["controller_workload"]:
        out.append(f"<p>controller workload: {html.escape(rec['controller_workload'])}</p>")
    out.append("<table class=rounds><tr><th>nemesis</th><th>leader (epoch)</th><th>from (s)</th><th>to (s)</th>"
               "<th>figures (s; fired: times a failpoint fired)</th></tr>")
    for r in rec["rounds"]:
        figures = ", ".join(f"{k} {v}" for k, v in r["figures"].items()) or "(did not recover)"
        out.append(f"<tr><td>{html.escape(r['nemesis'])}</td><td>{r['leader']} ({r['epoch']})</td>"
                   f"<td>{r['started_s']:.1f}</td><td>{r['ended_s']:.1f}</td><td>{html.escape(figures)}</td></tr>")
    out.append("</table>")
    for nemesis, why in rec.get("not_applicable", {}).items():
        out.append(f"<p class=na>{html.escape(nemesis)}: {html.escape(why)}</p>")
    for kind, plot in PLOTS:
        name = f"{stem}-{kind}.png"
        plot(rec, directory / name)
        out.append(_img(directory, name, f"{rec['configuration']}: {kind}"))
    return "\n".join(out)


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kwire fault runs</title>
<style>
body { font-family: sans-serif; margin: 1em; }
table.side { border-collapse: collapse; } table.side > tbody > tr > td { vertical-align: top; padding: 0 1em; }
table.rounds { border-collapse: collapse; font-size: 0.85em; } table.rounds td, table.rounds th { border: 1px solid #ccc; padding: 2px 6px; }
img { display: block; margin: 0.4em 0; }
.ok { color: #2a9d4b; } .bad { color: #d62728; } .na { color: #555; font-style: italic; }
</style></head><body>"""


@contextlib.contextmanager
def on_failure(seen: list[Any], configuration: str, directory: Path, seed: int | None = None) -> Iterator[None]:
    """For a test: when the block raises and ``seen`` holds the run
    (:func:`compat.faults.rounds.run_faults`'s ``seen``), write its report to ``directory``
    and add the report's path to the exception's notes (pytest prints them)."""
    try:
        yield
    except BaseException as exc:
        if seen:
            try:
                save(record(seen[0], configuration, seed=seed, error=f"{type(exc).__name__}: {str(exc)[:300]}"),
                     directory)
                exc.add_note(f"fault report: {write_report(directory)}")
            except Exception as failure:  # the report must not hide the failure it reports
                exc.add_note(f"fault report not written: {type(failure).__name__}: {failure}")
        raise
