"""The trained-model cache: models the pages look at, trained once per version of the code.

    python -m lab.model_cache --commit-trained   # this code's models into data/trained/

Two small models are trained (each in seconds on a CPU): the attention-only model
of snippets/induction.py on repeated tokens, and the GPT of snippets/char_gpt.py on
the guide's text. A trained model is kept in .cache/trained/, under a key made from
its configuration and from every file its training reads (the project's modules
this one imports, and data/), so the site build, the notebook and the tests share
one training per version of the code, and an edit to any of that code trains anew.
The same files, committed in data/trained/, spare a fresh clone (CI) the training.
Shape letters: B batch, T sequence length, L layers, H heads.
"""

import hashlib
import sys
from pathlib import Path

import torch

from lab.common import atomic_write
from lab.fingerprint import code_fingerprint
from lab.paths import CACHE, ROOT
from snippets.char_gpt import CharGPTConfig, train_char_gpt
from snippets.corpus import guide_text
from snippets.induction import AttentionOnly, InductionConfig, train_induction
from snippets.model import GPT
from snippets.tokenizer import CharTokenizer

TRAINED = CACHE / "trained"
# Read only: a file whose key no longer matches the code is ignored (and replaced by
# --commit-trained).
COMMITTED = ROOT / "data" / "trained"


def fingerprint(trained_by: Path | None = None) -> str:
    """A hash of everything a trained model depends on: this module (and the module
    `trained_by` that trains it, if another) with what they import from the project,
    the data they read, and the torch version."""
    versions = f"torch {torch.__version__}"
    roots = [Path(__file__).resolve()] + ([trained_by] if trained_by else [])
    return code_fingerprint(roots, versions, ROOT)


def file_name(name: str, config, trained_by: Path | None = None) -> str:
    """The file of model `name` trained with `config` by this version of the code."""
    key = f"{fingerprint(trained_by)}\n{config!r}"
    return f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.pt"


def cached(name: str, config, build, train, trained_by: Path | None = None):
    """(model, losses): loaded from TRAINED or COMMITTED if this config and code were
    trained before, else trained now and saved in TRAINED. Stale files of `name` there
    are removed. trained_by: the lab module whose `train` this is, when not this one
    (lab/streaming.py), so that its edits train anew."""
    path = TRAINED / file_name(name, config, trained_by)
    for saved_at in (path, COMMITTED / path.name):
        if saved_at.is_file():
            saved = torch.load(saved_at, weights_only=True)
            model = build(config)
            model.load_state_dict(saved["state"])
            return model.eval(), saved["losses"]
    model, losses = train(config)
    state = {"state": model.state_dict(), "losses": losses}
    atomic_write(path, lambda f: torch.save(state, f), mode="wb")
    for old in TRAINED.glob(f"{name}-*.pt"):
        if old != path:
            old.unlink(missing_ok=True)
    return model, losses


def trained_induction(
    config: InductionConfig | None = None,
) -> tuple[AttentionOnly, list[float]]:
    """train_induction(config), trained once per version of the code."""
    config = InductionConfig() if config is None else config
    return cached("induction", config, AttentionOnly, train_induction)


def trained_char_gpt(
    config: CharGPTConfig | None = None,
) -> tuple[GPT, CharTokenizer, list[float]]:
    """train_char_gpt(config) and its tokenizer, trained once per version."""
    config = CharGPTConfig() if config is None else config
    char = CharTokenizer.from_text(guide_text())

    def build(c):
        return GPT(c.gpt_config(char.vocab_size))

    model, losses = cached("char-gpt", config, build, train_char_gpt)
    return model, char, losses


def commit(name: str, config, trained_by: Path | None = None) -> Path:
    """Copy the trained file of `name` (in TRAINED: train it first) into COMMITTED,
    replacing older ones of the same model."""
    current = COMMITTED / file_name(name, config, trained_by)
    COMMITTED.mkdir(parents=True, exist_ok=True)
    for old in COMMITTED.glob(f"{name}-*.pt"):
        if old != current:
            old.unlink()
    if not current.is_file():
        current.write_bytes((TRAINED / current.name).read_bytes())
    return current


def commit_trained() -> list[Path]:
    """Copy this code's trained models (the default configurations) into COMMITTED,
    replacing older ones of the same model. (lab.streaming --commit-trained: its own.)"""
    trained_induction()
    trained_char_gpt()
    return [commit("induction", InductionConfig()), commit("char-gpt", CharGPTConfig())]


if __name__ == "__main__":
    if sys.argv[1:] != ["--commit-trained"]:
        raise SystemExit("usage: python -m lab.model_cache --commit-trained")
    for written in commit_trained():
        print(written.relative_to(ROOT))
