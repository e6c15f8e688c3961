"""Tests for hooks/explorer_data.py: the built site holds the explorer's JSON exactly as
lab/see_attention.py's explorer_data() makes it, and only pages with an explorer load its script."""

import json

import pytest
import torch

from lab import see_attention
from snippets.core.masks import attention_mask, causal_mask


@pytest.fixture(scope="module")
def exported(built_site) -> dict:
    return json.loads((built_site / "assets" / "attention-explorer.json").read_text("utf-8"))


def test_built_json_is_what_the_code_exports(exported):
    assert exported == see_attention.explorer_data()


def test_exported_rows_are_attention_rows(exported):
    assert len(exported["examples"]) == 4
    for example in exported["examples"]:
        T = len(example["tokens"])
        assert 10 <= T <= 32
        L, H = len(example["weights"]), len(example["weights"][0])
        assert (L, H) == (2, 4) and len(example["notes"]) == L
        for layer in example["weights"]:
            for head in layer:
                assert [len(row) for row in head] == list(range(1, T + 1))
                for row in head:  # in thousandths, each rounded
                    assert all(type(w) is int for w in row)
                    assert min(row) >= 0 and abs(sum(row) - 1000) <= len(row) / 2
    masks = exported["masks"]
    assert masks["causal"] == causal_mask(5).int().tolist()
    assert masks["both"] == attention_mask(torch.tensor([3]), 5)[0].int().tolist()


def test_explorer_assets_load_only_where_an_explorer_is(built_site):
    for page in built_site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        has = 'class="attention-explorer' in text or 'class="mask-explorer' in text
        assert has == ("attention-explorer.js" in text), page.relative_to(built_site)
    for page in ("multi-head", "generation-in-depth"):  # the attention and the mask explorer
        assert "attention-explorer.js" in (built_site / page / "index.html").read_text(), page


def test_built_live_model_is_the_committed_char_gpt(built_site):
    """assets/live/: the checkpoint load_model reads, and the manifest and float32 weights the
    page's JavaScript reads, all three the See-attention model (lab/recipes/live_model.py)."""
    from lab.model_cache import trained_char_gpt
    from lab.recipes.live_model import export
    from snippets.run.generate import load_model

    live = built_site / "assets" / "live"
    names = sorted(p.name for p in live.iterdir())
    assert names == ["char-gpt.bin", "char-gpt.json", "char-gpt.pt"]
    model, chars = load_model(live / "char-gpt.pt")
    committed, char, _ = trained_char_gpt()
    assert chars == char.chars and model.config == committed.config
    for name, tensor in committed.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name
    manifest, weights = export(committed, chars)
    assert json.loads((live / "char-gpt.json").read_text("utf-8")) == manifest
    assert (live / "char-gpt.bin").read_bytes() == weights
    assert len(weights) == 4 * sum(t.numel() for t in committed.state_dict().values())
