"""The committed trained models of lab/model_cache.py: a fresh clone loads them rather than
training, only when they were trained by this code."""

from pathlib import Path

import pytest
import torch

import lab.model_cache as models
from lab import fingerprint, model_cache
from snippets.induction import AttentionOnly, InductionConfig
from tests.code_copy import assert_key_follows_the_code, copy_of_the_code


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
    assert {"induction", "char-gpt", "mqar-mha-seed0", "mqar-n-kv-head-1-seed0"} <= set(runs)
    assert {"mqar-mha-ssss-seed0", "mqar-mha-llll-seed0", "mqar-mha-llls-seed0"} <= set(runs)
    for name, config in runs.items():
        committed = sorted(p.name for p in models.COMMITTED.glob(f"{name}-*.pt"))
        assert committed == [models.file_name(name, config)], (
            f"data/trained/ holds {committed} for {name!r}, not this code's "
            f"{models.file_name(name, config)}: run `OMP_NUM_THREADS=1 python -m lab.model_cache "
            "--commit-trained` (on one thread, as the suite trains: two give other weights), "
            "then the same for lab.sink_models, whose key covers this module's"
        )


def test_model_cache_key_covers_the_imported_modules_and_the_data(tmp_path, monkeypatch):
    modules = {p.name for p in fingerprint.imported_modules([Path(model_cache.__file__)])}
    assert {"model_cache.py", "char_gpt.py", "induction.py", "attention.py", "model.py"} <= modules
    assert {"paths.py", "common.py", "fingerprint.py"} <= modules
    assert {"corpus.py", "tokenizer.py", "data.py", "objectives.py"} <= modules
    assert "generate.py" not in modules  # a module no training reads changes nothing

    copy = copy_of_the_code(tmp_path)
    monkeypatch.setattr(models, "__file__", str(copy / "lab" / "model_cache.py"))
    monkeypatch.setattr(models, "ROOT", copy)
    assert_key_follows_the_code(copy, model_cache.fingerprint)


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
