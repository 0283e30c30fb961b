"""``kwire simulate`` (``tools.simulate.command``) at a tiny size: the same seed writes the same
summary.json, every scenario runs and does what it names, ``--compare`` reports both placers
side by side with its plots, and a broken placer is a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.cli import main
from tools.simulate.command import simulate
from tools.simulate.fleet_scenarios import SCENARIOS
from tools.simulate.fleet_spec import FIRST_BROKER_ID, FleetSpec

BROKERS = 9
TINY = ["--brokers", str(BROKERS), "--partitions", "60", "--racks", "3", "--fault-at-s", "10", "--quiet"]
OFF_RACK = "tools.examples.placers:LeadersOffRackPlacer"


def _spec(scenario: str = "zonal-outage", seed: int = 5, **properties: str) -> FleetSpec:
    return FleetSpec(brokers=BROKERS, partitions=60, scenario=scenario, seed=seed, racks=3, duration_s=130,
                     fault_at_s=10, properties=properties)


def test_the_same_seed_writes_the_same_summary(tmp_path: Path) -> None:
    simulate(_spec(), [None], tmp_path / "a", plots=False)
    simulate(_spec(), [None], tmp_path / "b", plots=False)
    simulate(_spec(seed=6), [None], tmp_path / "c", plots=False)
    first = (tmp_path / "a" / "summary.json").read_bytes()
    assert first == (tmp_path / "b" / "summary.json").read_bytes()
    assert first != (tmp_path / "c" / "summary.json").read_bytes()  # the seed matters
    assert b"wall" not in first and (tmp_path / "a" / "cpu.json").exists()  # times kept apart


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    status = main(["simulate", *TINY, "--out", str(tmp_path), "--json", "--no-plots", *args])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if status == 0 else {}, captured.err


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_scenario_runs(scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    duration = "130" if scenario == "zonal-outage" else "75"
    status, out, err = _run(tmp_path, capsys, "--scenario", scenario, "--duration-s", duration)
    assert status == 0, err
    figures = out["runs"][0]["figures"]
    assert figures["partitions"] == 60 and figures["partitions_created_s"] is not None
    assert figures["under_replicated_at_end"] == 0
    if scenario != "registration-storm":  # replication factor 3 over 3 racks: an ISR member lives
        assert figures["max_offline_partitions"] == 0
    if scenario == "steady":
        assert figures["leader_moves"] == 0 and figures["broker_incarnations"] == BROKERS
    elif scenario == "broker-kills":
        assert figures["broker_incarnations"] > BROKERS and figures["max_under_replicated_partitions"] > 0
    elif scenario == "zonal-outage":
        assert figures["max_partitions_led_by_a_dead_broker"] > 0
        assert figures["max_under_replicated_partitions"] == 60  # every partition has a replica on rack-a
        assert figures["leaders_per_rack_at_end"]["rack-a"] == 0  # not given back before the rebalance
    elif scenario == "rolling-restart":
        assert figures["controlled_shutdowns"] == BROKERS
    else:  # every broker restarts at once: the old incarnations are fenced, every partition offline
        assert figures["broker_incarnations"] == 2 * BROKERS
        assert figures["max_offline_partitions"] == 60 and figures["offline_at_end"] == 0


def test_compare_reports_both_placers(tmp_path: Path) -> None:
    """LeadersOffRackPlacer keeps preferred leaders off rack-a, so its partitions keep their
    leaders through rack-a's outage; the striped placement moves a third of them."""
    result = simulate(_spec(**{"kwire.placer.leaders.off.rack": "rack-a"}), [OFF_RACK, None], tmp_path)
    off, striped = result["runs"]
    assert (off["placer"], striped["placer"]) == (OFF_RACK, "StripedReplicaPlacer (default)")
    rack_a = [i for i, rack in enumerate(off["racks"]) if rack == "rack-a"]
    created = off["series"]["time_s"].index(11.0)  # the last sample before the outage
    assert sum(off["series"]["leaders_per_broker"][created][i] for i in rack_a) == 0
    assert sum(striped["series"]["leaders_per_broker"][created][i] for i in rack_a) > 0
    assert off["figures"]["leader_moves"] == 0 < striped["figures"]["leader_moves"]
    assert off["brokers"][0] == FIRST_BROKER_ID
    for name in ("leaders.png", "partitions.png", "moves.png", "controller.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "index.html").read_text()
    assert OFF_RACK in page and "StripedReplicaPlacer" in page and 'src="leaders.png"' in page


class RaisingPlacer:
    """A placer that fails (a bug in a plug-in)."""

    def place(self, spec: Any, cluster: Any) -> Any:
        raise RuntimeError("no rack map loaded")


class ShortPlacer:
    """A placer that answers one replica fewer than asked."""

    def place(self, spec: Any, cluster: Any) -> Any:
        brokers = [b.id for b in cluster.usable_brokers()]
        return [brokers[: spec.num_replicas - 1] for _ in range(spec.num_partitions)]


@pytest.mark.parametrize(("placer", "status", "words"), [
    (f"{__name__}:RaisingPlacer", 1, "INVALID_REPLICATION_FACTOR: Unable to replicate the partition 3 time(s): "
                                     "no rack map loaded"),
    (f"{__name__}:ShortPlacer", 1, "INVALID_REPLICA_ASSIGNMENT: The replica placer"),
    ("org.example.RackPlacer", 2, "kwire runs controller plug-ins written in Python"),
    (f"{__name__}:Missing", 2, "has no class 'Missing'"),
])
def test_a_broken_placer_is_a_clear_error(
    placer: str, status: int, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got, _, err = _run(tmp_path, capsys, "--scenario", "steady", "--duration-s", "20", "--placer", placer)
    assert got == status and words in err, err
