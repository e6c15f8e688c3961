"""The committed trained models of lab/model_cache.py: a fresh clone loads them rather than
training, only when they were trained by this code."""

import pytest
import torch

import lab.model_cache as models
from lab import model_cache
from lab.recipes import sink_models
from snippets.pages.induction import AttentionOnly, InductionConfig
from tests.code_copy import copy_of_the_code


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """No local cache; a committed folder of the test's own; training that must not happen."""
    monkeypatch.setattr(models, "TRAINED", tmp_path / "cache")
    monkeypatch.setattr(models, "COMMITTED", tmp_path / "committed")
    (tmp_path / "committed").mkdir()

    def no_training(config):
        raise AssertionError("trained although a committed model was there")

    monkeypatch.setattr(models, "train_induction", no_training)
    return tmp_path / "committed"


def save(path, model, losses):
    torch.save({"state": model.state_dict(), "losses": losses}, path)


def test_a_committed_model_is_loaded_instead_of_trained(empty_cache):
    torch.manual_seed(0)
    saved = AttentionOnly(InductionConfig())
    save(empty_cache / models.file_name("induction", InductionConfig()), saved, [2.0, 1.0])
    model, losses = models.trained_induction()
    assert losses == [2.0, 1.0]
    for name, tensor in saved.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_a_committed_model_of_other_code_is_not_loaded(empty_cache, monkeypatch):
    save(empty_cache / "induction-00000000000000000000.pt", AttentionOnly(InductionConfig()), [9])
    trained = AttentionOnly(InductionConfig())
    monkeypatch.setattr(models, "train_induction", lambda config: (trained, [1.0]))
    model, losses = models.trained_induction()
    assert model is trained and losses == [1.0]


def test_the_committed_models_are_this_codes():
    """Else every fresh clone trains them again (seconds of the build's chain): refresh them."""
    runs = models.committed_runs()
    assert {"induction", "char-gpt", "kv-heads-mqar-mha-seed0"} <= set(runs)
    assert {"speculative-target", "speculative-draft"} <= set(runs)  # lab/serving.py's
    assert "kv-heads-mqar-n-kv-head-1-seed0" in runs
    assert {"mqar-mha-ssss-seed0", "mqar-mha-llll-seed0", "mqar-mha-llls-seed0"} <= set(runs)
    for name, config in runs.items():
        committed = sorted(p.name for p in models.COMMITTED.glob(f"{name}-*.pt"))
        assert committed == [models.file_name(name, config)], (
            f"data/trained/ holds {committed} for {name!r}, not this code's "
            f"{models.file_name(name, config)}: run `OMP_NUM_THREADS=1 python -m lab.model_cache "
            "--commit-trained` (on one thread, as the suite trains: two give other weights), "
            "then `... lab.recipes.sink_models --commit-trained` if its models are stale too"
        )


def all_keys() -> dict[str, str]:
    """The file name of every committed model (lab.model_cache's and lab.recipes.sink_models')."""
    runs = {**models.committed_runs(), **sink_models.committed_runs()}
    return {name: models.file_name(name, config) for name, config in runs.items()}


def test_a_model_is_keyed_by_its_recipe_s_code_and_data(tmp_path, monkeypatch):
    copy = copy_of_the_code(tmp_path)
    monkeypatch.setattr(models, "ROOT", copy)
    before = all_keys()
    assert before == all_keys()
    groups = {
        "induction": {"induction"},
        "char-gpt": {"char-gpt", "speculative-target", "speculative-draft"},  # one recipe
        "mqar": {n for n in before if n.startswith("mqar-")},
        "kv-heads": {n for n in before if n.startswith("kv-heads-")},
        "streaming": {n for n in before if n.startswith("streaming-")},
    }
    assert len(groups["mqar"]) == 3 and len(groups["kv-heads"]) == 2
    assert len(groups["streaming"]) == 3
    assert set().union(*groups.values()) == set(before)

    def changed_by(edit: str, text: str) -> set[str]:
        path = copy / edit
        original = path.read_bytes()
        path.write_bytes(original + text.encode())
        try:
            after = all_keys()
        finally:
            path.write_bytes(original)
        return {name for name in before if after[name] != before[name]}

    code = "\nUNUSED_BY_TRAINING = 1\n"  # a line of code: it runs, so it re-keys
    # One experiment's module: its models only.
    assert changed_by("lab/recipes/kv_heads_models.py", code) == groups["kv-heads"]
    # The recipe both MQAR experiments train with: the models of both.
    assert changed_by("lab/recipes/mqar.py", code) == groups["mqar"] | groups["kv-heads"]
    assert changed_by("lab/recipes/sink_models.py", code) == groups["streaming"]
    assert changed_by("snippets/pages/induction.py", code) == groups["induction"]
    assert changed_by("snippets/pages/char_gpt.py", code) == groups["char-gpt"]
    assert changed_by("data/guide-snapshot.txt", "\n") == groups["char-gpt"]
    # A piece the recipes share: the models built or trained with it.
    uses_model = groups["char-gpt"] | groups["mqar"] | groups["kv-heads"] | groups["streaming"]
    assert changed_by("snippets/core/model.py", code) == uses_model
    assert changed_by("snippets/core/attention.py", code) == set(before)
    # Not what trains a model: comments and docstrings, the cache itself, other commands.
    assert changed_by("lab/recipes/mqar.py", "# a comment\n") == set()
    mqar = copy / "lab" / "recipes" / "mqar.py"
    text = mqar.read_text(encoding="utf-8")
    for old, new in (
        ('"""Training a small GPT', '"""Said otherwise: training a small GPT'),  # the module's
        ('"""One trained model:', '"""Said otherwise, one trained model:'),  # a class's
    ):
        assert old in text, old
        mqar.write_text(text.replace(old, new, 1), encoding="utf-8")
        assert all_keys() == before, new
    mqar.write_text(text, encoding="utf-8")
    for other in ("lab/model_cache.py", "lab/shared/fingerprint.py", "lab/streaming.py"):
        assert changed_by(other, code) == set(), other
    (copy / "snippets" / "unrelated.py").write_text("import torch\n")
    assert all_keys() == before


def test_the_refresh_commands_dry_run_says_what_they_would_write(empty_cache, capsys):
    stale = empty_cache / "induction-00000000000000000000.pt"
    stale.write_bytes(b"old")
    current = models.file_name("char-gpt", models.CharGPTConfig())
    (empty_cache / current).write_bytes(b"fresh")
    assert models.main(["--commit-trained", "--dry-run"], None, models.committed_runs, "m") == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(models.committed_runs())
    induction = models.file_name("induction", InductionConfig())
    assert f"{induction}: would be written (trained), replacing {stale.name}" in lines[0]
    assert lines[1].endswith(f"{current}: up to date")
    assert sorted(p.name for p in empty_cache.iterdir()) == sorted([stale.name, current])
    assert stale.read_bytes() == b"old"  # nothing written, nothing removed, nothing trained
    with pytest.raises(
        SystemExit, match=r"usage: python -m lab.recipes.sink_models --commit-trained"
    ):
        models.main(["--dry-run"], None, sink_models.committed_runs, "lab.recipes.sink_models")


def test_a_model_without_a_recipe_is_refused():
    with pytest.raises(KeyError, match=r"model name 'bigram' has no recipe: RECIPES knows"):
        models.file_name("bigram", InductionConfig())


def test_the_build_trained_the_models_and_they_are_reused(built_site, monkeypatch):
    """After the build, loading the models must not train: both come from the cache."""

    def no_training(config):
        raise AssertionError(
            "trained again: the build's model was not reused (a .cache/ with only "
            ".cache/trained/ deleted also does this: delete .cache/ as a whole)"
        )

    monkeypatch.setattr(models, "train_induction", no_training)
    monkeypatch.setattr(models, "train_char_gpt", no_training)
    model, losses = model_cache.trained_induction()
    assert len(losses) == model.config.steps
    gpt, char, losses = model_cache.trained_char_gpt()
    assert gpt.config.vocab_size == char.vocab_size
    assert len(losses) == model_cache.CharGPTConfig().steps
