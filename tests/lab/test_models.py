"""Tests for lab/models.py, the trained-model cache: its key follows the code the models are
trained from, and the models the site build trained are reused, not trained again."""

from pathlib import Path

from lab import fingerprint, models
from tests.code_copy import assert_key_follows_the_code, copy_of_the_code


def test_model_cache_key_covers_the_imported_modules_and_the_data(tmp_path, monkeypatch):
    modules = {p.name for p in fingerprint.imported_modules([Path(models.__file__)])}
    assert {"models.py", "char_gpt.py", "induction.py", "attention.py", "model.py"} <= modules
    assert {"masks.py", "common.py", "fingerprint.py"} <= modules
    assert {"corpus.py", "tokenizer.py", "data.py", "objectives.py"} <= modules
    assert "generate.py" not in modules  # a module no training reads changes nothing

    copy = copy_of_the_code(tmp_path)
    monkeypatch.setattr(models, "__file__", str(copy / "lab" / "models.py"))
    monkeypatch.setattr(models, "ROOT", copy)
    assert_key_follows_the_code(copy, models.fingerprint)


def test_the_build_trained_the_models_and_they_are_reused(built_site, monkeypatch):
    """After the build, loading the models must not train: both come from the cache."""

    def no_training(config):
        raise AssertionError(
            "trained again: the build's model was not reused (a .cache/ with only "
            ".cache/trained/ deleted also does this: delete .cache/ as a whole)"
        )

    monkeypatch.setattr(models, "train_induction", no_training)
    monkeypatch.setattr(models, "train_char_gpt", no_training)
    model, losses = models.trained_induction()
    assert len(losses) == model.config.steps
    gpt, char, losses = models.trained_char_gpt()
    assert gpt.config.vocab_size == char.vocab_size
    assert len(losses) == models.CharGPTConfig().steps
