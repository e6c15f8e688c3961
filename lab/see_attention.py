"""The see-attention page's figures of attention, and the attention explorer's data.

    python -m lab.see_attention --out DIR   # DIR/attention-explorer.json, as the build writes it

The notebook (docs/see-attention.py) draws heatmaps and masks with the functions
here; the build's hook (hooks/explorer_data.py) asks explorer_data() for what the
attention page's explorer shows. Both read the models of lab/model_cache.py.
Shape letters: B batch, T sequence length, L layers, H heads.
"""

import hashlib
import json
import sys

import torch

from lab.model_cache import file_name, trained_char_gpt, trained_induction
from lab.shared.experiment import Command
from lab.shared.paths import ARTIFACTS
from lab.shared.style import COLORS, INK
from snippets.core.masks import attention_mask, causal_mask, padding_mask
from snippets.pages.char_gpt import CharGPTConfig, gpt_attention
from snippets.pages.induction import (
    InductionConfig,
    induction_scores,
    previous_token_scores,
    repeated_tokens,
)

COMPACT = {"ensure_ascii": False, "separators": (",", ":")}  # the JSON the build writes


# ------------------------------------------------------------------ figures


def heatmap(ax, weights, tokens, title: str, aspect: str = "equal") -> None:
    """One head's (T, T) attention weights: row = query, column = key. Masked
    cells stay empty, a line follows the edge of the causal mask; tokens may be
    None (no tick labels). All text in the figure's font size (rcParams), which
    the notebook picks to stay legible on a phone; aspect="auto" lets the cells be
    taller than wide, room for a label per row."""
    T = weights.size(-1)
    shown = weights.masked_fill(~torch.ones(T, T).tril().bool(), float("nan"))
    ax.imshow(shown, cmap="viridis", vmin=0, vmax=1, interpolation="nearest", aspect=aspect)
    edge = torch.arange(T + 1) - 0.5
    ax.step(edge, edge, where="post", color=INK, linewidth=0.6)
    ax.set_title(title, fontsize="medium")
    if tokens is None:
        ax.set_xticks([])
        ax.set_yticks([])
    else:
        ax.set_xticks(range(T), tokens, family="monospace")
        ax.set_yticks(range(T), tokens, family="monospace")
    ax.tick_params(length=0, pad=1)
    for side in ax.spines.values():
        side.set_visible(False)


def mask_image(ax, mask, labels: list[str], title: str, row_labels: bool = True) -> None:
    """A (T, T) bool attention mask: allowed cells filled, blocked cells left
    transparent (the page shows through, light or dark), a grid of INK lines; the
    rows labelled too unless row_labels is false (a panel beside one that is)."""
    from matplotlib.colors import ListedColormap  # matplotlib only when drawing (lab.shared.style)

    T = mask.size(-1)
    shown = mask.float().masked_fill(~mask.bool(), float("nan"))  # blocked: no paint
    ax.imshow(shown, cmap=ListedColormap([COLORS[0]]), vmin=0, vmax=1)
    edges = torch.arange(T + 1) - 0.5
    ax.hlines(edges, -0.5, T - 0.5, color=INK, linewidth=0.5, alpha=0.6)
    ax.vlines(edges, -0.5, T - 0.5, color=INK, linewidth=0.5, alpha=0.6)
    ax.set_title(title, fontsize="medium")
    ax.set_xticks(range(T), labels, rotation=90)
    ax.set_yticks(range(T), labels if row_labels else [])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)


# ------------------------------------------------------------------ the explorer's data


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
    return {"fingerprint": models_key(), "examples": examples, "masks": masks}


def models_key() -> str:
    """What the explorer's data is computed from: its two models, by their cache keys."""
    files = file_name("induction", InductionConfig()) + file_name("char-gpt", CharGPTConfig())
    return hashlib.sha256(files.encode()).hexdigest()[:20]


def main(argv: list[str] | None = None) -> int:
    """Write the explorer's data, as the build does, into --out (for a look at it)."""
    cmd = Command("lab.see_attention", __doc__, out=ARTIFACTS, quick=False)
    cmd.parse(argv)
    cmd.write("attention-explorer.json", json.dumps(explorer_data(), **COMPACT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
