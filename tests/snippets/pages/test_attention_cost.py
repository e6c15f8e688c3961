"""Tests for snippets/pages/attention_cost.py and the attention-cost page's claims, at small sizes.

No timing is asserted anywhere: times depend on the machine and on what else runs on it.
Memory is asserted, because the profiler counts tensor bytes exactly and the same way on every
run. The whole file takes a few seconds on 2 CPU cores.
"""

import functools

import pytest
import torch
from torch.testing import assert_close

from lab.shared.common import ROOT
from snippets.core.attention import CausalSelfAttention, MultiHeadAttention
from snippets.pages.attention_cost import (
    FORWARD_ONLY,
    VARIANTS,
    einsum_attention,
    forward,
    forward_backward,
    inline_forward,
    make_variants,
    score_bytes,
    torch_mha_from,
    torch_mha_mask,
)
from snippets.pages.measure import peak_memory

COMMITTED = ROOT / "docs" / "assets" / "results"
SVG = "{http://www.w3.org/2000/svg}svg"


def randn(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- what the memory measurement sees -------------------------------------------------------


def test_manual_path_scores_are_B_H_T_T_float32_exactly():
    B, H, C, T = 2, 4, 64, 384  # B, H and T all different, so a missing factor shows
    torch.manual_seed(0)
    csa = CausalSelfAttention(H, C, context_length=T)
    x = randn(B, T, C)
    with torch.no_grad():
        _, weights = csa(x, return_weights=True)
    assert weights.shape == (B, H, T, T)
    assert weights.numel() * weights.element_size() == B * H * T * T * 4 == score_bytes(B, H, T)
    # The profiler sees the same tensors being allocated: the largest is a (B, H, T, T) one.
    calls, _ = make_variants(H, C, T)
    manual = peak_memory(lambda: forward(calls["manual"], x))
    assert manual["largest_allocation_bytes"] == B * H * T * T * 4
    # The per-head path holds one head's (B, T, T) at a time; the fused kernel none at all.
    per_head = peak_memory(lambda: forward(calls["per-head"], x))
    assert per_head["largest_allocation_bytes"] == B * T * T * 4
    sdpa = peak_memory(lambda: forward(calls["sdpa"], x))
    assert sdpa["largest_allocation_bytes"] < B * T * T * 4


# The manual paths are compared between T=512 and T=1024, the fused kernel between T=1024 and
# T=2048: its scratch buffer (a few tiles per thread) is sized from T, in steps, and is the same
# for every T from 768 on. Width and head count are the benchmark's defaults.
MANUAL_T, FUSED_T = (512, 1024), (1024, 2048)


@pytest.fixture(scope="module")
def peaks() -> dict:
    """Peak bytes of each variant and mode at the sizes above, B=1, C=256, H=8."""
    B, C, H = 1, 256, 8
    result = {}
    for T in sorted(set(MANUAL_T + FUSED_T)):
        calls, modules = make_variants(H, C, T)
        x, grad_out = randn(B, T, C), randn(B, T, C, seed=2)
        for variant in ("per-head", "manual", "sdpa"):
            if T not in (FUSED_T if variant == "sdpa" else MANUAL_T):
                continue
            call = calls[variant]
            for module in modules:
                module.zero_grad(set_to_none=True)
            result[variant, "forward", T] = peak_memory(functools.partial(forward, call, x))[
                "peak_bytes"
            ]
            result[variant, "forward_backward", T] = peak_memory(
                functools.partial(forward_backward, call, x, grad_out)
            )["peak_bytes"]
    return result


@pytest.mark.parametrize("mode", ["forward", "forward_backward"])
@pytest.mark.parametrize("variant", ["per-head", "manual"])
def test_manual_paths_memory_grows_like_T_squared(peaks, variant, mode):
    small, large = MANUAL_T
    growth = peaks[variant, mode, large] / peaks[variant, mode, small]
    assert growth >= 3, f"{variant} {mode}: x{growth:.2f} from T={small} to T={large}"


@pytest.mark.parametrize("mode", ["forward", "forward_backward"])
def test_fused_kernel_memory_grows_like_T(peaks, mode):
    small, large = FUSED_T
    growth = peaks["sdpa", mode, large] / peaks["sdpa", mode, small]
    assert growth <= 2.2, f"sdpa {mode}: x{growth:.2f} from T={small} to T={large}"


# --- all variants compute the same function -------------------------------------------------


def test_all_variants_agree_outputs_and_gradients():
    B, C, H, T = 2, 64, 4, 48
    # FlexAttention uncompiled: the same function, computed densely, no compile in the suite.
    # The compiled kernel is compared with SDPA by the benchmark's quick run
    # (tests/lab/test_attention_cost.py).
    calls, (mha, csa, torch_mha) = make_variants(H, C, T, compile_flex=False)
    x, grad_out = randn(B, T, C), randn(B, T, C, seed=2)
    outputs, grads = {}, {}
    for variant in VARIANTS:
        for module in (mha, csa, torch_mha):
            module.zero_grad(set_to_none=True)
        if variant in FORWARD_ONLY:  # no backward on the CPU
            with torch.no_grad():
                outputs[variant] = calls[variant](x)
            continue
        out = calls[variant](x)
        out.backward(grad_out)
        outputs[variant] = out.detach()
        if variant == "per-head":  # rebuild the batched layout of the per-head gradients
            grads[variant] = (
                torch.cat(
                    [h.query.weight.grad for h in mha.heads]
                    + [h.key.weight.grad for h in mha.heads]
                    + [h.value.weight.grad for h in mha.heads]
                ),
                mha.proj.weight.grad,
            )
        elif variant == "torch-mha":
            grads[variant] = (torch_mha.in_proj_weight.grad, torch_mha.out_proj.weight.grad)
        else:
            grads[variant] = (csa.qkv.weight.grad, csa.proj.weight.grad)
    for variant in VARIANTS[1:]:
        assert_close(outputs[variant], outputs["per-head"], rtol=1e-5, atol=1e-5)
        if variant not in FORWARD_ONLY:
            assert_close(grads[variant], grads["per-head"], rtol=1e-4, atol=1e-5)


def test_torch_mha_mask_convention_and_weights():
    # need_weights=True makes nn.MultiheadAttention apply attn_mask itself (no fused
    # kernel, no is_causal): True must mean "may not attend", and its weights, averaged
    # over nothing, must be the guide's (B, H, T, T) weights.
    B, C, H, T = 2, 32, 4, 10
    torch.manual_seed(0)
    csa = CausalSelfAttention(H, C, context_length=T)
    torch_mha = torch_mha_from(csa)
    x = randn(B, T, C)
    not_allowed = torch_mha_mask(T)
    with torch.no_grad():
        out, weights = torch_mha(
            x, x, x, attn_mask=not_allowed, need_weights=True, average_attn_weights=False
        )
        expected, expected_weights = csa(x, return_weights=True)
    assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert_close(weights, expected_weights, rtol=1e-5, atol=1e-5)
    assert torch_mha.in_proj_bias.abs().max() == 0  # csa's q, k, v have no bias


def test_einsum_attention_is_the_manual_path():
    torch.manual_seed(0)
    csa = CausalSelfAttention(n_head=4, n_embed=32, context_length=12)
    x = randn(3, 12, 32)
    with torch.no_grad():
        assert_close(einsum_attention(csa, x), csa(x, return_weights=True)[0])


def test_inline_forward_is_exactly_the_module():
    torch.manual_seed(0)
    csa = CausalSelfAttention(n_head=4, n_embed=64, context_length=32)
    x = randn(3, 32, 64)
    with torch.no_grad():
        assert_close(inline_forward(csa, x), csa(x), rtol=0, atol=0)


def test_variants_share_weights():
    calls, (mha, csa, torch_mha) = make_variants(2, 32, 16, compile_flex=False)
    assert isinstance(mha, MultiHeadAttention) and calls["per-head"] is mha
    assert calls["sdpa"] is csa
    assert list(calls) == list(VARIANTS)
    assert_close(csa.proj.weight, mha.proj.weight, rtol=0, atol=0)
    assert_close(torch_mha.in_proj_weight, csa.qkv.weight, rtol=0, atol=0)
    assert_close(torch_mha.out_proj.bias, csa.proj.bias, rtol=0, atol=0)
