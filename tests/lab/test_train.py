"""Tests for lab/train.py: the training command, its files, and the committed results the
optimization page prints."""

import json
import xml.etree.ElementTree as ET

import pytest
import torch

from lab.shared.common import TRAINING_RESULTS
from lab.train import LOSS_PLOT, bench_throughput, field_comments, main, throughput_table
from snippets.run.throughput import BENCH_MODEL, ladder
from snippets.run.train import CHECKPOINT, HISTORY, TrainConfig


def final_state(out):
    return torch.load(out / CHECKPOINT, weights_only=True)


# --- the command ------------------------------------------------------------------------------

TINY_ARGS = [
    "--corpus-chars", "20000", "--steps", "8", "--batch-size", "8", "--context-length", "16",
    "--n-layer", "1", "--n-embed", "32", "--warmup-steps", "2", "--eval-interval", "4",
    "--val-windows", "16",
]  # fmt: skip


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for option in ("--out", "--resume", "--steps", "--grad-accum", "--bench-throughput"):
        assert option in text


def test_command_trains_with_a_progress_bar_and_writes_its_files(tmp_path, capsys):
    assert main([*TINY_ARGS, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr()
    assert "tokens_per_s=" in printed.err and "8/8" in printed.err  # tqdm, on stderr
    assert "step     8" in printed.out and "from best" in printed.out
    history = json.loads((tmp_path / HISTORY).read_text())
    assert [r["step"] for r in history["records"]] == [0, 4, 8]  # 0: before training
    assert history["best_loss"] == pytest.approx(1.5026, abs=1e-4)
    assert history["config"]["steps"] == 8 and history["world_size"] == 1
    assert ET.parse(tmp_path / LOSS_PLOT).getroot().tag.endswith("svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT, HISTORY, LOSS_PLOT]
    # Resumed when already finished: nothing left to do, nothing changes.
    before = final_state(tmp_path)["model"]
    assert main([*TINY_ARGS, "--out", str(tmp_path), "--resume", "--no-progress"]) == 0
    after = final_state(tmp_path)["model"]
    assert all(torch.equal(before[n], after[n]) for n in before)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--batch-size", "10", "--grad-accum", "4"], "batch_size (10) must be divisible"),
        (["--corpus", "shakespeare"], "corpus ('shakespeare') must be"),
        (["--warmup-steps", "20"], "warmup_steps (20) must be between 0 and steps (8)"),
        (["--min-lr", "0.1"], "min_lr (0.1) must be between 0 and lr (0.003)"),
        (["--adamw", "fast"], "adamw ('fast') must be 'fused', 'foreach' or 'for-loop'"),
        ([], "--out is required"),
    ],
)
def test_command_errors(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*TINY_ARGS, *args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_help_texts_are_the_fields_comments():
    comments = field_comments(TrainConfig)
    assert comments["steps"] == "optimizer steps; the schedule ends here"
    assert "context_length" not in comments  # no comment, no help text


# --- the committed results the page shows -----------------------------------------------------


def test_committed_one_minute_run_meets_the_pages_claim():
    history = json.loads((TRAINING_RESULTS / "markov.json").read_text())
    assert history["process_seconds"] <= 60
    final = history["records"][-1]
    assert final["val_loss"] - history["best_loss"] < 0.1
    assert history["command"].startswith("python -m lab.train --corpus markov")


def test_committed_throughput_has_every_rung():
    data = json.loads((TRAINING_RESULTS / "throughput.json").read_text())
    assert [r["rung"] for r in data["results"]][:5] == list(ladder())
    assert data["model"] == BENCH_MODEL and data["batch_size"] == 12


def test_throughput_bench_times_every_rung_at_a_small_size():
    data = bench_throughput(rounds=2, steps=1, with_compile=False, argv=["--bench-throughput"])
    assert data["command"] == "python -m lab.train --bench-throughput"
    assert [r["rung"] for r in data["results"]] == list(ladder())
    assert {"load_1min_before", "load_1min_after", "cpu_model"} <= set(data["machine"])
    for row in data["results"]:
        assert len(row["samples_tokens_per_cpu_s"]) == 2 and row["tokens_per_cpu_s"] > 0
    assert throughput_table(data).splitlines()[1].startswith("readable")
