"""``index.html`` of an audit's report directory: one static page that links the summary, the
tables and the plots by relative paths and shows the tables' first rows inline, so it opens
from the file system (``file://``) in any browser, with no server and no script."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

TABLE_ROWS = 500
"""Rows of each table shown inline; the linked file has them all."""

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; font-size: 12px; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #eee; }
tr.violation td { background: #fbe3e3; } tr.warning td { background: #fdf0dc; }
.ok { color: #2a7d2a; } .bad { color: #b22222; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
"""


@dataclass
class Table:
    """A table to show: ``title``, ``rows`` (dicts), the ``columns`` shown, the file that holds
    them all (relative to the report directory, or None), and the row field whose value
    (``violation``/``warning``) colours a row."""

    title: str
    rows: Sequence[dict[str, Any]]
    columns: Sequence[str]
    link: str | None = None
    shade_by: str | None = None


@dataclass
class Index:
    """What ``index.html`` shows, in order: a status line, facts (label, value), links (label,
    relative path), the leading images (caption, relative path), tables, then the other images."""

    title: str
    ok: bool
    status: str
    facts: list[tuple[str, Any]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    lead_images: list[tuple[str, str]] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


def _cell(value: Any) -> str:  # noqa: ANN401 - any JSON value
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return html.escape(", ".join(str(v) for v in value))
    return html.escape(str(value))


def _image(caption: str, path: str) -> str:
    e = html.escape
    return f"<h3>{e(caption)}</h3><a href='{e(path)}'><img src='{e(path)}' alt='{e(caption)}'></a>"


def render(index: Index) -> str:
    """The page's HTML text."""
    e = html.escape
    out = [f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{e(index.title)}</title>",
           f"<style>{_STYLE}</style></head><body>", f"<h1>{e(index.title)}</h1>",
           f"<p class='{'ok' if index.ok else 'bad'}'><b>{e(index.status)}</b></p>"]
    if index.facts:
        out.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{_cell(v)}</td></tr>" for k, v in index.facts)
                   + "</table>")
    if index.links:
        out.append("<ul>" + "".join(f"<li><a href='{e(path)}'>{e(label)}</a></li>" for label, path in index.links)
                   + "</ul>")
    out += [_image(caption, path) for caption, path in index.lead_images]
    for table in index.tables:
        shown = table.rows[:TABLE_ROWS]
        more = f" (first {len(shown)} of {len(table.rows)})" if len(shown) < len(table.rows) else ""
        link = f" - <a href='{e(table.link)}'>{e(table.link)}</a>" if table.link else ""
        out.append(f"<h2>{e(table.title)}{e(more)}{link}</h2>")
        if not shown:
            out.append("<p>none</p>")
            continue
        out.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in table.columns) + "</tr>")
        for row in shown:
            shade = row.get(table.shade_by) if table.shade_by else None
            css = f" class='{e(str(shade))}'" if shade in ("violation", "warning") else ""
            out.append(f"<tr{css}>" + "".join(f"<td>{_cell(row.get(c))}</td>" for c in table.columns) + "</tr>")
        out.append("</table>")
    out += [_image(caption, path) for caption, path in index.images]
    out.append("</body></html>\n")
    return "\n".join(out)


def write_index(index: Index, out_dir: str) -> str:
    """Write ``index.html`` into ``out_dir``; returns its path."""
    path = os.path.join(out_dir, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(index))
    return path
