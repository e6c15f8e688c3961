"""Tests for lab/serving.py and lab/parts/serving_page.py: the quick run shows each effect's
sign; the committed result is the full run of this code's settings, its numbers consistent
with one another; the page's tables are the file's."""

import dataclasses
import json
import statistics

import pytest

from lab import model_cache, serving
from lab.parts import serving_page
from snippets.run.corpus import guide_text
from snippets.run.tokenizer import CharTokenizer


def committed() -> dict:
    return json.loads(serving_page.RESULT_FILE.read_text(encoding="utf-8"))


def check_signs(data: dict, high_acceptance: float) -> None:
    """What the page claims, each as a sign."""
    m, max_seqs = data["memory"], data["settings"]["memory"]["max_seqs"]
    for name, w in m["workloads"].items():
        pairs = zip(w["prompt_lengths"], w["new_tokens"], strict=True)
        longest = max(t + n - 1 for t, n in pairs)
        for r in w["runs"]:  # paged blocks hold less than a contiguous preallocation
            bs = r["block_size"]
            assert r["paged_bytes"] == r["peak_blocks"] * bs * m["bytes_per_position"]
            assert r["paged_bytes"] < m["contiguous_bytes"], (name, r)
            # and fewer than the pool generate_batch sizes for max_seqs of the longest
            assert r["peak_blocks"] < max_seqs * -(-longest // bs), (name, r)
    shared = m["workloads"]["shared prefix"]["runs"]
    mixed = m["workloads"]["mixed"]["runs"]
    for a, b in zip(shared, mixed, strict=True):  # a shared prefix holds no more blocks
        assert a["shared_positions"] > b["shared_positions"], (a, b)
        assert a["peak_blocks"] <= b["peak_blocks"], (a, b)
    # and fewer where blocks are smaller than the prefix (a block it fills only partly
    # is copied when its sequence writes into it)
    assert shared[0]["peak_blocks"] < mixed[0]["peak_blocks"], (shared[0], mixed[0])
    for row in data["throughput"]["seeds"]:  # the same tokens in fewer forward passes
        assert row["same_outputs"], row["seed"]
        assert row["continuous"]["steps"] < row["static"]["steps"], row
    for r in data["speculative"]["rows"]:
        assert r["same_as_plain"], r  # the target's own greedy output
        if r["acceptance"] >= high_acceptance:
            assert r["target_passes"] < r["plain_passes"], r
    best = max(r["acceptance"] for r in data["speculative"]["rows"])
    assert best >= high_acceptance, best


def test_quick_run_shows_each_effects_sign(tmp_path, capsys):
    assert serving.main(["--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / serving_page.RESULT_FILE.name).read_text())
    assert data["settings"] == serving.QUICK
    assert [r["draft"] for r in data["speculative"]["rows"]] == [f"{serving.DRAFT.steps} steps"]
    check_signs(data, high_acceptance=0.5)
    assert (tmp_path / serving_page.FIGURE.name).read_text().startswith("<?xml")
    out = capsys.readouterr().out
    assert "paged/contig." in out and "speed-up" in out


def test_committed_result_is_the_full_run_of_this_code():
    data = committed()
    assert data["schema"] == serving.SCHEMA
    assert data["command"] == "python -m lab.serving"
    assert data["settings"] == serving.FULL
    assert data["target"]["config"] == dataclasses.asdict(serving.TARGET)
    assert data["target"]["file"].startswith("speculative-target-")
    m = data["machine"]
    assert m["cpu_model"] and m["torch"] and "load_1min_after" in m
    check_signs(data, high_acceptance=0.5)


def test_committed_memory_is_its_workloads_arithmetic():
    data = committed()
    s, m, t = data["settings"]["memory"], data["memory"], serving.TARGET
    # every layer's keys and values, float32, per position
    assert m["bytes_per_position"] == t.n_layer * 2 * t.n_embed * 4
    assert m["contiguous_bytes"] == s["max_seqs"] * t.context_length * m["bytes_per_position"]
    ids = CharTokenizer.from_text(guide_text()).encode(guide_text())
    for name, (prompts, news) in serving.memory_workloads(s, ids).items():
        w = m["workloads"][name]
        assert w["prompt_lengths"] == [len(p) for p in prompts], name
        assert w["new_tokens"] == news, name
        assert [r["block_size"] for r in w["runs"]] == s["block_sizes"]


def test_committed_timings_are_their_medians():
    data = committed()
    t = data["throughput"]
    s = data["settings"]["throughput"]
    assert [row["seed"] for row in t["seeds"]] == s["seeds"] and len(s["seeds"]) >= 5
    ids = CharTokenizer.from_text(guide_text()).encode(guide_text())
    for row in t["seeds"]:
        _, news = serving.throughput_workload(s, row["seed"], ids)
        assert row["new_tokens"] == sum(news)
        for mode in ("static", "continuous"):
            cell = row[mode]
            assert len(cell["seconds"]) == s["repeats"]
            rate = row["new_tokens"] / statistics.median(cell["seconds"])
            assert cell["tokens_per_second"] == pytest.approx(rate, rel=1e-3), (row, mode)
        pairs = zip(row["static"]["seconds"], row["continuous"]["seconds"], strict=True)
        paired = statistics.median(a / b for a, b in pairs)
        assert row["speedup"] == pytest.approx(paired, abs=2e-3), row
    kept = ("static_range", "continuous_range", "overlap", "speedup_range")
    assert {k: t[k] for k in kept} == serving.ranges(t["seeds"])
    a = data["attention"]
    assert [r["length"] for r in a["rows"]] == data["settings"]["attention"]["lengths"]
    for r in a["rows"]:
        assert r["ratio"] == pytest.approx(r["paged_us"] / r["contiguous_us"], abs=2e-3)
    sp, ss = data["speculative"], data["settings"]["speculative"]
    assert list(sp["drafts"]) == [f"{n} steps" for n in ss["draft_steps"]]
    cells = [(r["draft"], r["k"]) for r in sp["rows"]]
    assert cells == [(d, k) for d in sp["drafts"] for k in ss["ks"]]
    costs = sp["pass_costs"]
    assert set(costs) == {"target_contiguous_us", "target_paged_us", "draft_paged_us"}
    assert all(c > 0 for c in costs.values())
    for r in sp["rows"]:
        assert r["acceptance"] == pytest.approx(r["accepted"] / r["drafted"], abs=1e-4)
        assert r["target_passes"] == r["rounds"]
        assert r["plain_passes"] == ss["prompts"] * ss["new_tokens"]
        assert len(r["seconds"]) == len(r["plain_seconds"]) == ss["repeats"]
        speedup = statistics.median(
            a / b for a, b in zip(r["plain_seconds"], r["seconds"], strict=True)
        )
        assert r["speedup"] == pytest.approx(speedup, abs=2e-3), r


def test_the_page_results_are_the_files():
    data = committed()
    memory = serving_page.memory_result()
    run = data["memory"]["workloads"]["shared prefix"]["runs"][0]
    assert f"| {run['peak_blocks']} |" in memory and "How this was measured" in memory
    throughput = serving_page.throughput_result()
    row = data["throughput"]["seeds"][-1]
    assert f"{row['continuous']['tokens_per_second']:.0f}" in throughput
    attention = serving_page.attention_result()
    assert f"{data['attention']['rows'][-1]['ratio']:.2f}" in attention
    speculative = serving_page.speculative_result()
    best = max(data["speculative"]["rows"], key=lambda r: r["speedup"])
    assert f"| {best['k']} | {best['acceptance']:.2f} |" in speculative
    v = serving_page.values()
    assert v["best_speedup"] == f"{best['speedup']:.2f}" and v["best_k"] == str(best["k"])
    lo, hi = data["throughput"]["speedup_range"]
    assert (v["continuous_low"], v["continuous_high"]) == (f"{lo:.2f}", f"{hi:.2f}")


def test_the_target_and_draft_are_committed_by_the_model_cache_and_small():
    runs = model_cache.committed_runs()
    for name, config in (
        ("speculative-target", serving.TARGET),
        ("speculative-draft", serving.DRAFT),
    ):
        assert runs[name] == config
        path = model_cache.COMMITTED / model_cache.file_name(name, config)
        assert path.stat().st_size < 4 * 2**20, path
