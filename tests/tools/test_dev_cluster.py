"""``kwire dev-cluster``: formats N nodes, starts them as processes, prints how to reach the
quorum, and stops every node on SIGINT; a second run on the same directory starts the same
cluster again. Cost: about 10 s."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from tools.local_cluster import REPO_DIR, DevCluster, DevClusterError, free_ports
from tools.quorum_client import describe


def _start(root: Path, base_port: int) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "dev-cluster", "--nodes", "3", "--dir", str(root),
         "--base-port", str(base_port)],
        cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("Ctrl-C stops every node"):
            return proc, lines
    proc.kill()
    raise AssertionError(f"dev-cluster did not come up: {lines} {proc.stderr and proc.stderr.read()}")


def _consecutive_free_ports(count: int) -> int:
    """A base port such that base .. base + count - 1 were all free a moment ago."""
    for _ in range(50):
        base = free_ports(1)[0]
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("localhost", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise AssertionError("no run of free ports")


def test_dev_cluster_runs_three_nodes_and_stops_on_sigint(tmp_path: Path) -> None:
    root = tmp_path / "dc"
    base = _consecutive_free_ports(3)
    proc, lines = _start(root, base)
    try:
        bootstrap = ",".join(f"localhost:{base + i}" for i in range(3))
        assert any(bootstrap in line for line in lines), lines
        description = json.loads((root / "cluster.json").read_text())
        assert [n["port"] for n in description["nodes"]] == [base, base + 1, base + 2]
        view = trio.run(describe, bootstrap)
        assert view.cluster_id == description["cluster_id"]
        assert {v.replica_id for v in view.partition.current_voters} == {1, 2, 3}
        assert view.partition.leader_id in {1, 2, 3}
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    for node in (1, 2, 3):
        with pytest.raises(OSError):
            trio.run(describe, f"localhost:{base + node - 1}", 2.0)

    # the same directory: the same cluster again
    proc, lines = _start(root, base)
    try:
        view = trio.run(describe, f"localhost:{base}")
        assert view.cluster_id == description["cluster_id"]
        assert [n.directory_id for n in DevCluster.open(root).nodes.values()] == [
            n["directory_id"] for n in description["nodes"]
        ]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0


def test_create_refuses_an_existing_cluster(tmp_path: Path) -> None:
    DevCluster.create(tmp_path, 1, base_port=None)
    with pytest.raises(DevClusterError, match="already holds a dev cluster"):
        DevCluster.create(tmp_path, 1, base_port=None)
    with pytest.raises(DevClusterError, match="no dev cluster"):
        DevCluster.open(tmp_path / "elsewhere")


def test_a_start_that_fails_part_way_leaves_no_node_running(tmp_path: Path) -> None:
    """Node 2's port is taken (bound, not listening): it exits, the start fails, and the nodes it
    had started are stopped rather than left running."""
    cluster = DevCluster.create(tmp_path, 3, base_port=None)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", cluster.nodes[2].port))
        with pytest.raises(DevClusterError, match="node 2 exited"):
            cluster.start(timeout_s=60.0)
    processes = {i: n.process for i, n in cluster.nodes.items()}
    assert all(p is not None and p.returncode is not None for p in processes.values()), processes
    for i in (1, 3):
        with pytest.raises(OSError):
            trio.run(describe, f"localhost:{cluster.nodes[i].port}", 2.0)


def test_create_at_a_release_before_3_9_makes_a_static_quorum(tmp_path: Path) -> None:
    from storage.bootstrap import read_bootstrap_checkpoint

    cluster = DevCluster.create(tmp_path, 3, base_port=None, release_version="3.6")
    voters = ",".join(f"{i}@localhost:{n.port}" for i, n in cluster.nodes.items())
    assert cluster.quorum_voters == voters and cluster.direct_describe
    for node in cluster.nodes.values():
        text = node.config_path.read_text()
        assert f"controller.quorum.voters={voters}\n" in text and "bootstrap.servers" not in text
        bootstrap = read_bootstrap_checkpoint(node.data_dir)
        assert bootstrap is not None and bootstrap.metadata_version_level == 14  # 3.6-IV2
    reopened = DevCluster.open(tmp_path)
    assert reopened.quorum_voters == voters and reopened.direct_describe


def test_create_at_3_9_keeps_a_dynamic_quorum(tmp_path: Path) -> None:
    cluster = DevCluster.create(tmp_path, 1, base_port=None, release_version="3.9-IV0")
    assert cluster.quorum_voters is None and not cluster.direct_describe
    assert "controller.quorum.bootstrap.servers=" in cluster.nodes[1].config_path.read_text()
    with pytest.raises(DevClusterError, match="Unknown release version"):
        DevCluster.create(tmp_path / "other", 1, base_port=None, release_version="2.8")


# ---------------------------------------------------------------- plug-ins and racks (no process)


def _args(*argv: str) -> Any:
    import argparse

    from tools import dev_cluster

    parser = argparse.ArgumentParser()
    dev_cluster.add_parser(parser.add_subparsers())
    return parser.parse_args(["dev-cluster", *argv])


def test_the_plugin_flags_set_kafkas_keys_and_override_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.dev_cluster import controller_overrides

    (tmp_path / "my_placer_here.py").write_text("class P:\n    def place(self, spec, cluster):\n        return []\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    args = _args("--placer", "my_placer_here:P", "--create-topic-policy", "compat.example_policies:MinPartitionsPolicy",
                 "--override", "kwire.replica.placer.class=tools.examples.placers:LeadersOffRackPlacer")
    assert controller_overrides(args) == [
        "kwire.replica.placer.class=my_placer_here:P",
        "create.topic.policy.class.name=compat.example_policies:MinPartitionsPolicy",
        "kwire.replica.placer.class=tools.examples.placers:LeadersOffRackPlacer",
    ]


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--placer", "org.example.MyPlacer", "kwire.replica.placer.class: 'org.example.MyPlacer' is not a Python class"),
    ("--alter-config-policy", "no_such_module_here:P", "cannot import module 'no_such_module_here'"),
    ("--create-topic-policy", "tools.examples.placers:LeadersOffRackPlacer", "has no method validate()"),
])
def test_a_wrong_plugin_stops_the_command_before_any_node_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, words: str,
) -> None:
    from tools.dev_cluster import run

    root = tmp_path / "cluster"
    assert run(_args("--nodes", "1", "--dir", str(root), flag, value)) == 1
    err = capsys.readouterr().err
    assert err.startswith("kwire dev-cluster: controller plug-in: ") and words in err, err
    assert not root.exists()


def test_the_nodes_import_plugins_from_where_the_command_runs(tmp_path: Path) -> None:
    (tmp_path / "my_policy_here.py").write_text("WHERE = 'here'\n")
    cluster = DevCluster(tmp_path, "id", [])
    cluster.python_path = [str(tmp_path)]
    env = cluster._environment()
    assert env["PYTHONPATH"].split(os.pathsep)[-1] == str(tmp_path)
    found = subprocess.run([sys.executable, "-c", "import my_policy_here, tools; print(my_policy_here.WHERE, "
                            "tools.__file__)"], cwd=REPO_DIR, env=env, capture_output=True, text=True, check=True)
    where, tools_file = found.stdout.split()
    assert where == "here" and tools_file == str(REPO_DIR / "tools" / "__init__.py")


def test_racks_are_named_in_turn_and_need_brokers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools.dev_cluster import rack_of, run

    assert [rack_of(i % 3) for i in range(6)] == ["rack-a", "rack-b", "rack-c", "rack-a", "rack-b", "rack-c"]
    assert [rack_of(i) for i in (25, 26, 27)] == ["rack-z", "rack-aa", "rack-ab"]
    assert run(_args("--nodes", "1", "--dir", str(tmp_path / "c"), "--racks", "3")) == 1
    assert "--racks R needs --brokers N" in capsys.readouterr().err
