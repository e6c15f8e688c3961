"""lab/beyond_softmax.py and its recall experiment: the --quick runs, the sign of the
effects, and the committed results the page prints.

The quick recall run trains each variant for a few steps (a smoke test: too few to
learn); the sign of the effect it is about is checked without training, by the
capacity probe (a fixed state recalls fewer pairs as they grow, softmax attention
does not). The committed full run is undertrained and does not show the trained
effect (the page says so); only its shape is checked.
"""

import json
import statistics

from lab import beyond_softmax as bs
from lab import beyond_softmax_recall as recall
from lab.common import RESULTS_DIR


def test_recall_quick_runs_every_variant(tmp_path):
    out = tmp_path / "recall.json"
    assert bs.main(["recall", "--quick", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data["variants"]) == set(recall.VARIANTS)
    for r in data["variants"].values():
        assert set(r["recall"]) == {"4", "6"}
        assert all(0 <= x <= 1 for runs in r["recall"].values() for x in runs)
    assert data["variants"]["hybrid"]["layer_types"] == ["linear"] * 3 + ["softmax"]
    assert "Gated DeltaNet only" in recall.table(data)


def test_a_fixed_state_recalls_fewer_pairs_as_they_grow():
    few_state, few_softmax = recall.capacity(4)
    many_state, many_softmax = recall.capacity(32)
    assert many_state < few_state - 0.3  # the state overflows: 8 dimensions, 32 keys
    assert many_softmax > many_state + 0.5  # attention keeps every key
    assert few_softmax == 1.0


def test_committed_recall_has_every_variant_and_three_seeds():
    """The committed run is undertrained and does not show the effect (the page says so):
    only its shape is checked here, never its numbers."""
    data = json.loads(recall.RECALL_FILE.read_text())
    assert data["settings"]["seeds"] >= 3 and data["machine"]["cpu_model"]
    for r in data["variants"].values():
        assert all(len(runs) == data["settings"]["seeds"] for runs in r["recall"].values())


def test_cost_runs_and_grows(tmp_path):
    data = bs.run_cost({"seq_lens": [64, 128], "repetitions": 1}, "test")
    assert set(data["results"]) == set(bs.LABELS)
    for cells in data["results"].values():
        assert [c["T"] for c in cells] == [64, 128]
        assert all(c["cpu_ms"] > 0 and c["peak_bytes"] > 0 for c in cells)
    assert "per doubling" in bs.cost_table(data)


def test_committed_cost_names_the_machine_and_meets_the_goal():
    data = json.loads(bs.COST_FILE.read_text())
    assert data["machine"]["cpu_model"] and data["settings"]["seq_lens"][0] == 1024
    factors = bs.per_doubling(data["results"]["gated_delta"])
    assert statistics.median(factors) <= 2.2  # the goal for the chunked form
    assert statistics.median(bs.per_doubling(data["results"]["dense"])) > 3


def test_state_is_fixed_and_the_cache_grows():
    a, b = bs.carried_bytes(1024), bs.carried_bytes(2048)
    assert a["linear"] == b["linear"]
    assert b["softmax"] == 2 * a["softmax"]
    assert (RESULTS_DIR / "beyond-softmax-state.svg").exists()
