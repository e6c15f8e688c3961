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
    assert length == streaming.STREAM_FACTOR * W
    spans = data["bands"]
    assert spans[0] == [0, W] and spans[-1][1] == length
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    methods = [row["method"] for row in data["rows"]]
    assert methods == ["chain", *streaming.METHODS]
    for row in data["rows"]:
        assert len(row["excess"]) == len(spans)
    by = {row["method"]: row["excess"] for row in data["rows"]}
    # Inside the first window nothing has been dropped: the three windowed readers
    # and the full cache read the same tokens the same way.
    for name in ("recompute", "rolling", "sinks"):
        assert by[name][0] == pytest.approx(by["full"][0], abs=1e-3), name
    first = data["first_token"]
    shares = first["per_layer_head"]
    assert len(shares) == data["setup"]["n_layer"]
    assert all(len(h) == data["setup"]["n_head"] for h in shares)
    assert first["window"] == W
    for first in (data["first_token"], data["first_token_guide_gpt"]):
        assert all(0 < v < 1 for h in first["per_layer_head"] for v in h)
        start, window = first["query_start"], first["window"]
        uniform = sum(1 / (t + 1) for t in range(start, window)) / (window - start)
        assert first["uniform"] == pytest.approx(uniform, abs=1e-4)


def test_bands_double_from_the_window():
    assert streaming.bands(64, 1024) == [
        (0, 64),
        (64, 128),
        (128, 256),
        (256, 512),
        (512, 1024),
    ]
    assert streaming.bands(16, 40) == [(0, 16), (16, 32), (32, 40)]


def test_quick_run_end_to_end(tmp_path, capsys):
    assert streaming.main(["--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "streaming.json").read_text())
    check_result(data)
    out = capsys.readouterr().out
    assert "rolling cache of W" in out and "uniform over the keys" in out


def test_committed_result():
    data = json.loads((RESULTS_DIR / "streaming.json").read_text())
    check_result(data)
    assert data["command"] == "python -m lab.streaming"
    assert data["window"] == 64 and data["run"]["sinks"] == 4
