"""How the audit names the node directories it is given: by ``node.id`` from each metadata log
dir's ``meta.properties``, by ``directory.id`` when two directories share a node id, by the
directory's name only without ``meta.properties``; an explicit ``name=DIR`` wins. So
``kwire audit /a/meta /b/meta /c/meta`` works although the directories' names are equal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwire.uuid import Uuid
from storage.meta_properties import MetaProperties, write_meta_properties
from tests.audit.synth import PARTITION, make_history, write_node
from tools.audit import cli
from tools.audit.scan import NodeDir, node_names, parse_node_dirs

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
HISTORY = make_history([(1, 1, 4), (2, 2, 5), (3, 3, 4)])


def dir_id(n: int) -> Uuid:
    return Uuid(bytes(15) + bytes([100 + n]))


def format_node(log_dir: Path, node_id: int, directory_id: Uuid | None) -> Path:
    """A metadata log dir with the synthetic history and the meta.properties of ``node_id``."""
    write_node(log_dir, HISTORY)
    write_meta_properties(log_dir, MetaProperties(1, CLUSTER_ID, node_id, directory_id),
                          fsync=False)
    return log_dir


# -- the naming rule ---------------------------------------------------------------------------


def test_a_shared_node_id_names_those_directories_by_directory_id() -> None:
    dirs = [
        NodeDir("/a/meta/" + PARTITION, "meta", node_id=1, directory_id="AAAAAAAAAAAAAAAAAAAAZQ"),
        NodeDir("/b/meta/" + PARTITION, "meta", node_id=1, directory_id="AAAAAAAAAAAAAAAAAAAAZg"),
        NodeDir("/c/meta/" + PARTITION, "meta", node_id=2, directory_id="AAAAAAAAAAAAAAAAAAAAZw"),
    ]
    assert node_names(dirs) == ["AAAAAAAAAAAAAAAAAAAAZQ", "AAAAAAAAAAAAAAAAAAAAZg", "2"]


def test_explicit_names_win_and_directory_names_are_the_last_resort() -> None:
    dirs = [
        NodeDir("/a/meta/" + PARTITION, "meta", explicit="leader", node_id=1, directory_id="x"),
        NodeDir("/b/meta/" + PARTITION, "meta", node_id=1, directory_id="y"),  # 1 is not shared
        NodeDir("/c/n3/" + PARTITION, "n3"),  # no meta.properties
        NodeDir("/d/n4/" + PARTITION, "n4", node_id=4),  # shared id, no directory id:
        NodeDir("/e/n5/" + PARTITION, "n5", node_id=4),  # their directory names
    ]
    assert node_names(dirs) == ["leader", "1", "n3", "n4", "n5"]


def test_names_that_still_collide_are_refused_naming_the_directories() -> None:
    dirs = [
        NodeDir("/a/meta/" + PARTITION, "meta", node_id=1),
        NodeDir("/b/meta/" + PARTITION, "meta", node_id=1),
    ]
    with pytest.raises(ValueError, match=r"'meta' for /a/meta/.*, /b/meta/.*name=DIR"):
        node_names(dirs)
    with pytest.raises(ValueError, match="'1' for"):
        node_names([NodeDir("/a/x/" + PARTITION, "x", explicit="1"),
                    NodeDir("/b/y/" + PARTITION, "y", node_id=1)])


def test_parse_node_dirs_reads_meta_properties_of_the_metadata_log_dir(tmp_path: Path) -> None:
    a = format_node(tmp_path / "a" / "meta", 1, dir_id(1))
    b = format_node(tmp_path / "b" / "meta", 1, dir_id(2))
    c = format_node(tmp_path / "c" / "meta", 3, dir_id(3))
    bare = tmp_path / "d" / "meta"
    write_node(bare, HISTORY)  # no meta.properties

    # a node dir or its __cluster_metadata-0: meta.properties is in the metadata log dir
    assert parse_node_dirs([str(a), str(b / PARTITION), str(c)]) == [
        (str(dir_id(1)), str(a / PARTITION)),
        (str(dir_id(2)), str(b / PARTITION)),
        ("3", str(c / PARTITION)),
    ]
    assert parse_node_dirs([f"one={a}", str(b), str(bare)]) == [
        ("one", str(a / PARTITION)), ("1", str(b / PARTITION)), ("meta", str(bare / PARTITION)),
    ]
    (c / "meta.properties").write_text("version=1\nnode.id=three\n")  # unreadable: dir name
    assert parse_node_dirs([str(a), str(c)])[1] == ("meta", str(c / PARTITION))
    with pytest.raises(ValueError, match="duplicate node names: 'meta'"):
        parse_node_dirs([str(c), str(bare)])


# -- the command -------------------------------------------------------------------------------


@pytest.mark.spark
def test_audit_of_three_directories_named_meta_names_the_nodes_by_id(spark, tmp_path, capsys):
    dirs = [format_node(tmp_path / x / "meta", n, dir_id(n)) for n, x in ((1, "a"), (2, "b"), (3, "c"))]
    args = cli.parse_args([str(d) for d in dirs] + ["--json", "--quiet"])
    assert cli.run(args, spark=spark) == 0
    out, err = capsys.readouterr()
    assert "VIOLATION" not in err
    summary = json.loads(out)
    assert summary["ok"] is True
    assert [(n["node"], n["node_id"], n["dir"]) for n in summary["nodes"]] == [
        (str(n), n, str(d / PARTITION)) for n, d in zip((1, 2, 3), dirs, strict=True)
    ]
    assert [n["log_end_offset"] for n in summary["nodes"]] == [HISTORY.end_offset] * 3
