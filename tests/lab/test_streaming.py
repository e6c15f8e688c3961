"""Tests for lab/streaming.py: the quick run's sign of the effect, the tables, the committed
result, and the committed models the quick run reads (lab/recipes/sink_models.py)."""

import json

import pytest

from lab import model_cache, streaming
from lab.recipes import sink_models
from lab.shared.common import RESULTS_DIR


def check_result(data: dict) -> None:
    assert data["schema"] == streaming.SCHEMA
    assert data["command"].startswith("python -m lab.streaming")
    for key in ("cpu_model", "cpu_count", "torch", "date"):
        assert key in data["machine"], key
    W, length = data["window"], data["stream_length"]
    assert length == data["setup"]["stream_factor"] * W
    spans = data["bands"]
    assert spans[0] == [0, W] and spans[-1][1] == length
    expected = [(seed, name) for seed in data["seeds"] for name in sink_models.MODELS]
    assert [(row["seed"], row["model"]) for row in data["models"]] == expected
    L, H = data["setup"]["n_layer"], data["setup"]["n_head"]
    for row in data["models"]:
        excess = row["excess"]
        assert list(excess) == list(streaming.READERS)
        # Inside the first window nothing has been dropped: every reader reads the same.
        for reader in streaming.READERS:
            assert len(excess[reader]) == len(spans)
            assert excess[reader][0] == pytest.approx(excess["full"][0], abs=1e-3), reader
        bos = row["bos"]
        assert len(bos["elsewhere"]) == L and all(len(h) == H for h in bos["elsewhere"])
        assert all(0 <= v <= 1 for layer in bos["at_triggers"] for v in layer)
        sinks = [v for layer in bos["sink_share"] for v in layer]
        if row["model"] == "learned sinks":
            assert all(v > 0 for v in sinks)  # its rows sum to less than 1
        else:
            assert all(abs(v) < 1e-4 for v in sinks)
        heads = row["heads"]
        assert len(heads["change"]) == L and all(len(h) == H for h in heads["change"])


def costs(data: dict, model: str, kept: str = "sinks-4") -> float:
    """The mean over seeds of what evicting BOS costs `model`, against reader `kept`."""
    per_seed = streaming.eviction_cost(data, model, kept)
    return sum(per_seed) / len(per_seed)


def check_the_sign(data: dict) -> None:
    """StreamingLLM in miniature (Xiao et al. 2023): evicting the sink token hurts the
    plain model, one or four kept sinks restore it; learned sinks and the gate lose
    (almost) nothing."""
    plain = costs(data, "plain")
    assert plain > 0.01, plain
    assert costs(data, "plain", "sinks-1") > 0.8 * plain  # one sink restores nearly all
    for model in ("learned sinks", "output gate"):
        assert abs(costs(data, model)) < 0.25 * plain, model
    # What the loss follows: evicting BOS moves the plain model's heads far more.
    change = {}
    for name, rows in streaming.by_model(data).items():
        heads = streaming._flat(rows, "heads", "change")
        change[name] = sum(heads) / len(heads)
    assert change["plain"] > 3 * max(change["learned sinks"], change["output gate"]), change


def test_bands_double_from_the_window():
    assert streaming.bands(64, 1024) == [(0, 64), (64, 128), (128, 256), (256, 512), (512, 1024)]
    assert streaming.bands(16, 40) == [(0, 16), (16, 32), (32, 40)]


def test_quick_run_shows_the_sign_of_the_effect(tmp_path, capsys):
    """Seed 0's committed models read short streams: a few seconds, the effect's sign."""
    assert streaming.main(["--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "streaming.json").read_text())
    check_result(data)
    check_the_sign(data)
    out = capsys.readouterr().out
    assert "rolling cache of W" in out and "even spread" in out and "rolling - 4 sinks" in out


def test_committed_result_shows_the_sink_broken_and_fixed():
    data = json.loads((RESULTS_DIR / "streaming.json").read_text())
    check_result(data)
    assert len(data["seeds"]) >= 3
    check_the_sign(data)
    by = streaming.by_model(data)
    for seed, cost in zip(data["seeds"], streaming.eviction_cost(data, "plain"), strict=True):
        assert cost > 0.01, seed  # every seed, not only on average

    # Guo et al. 2024: away from triggers, the plain model's first layer parks its weight on
    # BOS. With a learned sink, the sink takes it instead; with the gate, BOS gets little.
    def first_layer(model, key):
        return [v for row in by[model] for v in row["bos"][key][0]]

    assert min(first_layer("plain", "elsewhere")) > 10 * data["models"][0]["bos"]["uniform"]
    assert min(first_layer("learned sinks", "sink_share")) > 0.5
    assert max(first_layer("learned sinks", "elsewhere")) < 0.1
    assert max(first_layer("output gate", "elsewhere")) < 0.5
    # Keeping everything puts keys at distances RoPE never trained on: every model breaks.
    for model in sink_models.MODELS:
        assert costs(data, model, "full") < -0.5, model


def test_the_committed_models_are_this_codes():
    """Else the quick run trains them (minutes):
    `python -m lab.recipes.sink_models --commit-trained`."""
    for name in sink_models.MODELS:
        stem = sink_models.cache_name(name, 0)
        committed = sorted(p.name for p in model_cache.COMMITTED.glob(f"{stem}-*.pt"))
        assert committed == [sink_models.cache_file(sink_models.FULL, name, 0)], stem
