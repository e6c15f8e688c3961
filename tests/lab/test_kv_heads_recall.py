"""Tests for lab/kv_heads_recall.py and lab/mqar.py: MQAR recall of MHA, GQA, MQA and MLA.

The quick run scores the cached seed-0 MHA and MQA models (lab/model_cache.py) and
checks the sign of the effect; the committed result is checked for what the page
prints from it."""

import json
import statistics

import torch

from lab import kv_heads_recall as experiment
from lab.mqar import VARIANTS, MqarRun, repeated_keys, run_of
from snippets.tasks import mqar


def test_quick_run_shows_mqa_below_mha_at_the_most_pairs(tmp_path, capsys):
    assert experiment.main(["--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / experiment.RESULT_FILE.name).read_text())
    assert list(data["variants"]) == list(experiment.QUICK_VARIANTS) == ["MHA", "MQA"]
    most = str(max(data["settings"]["eval_pairs"]))
    mha, mqa = (data["variants"][v]["recall"][most][0] for v in ("MHA", "MQA"))
    # The effect the page is about: one shared key/value head of D = 4 recalls less.
    assert mqa < mha - 0.2, (mha, mqa)
    assert (tmp_path / experiment.FIGURE.name).read_text().startswith("<?xml")
    assert "MQA" in capsys.readouterr().out


def test_the_variants_differ_only_in_their_key_value_heads():
    configs = {v: run_of(v).model_config() for v in VARIANTS}
    assert {c.n_head for c in configs.values()} == {8}
    assert configs["MHA"].n_kv_head is None and configs["MQA"].n_kv_head == 1
    assert configs["GQA"].n_kv_head == 2 and configs["MLA"].kv_latent == 8
    numbers = {v: experiment.cached_numbers(v) for v in VARIANTS}
    assert numbers == {"MHA": 64, "GQA": 16, "MQA": 8, "MLA": 8}


def test_repeated_keys_marks_the_keys_seen_before():
    tokens, targets = mqar(16, 32, 32, 64, 1, 12, torch.Generator().manual_seed(0))
    asked = repeated_keys(tokens)
    assert not asked[:, 1::2].any()  # never at a value
    for row, flags in zip(tokens.tolist(), asked.tolist(), strict=True):
        keys = row[0::2]
        assert flags[0::2] == [k in keys[:i] for i, k in enumerate(keys)]
    # where a key repeats, its target is the value it had the first time
    first = {}
    for row, target, flags in zip(tokens.tolist(), targets.tolist(), asked.tolist(), strict=True):
        first.clear()
        for t in range(0, 32, 2):
            if flags[t]:
                assert target[t] == first[row[t]]
            first.setdefault(row[t], row[t + 1])
    assert MqarRun().length == 32


def test_committed_result_is_the_full_run():
    data = json.loads(experiment.RESULT_FILE.read_text())
    assert data["schema"] == experiment.SCHEMA
    assert data["command"] == "python -m lab.kv_heads_recall"
    assert data["settings"] == experiment.FULL and data["settings"]["seeds"] >= 3
    m = data["machine"]
    assert m["cpu_model"] and m["torch"] and "load_1min_after" in m
    assert data["run"] == MqarRun().recipe()
    assert list(data["variants"]) == list(VARIANTS)
    pairs = [str(p) for p in data["settings"]["eval_pairs"]]
    for r in data["variants"].values():
        assert list(r["recall"]) == pairs
        assert all(len(s) == 3 and all(0 <= x <= 1 for x in s) for s in r["recall"].values())
    mean = {v: statistics.mean(r["recall"][pairs[-1]]) for v, r in data["variants"].items()}
    assert mean["MQA"] < mean["MHA"], mean
    assert experiment.FIGURE.is_file()
