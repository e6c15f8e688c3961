"""Tests for lab/positions.py: the positions page's experiment on the copy task, at a
tiny size (the sign of its effect), and its committed result."""

import dataclasses
import json

from lab import positions as experiment
from snippets.positions import POSITIONS


def test_quick_experiment_shows_alibi_below_sinusoidal_at_4x(tmp_path, capsys):
    assert experiment.main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "positions.json").read_text())
    rows = {row["position"]: row for row in result["rows"]}
    assert list(rows) == list(experiment.QUICK.schemes)
    # The effect the page is about: ALiBi copies at 4x the training length, where the
    # sinusoidal table's positions were never seen.
    alibi, sinusoidal = rows["alibi"]["loss_4x"]["mean"], rows["sinusoidal"]["loss_4x"]["mean"]
    assert alibi < sinusoidal - 0.3, (alibi, sinusoidal)
    assert all(r["curve"] and r["loss_1x"] >= 0 for r in result["runs"])
    for name in ("sinusoidal", "rope", "alibi", "excess"):
        assert (tmp_path / f"positions-{name}.svg").read_text().startswith("<?xml")
    assert "| alibi |" in capsys.readouterr().out


def test_committed_result_is_the_full_experiment():
    result = json.loads(experiment.RESULT_FILE.read_text())
    assert result["schema"] == experiment.SCHEMA
    setup = {**dataclasses.asdict(experiment.FULL), "schemes": list(POSITIONS), "seeds": [0, 1, 2]}
    assert result["setup"] == setup
    assert result["command"] == "python -m lab.positions"
    assert result["machine"]["cpu_model"]
    assert [row["position"] for row in result["rows"]] == list(POSITIONS)
    assert all(row["seeds"] >= 3 for row in result["rows"])
    learned = result["rows"][0]
    assert learned["loss_2x"] is None and learned["loss_4x"] is None  # no table rows
    assert len(result["learned_similarity"]) == experiment.FULL.context_length
    for name in ("sinusoidal", "rope", "alibi", "learned", "excess"):  # the page's figures
        assert (experiment.RESULT_FILE.parent / f"positions-{name}.svg").is_file()
