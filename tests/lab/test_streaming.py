"""Tests for lab/streaming.py: the quick run end to end, the tables, the committed result."""

import json

import pytest

from lab import streaming
from lab.common import RESULTS_DIR


def check_result(data: dict) -> None:
    assert data["schema"] == streaming.SCHEMA
    assert data["command"].startswith("python -m lab.streaming")
    for key in ("cpu_model", "cpu_count", "torch", "date"):
        assert key in data["machine"], key
    W, length = data["window"], data["stream_length"]
    assert length == data["setup"]["stream_factor"] * W
    spans = data["bands"]
    assert spans[0] == [0, W] and spans[-1][1] == length
    assert [row["model"] for row in data["models"]] == list(streaming.MODELS)
    for row in data["models"]:
        excess = row["excess"]
        assert list(excess) == list(streaming.READERS)
        # Inside the first window nothing has been dropped: every reader reads the same.
        for reader in streaming.READERS:
            assert len(excess[reader]) == len(spans)
            assert excess[reader][0] == pytest.approx(excess["full"][0], abs=1e-3), reader
        bos = row["bos"]
        assert len(bos["elsewhere"]) == data["setup"]["n_layer"]
        assert all(len(h) == data["setup"]["n_head"] for h in bos["elsewhere"])
        assert all(0 <= v <= 1 for layer in bos["at_triggers"] for v in layer)
        sinks = [v for layer in bos["sink_share"] for v in layer]
        if row["model"] == "learned sinks":
            assert all(v > 0 for v in sinks)  # its rows sum to less than 1
        else:
            assert all(abs(v) < 1e-4 for v in sinks)


def test_bands_double_from_the_window():
    assert streaming.bands(64, 1024) == [(0, 64), (64, 128), (128, 256), (256, 512), (512, 1024)]
    assert streaming.bands(16, 40) == [(0, 16), (16, 32), (32, 40)]


def test_quick_run_end_to_end(tmp_path, capsys):
    assert streaming.main(["--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "streaming.json").read_text())
    check_result(data)
    out = capsys.readouterr().out
    assert "rolling cache of W" in out and "even spread" in out


def test_committed_result_shows_the_sink_broken_and_fixed():
    data = json.loads((RESULTS_DIR / "streaming.json").read_text())
    check_result(data)
    assert data["command"].startswith("python -m lab.streaming")
    by = {row["model"]: row for row in data["models"]}

    def after_first_window(model, reader):
        excess = by[model]["excess"][reader][1:]
        return sum(excess) / len(excess)

    # Guo et al. 2024: away from triggers, the plain model's heads park their weight on BOS.
    plain = by["plain"]["bos"]
    assert min(min(layer) for layer in plain["elsewhere"]) > 10 * plain["uniform"]
    # With a learned sink, the sink takes that weight instead, and BOS gets less than an
    # even share; with the gate, no head parks even half its weight on BOS.
    sinks = by["learned sinks"]["bos"]
    assert min(min(layer) for layer in sinks["sink_share"]) > 0.5
    assert max(max(layer) for layer in sinks["elsewhere"]) < sinks["uniform"]
    assert max(max(layer) for layer in by["output gate"]["bos"]["elsewhere"]) < 0.5
    # Measured, not assumed: at this size dropping BOS from a rolling cache costs under
    # 0.01 nats for every model, while keeping it at distances never trained on (one cache
    # of everything) costs more than 0.5.
    for model in streaming.MODELS:
        rolling = after_first_window(model, "rolling")
        assert abs(rolling - after_first_window(model, "sinks-4")) < 0.01, model
        assert after_first_window(model, "full") > rolling + 0.5, model
