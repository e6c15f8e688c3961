"""Tests for snippets/run/throughput.py: the ladder from the readable model to the fast path."""

import math

from snippets.run.throughput import ladder, make_bench_step


def test_each_rung_of_the_ladder_changes_one_setting():
    rungs = list(ladder(with_compile=True).values())
    assert rungs[0] == {
        "compile": False, "per_head": True, "tie_weights": False, "adamw": "for-loop"
    }  # fmt: skip
    for before, after in zip(rungs, rungs[1:], strict=False):
        assert sum(before[k] != after[k] for k in before) == 1
    assert not any(r["compile"] for r in ladder().values())


def test_every_rung_trains():
    for settings in ladder().values():
        step = make_bench_step(settings)
        first = step()
        assert math.isfinite(first) and abs(first - math.log(65)) < 0.1
