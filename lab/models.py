"""Trained models to look at, kept in a cache, and the attention explorer's data.

    python -m lab.models out.json        # what the attention explorer shows
    python -m lab.models --commit-trained  # this code's trained models into data/trained/

Two small models are trained (each in seconds on a CPU): the attention-only model
of snippets/induction.py on repeated tokens, and the GPT of snippets/char_gpt.py on
the guide's text. A trained model is kept in .cache/trained/, under a key made from
its configuration and from every file its training reads (the project's modules
this one imports, and data/), so the site build, the notebook and the tests share
one training per version of the code, and an edit to any of that code trains anew.
Shape letters: B batch, T sequence length, L layers, H heads.
"""

import hashlib
import json
import sys
from pathlib import Path

import torch

from lab.common import CACHE, ROOT, atomic_write, write_text
from lab.fingerprint import code_fingerprint
from snippets.char_gpt import CharGPTConfig, gpt_attention, train_char_gpt
from snippets.corpus import guide_text
from snippets.induction import (
    AttentionOnly,
    InductionConfig,
    induction_scores,
    previous_token_scores,
    repeated_tokens,
    train_induction,
)
from snippets.masks import attention_mask, causal_mask, padding_mask
from snippets.model import GPT
from snippets.tokenizer import CharTokenizer

TRAINED = CACHE / "trained"
# The same models, committed: a fresh clone (CI) loads them instead of training. Read only; a
# file whose key no longer matches the code is ignored, and `python -m lab.models
# --commit-trained` replaces it with this code's.
COMMITTED = ROOT / "data" / "trained"


def fingerprint() -> str:
    """A hash of everything a trained model depends on: this module and those it
    imports from the project, the data they read, and the torch version."""
    versions = f"torch {torch.__version__}"
    return code_fingerprint([Path(__file__).resolve()], versions, ROOT)


def file_name(name: str, config) -> str:
    """The file of model `name` trained with `config` by this version of the code."""
    key = hashlib.sha256(f"{fingerprint()}\n{config!r}".encode()).hexdigest()[:20]
    return f"{name}-{key}.pt"


def _cached(name: str, config, build, train):
    """(model, losses): loaded from TRAINED if this config and code were trained
    before, else trained now and saved there. Stale files of `name` are removed."""
    path = TRAINED / file_name(name, config)
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


def letters(ids) -> list[str]:
    """Token ids of the induction model shown as letters: 0 -> a, 1 -> b, ..."""
    return [chr(ord("a") + int(i)) for i in ids]


# The sentences the explorer offers for the GPT: each at most 32 characters.
SENTENCES = (
    "The causal mask hides the future",
    "Each head learns its own pattern",
    "softmax(q @ k.T / sqrt(D)) @ v",
)


def _rows(weights: torch.Tensor) -> list:
    """(L, H, T, T) -> nested lists [l][h][t] holding row t's first t + 1 weights
    (the rest are masked, exactly 0), in thousandths: 0.1234 -> 123."""
    T = weights.size(-1)
    return [
        [[[round(w * 1000) for w in head[t, : t + 1].tolist()] for t in range(T)] for head in layer]
        for layer in weights
    ]


def _mask_rows(mask: torch.Tensor) -> list[list[int]]:
    return mask.int().tolist()


def explorer_data() -> dict:
    """What the attention explorer shows: per example input, its tokens and, per
    layer and head, each query's attention row; and the masks of a padded row."""
    gpt, char, _ = trained_char_gpt()
    examples = []
    for n, sentence in enumerate(SENTENCES):
        idx = torch.tensor([char.encode(sentence)])  # (1, T)
        weights = gpt_attention(gpt, idx)  # (1, L, H, T, T)
        prev = previous_token_scores(weights).tolist()  # (L, H)
        examples.append(
            {
                "id": f"sentence-{n + 1}",
                "label": f"“{sentence}” (the guide’s GPT)",
                "tokens": list(sentence),
                "weights": _rows(weights[0]),
                "notes": [[f"previous token {p:.2f}" for p in ps] for ps in prev],
            }
        )
    induction, _ = trained_induction()
    period = 16  # two copies, as the notebook scores them
    generator = torch.Generator().manual_seed(2024)
    T = induction.config.context_length
    V = induction.config.vocab_size
    idx = repeated_tokens(1, T, V, period, generator=generator)  # (1, T)
    with torch.no_grad():
        _, weights = induction(idx)  # (1, L, H, T, T)
    ind = induction_scores(weights, period).tolist()  # (L, H)
    prev = previous_token_scores(weights).tolist()
    examples.append(
        {
            "id": "repeated-letters",
            "label": f"Random letters, repeated every {period} (induction model)",
            "tokens": letters(idx[0]),
            "weights": _rows(weights[0]),
            "notes": [
                [f"induction {i:.2f}, previous token {p:.2f}" for i, p in zip(a, b, strict=True)]
                for a, b in zip(ind, prev, strict=True)
            ],
        }
    )
    lengths = torch.tensor([3])  # one row: 2 padding tokens, then 3 real ones
    T = 5
    masks = {
        "tokens": ["<pad>", "<pad>", "the", "cat", "sat"],
        "causal": _mask_rows(causal_mask(T)),
        "padding": _mask_rows(padding_mask(lengths, T)[0].expand(T, T)),
        "both": _mask_rows(attention_mask(lengths, T)[0]),
    }
    return {"fingerprint": fingerprint()[:20], "examples": examples, "masks": masks}


def commit_trained() -> list[Path]:
    """Copy this code's trained models (the default configurations) into COMMITTED, replacing
    older ones of the same model."""
    trained_induction()
    trained_char_gpt()
    COMMITTED.mkdir(parents=True, exist_ok=True)
    written = []
    for name, config in (("induction", InductionConfig()), ("char-gpt", CharGPTConfig())):
        current = COMMITTED / file_name(name, config)
        for old in COMMITTED.glob(f"{name}-*.pt"):
            if old != current:
                old.unlink()
        if not current.is_file():
            current.write_bytes((TRAINED / current.name).read_bytes())
        written.append(current)
    return written


def main(argv: list[str]) -> None:
    if argv == ["--commit-trained"]:
        for path in commit_trained():
            print(path.relative_to(ROOT))
        return
    if len(argv) != 1:
        raise SystemExit("usage: python -m lab.models OUT.json | --commit-trained")
    data = json.dumps(explorer_data(), ensure_ascii=False, separators=(",", ":"))
    write_text(Path(argv[0]), data)


if __name__ == "__main__":
    main(sys.argv[1:])
