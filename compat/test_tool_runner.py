"""The tool runner (tools/tool_runner.py, compat/oracle/src/kwire/oracle/ToolRunner.java) answers
as a JVM of the tool's own would, on every pinned release.

Each test runs a stock tool through ``run_tool`` with ``KWIRE_KAFKA_TOOL_RUNNER`` set and
``subprocess.run`` disabled (so the runner, and not the subprocess fallback, answered), and
where the answer is deterministic compares it with the same call as a subprocess: returncode,
stdout and stderr of a format (and what it writes), a dump, a usage error and an exception
escaping main. The Scala tools (3.9.2's StorageTool and DumpLogSegments) print through Scala's
``Console``, which keeps the System.out it first sees. Also: output does not carry over from one
call to the next, a timeout kills the runner (the next call starts another), a tool's
System.exit ends the runner and the call is answered by a subprocess, and a forked child does
not use its parent's runners.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from compat import kafka as k
from compat.harness import CLUSTER_ID, KafkaRelease
from tools import stock_kafka, tool_runner
from tools.stock_kafka import TOOL_RUNNER_ENV, KafkaCommandError

pytestmark = pytest.mark.compat

PARTITION = "__cluster_metadata-0"


def _no_subprocess(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"ran as a subprocess, not in the tool runner: {args[0] if args else kwargs}")


def in_runner(monkeypatch: pytest.MonkeyPatch, kafka: KafkaRelease, tool: str, args: list[Any],
              **kwargs: object) -> subprocess.CompletedProcess[str]:
    monkeypatch.setenv(TOOL_RUNNER_ENV, "1")
    # the class data sharing archive, when there is none yet, is made by JVMs of their own
    stock_kafka.java_command(kafka.version, kafka.tool_class(tool),
                             tools=kafka.tool_release(tool) != kafka.version)
    with monkeypatch.context() as m:
        m.setattr(subprocess, "run", _no_subprocess)
        return kafka.run_tool(tool, args, **kwargs)


def as_subprocess(monkeypatch: pytest.MonkeyPatch, kafka: KafkaRelease, tool: str, args: list[Any],
                  **kwargs: object) -> subprocess.CompletedProcess[str]:
    monkeypatch.setenv(TOOL_RUNNER_ENV, "0")
    return kafka.run_tool(tool, args, **kwargs)


_LOG_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]", re.MULTILINE)


def _same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> None:
    """Same command line, exit code and output (log lines' times aside)."""
    assert (b.args, b.returncode, b.stdout, _LOG_TIME.sub("[T]", b.stderr)) == \
        (a.args, a.returncode, a.stdout, _LOG_TIME.sub("[T]", a.stderr))


def _controller(tmp_path: Path, name: str) -> tuple[Path, Path]:
    data = tmp_path / name
    props = tmp_path / f"{name}.properties"
    props.write_text(
        "process.roles=controller\nnode.id=1\ncontroller.quorum.bootstrap.servers=localhost:19093\n"
        "controller.listener.names=CONTROLLER\nlisteners=CONTROLLER://localhost:19093\n"
        f"log.dirs={data}\n",
        encoding="utf-8",
    )
    return props, data


def _properties(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_random_uuid(each_kafka: KafkaRelease, monkeypatch: pytest.MonkeyPatch) -> None:
    result = in_runner(monkeypatch, each_kafka, "storage", ["random-uuid"])
    assert result.returncode == 0 and result.stderr == ""
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}\n", result.stdout), result.stdout
    assert result.args == stock_kafka.java_command(
        each_kafka.version, each_kafka.tool_class("storage"), ["random-uuid"])


def test_format_and_dump_as_a_subprocess_does(each_kafka: KafkaRelease, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    written = {}
    for name, run in (("sub", as_subprocess), ("runner", in_runner)):
        props, data = _controller(tmp_path, name)
        result = run(monkeypatch, each_kafka, "storage",
                     ["format", "-t", CLUSTER_ID, "-c", props, "--standalone"])
        written[name] = (result, data)
    (sub, sub_data), (ours, our_data) = written["sub"], written["runner"]
    assert ours.returncode == sub.returncode == 0
    assert ours.stdout.replace(str(our_data), "DIR") == sub.stdout.replace(str(sub_data), "DIR")
    assert ours.stderr == sub.stderr
    assert sorted(p.relative_to(our_data) for p in our_data.rglob("*")) == \
        sorted(p.relative_to(sub_data) for p in sub_data.rglob("*"))
    meta, sub_meta = _properties(our_data / "meta.properties"), _properties(sub_data / "meta.properties")
    assert meta.keys() == sub_meta.keys()
    assert {k: v for k, v in meta.items() if k != "directory.id"} == \
        {k: v for k, v in sub_meta.items() if k != "directory.id"}

    # DumpLogSegments: Scala's kafka.tools (println) up to 4.2, the Java port from 4.3
    snapshot = sub_data / PARTITION / "00000000000000000000-0000000000.checkpoint"
    args = ["--cluster-metadata-decoder", "--files", snapshot]
    dumped = in_runner(monkeypatch, each_kafka, "dump-log", args)
    assert "SnapshotHeader" in dumped.stdout
    _same(as_subprocess(monkeypatch, each_kafka, "dump-log", args), dumped)


def test_usage_error_as_a_subprocess_has_it(each_kafka: KafkaRelease,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["format", "--no-such-flag"]
    sub = as_subprocess(monkeypatch, each_kafka, "storage", args, check=False)
    ours = in_runner(monkeypatch, each_kafka, "storage", args, check=False)
    assert sub.returncode != 0 and "usage" in sub.stderr.lower()
    _same(sub, ours)
    with pytest.raises(KafkaCommandError) as raised:
        in_runner(monkeypatch, each_kafka, "storage", args)
    assert raised.value.result.returncode == sub.returncode
    assert str(raised.value) == str(KafkaCommandError(each_kafka.version, each_kafka.tool_class("storage"), sub))


def test_uncaught_exception_as_the_jvm_prints_it(each_kafka: KafkaRelease, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # a segment whose name is no offset: 3.9.2's Scala DumpLogSegments lets the
    # NumberFormatException out of main ("Exception in thread "main" ...", exit 1)
    segment = tmp_path / "not-an-offset.log"
    segment.write_bytes(b"\0" * 64)
    args = ["--files", segment]
    sub = as_subprocess(monkeypatch, each_kafka, "dump-log", args, check=False)
    ours = in_runner(monkeypatch, each_kafka, "dump-log", args, check=False)
    assert sub.returncode != 0
    _same(sub, ours)
    if k.version_tuple(each_kafka.tool_release("dump-log")) < (4, 3):
        assert sub.stderr.startswith('Exception in thread "main" java.lang.NumberFormatException')


def test_calls_do_not_share_output(each_kafka: KafkaRelease, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # an error on stderr, then another tool's usage on stdout, then the first tool again
    failed = in_runner(monkeypatch, each_kafka, "storage", ["info", "-c", "/nonexistent/server.properties"],
                       check=False)
    usage = in_runner(monkeypatch, each_kafka, "metadata-quorum", ["--help"])
    uuid = in_runner(monkeypatch, each_kafka, "storage", ["random-uuid"])
    assert failed.returncode != 0 and failed.stderr
    assert usage.returncode == 0 and "--bootstrap-controller" in usage.stdout and usage.stderr == ""
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}\n", uuid.stdout) and uuid.stderr == ""

    # MetadataShell is not run here: it always gets a JVM of its own (stock_kafka.SUBPROCESS_ONLY).


def test_timeout_kills_the_runner_and_the_next_call_works(newest_kafka: KafkaRelease,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    each_kafka = newest_kafka
    in_runner(monkeypatch, each_kafka, "metadata-quorum", ["--help"])  # the runner is up
    with socket.socket() as s:  # a port nothing listens on: the admin client retries for 60 s
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    args = ["--bootstrap-controller", f"localhost:{port}", "describe", "--status"]
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        in_runner(monkeypatch, each_kafka, "metadata-quorum", args, timeout=2.0)
    stand_in = each_kafka.tool_release("metadata-quorum") != each_kafka.version
    assert raised.value.cmd == stock_kafka.java_command(
        each_kafka.version, each_kafka.tool_class("metadata-quorum"), args, tools=stand_in)
    assert raised.value.timeout == 2.0
    again = in_runner(monkeypatch, each_kafka, "metadata-quorum", ["--help"])  # a new runner
    assert again.returncode == 0 and "--bootstrap-controller" in again.stdout


def test_system_exit_falls_back_to_a_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3.9.2's FeatureCommand parses with argparse4j's parseArgsOrFail, which calls System.exit on
    # a bad argument: the runner ends, and the call is answered by a JVM of its own
    kafka = KafkaRelease(k.PINNED_VERSIONS[0])
    k.require_kafka(kafka.version)
    sub = as_subprocess(monkeypatch, kafka, "features", ["--no-such-flag"], check=False)
    monkeypatch.setenv(TOOL_RUNNER_ENV, "1")
    subprocess_runs = []
    real_run = subprocess.run

    def counted(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        subprocess_runs.append(args)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counted)
    ours = kafka.run_tool("features", ["--no-such-flag"], check=False)
    assert sub.returncode != 0
    _same(sub, ours)
    if kafka.version == "3.9.2":
        assert len(subprocess_runs) == 1


def test_forked_children_start_their_own(each_kafka: KafkaRelease, monkeypatch: pytest.MonkeyPatch) -> None:
    in_runner(monkeypatch, each_kafka, "storage", ["random-uuid"])
    assert tool_runner._runners
    pid = os.fork()
    if pid == 0:  # the child: none of the parent's runners is its own
        os._exit(0 if not tool_runner._runners and tool_runner._owner == os.getpid() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
