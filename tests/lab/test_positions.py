"""Tests for lab/positions.py: the positions page's experiment, at a tiny size, and its
committed result."""

import dataclasses
import json

from lab import positions as experiment
from snippets.positions import POSITIONS


def test_quick_experiment_writes_a_table_for_every_scheme(tmp_path, capsys):
    assert experiment.main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "positions.json").read_text())
    assert [row["position"] for row in result["rows"]] == list(POSITIONS)
    learned = result["rows"][0]
    assert learned["excess_2x"] is None and learned["excess_4x"] is None
    for row in result["rows"][1:]:
        assert all(row[f"excess_{f}x"] is not None for f in result["factors"])
    for row in result["rows"]:
        assert row["excess_1x"] > -0.05  # nothing beats the entropy rate by more than noise
    for name in ("sinusoidal", "rope", "alibi", "learned", "excess"):
        assert (tmp_path / f"positions-{name}.svg").read_text().startswith("<?xml")
    assert "| rope |" in capsys.readouterr().out


def test_committed_result_is_the_full_experiment():
    result = json.loads(experiment.RESULT_FILE.read_text())
    assert result["schema"] == experiment.SCHEMA
    assert result["setup"] == dataclasses.asdict(experiment.FULL)
    assert result["command"] == "python -m lab.positions"
    assert result["machine"]["cpu_model"]
    assert [row["position"] for row in result["rows"]] == list(POSITIONS)
    for name in ("sinusoidal", "rope", "alibi", "learned", "excess"):  # the page's figures
        assert (experiment.RESULT_FILE.parent / f"positions-{name}.svg").is_file()
