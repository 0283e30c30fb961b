"""What the directories given to ``kwire audit`` say of themselves, checked against each other
and against the names they were given. Every log directory Kafka formats holds a
``meta.properties`` (``MetaProperties``: ``cluster.id``, ``node.id``, ``directory.id``); the
audit reads it whether or not the directory was named on the command line (``b11=DIR`` labels
the directory, it does not replace its id), and every finding and plot names the broker by it.

Findings (severity in brackets), partition ``-1`` of topic ``""`` as for every finding about a
directory rather than a partition:

``duplicate_node_id`` [violation]
    Two or more directories claim one ``node.id`` and cannot be one broker's ``log.dirs``: they
    hold the same ``directory.id`` (one directory given twice, or a copy of it), or both hold a
    copy of one partition (a broker keeps one copy of a partition across its log directories,
    ``LogManager``), or both hold a metadata log (a node keeps one, in ``metadata.log.dir``).
    Two brokers configured with one id, or a copy: which copy is the assigned replica cannot be
    told, so the checks against the assignment are unreliable for that id.
``duplicate_node_id`` [warning]
    Directories that claim one ``node.id`` with distinct directory ids and nothing shared: one
    broker's log directories (JBOD), audited as that broker's, or two brokers misconfigured
    with one id whose copies have not met yet.
``node_name_mismatch`` [warning]
    A directory named ``NAME=DIR`` whose name ends in a number (``b12``) other than the
    ``node.id`` of its ``meta.properties``: the name and the directory disagree; findings use
    the directory's id.
``cluster_id_mismatch`` [violation]
    Directories whose ``cluster.id`` differs from the one most directories hold: directories of
    another cluster.
``meta_properties`` [warning]
    A broker log directory without a readable ``meta.properties`` (or one without ``node.id``):
    its broker id comes from its name's trailing digits, or is unknown.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence

from tools.audit.broker_dirs import AuditDir
from tools.audit.replica_checks import VIOLATION, WARNING, Finding

__all__ = ["identity_findings"]


def _finding(invariant: str, severity: str, d: AuditDir, detail: str) -> Finding:
    return Finding(invariant, severity, "", -1, d.name, None, detail, broker_id=d.node_id)


def identity_findings(dirs: Sequence[AuditDir],
                      holdings: Mapping[str, Collection[tuple[str, int]]] | None = None) -> list[Finding]:
    """The module docstring's findings for ``dirs``; ``holdings``: per directory name, the
    topic-partitions whose live copies it holds (broker log directories; absent: none)."""
    holdings = holdings or {}
    out: list[Finding] = []
    for d in dirs:
        if d.broker and not d.meta:
            source = f"broker id {d.node_id} from its name {d.name!r}" if d.node_id is not None else "broker id unknown"
            out.append(_finding("meta_properties", WARNING, d, f"{d.path} has no readable meta.properties with a "
                                                               f"node.id: {source}"))
        if d.meta and d.explicit:
            digits = re.search(r"(\d+)$", d.name)
            if digits is not None and int(digits.group(1)) != d.node_id:
                out.append(_finding("node_name_mismatch", WARNING, d,
                                    f"named {d.name!r}, but {d.path}/meta.properties says node.id {d.node_id}: "
                                    f"findings use {d.node_id}"))
    clusters = Counter(d.cluster_id for d in dirs if d.cluster_id is not None)
    if len(clusters) > 1:
        common, _ = clusters.most_common(1)[0]
        for d in dirs:
            if d.cluster_id is not None and d.cluster_id != common:
                out.append(_finding("cluster_id_mismatch", VIOLATION, d,
                                    f"{d.path}/meta.properties says cluster.id {d.cluster_id}; "
                                    f"{clusters[common]} of the directories given say {common}"))
    by_id: dict[int, list[AuditDir]] = defaultdict(list)
    for d in dirs:
        if d.meta and d.node_id is not None:
            by_id[d.node_id].append(d)
    for node_id, claiming in sorted(by_id.items()):
        if len(claiming) < 2:
            continue
        names = ", ".join(f"{d.name} ({d.path})" for d in claiming)
        reasons = []
        directory_ids = Counter(d.directory_id for d in claiming if d.directory_id is not None)
        same_dir = sorted(i for i, n in directory_ids.items() if n > 1)
        if same_dir:
            reasons.append(f"directory.id {', '.join(same_dir)} twice: one directory given twice, or a copy")
        held: Counter[tuple[str, int]] = Counter(p for d in claiming for p in set(holdings.get(d.name, ())))
        shared = sorted(p for p, n in held.items() if n > 1)
        if shared:
            listed = ", ".join(f"{t}-{p}" for t, p in shared[:5]) + (f" and {len(shared) - 5} more" if len(shared) > 5 else "")
            reasons.append(f"each holds a copy of {listed}: one broker keeps one copy of a partition")
        if sum(d.metadata_dir is not None for d in claiming) > 1:
            reasons.append("each holds a metadata log: a node keeps one")
        if reasons:
            detail = (f"{len(claiming)} directories claim node.id {node_id}: {names}; "
                      f"{'; '.join(reasons)} (two nodes with one id?)")
            out += [_finding("duplicate_node_id", VIOLATION, d, detail) for d in claiming]
        else:
            detail = (f"{len(claiming)} directories claim node.id {node_id}: {names}, with distinct directory ids "
                      f"and no partition in common: audited as one broker's log.dirs")
            out += [_finding("duplicate_node_id", WARNING, d, detail) for d in claiming]
    return out
