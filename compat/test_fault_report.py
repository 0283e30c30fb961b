"""The fault report (``compat/faults/report.py``) drawn from a recorded run and opened in headless
Chromium (``compat/faults/browser.py``).

The history is ``compat/testdata/fault-history-kill-leader.json``: one real quorum of three kwire
nodes under ``kill-leader`` (``python -m compat.faults --configs kwire --each --nemeses
kill-leader --seed 5 --report DIR``, its ``quorum-*.json`` as written), so no cluster runs here.
The browser test needs Debian's ``chromium``, which ``make test`` installs where it is missing
(``compat/ensure-chromium.sh``); without it the test skips and says so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image, ImageStat

from compat.faults import browser, report
from compat.faults.failpoints import NOT_IN_STOCK
from compat.faults.history import Op
from compat.faults.rounds import KWIRE_ONLY, Round, available_nemeses
from compat.faults.sampler import Sample
from compat.harness import KafkaRelease

HISTORY = Path(__file__).parent / "testdata" / "fault-history-kill-leader.json"


def _report(tmp_path: Path) -> tuple[Path, dict]:
    directory = tmp_path / "report"
    directory.mkdir()
    shutil.copy(HISTORY, directory / "quorum-s5-1-kwire.json")
    return report.write_report(directory), json.loads(HISTORY.read_text(encoding="utf-8"))


def test_the_report_draws_every_plot_of_a_recorded_run(tmp_path: Path) -> None:
    index, rec = _report(tmp_path)
    images, text = browser.read_page(index)
    for nemesis in report.nemeses_run([rec]):
        assert nemesis in text, f"the page does not name {nemesis}"
    pngs = {p.name for p in index.parent.glob("*.png")}
    assert sorted(images) == sorted(pngs) and len(images) == 5, (images, pngs)
    for src in images:
        with Image.open(index.parent / src) as png:
            assert png.format == "PNG"
            # a plot, not a blank canvas: several colours over the image
            assert max(ImageStat.Stat(png.convert("L")).stddev) > 10, src
    # what the roles plot draws: the killed leader is down from the kill until it restarted
    killed = rec["rounds"][0]
    spans = report.role_spans(rec, killed["leader"])
    down = [(a, b) for a, b, role in spans if role == "down"]
    assert down and down[0][0] <= killed["started_s"] + 0.5, spans
    # and another node, as its log says, went from prospective to candidate to leader meanwhile
    others = {node: [role for _, _, role in report.role_spans(rec, node)] for node in rec["nodes"]
              if node != killed["leader"]}
    assert any(["prospective", "candidate", "leader"] == [r for r in roles if r in ("prospective", "candidate", "leader")]
               for roles in others.values()), others


@pytest.mark.skipif(browser.chromium() is None,
                    reason="CHROMIUM IS MISSING: Debian's `chromium` is not installed and compat/ensure-chromium.sh "
                           "could not install it (no apt-get, or neither root nor passwordless sudo); the fault "
                           "report was NOT opened in a browser")
def test_the_report_renders_every_image_in_headless_chromium(tmp_path: Path) -> None:
    index, rec = _report(tmp_path)
    shot = browser.trim(browser.screenshot(index, index.parent / "screenshot.png", *browser.page_size(index)))
    with Image.open(shot) as page:
        assert max(ImageStat.Stat(page.convert("L")).stddev) > 10, "the page rendered blank"
    rendered = browser.rendered_images(index, tmp_path / "probe.png")
    assert len(rendered) == 5 and all(r.changed < 0.01 for r in rendered), rendered
    # the same check on a page one of whose images is gone from beside it: it must name that one
    missing = rendered[0].src
    reference = tmp_path / "reference"
    reference.mkdir()
    for r in rendered:
        shutil.copy(index.parent / r.src, reference / r.src)
    (index.parent / missing).unlink()
    broken = {r.src: r.changed for r in browser.rendered_images(index, tmp_path / "probe-broken.png", reference)}
    assert broken[missing] > 0.05 and all(f < 0.01 for src, f in broken.items() if src != missing), broken
    print(f"screenshot: {shot}")


def test_a_failed_fault_test_leaves_its_report(tmp_path: Path) -> None:
    """``report.on_failure`` around a fault test: the run the test saw (rebuilt here from the
    recorded history) is drawn, and the failure's notes name the report."""
    rec = json.loads(HISTORY.read_text(encoding="utf-8"))
    root = tmp_path / "quorum"
    root.mkdir()
    quorum = SimpleNamespace(ports=dict.fromkeys(rec["nodes"], 0), kwire_ids=set(rec["kwire_ids"]),
                             kafka=SimpleNamespace(version=rec["release"]), root=root)
    run = SimpleNamespace(
        quorum=quorum, verdict=None, cluster=None, admin_ops=[],
        ops=[Op(value=n, node=1, invoked_s=a, completed_s=b, outcome=o) for n, (_, a, b, o) in enumerate(rec["ops"])],
        samples=[Sample(s[0], s[1], s[2], s[3], s[4], s[5], {int(k): v for k, v in s[6].items()})
                 for s in rec["samples"]],
        rounds=[Round(r["nemesis"], r["leader"], r["epoch"], r["started_s"], r["ended_s"], r["figures"])
                for r in rec["rounds"]])
    with pytest.raises(AssertionError) as failure, report.on_failure([run], "kwire", tmp_path / "report", seed=5):
        raise AssertionError("the quorum did not recover")
    index = tmp_path / "report" / "index.html"
    assert f"fault report: {index}" in failure.value.__notes__
    _, text = browser.read_page(index)
    assert "FAILED" in text and "the quorum did not recover" in text and "kill-leader" in text


def test_a_stock_quorum_says_it_cannot_take_the_failpoint_nemeses(tmp_path: Path) -> None:
    """kwire under a failpoint nemesis beside stock Kafka of the same seed: the stock quorum,
    which has no failpoints, sits beside kwire's and says so rather than leaving the nemesis out
    (the page and the recovery plot's "n/a")."""
    rec = json.loads(HISTORY.read_text(encoding="utf-8"))
    directory = tmp_path / "report"
    directory.mkdir()
    kwire = dict(rec, plan=["kill-leader", "slow-commit"],
                 rounds=[*rec["rounds"], dict(rec["rounds"][0], nemesis="slow-commit", figures={"recovered_s": 0.4})])
    stock = dict(rec, configuration="stock-4.4.0", kwire_ids=[], plan=["kill-leader"],
                 not_applicable={"slow-commit": NOT_IN_STOCK})
    report.save(kwire, directory)
    report.save(stock, directory)
    index = report.write_report(directory)
    _, text = browser.read_page(index)
    assert f"slow-commit: {NOT_IN_STOCK}" in text, text
    assert text.count("seed 5:") == 1, "the two quorums of one seed are not side by side"
    assert (directory / "recovery-stock-4.4.0.png").exists() and (directory / "recovery.png").exists()


def test_failpoint_nemeses_are_offered_to_quorums_with_kwire_nodes_only() -> None:
    kafka = KafkaRelease("4.4.0")
    stock = available_nemeses(kafka, brokers=True, kwire=False)
    kwire = available_nemeses(kafka, brokers=True, kwire=True)
    assert KWIRE_ONLY and not KWIRE_ONLY & set(stock), stock
    assert KWIRE_ONLY <= set(kwire) and set(stock) <= set(kwire), kwire
    assert "heartbeat-delay" not in available_nemeses(kafka, brokers=False, kwire=True)
