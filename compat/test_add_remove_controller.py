"""Stock ``kafka-metadata-quorum add-controller`` / ``remove-controller`` across kinds (KIP-853).

For the pinned releases in both directions (``make test``: a kwire leader on the newest release, a
stock one on the older; ``make nightly``: every pair, :func:`compat.kafka.release_matrix`): a
standalone leader of one kind (formatted with ``--standalone``) and a joiner of the other kind, formatted with ``--no-initial-controllers``
and started with only ``controller.quorum.bootstrap.servers``. Asserted:

* the joiner starts as an observer of the leader (DescribeQuorum lists it among the observers);
* ``--dry-run`` of add-controller and remove-controller prints the same line from the stock
  tool and from ``kwire metadata-quorum``, and changes nothing;
* the stock tool, run with the joiner's configuration (``--command-config``), adds it: exit 0,
  ``Added controller 2``, voters {1, 2}, and the leader epoch unchanged (kwire's leader used to
  resign on the first added voter: its check-quorum timer had run out while it was alone);
  then removes it (``--controller-id 2 --controller-directory-id``): exit 0, voters {1}, the
  removed controller still fetching as an observer, the epoch unchanged; then
  ``kwire metadata-quorum`` does the same, printing what the stock tool printed;
* removing it once more fails in both tools with VoterNotFoundException (exit 1);
* both processes are still running;
* with ``controller.quorum.auto.join.enable=true`` (newest pinned release) the joiner of either
  kind becomes a voter by itself.

The hazard this test keeps small: a Kafka 3.9 voter has no pre-vote (KIP-996), so a joiner that
misses its fetch timeout while it is a voter (or just after its removal, before it reads the
VotersRecord) makes the 3.9 leader step down to Unattached with each higher-epoch Vote it sends
(``KafkaRaftClient.handleVoteRequest``). A removed voter retrying every
``election.backoff.max.ms`` keeps resetting the 3.9 leader's 1-2 s election timer, so the
leader may not lead again for a minute. A stock 4.x joiner does the same. The fetch timeout is
therefore Kafka's default (2 s) rather than a shorter one: a CPU-starved run would need a 1.5 s
stall of either process, where a 1 s timeout (500 ms past the fetch's max wait) tripped under
load. When a wait fails, the tail of each process's output (kwire's role transitions, the stock
controller's warnings) is part of the message.

A fault of stock Kafka 3.9's own: its leader sends BeginQuorumEpoch to every voter as a
heartbeat (every ``controller.quorum.fetch.timeout.ms`` / 2, KAFKA-16536), and an answer that
arrives after the voter's removal committed makes ``LeaderState.addAcknowledgementFrom`` throw
("Unexpected acknowledgement from non-voter 2"), which stops the process (a stock joiner's
answer does the same; a loaded machine widens the window). When a stock leader exits with
exactly that line, the test starts it again on its own data and goes on, printing that it did:
the tools' interoperation is what is under test. Any other exit still fails it.

Cost: one JVM and one kwire process for ~15 s per case.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from compat.harness import (
    CLUSTER_ID,
    KafkaRelease,
    controller_properties,
    format_kwire,
    free_port,
    kwire_cli,
    start_kwire,
    start_stock,
    stop_processes,
    wait_until,
)
from compat.kafka import release_matrix
from storage.meta_properties import read_meta_properties
from tools.quorum_client import QuorumToolError, describe

pytestmark = [pytest.mark.compat, pytest.mark.slow]

WAIT_S = 60.0
FETCH_TIMEOUT_MS = 2000
ALONE_S = 2 * FETCH_TIMEOUT_MS / 1000
"""How long the leader leads alone before the add: past its check-quorum timeout (1.5 x
fetch.timeout.ms), where kwire's leader resigned on the first added voter."""
TAIL_LINES = 12
STOCK_REMOVAL_FAULT = "Unexpected acknowledgement from non-voter 2"
"""The line a Kafka 3.9 leader dies with when a removed voter's BeginQuorumEpoch answer arrives
late (module docstring)."""


def _kwire_tool(args: list[str]) -> subprocess.CompletedProcess[str]:
    return kwire_cli(["metadata-quorum", *args])


def _view(port: int) -> tuple[list[int], list[int], int] | None:
    """(voter ids, observer ids, leader epoch) as the leader reports them, None while it
    does not answer."""
    try:
        p = trio.run(describe, f"localhost:{port}", 5.0).partition
    except (OSError, QuorumToolError, trio.TooSlowError):
        return None
    return sorted(v.replica_id for v in p.current_voters), sorted(o.replica_id for o in p.observers), p.leader_epoch


def _wait(
    port: int, what: str, holds: Callable[[tuple[list[int], list[int], int]], bool], outputs: Path | None = None
) -> tuple[list[int], list[int], int]:
    """Until the leader at ``port`` reports a view that ``holds``; on failure the message ends
    with the last lines of every ``*.out`` in ``outputs``."""
    try:
        view = wait_until(what, lambda: _view(port), WAIT_S, ok=lambda v: v is not None and holds(v))
    except AssertionError as failed:
        tails = [
            f"--- {out.name}\n" + "\n".join(out.read_text(errors="replace").splitlines()[-TAIL_LINES:])
            for out in sorted(outputs.glob("*.out"))
        ] if outputs is not None else []
        raise AssertionError("\n".join([str(failed), *tails])) from None
    assert view is not None
    return view


@contextlib.contextmanager
def _pair(
    kafka: KafkaRelease, tmp_path: Path, leader_kind: str, joiner_extra: str = ""
) -> Iterator[tuple[dict[int, int], dict[int, subprocess.Popen[bytes]], dict[int, Path], float]]:
    """A standalone leader (node 1) of ``leader_kind`` and a ``--no-initial-controllers``
    joiner (node 2) of the other kind, both started from the leader's address, the joiner with
    ``joiner_extra`` properties. Yields (ports, processes, properties, when the leader led)."""
    joiner_kind = "stock" if leader_kind == "kwire" else "kwire"
    ports = {1: free_port(), 2: free_port()}
    procs: dict[int, subprocess.Popen[bytes]] = {}
    props = {}
    for node, kind, flag in ((1, leader_kind, "--standalone"), (2, joiner_kind, "--no-initial-controllers")):
        # every node starts from the leader's address
        props[node] = controller_properties(
            tmp_path / f"{node}.properties", tmp_path / f"data{node}", ports[node],
            f"controller.quorum.fetch.timeout.ms={FETCH_TIMEOUT_MS}\n" + (joiner_extra if node == 2 else ""),
            node_id=node, bootstrap_port=ports[1],
        )
        if kind == "kwire":
            format_kwire(props[node], flag)
        else:
            kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props[node], flag])
    try:
        alone_since = 0.0
        for node, kind in ((1, leader_kind), (2, joiner_kind)):
            out = tmp_path / f"{node}.out"
            if kind == "kwire":
                procs[node] = start_kwire(props[node], out)
            else:
                procs[node] = start_stock(kafka, props[node], out, logs_dir=tmp_path / f"logs{node}")
            if node == 1:
                _wait(ports[1], "the leader leads", lambda v: v[0] == [1], tmp_path)
                alone_since = time.monotonic()
        yield ports, procs, props, alone_since
    finally:
        stop_processes(procs.values())


class _LeaderRestarts:
    """Starts the stock leader (node 1) again when it died of :data:`STOCK_REMOVAL_FAULT`, once
    per occurrence of that line in its output; ``count`` is how often it did."""

    def __init__(self, kafka: KafkaRelease, leader_kind: str, procs: dict[int, subprocess.Popen[bytes]],
                 props: dict[int, Path], tmp_path: Path) -> None:
        self.kafka, self.leader_kind, self.procs, self.props, self.tmp_path = kafka, leader_kind, procs, props, tmp_path
        self.count = 0

    def __call__(self) -> bool:
        """Whether the leader was started again just now."""
        if self.leader_kind != "stock" or self.procs[1].poll() is None:
            return False
        out = self.tmp_path / "1.out"
        if out.read_text(errors="replace").count(STOCK_REMOVAL_FAULT) <= self.count:
            return False
        self.count += 1
        print(f"stock leader died of its own removal fault ({STOCK_REMOVAL_FAULT!r}); started again")
        self.procs[1] = start_stock(self.kafka, self.props[1], out, logs_dir=self.tmp_path / "logs1")
        return True


@pytest.mark.parametrize(("kafka_version", "leader_kind"), release_matrix(("kwire", "stock")))
def test_stock_tool_adds_and_removes_a_controller_of_the_other_kind(
    each_kafka: KafkaRelease, tmp_path: Path, leader_kind: str
) -> None:
    with _pair(each_kafka, tmp_path, leader_kind) as (ports, procs, props, alone_since):
        _, _, epoch = _wait(ports[1], "the joiner fetches as an observer", lambda v: 2 in v[1], tmp_path)
        time.sleep(max(0.0, alone_since + ALONE_S - time.monotonic()))  # a precondition, not a wait for a result

        bootstrap = f"localhost:{ports[1]}"
        directory = read_meta_properties(tmp_path / "data2").directory_id  # type: ignore[union-attr]
        add_args = ["--command-config", str(props[2]), "--bootstrap-controller", bootstrap, "add-controller"]
        remove_args = ["--bootstrap-controller", bootstrap, "remove-controller", "--controller-id", "2",
                       "--controller-directory-id", str(directory)]
        # the dry runs change nothing and print the same line from both tools
        for args in (add_args, remove_args):
            stock = each_kafka.run_tool("metadata-quorum", [*args, "--dry-run"], check=False)
            ours = _kwire_tool([*args, "--dry-run"])
            assert stock.returncode == ours.returncode == 0, stock.stderr + ours.stderr
            assert ours.stdout == stock.stdout and "DRY RUN" in ours.stdout
        assert _view(ports[1])[:2] == ([1], [2])  # type: ignore[index]

        outputs: dict[str, list[str]] = {}
        restarted = _LeaderRestarts(each_kafka, leader_kind, procs, props, tmp_path)
        for tool in ("stock", "kwire"):  # each tool adds and removes once
            run = (lambda a: each_kafka.run_tool("metadata-quorum", a, check=False)) if tool == "stock" else _kwire_tool
            added = run(add_args)
            assert added.returncode == 0, added.stdout + added.stderr
            assert "Added controller 2" in added.stdout
            _, _, after = _wait(ports[1], f"{tool}: voters {{1, 2}}", lambda v: v[0] == [1, 2], tmp_path)
            assert after == epoch
            removed = run(remove_args)
            if removed.returncode != 0 and restarted():  # the leader died before it answered
                voters, _, _ = _wait(ports[1], f"{tool}: the leader back", lambda v: True, tmp_path)
                if voters == [1, 2]:
                    removed = run(remove_args)
            assert removed.returncode == 0, removed.stdout + removed.stderr
            restarts = restarted.count
            _, _, after = _wait(ports[1], f"{tool}: voters {{1}}, 2 observing",
                                lambda v: not restarted() and v[0] == [1] and 2 in v[1], tmp_path)
            if restarted.count == restarts == 0:
                assert after == epoch
            epoch = after
            outputs[tool] = [added.stdout, removed.stdout]
        assert outputs["kwire"] == outputs["stock"]

        # errors: both tools fail the same way on a replica key that is not a voter
        stock = each_kafka.run_tool("metadata-quorum", remove_args, check=False)
        ours = _kwire_tool(remove_args)
        assert stock.returncode == ours.returncode == 1
        assert "VoterNotFoundException" in stock.stderr and "VoterNotFoundException" in ours.stderr
        as_json = json.loads(_kwire_tool([*add_args, "--dry-run", "--json"]).stdout)
        assert as_json["controllerId"] == 2 and as_json["directoryId"] == str(directory)
        assert all(p.poll() is None for p in procs.values()), {n: p.poll() for n, p in procs.items()}


@pytest.mark.parametrize("leader_kind", ["kwire", "stock"])
def test_a_joiner_with_auto_join_becomes_a_voter_by_itself(
    newest_kafka: KafkaRelease, tmp_path: Path, leader_kind: str
) -> None:
    """``controller.quorum.auto.join.enable=true`` (Kafka 4.x; the newest pinned release runs the
    stock side): the observer asks the leader to add it, with no tool, whichever kind leads."""
    with _pair(newest_kafka, tmp_path, leader_kind, "controller.quorum.auto.join.enable=true\n") as (ports, procs, _, _):
        _, _, epoch = _wait(ports[1], "the joiner made itself a voter", lambda v: v[0] == [1, 2], tmp_path)
        directory = read_meta_properties(tmp_path / "data2").directory_id  # type: ignore[union-attr]
        view = trio.run(describe, f"localhost:{ports[1]}", 5.0).partition
        assert [(v.replica_id, v.replica_directory_id) for v in view.current_voters if v.replica_id == 2] == [
            (2, directory)
        ]
        assert view.leader_epoch == epoch and view.leader_id == 1
        assert all(p.poll() is None for p in procs.values()), {n: p.poll() for n, p in procs.items()}
