"""Tests for lab/generate.py: sampling from a checkpoint at the command line, the KV-cache
benchmark, and the committed result the generation page prints."""

import json

import pytest

from lab.generate import main
from lab.shared.common import TRAINING_RESULTS
from snippets.run.train import TrainConfig, train

# --- the command ------------------------------------------------------------------------------


def test_command_writes_text_from_a_checkpoint(tmp_path, capsys):
    config = TrainConfig(
        corpus_chars=20_000, steps=4, batch_size=8, context_length=16, n_layer=1, n_embed=32,
        warmup_steps=1, eval_interval=4, val_windows=8,
    )  # fmt: skip
    train(config, tmp_path)
    capsys.readouterr()
    checkpoint = str(tmp_path / "ckpt.pt")
    assert main([checkpoint, "--prompt", "dan", "--tokens", "30", "--top-k", "5"]) == 0
    text = capsys.readouterr().out.rstrip("\n")
    assert text.startswith("dan") and len(text) == 33
    assert set(text) <= set(" adeiklnost")
    assert main([checkpoint, "--prompt", "a", "--tokens", "5", "--greedy"]) == 0
    with pytest.raises(SystemExit):
        main([checkpoint, "--temperature", "0"])
    assert "temperature (0.0) must be > 0" in capsys.readouterr().err


def test_kv_cache_bench_runs_at_a_small_size(tmp_path, capsys):
    assert main(["--bench-kv-cache", "--tokens", "6", "--rounds", "1", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "kv-cache.json").read_text())
    assert data["same_tokens"] and data["new_tokens"] == 6
    assert len(data["kv_cache"]["median_ms_by_position"]) == 6
    assert (tmp_path / "kv-cache.svg").read_text().lstrip().startswith("<?xml")


def test_kv_cache_bench_cache_only_skips_recompute(tmp_path):
    argv = ["--bench-kv-cache", "--cache-only", "--tokens", "6", "--rounds", "1"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "kv-cache-long.json").read_text())
    assert "recompute" not in data and len(data["kv_cache"]["runs_ms_per_token"]) == 1
    assert not (tmp_path / "kv-cache.json").exists()


def test_committed_long_kv_cache_result_is_the_pages():
    data = json.loads((TRAINING_RESULTS / "kv-cache-long.json").read_text())
    assert data["new_tokens"] == 2048 and "recompute" not in data
    assert len(data["kv_cache"]["median_ms_by_position"]) == 2048


def test_committed_kv_cache_result_is_the_pages():
    data = json.loads((TRAINING_RESULTS / "kv-cache.json").read_text())
    assert data["new_tokens"] == 256 and data["same_tokens"]
    assert data["model"]["context_length"] >= data["prompt_tokens"] + data["new_tokens"]
