"""Tests for lab/optimization.py: the optimization page's headline run on the copy task. A
tiny run shows the sign (the loss on the copies falls once an induction head has formed);
the committed run shows the plateau, the drop and the floor."""

import dataclasses
import json

from lab import optimization
from lab.optimization import best
from lab.recipes.copy_training import INDUCTION_THRESHOLD


def test_quick_run_loss_falls_once_an_induction_head_forms(tmp_path, capsys):
    assert optimization.main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / optimization.RESULT_FILE.name).read_text())
    (run,) = result["runs"]
    start, end = run["curve"][0], run["curve"][-1]
    # Untrained: near chance on the copies, and no head of layer 2 on the copy's source.
    assert start["loss_copies"] > result["chance"] - 0.3
    assert best(start, "induction", 2) < INDUCTION_THRESHOLD
    # Trained: the copies nearly free, and an induction head in layer 2; before it
    # formed, 100 steps earlier, the loss on the copies was still more than a nat higher.
    assert end["loss_copies"] < 0.5
    assert best(end, "induction", 2) >= INDUCTION_THRESHOLD
    formed = run["induction_formed"]
    assert formed["layer"] == 2
    before = [p for p in run["curve"] if p["step"] <= formed["step"] - 100][-1]
    assert before["loss_copies"] > end["loss_copies"] + 1
    assert (tmp_path / optimization.FIGURE.name).read_text().startswith("<?xml")
    assert "ind L2" in capsys.readouterr().out


def committed() -> dict:
    return json.loads(optimization.RESULT_FILE.read_text())


def test_committed_result_is_the_full_run():
    result = committed()
    assert result["schema"] == optimization.SCHEMA
    assert result["command"] == "python -m lab.optimization"
    setup = {
        **dataclasses.asdict(optimization.FULL),
        "schemes": ["learned"],
        "seeds": [0, 1, 2],
        "factors": [1],
    }
    assert result["setup"] == setup
    assert result["machine"]["cpu_model"]
    assert optimization.FIGURE.is_file()


def test_committed_run_plateau_then_drop_to_the_floor_as_the_head_forms():
    result = committed()
    floor, chance = result["floor_all_targets"], result["chance"]
    for run in result["runs"]:
        curve = {p["step"]: p for p in run["curve"]}
        formed = run["induction_formed"]
        assert formed is not None and formed["layer"] == 2, run["seed"]
        # The plateau: 50 steps in, still within 0.6 nats of chance on all targets.
        assert curve[50]["loss_all"] > chance - 0.6
        # The drop: from the plateau to within 0.2 nats of the floor, after the head.
        before, after = curve[formed["step"] - 50], curve[formed["step"] + 50]
        assert before["loss_all"] - after["loss_all"] > 0.8, run["seed"]
        assert run["curve"][-1]["loss_all"] < floor + 0.2
        assert best(run["curve"][-1], "induction", 2) >= INDUCTION_THRESHOLD
