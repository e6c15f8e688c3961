"""The generation page's lesson: the transformer page's GPT with a KV cache.

With the cache, the lesson GPT computes the logits the uncached lesson GPT computes
(the prompt at once, token by token, a chunk after a prefix); its greedy generate
writes what recomputing everything writes, and what the package's generate writes on
a package GPT with the same weights. The page shows each changed class as a change:
its highlighted lines are exactly the lines that differ from the earlier lesson.
"""

from pathlib import Path

import pytest
import torch

import snippets.run.generate
from snippets.core import model as library
from snippets.lessons import generation as lesson
from snippets.lessons import transformer
from tests.snippets.lessons.highlight import assert_highlights_are_the_changes

ROOT = Path(__file__).resolve().parents[3]
SIZES = {"vocab_size": 40, "context_length": 12, "n_embed": 32, "n_head": 4}
SIZES |= {"n_layer": 2}


def models(tie=False):
    """The uncached lesson GPT and the cached one, with the same weights: every
    matrix drawn with std 0.3, so that the output depends strongly on the context
    (at the initial std of 0.02 the scores are nearly equal and a broken cache
    could go unnoticed)."""
    torch.manual_seed(0)
    plain = transformer.GPT(transformer.GPTConfig(**SIZES, tie_weights=tie))
    with torch.no_grad():
        for p in plain.parameters():
            if p.dim() == 2:  # Linear and Embedding weights; LayerNorms stay
                p.normal_(0.0, 0.3)
    cached = lesson.GPT(transformer.GPTConfig(**SIZES, tie_weights=tie))
    cached.load_state_dict(plain.state_dict())  # the same names and shapes
    return plain.eval(), cached.eval()


IDS = torch.randint(0, 40, (3, 12), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize(
    "pieces",
    [[12], [1] * 12, [5, 4, 3], [7, 1, 4]],
    ids=["prompt-at-once", "token-by-token", "chunks-after-a-prefix", "mixed"],
)
def test_cached_logits_equal_the_uncached_gpt_s(pieces):
    plain, cached = models()
    cache = lesson.new_cache(cached)
    got, start = [], 0
    with torch.no_grad():
        for n in pieces:
            got.append(cached(IDS[:, start : start + n], cache=cache)[0])
            start += n
            assert [c.seen for c in cache] == [start] * SIZES["n_layer"]
        expected = plain(IDS)[0]  # (3, 12, V), one pass, no cache
    torch.testing.assert_close(torch.cat(got, dim=1), expected)
    # The context matters in these weights: the last position's logits change
    # when the first token does, so a cache that loses keys cannot pass.
    other = IDS.clone()
    other[:, 0] = (other[:, 0] + 1) % 40
    with torch.no_grad():
        assert (plain(other)[0][:, -1] - expected[:, -1]).abs().max() > 0.1


def test_without_a_cache_it_is_the_transformer_page_s_gpt():
    plain, cached = models(tie=True)
    targets = torch.roll(IDS, -1, dims=1)
    logits, loss = cached(IDS, targets)
    ref_logits, ref_loss = plain(IDS, targets)
    torch.testing.assert_close(logits, ref_logits)
    torch.testing.assert_close(loss, ref_loss)


def greedy_recompute(model, idx, max_new_tokens):
    """Greedy decoding without a cache: the whole text through the model each step."""
    with torch.no_grad():
        for _ in range(max_new_tokens):
            next_id = model(idx)[0][:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            idx = torch.cat([idx, next_id], dim=1)
    return idx


@pytest.mark.parametrize("prompt", [1, 4])
def test_generate_equals_greedy_recompute_and_the_package_s(prompt):
    plain, cached = models(tie=True)
    idx = IDS[:, :prompt]
    new = SIZES["context_length"] - prompt  # up to the limit, which is allowed
    out = lesson.generate(cached, idx, new)
    assert out.shape == (3, SIZES["context_length"])
    assert torch.equal(out[:, :prompt], idx)
    assert torch.equal(out, greedy_recompute(plain, idx, new))
    assert len({tuple(row) for row in out[:, prompt:].tolist()}) == 3  # not constant
    # The package's GPT with these weights, and the package's generate.
    package = library.GPT(library.GPTConfig(**SIZES, tie_weights=True))
    package.load_state_dict(cached.state_dict())
    theirs = snippets.run.generate.generate(package, idx, new, greedy=True)
    assert torch.equal(out, theirs)
    assert torch.equal(lesson.generate(cached, idx, 0), idx)


def test_generate_refuses_a_text_longer_than_the_context():
    _, cached = models()
    with pytest.raises(ValueError) as err:
        lesson.generate(cached, IDS[:, :5], 8)
    assert str(err.value).startswith("T=13 exceeds context_length=12: ")
    assert "prompt's 5 tokens and 8 new ones" in str(err.value)


# ------------------------------------------------------------------ the page's diff

PAGE = ROOT / "docs" / "generation.md"
# Each class the page shows as a change, and the section of the earlier lesson it
# changes.
EARLIER = {
    "snippets/lessons/generation.py:attention": "snippets/lessons/attention.py:batched",
    "snippets/lessons/generation.py:block": "snippets/lessons/transformer.py:block",
    "snippets/lessons/generation.py:gpt": "snippets/lessons/transformer.py:gpt",
}


def test_the_page_highlights_exactly_the_lines_that_differ():
    assert_highlights_are_the_changes(PAGE, EARLIER)
