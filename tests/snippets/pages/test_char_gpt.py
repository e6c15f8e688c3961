"""Tests for snippets/pages/char_gpt.py: the guide's GPT on its own text, and its
attention weights."""

import dataclasses

import torch

from lab.model_cache import trained_char_gpt
from snippets.core.attention import CausalSpec
from snippets.core.model import GPT, GPTConfig
from snippets.pages.char_gpt import CharGPTConfig, gpt_attention
from tests.snippets.equivalence import from_per_head


def test_gpt_attention_shapes_and_the_two_attention_forms_agree():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=20, context_length=12, n_embed=16, n_head=4, n_layer=3)
    layers = (CausalSpec(16, 4, 12, per_head=True),) * 3
    per_head = GPT(dataclasses.replace(config, layers=layers)).eval()
    fused = from_per_head(per_head).eval()
    idx = torch.randint(20, (2, 10), generator=torch.Generator().manual_seed(1))
    weights = gpt_attention(fused, idx)
    assert weights.shape == (2, 3, 4, 10, 10)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4, 10))
    assert (weights.triu(diagonal=1) == 0).all()
    torch.testing.assert_close(gpt_attention(per_head, idx), weights)
    # The hooks are gone afterwards: the model runs as before.
    assert all(not block.attn._forward_hooks for block in fused.blocks)


def test_the_char_gpt_learns_the_guides_text():
    """The cached model (trained once per version of the code) fell from ln V."""
    gpt, char, losses = trained_char_gpt()
    assert len(losses) == CharGPTConfig().steps
    assert gpt.config.vocab_size == char.vocab_size
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert first > 4.0 and last < 2.8, (first, last)
