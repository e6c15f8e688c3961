"""The guide's GPT from a whole transformers model (lab/oracle/from_transformers_model.py):
the same logits and the same greedy tokens as transformers, for each dense family."""

import pytest
import torch
import torch.nn as nn

from lab.oracle.from_transformers_model import WHOLE, gpt_config, load_model, sharpen
from lab.oracle.tiny_models import WINDOW, tiny_config, tiny_model
from snippets.core.model import GPT, parameter_count
from snippets.run.generate import generate

PROMPT, NEW = 12, 20  # T = 32 at the end: four windows of 8


def tiny(family: str):
    return sharpen(tiny_model(family))


def ids(T: int, B: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(seed))


def relative(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """The largest difference, relative to the largest logit."""
    return ((ours - theirs).abs().max() / theirs.abs().max()).item()


def hf_greedy(model, prompt: torch.Tensor, new: int) -> torch.Tensor:
    """transformers' greedy generate, cached, every prompt token attended (no id is
    taken for padding) and no stop at an end-of-text id."""
    model.generation_config.eos_token_id = None
    return model.generate(
        prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new, do_sample=False
    )


@pytest.fixture(scope="module", params=list(WHOLE))
def pair(request):
    torch.manual_seed(0)
    hf = tiny(request.param)
    return request.param, hf, load_model(hf)


def test_the_logits_are_transformers(pair):
    family, hf, gpt = pair
    x = ids(PROMPT + NEW)
    with torch.no_grad():
        theirs = hf(x).logits
        ours, _ = gpt(x)
    assert theirs.std() > 0.5  # sharp enough that a wrong piece shows
    assert relative(ours, theirs) < 1e-5, family


def test_greedy_tokens_are_transformers_cached_and_not(pair):
    family, hf, gpt = pair
    prompt = ids(PROMPT, seed=1)
    theirs = hf_greedy(hf, prompt, NEW)
    assert theirs.size(1) == PROMPT + NEW > 3 * WINDOW
    assert torch.equal(generate(gpt, prompt, NEW, greedy=True), theirs), family
    assert torch.equal(generate(gpt, prompt, NEW, greedy=True, kv_cache=False), theirs)


def test_the_gpt_is_a_gpt_config_with_its_count(pair):
    family, hf, gpt = pair
    assert isinstance(gpt, GPT)
    n = sum(p.numel() for p in gpt.parameters())
    assert n == parameter_count(gpt.config) == sum(p.numel() for p in hf.parameters())
    assert not any(p.is_meta for p in gpt.parameters())
    if gpt.config.tie_weights:
        assert gpt.lm_head.weight is gpt.tok_emb.weight


def test_every_layer_gives_its_weights(pair):
    family, _, gpt = pair
    with torch.no_grad():
        _, _, weights = gpt(ids(10), return_weights=True)
    assert len(weights) == gpt.config.n_layer
    for w in weights:
        assert torch.all(w.triu(1) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))


# --- planted faults: each piece, wrong, must show --------------------------------------


def faulty_logits(family: str, plant) -> float:
    hf = tiny(family)
    gpt = load_model(hf)
    plant(gpt)
    x = ids(PROMPT + NEW)
    with torch.no_grad():
        return relative(gpt(x)[0], hf(x).logits)


def norms_without_one_plus(gpt):  # Gemma's scales used as stored, w - 1
    for module in gpt.modules():
        if hasattr(module, "one_plus"):
            module.one_plus = False


def olmo_norms_before(gpt):  # Olmo's norms on the sublayers' inputs, not outputs
    for block in gpt.blocks:
        block.ln1, block.post1 = block.post1, nn.Identity()
        block.ln2, block.post2 = block.post2, nn.Identity()


def embedding_unscaled(gpt):  # Gemma's token vectors without sqrt(C)
    gpt.tok_emb.__class__ = nn.Embedding


def gate_and_up_swapped(gpt):
    for block in gpt.blocks:
        block.mlp.gate, block.mlp.up = block.mlp.up, block.mlp.gate


@pytest.mark.parametrize(
    "family, plant",
    [
        ("gemma3_text", norms_without_one_plus),
        ("olmo3", olmo_norms_before),
        ("gemma3_text", embedding_unscaled),
        ("llama", gate_and_up_swapped),
        ("gemma3_text", gate_and_up_swapped),
    ],
)
def test_a_wrong_piece_fails_the_logits(family, plant):
    assert faulty_logits(family, plant) > 1e-3


def test_a_family_or_field_it_cannot_express_is_named():
    with pytest.raises(ValueError, match=r"config.model_type \('gemma2'\): not one of"):
        gpt_config(tiny_config("gemma2"))
    with pytest.raises(ValueError, match=r"config.final_logit_softcapping \(30.0\)"):
        gpt_config(tiny_config("gemma3_text", final_logit_softcapping=30.0))
    with pytest.raises(ValueError, match=r"config.hidden_act \('relu'\)"):
        gpt_config(tiny_config("llama", hidden_act="relu"))
