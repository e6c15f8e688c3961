"""The trained-model cache: models the pages look at, trained once per version of the code.

Two small models are trained (each in seconds on a CPU): the attention-only model
of snippets/induction.py on repeated tokens, and the GPT of snippets/char_gpt.py on
the guide's text. A trained model is kept in .cache/trained/, under a key made from
its configuration and from every file its training reads (the project's modules
this one imports, and data/), so the site build, the notebook and the tests share
one training per version of the code, and an edit to any of that code trains anew.
Shape letters: B batch, T sequence length, L layers, H heads.
"""

import hashlib
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


def fingerprint() -> str:
    """A hash of everything a trained model depends on: this module and those it
    imports from the project, the data they read, and the torch version."""
    versions = f"torch {torch.__version__}"
    return code_fingerprint([Path(__file__).resolve()], versions, ROOT)


def _cached(name: str, config, build, train):
    """(model, losses): loaded from TRAINED if this config and code were trained
    before, else trained now and saved there. Stale files of `name` are removed."""
    key = hashlib.sha256(f"{fingerprint()}\n{config!r}".encode()).hexdigest()[:20]
    path = TRAINED / f"{name}-{key}.pt"
    if path.is_file():
        saved = torch.load(path, weights_only=True)
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
    return _cached("induction", config, AttentionOnly, train_induction)


def trained_char_gpt(
    config: CharGPTConfig | None = None,
) -> tuple[GPT, CharTokenizer, list[float]]:
    """train_char_gpt(config) and its tokenizer, trained once per version."""
    config = CharGPTConfig() if config is None else config
    char = CharTokenizer.from_text(guide_text())

    def build(c):
        return GPT(c.gpt_config(char.vocab_size))

    model, losses = _cached("char-gpt", config, build, train_char_gpt)
    return model, char, losses
