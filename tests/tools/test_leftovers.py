"""tools.leftovers: a test run's processes still alive at its end are listed and stopped, and
nothing else is touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from tools.leftovers import RUN_ENV, find_marked, main

IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"


@pytest.fixture
def spawn() -> Iterator[object]:
    """``spawn(mark, ignore_term=False)``: a child sleeping a minute, its environment marked
    with ``mark`` (None: no mark); every child is killed and reaped at the end."""
    children: list[subprocess.Popen[bytes]] = []

    def start(mark: str | None, ignore_term: bool = False) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != RUN_ENV}
        if mark is not None:
            env[RUN_ENV] = mark
        code = IGNORES_SIGTERM if ignore_term else "import time; print(flush=True); time.sleep(60)"
        child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == b"\n"  # running its code
        children.append(child)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_only_the_runs_marked_processes_are_listed_stopped_and_fail_the_run(spawn: object,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    run, other = f"test-{uuid.uuid4()}", f"test-{uuid.uuid4()}"
    start = spawn  # type: ignore[assignment]
    plain = start(run)  # type: ignore[operator]
    stubborn = start(run, ignore_term=True)  # type: ignore[operator]
    another_run = start(other)  # type: ignore[operator]
    unmarked = start(None)  # type: ignore[operator]
    assert [p.pid for p in find_marked(run)] == sorted([plain.pid, stubborn.pid])
    assert all(p.command.startswith(sys.executable) and p.ppid == os.getpid() for p in find_marked(run))

    assert main(["--run-id", run, "--grace-s", "0", "--kill-after-s", "1"]) == 1
    out = capsys.readouterr().out
    assert f"2 process(es) of test run {run}" in out and f"pid {stubborn.pid} " in out, out
    assert plain.wait(timeout=10) == -signal.SIGTERM
    assert stubborn.wait(timeout=10) == -signal.SIGKILL  # it ignored the SIGTERM
    assert another_run.poll() is None and unmarked.poll() is None  # not the run's: untouched
    assert find_marked(run) == []
    assert main(["--run-id", run, "--grace-s", "0"]) == 0
    assert "no process of test run" in capsys.readouterr().out


def test_a_process_exiting_within_the_grace_and_a_zombie_are_not_left_over(spawn: object) -> None:
    run = f"test-{uuid.uuid4()}"
    start = spawn  # type: ignore[assignment]
    exiting = start(run)  # type: ignore[operator]
    zombie = start(run)  # type: ignore[operator]
    zombie.kill()
    deadline = time.monotonic() + 10
    while find_marked(run) != [p for p in find_marked(run) if p.pid == exiting.pid] and time.monotonic() < deadline:
        time.sleep(0.05)  # poll interval: until the killed child is a zombie (not reaped yet)
    assert [p.pid for p in find_marked(run)] == [exiting.pid]
    exiting.terminate()  # ends within the grace, on its own as far as the check knows
    assert main(["--run-id", run, "--grace-s", "5"]) == 0
    assert exiting.wait(timeout=10) == -signal.SIGTERM


def test_no_run_id_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUN_ENV, raising=False)
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
