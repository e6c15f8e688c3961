"""The guide's GatedDeltaNet computes what transformers' Qwen3-Next linear-attention layer
computes (its pure-torch path on CPU: torch_chunk_gated_delta_rule and the reference
causal convolution), given the weights by lab/oracle/linear_from_transformers.py.

A tiny random Qwen3NextConfig (three linear layers, then a softmax one), weights
perturbed away from their initialisation (std 0.02 makes many wrong layers agree);
each linear layer's input and output recorded by a forward hook in a full forward.
"""

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

from lab.oracle.from_transformers import load_attention  # noqa: E402
from lab.oracle.linear_from_transformers import load_linear_attention  # noqa: E402


@pytest.fixture(scope="module")
def recorded():
    config = transformers.Qwen3NextConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_experts=2,
        num_experts_per_tok=1,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=6,
        linear_conv_kernel_dim=4,
        max_position_embeddings=128,
    )
    assert config.layer_types[:4] == ["linear_attention"] * 3 + ["full_attention"]
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    seen = {}

    def hook(index):
        def record(module, args, kwargs, output):
            seen[index] = (kwargs["hidden_states"], output)

        return record

    handles = [
        model.model.layers[i].linear_attn.register_forward_hook(hook(i), with_kwargs=True)
        for i in range(3)
    ]
    with torch.no_grad():
        model(torch.randint(0, 64, (2, 70)))  # 70: one full chunk of 64 and a padded one
    for handle in handles:
        handle.remove()
    return model, seen


@pytest.mark.parametrize("index", [0, 2])
def test_equal_to_qwen3_next_linear_attention(recorded, index):
    model, seen = recorded
    x, theirs = seen[index]
    ours = load_attention(model, index)  # hands linear layers to load_linear_attention
    assert type(ours).__name__ == "GatedDeltaNet"
    with torch.no_grad():
        assert_close(ours(x), theirs, rtol=1e-5, atol=1e-5)
        # the step-by-step form sums in another order: float32 rounding, relative to |y| ~ 10
        assert_close(ours(x, recurrent=True), theirs, rtol=1e-4, atol=1e-4)
    assert theirs.abs().max() > 1  # not a near-zero output that anything would match


def test_a_softmax_layer_is_refused(recorded):
    model, _ = recorded
    with pytest.raises(ValueError, match=r"layer 3 is a 'full_attention' layer"):
        load_linear_attention(model, 3)
    with pytest.raises(ValueError, match=r"layer_index \(4\)"):
        load_linear_attention(model, 4)
