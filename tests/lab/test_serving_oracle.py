"""transformers as the oracle of snippets/run/serving.py: its continuous batching
(`generate_batch`) and its assisted generation give the tokens the guide's generate_batch and
speculative_generate give, on tiny random Llamas loaded into the guide's GPT with the same
weights (snippets.run.pretrained.load_pretrained).

transformers' generate_batch sizes its paged cache, when num_blocks and max_batch_tokens are
left out, from the device's free memory: on a CPU that is the host's RAM (90% of what is
free), and with eager or SDPA attention it also makes a float attention mask of
max_batch_tokens (8192) x (every cached token + 8192) and fills it once, at start. On a
machine with 15 GB free that mask is 14 GB and the fill alone took 49 s of a 55 s call for
three prompts. Their documented ContinuousBatchingConfig sizes (num_blocks, max_batch_tokens)
bring the call under a second.
"""

import copy

import pytest
import torch
from transformers import ContinuousBatchingConfig, GenerationConfig

from lab.oracle.from_transformers_model import sharpen
from lab.oracle.tiny_models import tiny_model
from snippets.run.generate import generate
from snippets.run.pretrained import load_pretrained
from snippets.run.serving import generate_batch, speculative_generate

V = 64  # the tiny configs' vocabulary
SMALL = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2}
SMALL |= {"num_key_value_heads": 1}


def pair(hf, folder):
    """hf (a sharpened tiny Llama) and the guide's GPT loaded from its saved files."""
    hf.generation_config.eos_token_id = None  # no stop at an end-of-text id
    hf.save_pretrained(folder)
    return hf, load_pretrained(folder)


@pytest.fixture(scope="module")
def llamas(tmp_path_factory):
    """A target Llama, a smaller draft over the same vocabulary, and a noisy copy of the
    target (a draft it agrees with part of the time): each with its guide GPT."""
    target = sharpen(tiny_model("llama", num_hidden_layers=2))
    small = sharpen(tiny_model("llama", seed=1, **SMALL), seed=1)
    noisy = sharpen(tiny_model("llama", num_hidden_layers=2))
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in noisy.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.03 * p.std())
    models = {"target": target, "small": small, "noisy": noisy, "copy": copy.deepcopy(target)}
    return {name: pair(model, tmp_path_factory.mktemp(name)) for name, model in models.items()}


def ids(n: int, seed: int) -> list[int]:
    return torch.randint(V, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_generate_batch_is_transformers_continuous_batching(llamas):
    hf, gpt = llamas["target"]
    stem = ids(6, 0)  # a prefix three prompts share
    prompts = [ids(5, 1), stem + ids(5, 2), ids(3, 3), stem + ids(11, 4), stem, ids(8, 5)]
    new = 10
    sizes = {"num_blocks": 16, "max_batch_tokens": 8, "max_requests_per_batch": 3}
    theirs = hf.generate_batch(
        inputs=prompts,
        generation_config=GenerationConfig(
            max_new_tokens=new, do_sample=False, eos_token_id=None, pad_token_id=0
        ),
        continuous_batching_config=ContinuousBatchingConfig(page_size=4, **sizes),
        warmup=False,  # CUDA graphs: nothing to capture on a CPU
    )
    stats = {}
    ours = generate_batch(
        gpt, prompts, new, block_size=4, n_blocks=16, max_tokens=8, max_seqs=3, stats=stats
    )
    assert len(theirs) == len(prompts)
    for prompt, out, got in zip(prompts, theirs.values(), ours, strict=True):
        assert out.prompt_ids == prompt  # in the order of the inputs
        assert got.tolist() == prompt + out.generated_tokens
    assert stats["shared_positions"] > 0  # sequences joined a running one's prefix
    for prompt, got in zip(prompts, ours, strict=True):  # and each is generate's
        assert torch.equal(got, generate(gpt, torch.tensor([prompt]), new, greedy=True)[0])


@pytest.mark.parametrize("k", [1, 3, 5])
def test_speculative_decoding_is_transformers_assisted_generation(llamas, k):
    hf, gpt = llamas["target"]
    prompt, new = torch.tensor([ids(7, 6)]), 20
    forward_passes = []
    hook = hf.model.register_forward_pre_hook(lambda *_: forward_passes.append(1))
    try:
        for name in ("small", "noisy", "copy"):
            hf_draft, gpt_draft = llamas[name]
            # k drafts a round, every round: no schedule that changes k, no early stop.
            hf_draft.generation_config.num_assistant_tokens = k
            hf_draft.generation_config.num_assistant_tokens_schedule = "constant"
            hf_draft.generation_config.assistant_confidence_threshold = 0.0
            forward_passes.clear()
            theirs = hf.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                assistant_model=hf_draft,
                do_sample=False,
                max_new_tokens=new,
            )
            stats = {}
            ours = speculative_generate(gpt, gpt_draft, prompt, new, k=k, stats=stats)
            assert torch.equal(ours, theirs), name
            # One pass of the target per round on both sides: the same drafts accepted.
            assert stats["rounds"] == len(forward_passes), (name, stats)
            if name == "copy":
                assert stats["accepted"] == stats["drafted"]
            elif name == "noisy":  # rounds that stop part way
                assert 0 < stats["accepted"] < stats["drafted"]
    finally:
        hook.remove()
