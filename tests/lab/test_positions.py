"""Tests for lab/positions.py: the positions page's experiment on the copy task, at a
tiny size (the sign of its effect, for the right reason), and its committed result."""

import dataclasses
import json
import math

from lab import positions as experiment
from snippets.core.positions import POSITIONS

LEARNED_AT_1X = 0.2  # nats on the copies: far below chance (ln V), the task is learned


def rise(row: dict) -> float:
    """How much a scheme's loss on the copies grows from 1x to 4x the training length."""
    return row["loss_4x"]["mean"] - row["loss_1x"]["mean"]


def test_quick_experiment_sinusoidal_degrades_past_the_training_length_more_than_alibi(
    tmp_path, capsys
):
    assert experiment.main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "positions.json").read_text())
    rows = {row["position"]: row for row in result["rows"]}
    assert list(rows) == list(experiment.QUICK.schemes)
    chance = math.log(experiment.QUICK.vocab_size)
    # First, both have learned to copy at the training length: a scheme that learned
    # nothing cannot fail to extrapolate.
    for row in rows.values():
        assert row["loss_1x"]["mean"] < LEARNED_AT_1X < chance, row
    # Then the effect: past the training length, the sinusoidal model's loss grows
    # more than ALiBi's, and ends above it.
    sinusoidal, alibi = rise(rows["sinusoidal"]), rise(rows["alibi"])
    assert sinusoidal > alibi + 0.05, (sinusoidal, alibi)
    assert rows["alibi"]["loss_4x"]["mean"] < rows["sinusoidal"]["loss_4x"]["mean"]
    # ALiBi's bias alone, before any training, makes its steepest head favour t - 1.
    runs = {run["position"]: run for run in result["runs"]}
    assert runs["alibi"]["previous_formed"]["step"] == 0
    assert (
        max(map(max, runs["sinusoidal"]["curve"][0]["previous"])) < result["thresholds"]["previous"]
    )
    for name in ("sinusoidal", "rope", "alibi", "excess"):
        assert (tmp_path / f"positions-{name}.svg").read_text().startswith("<?xml")
    assert "| alibi |" in capsys.readouterr().out


def test_committed_result_is_the_full_experiment():
    result = json.loads(experiment.RESULT_FILE.read_text())
    assert result["schema"] == experiment.SCHEMA
    setup = {
        **dataclasses.asdict(experiment.FULL),
        "schemes": list(POSITIONS),
        "seeds": [0, 1, 2],
        "factors": [1, 2, 4],
    }
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


def test_committed_result_every_scheme_learned_and_each_head_formed_where_it_says():
    result = json.loads(experiment.RESULT_FILE.read_text())
    for row in result["rows"]:
        assert row["loss_1x"]["max"] < LEARNED_AT_1X, row["position"]
    for run in result["runs"]:
        for key in ("previous", "induction"):
            formed = run[f"{key}_formed"]
            if formed is None:
                assert all(
                    max(max(layer) for layer in point[key]) < result["thresholds"][key]
                    for point in run["curve"]
                )
                continue
            point = next(p for p in run["curve"] if p["step"] == formed["step"])
            score = point[key][formed["layer"] - 1][formed["head"] - 1]
            assert score >= result["thresholds"][key], (run["position"], key, formed)
