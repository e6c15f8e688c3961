"""Tests for lab/masks.py: `python -m lab.masks cost --quick` end to end and the committed result
file (tests/lab/test_figures.py redraws the mask figures). No timing is asserted: times depend
on the machine."""

import json
import xml.etree.ElementTree as ET

from lab import masks as lab_masks


def test_cost_quick_runs_end_to_end(tmp_path, capsys):
    lab_masks.main(["cost", "--quick", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "masks-cost.json").read_text())
    assert data["schema"] == lab_masks.SCHEMA and data["machine"]["cpu_count"] >= 1
    assert [row["seq_len"] for row in data["results"]] == lab_masks.QUICK_T
    for row in data["results"]:
        assert row["flex_matches_dense"], row
        # 128-blocks, window 64: each query block needs its own and the previous key block,
        # 2n - 1 of the n^2 blocks: the work grows linearly in T.
        n = row["seq_len"] // 128
        assert row["block_density"] == round((2 * n - 1) / n**2, 4)
        for job in lab_masks.JOBS:
            for clock in ("runs_cpu_ms", "runs_wall_ms"):
                assert len(row[job][clock]) == data["settings"]["repetitions"]
    ET.parse(tmp_path / "masks-cost.svg")  # a well-formed plot
    printed = capsys.readouterr().out
    assert lab_masks.cost_table(data) in printed


def test_committed_cost_file_is_a_full_run():
    data = json.loads(lab_masks.COST_FILE.read_text())
    assert data["schema"] == lab_masks.SCHEMA
    assert data["command"].startswith("python -m lab.masks cost")
    assert [row["seq_len"] for row in data["results"]] == lab_masks.DEFAULT_T
    assert all(row["flex_matches_dense"] for row in data["results"])
    assert data["settings"]["window"] == lab_masks.WINDOW
    assert lab_masks.COST_PLOT.exists()
