"""Tests for lab/kv_heads_recall.py and lab/recipes/mqar.py: MQAR recall of MHA, GQA, MQA and MLA.

The quick run scores the cached seed-0 MHA and MQA models (lab/model_cache.py) and
checks the sign of the effect; the committed result is checked for what the page
prints from it."""

import json
import statistics

import torch

from lab import kv_heads_recall as experiment
from lab.recipes.kv_heads_models import VARIANTS, run_of
from lab.recipes.mqar import MqarRun, build, repeated_keys
from snippets.core.cache import ModelCache
from snippets.pages.tasks import mqar


def test_quick_run_shows_the_cached_models_learned_the_lookup(tmp_path, capsys):
    assert experiment.main(["--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / experiment.RESULT_FILE.name).read_text())
    assert list(data["variants"]) == list(experiment.QUICK_VARIANTS) == ["MHA", "MQA"]
    most = str(max(data["settings"]["eval_pairs"]))
    for name in ("MHA", "MQA"):
        recall = data["variants"][name]["recall"]
        # What the page is about: one shared key/value head of D = 16 learns the lookup
        # too, far above a guess among the row's values (0.50 at 2 pairs, 0.08 at 12).
        assert recall["2"][0] > 0.9 and recall[most][0] > 0.6, (name, recall)
    assert (tmp_path / experiment.FIGURE.name).read_text().startswith("<?xml")
    assert "MQA" in capsys.readouterr().out


def test_the_variants_differ_only_in_their_key_value_heads():
    configs = {v: run_of(v).model_config() for v in VARIANTS}
    assert {c.n_head for c in configs.values()} == {4}
    assert {c.n_embed for c in configs.values()} == {64}
    layer = {v: c.layer_specs()[0] for v, c in configs.items()}
    assert type(layer["MHA"]).__name__ == "CausalSpec" and layer["MHA"].position == "alibi"
    assert layer["GQA"].n_kv_head == 2 and layer["MQA"].n_kv_head == 1
    assert layer["GQA"].alibi and layer["MLA"].alibi and layer["MLA"].kv_latent == 32
    numbers = {v: experiment.cached_numbers(v) for v in VARIANTS}
    assert numbers == {"MHA": 128, "GQA": 64, "MQA": 32, "MLA": 32}
    assert {run_of(v).batch for v in VARIANTS} == {256}


def test_mla_normalises_its_latent_and_its_cache_keeps_the_normalised_one():
    """The runs' MLA has DeepSeek-V2's RMSNorm after its down-projection (the MLASpec's
    latent_norm); the cached (absorbed) path reads the same latents as the whole pass."""
    torch.manual_seed(0)
    model = build(run_of("MLA"))
    for block in model.blocks:
        assert isinstance(block.attn.kv_norm, torch.nn.RMSNorm)
    x = torch.randn(2, 5, 64)
    c, _ = model.blocks[0].attn.latents(x)
    assert torch.allclose(c.pow(2).mean(-1), torch.ones(2, 5), atol=1e-4)
    tokens = torch.randint(0, 96, (2, 32), generator=torch.Generator().manual_seed(1))
    whole, _ = model(tokens)
    cached, _ = model(tokens, cache=ModelCache.for_model(model, 2))
    torch.testing.assert_close(cached, whole, atol=1e-5, rtol=1e-5)
    mqa = build(run_of("MQA")).blocks[0].attn  # the other variants as the guide has them
    assert not any(isinstance(m, torch.nn.RMSNorm) for m in mqa.modules())


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
    assert data["command"] in (
        "python -m lab.kv_heads_recall",
        "python -m lab.kv_heads_recall --jobs 2",
    )
    assert data["settings"] == experiment.FULL and data["settings"]["seeds"] == 5
    m = data["machine"]
    assert m["cpu_model"] and m["torch"] and "load_1min_after" in m
    assert data["run"] == experiment.BASE.recipe()
    assert list(data["variants"]) == list(VARIANTS)
    pairs = [str(p) for p in data["settings"]["eval_pairs"]]
    for name, r in data["variants"].items():
        assert list(r["recall"]) == pairs
        assert all(len(s) == 5 and all(0 <= x <= 1 for x in s) for s in r["recall"].values())
        # What the page says of every variant: each seed learned the lookup at 2 pairs.
        assert min(r["recall"]["2"]) > 0.9, (name, r["recall"]["2"])
    assert experiment.FIGURE.is_file()
    # The page's reading of it: every pair of variants within noise at every number of
    # pairs (their seed ranges overlap); MLA's mean the lowest from 4 pairs on.
    assert experiment.separated(data) == []
    for p in pairs[pairs.index("4") :]:
        means = {v: statistics.mean(r["recall"][p]) for v, r in data["variants"].items()}
        assert min(means, key=means.get) == "MLA", (p, means)


def test_committed_trials_are_this_codes_and_stayed_at_a_guess():
    """The trials the page names did not learn the lookup: recall at 2 pairs near the
    0.5 of a guess between the row's two values."""
    data = json.loads(experiment.TRIALS_FILE.read_text())
    assert data["schema"] == experiment.TRIALS_SCHEMA
    assert data["command"].startswith("python -m lab.kv_heads_recall --trials")
    assert list(data["trials"]) == list(experiment.TRIALS)
    for name, t in data["trials"].items():
        run = experiment.TRIALS[name]
        assert t["run"] == {**run.recipe(), "attention": dict(run.attention), "seed": run.seed}
        assert t["recall"]["2"] < 0.6, (name, t["recall"])


def test_the_page_result_is_the_files():
    """The rendered table's cells are the file's means and seed ranges."""
    data = json.loads(experiment.RESULT_FILE.read_text())
    text = experiment.result()
    for p in data["settings"]["eval_pairs"]:
        runs = data["variants"]["MQA"]["recall"][str(p)]
        cell = f"{statistics.mean(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})"
        assert cell in text, (p, cell)
    assert "How this was measured" in text and "20 models trained" in text
    v = experiment.values()
    assert v["mqa_12"] == f"{statistics.mean(data['variants']['MQA']['recall']['12']):.2f}"
    trials = experiment.trials_result()
    assert all(name in trials for name in experiment.TRIALS)
