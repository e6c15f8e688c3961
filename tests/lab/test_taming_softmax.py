"""Tests for lab/taming_softmax.py: the quick sweep shows the sign; the committed results."""

import json

from lab import taming_softmax as ts
from lab.shared.common import RESULTS_DIR


def rows_by(data):
    return {(r["variant"], r["lr"]): r for r in data["rows"]}


def check_growth(data):
    assert data["schema"] == ts.GROWTH_SCHEMA
    for key in ("cpu_model", "cpu_count", "torch", "date"):
        assert key in data["machine"], key
    assert {(r["variant"], r["lr"]) for r in data["rows"]} == {
        (v, lr) for v in ts.VARIANTS for lr in data["setup"]["lrs"]
    }


def test_quick_sweep_plain_logits_grow_far_past_qk_normed_ones(tmp_path, capsys):
    # Wortsman et al. 2023: at a large learning rate the plain model's attention logits
    # grow without bound; QK-norm keeps them near sqrt(D) times its scales.
    assert ts.main(["growth", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / ts.GROWTH_FILE.name).read_text())
    check_growth(data)
    top = max(data["setup"]["lrs"])
    by = rows_by(data)
    assert by[("plain", top)]["largest_logit"] > 20 * by[("qk-norm", top)]["largest_logit"]
    assert "qk-norm loss" in capsys.readouterr().out


def test_committed_growth_result():
    data = json.loads(ts.GROWTH_FILE.read_text())
    check_growth(data)
    assert data["command"].startswith("python -m lab.taming_softmax growth")
    by, chance = rows_by(data), data["chance_loss"]
    lrs = data["setup"]["lrs"]
    low, top = min(lrs), max(lrs)
    # From 3e-2 on, plain training breaks: the loss stays near chance and the largest
    # logit grows with the rate into the hundreds and beyond.
    for lr in (lr for lr in lrs if lr >= 3e-2):
        assert by[("plain", lr)]["loss"] > chance - 0.1, lr
        assert by[("plain", lr)]["largest_logit"] > 10 * by[("qk-norm", lr)]["largest_logit"]
    # QK-norm keeps its logits below 100 at every rate, and learns where plain does not.
    assert all(by[("qk-norm", lr)]["largest_logit"] < 100 for lr in lrs)
    assert by[("qk-norm", 1e-1)]["loss"] < by[("plain", 1e-1)]["loss"] - 0.3
    assert by[("qk-norm", 3e-2)]["loss"] < by[("plain", 3e-2)]["loss"] - 0.2
    # A cap does not stop the growth under it: soft-capped logits grow as plain ones do.
    assert by[("soft-cap", top)]["largest_logit"] > 1e3
    # At the smallest rate all three learn.
    assert all(by[(v, low)]["loss"] < chance - 0.3 for v in ts.VARIANTS)


def test_committed_timing_result():
    data = json.loads(ts.TIMING_FILE.read_text())
    assert data["schema"] == ts.TIMING_SCHEMA
    layers = {r["layer"] for r in data["rows"]}
    assert layers == {"plain", "soft-cap (FlexAttention)", *ts.PIECES}
    for row in data["rows"]:
        if row["layer"] == "plain":
            assert row["vs_plain"] == 1.0
        assert row["cpu_ms"] > 0
    assert "x1.00" in ts.timing_table(data)


def test_growth_table_reads_the_committed_rows():
    data = json.loads((RESULTS_DIR / ts.GROWTH_FILE.name).read_text())
    table = ts.growth_table(data)
    assert table.splitlines()[0].split()[:3] == ["lr", "plain", "loss"]
    assert len(table.splitlines()) == len(data["setup"]["lrs"]) + 2
