"""Tests for lab/taming_softmax.py: the quick sweep shows the sign; the committed results."""

import json

from lab import taming_softmax as ts
from lab.common import RESULTS_DIR


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
    low, top = min(data["setup"]["lrs"]), max(data["setup"]["lrs"])
    # Where plain training breaks (loss at chance, logits in the thousands), QK-norm learns.
    assert by[("plain", top)]["loss"] > chance - 0.1
    assert by[("plain", top)]["largest_logit"] > 1e3
    assert by[("qk-norm", top)]["loss"] < chance - 0.5
    assert by[("qk-norm", top)]["largest_logit"] < 100
    # At the smallest rate both learn, and their logits are of the same order.
    assert by[("plain", low)]["loss"] < chance - 0.3
    assert by[("qk-norm", low)]["loss"] < chance - 0.3


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
