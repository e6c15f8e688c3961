"""What attention costs: six implementations of causal self-attention, one
set of weights, and the same layer written inline.

snippets/pages/measure.py measures them, and `python -m lab.attention_cost` runs the
measurements. Shape letters as in snippets/core/attention.py: B batch, T sequence
length, C channels, H heads, D head size.
"""

# --8<-- [start:imports]
import functools
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from snippets.core.attention import CausalSelfAttention, MultiHeadAttention

# --8<-- [end:imports]

__all__ = [
    "VARIANTS",
    "VARIANT_LABELS",
    "FORWARD_ONLY",
    "make_variants",
    "einsum_attention",
    "torch_mha_from",
    "torch_mha_mask",
    "causal_block_mask",
    "compiled_flex_attention",
    "eager_flex_attention",
    "flex_attention_layer",
    "forward",
    "forward_backward",
    "inline_forward",
    "score_bytes",
]


# --8<-- [start:variants]
# The order of the tables: the three written out in full, then three library calls.
VARIANTS = ("per-head", "manual", "einsum", "torch-mha", "flex", "sdpa")
VARIANT_LABELS = {
    "per-head": "per-head",
    "manual": "manual",
    "einsum": "einsum",
    "torch-mha": "nn.MHA",
    "flex": "Flex",
    "sdpa": "SDPA",
}
# torch 2.13 has no FlexAttention backward on the CPU ("FlexAttention does not
# support backward on CPU"): this variant is measured forward only.
FORWARD_ONLY = ("flex",)


def make_variants(
    n_head: int, n_embed: int, T: int, seed: int = 0, compile_flex: bool = True
):
    """The six implementations, sharing one set of weights.

    - per-head: MultiHeadAttention, H Head modules one after another, each
      materialising its own (B, T, T) scores and weights.
    - manual: CausalSelfAttention(x, return_weights=True), all heads in one
      batched matmul, softmax written out: (B, H, T, T) scores and weights.
    - einsum: the same arithmetic as manual, every product one torch.einsum.
    - torch-mha: torch.nn.MultiheadAttention holding the same weights.
    - flex: FlexAttention with a causal block mask, compiled (compile_flex) or
      run eagerly (dense, slow, but no compiler: for tests). Forward only.
    - sdpa: CausalSelfAttention(x), F.scaled_dot_product_attention with
      is_causal=True, a fused kernel that never holds a (T, T) matrix.

    Args:
        n_head: H.
        n_embed: C, divisible by H.
        T: the sequence length.
        seed: seed of the weights.
        compile_flex: False runs flex_attention without torch.compile.

    Returns:
        variants (tuple): A dict of calls x (B, T, C) -> (B, T, C), keyed by
            VARIANTS, and the three modules, whose gradients the caller resets
            between runs.
    """
    torch.manual_seed(seed)
    # context_length=T: the tril buffers are (T, T), made before any measurement.
    mha = MultiHeadAttention(n_head, n_embed, context_length=T)
    csa = CausalSelfAttention.from_multihead(mha)  # the same function, batched
    torch_mha = torch_mha_from(csa)  # and once more, as PyTorch's own module
    not_allowed = torch_mha_mask(T)  # (T, T), made once, outside the timed runs
    block_mask = causal_block_mask(T)  # which (128, 128) tiles hold any score

    def manual(x):
        out, _weights = csa(x, return_weights=True)  # weights made, then dropped
        return out

    def torch_mha_call(x):
        # With is_causal=True and no weights asked for, the module hands the work
        # to the fused kernel with is_causal=True; the mask only has to be right.
        out, _ = torch_mha(
            x, x, x, attn_mask=not_allowed, is_causal=True, need_weights=False
        )
        return out

    def flex(x):
        return flex_attention_layer(csa, x, block_mask, compiled=compile_flex)

    calls = {
        "per-head": mha,
        "manual": manual,
        "einsum": functools.partial(einsum_attention, csa),
        "torch-mha": torch_mha_call,
        "flex": flex,
        "sdpa": csa,
    }
    return calls, (mha, csa, torch_mha)


def forward(call, x: torch.Tensor) -> None:
    """Inference: no autograd graph, so intermediates are freed as soon as used.

    Args:
        call (Callable): one of make_variants' calls.
        x: the input (B, T, C).
    """
    with torch.no_grad():
        call(x)


def forward_backward(call, x: torch.Tensor, grad_out: torch.Tensor) -> None:
    """A training step minus the optimizer: autograd keeps what backward needs.

    Args:
        call (Callable): one of make_variants' calls.
        x: the input (B, T, C).
        grad_out: the gradient of the output (B, T, C), fixed so that every
            variant does the same backward pass.
    """
    call(x).backward(grad_out)


# --8<-- [end:variants]


# --8<-- [start:einsum]
def einsum_attention(csa: CausalSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """Causal self-attention with csa's weights, each product one torch.einsum.

    x (B, T, C) -> (B, T, C). The letters name the axes: b batch, h head,
    t query position, s key position, d head channel, c input channel.
    """
    B, T, C = x.shape
    H, D = csa.n_head, C // csa.n_head
    # qkv.weight is (3C, C): rows [q; k; v], each H heads of D rows.
    w = csa.qkv.weight.view(3, H, D, C)  # (3, H, D, C)
    q, k, v = torch.einsum("btc,nhdc->nbhtd", x, w)  # 3 x (B, H, T, D)
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(D)  # (B, H, T, T)
    future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)  # (T, T)
    scores = scores.masked_fill(future, float("-inf"))  # (B, H, T, T)
    weights = scores.softmax(dim=-1)  # (B, H, T, T)
    y = torch.einsum("bhts,bhsd->bthd", weights, v)  # (B, T, H, D)
    return csa.proj(y.reshape(B, T, C))  # heads side by side: (B, T, C)


# --8<-- [end:einsum]


# --8<-- [start:torch_mha]
def torch_mha_from(csa: CausalSelfAttention) -> nn.MultiheadAttention:
    """torch.nn.MultiheadAttention computing exactly csa's function.

    Its in_proj_weight (3C, C) packs [q; k; v] as csa.qkv.weight does, and
    splits each into H heads of D channels the same way. It has one bias
    switch for both projections: on, with the q, k, v biases zero (csa has
    none) and the output bias copied from csa.proj.
    """
    C = csa.n_embed
    torch_mha = nn.MultiheadAttention(C, csa.n_head, bias=True, batch_first=True)
    weight = csa.proj.weight
    torch_mha = torch_mha.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(csa.qkv.weight)  # (3C, C)
        torch_mha.in_proj_bias.zero_()  # (3C,)
        torch_mha.out_proj.weight.copy_(csa.proj.weight)  # (C, C)
        torch_mha.out_proj.bias.copy_(csa.proj.bias)  # (C,)
    return torch_mha


def torch_mha_mask(T: int) -> torch.Tensor:
    """The causal mask as nn.MultiheadAttention reads a bool attn_mask: (T, T),
    True where a query may NOT look (above the diagonal). The guide's
    causal_mask is the opposite: True where it may."""
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)  # (T, T)


# --8<-- [end:torch_mha]


# --8<-- [start:flex]
def causal(b, h, q_idx, kv_idx):
    """FlexAttention's mask_mod: may query q_idx see key kv_idx?"""
    return q_idx >= kv_idx


def causal_block_mask(T: int):
    """Which (128, 128) tiles of the (T, T) scores hold any allowed score.

    FlexAttention skips the tiles above the diagonal altogether and applies
    `causal` score by score only in the tiles that the diagonal crosses.
    """
    # B=None, H=None: one mask for every batch row and head.
    return create_block_mask(causal, None, None, Q_LEN=T, KV_LEN=T, device="cpu")


@functools.cache
def compiled_flex_attention():
    """torch.compile(flex_attention), made once per process and shared.

    Uncompiled, flex_attention computes every score densely; compiling turns it
    into a kernel that walks the block mask. dynamic=True: one compile serves
    every T instead of one per shape. The first call compiles (seconds).
    """
    return torch.compile(flex_attention, dynamic=True)


def flex_attention_layer(csa, x: torch.Tensor, block_mask, compiled: bool = True):
    """csa(x), FlexAttention in place of the fused kernel: (B, T, C) -> (B, T, C).

    Forward only on the CPU (torch 2.13): call it under torch.no_grad().
    """
    B, T, C = x.shape
    H, D = csa.n_head, C // csa.n_head
    q, k, v = csa.qkv(x).split(C, dim=-1)  # (B, T, 3C) -> 3 x (B, T, C)
    # (B, T, C) -> (B, H, T, D), made contiguous: a compiled kernel is
    # specialised for its inputs' strides, and these are the same every call.
    q, k, v = (t.view(B, T, H, D).transpose(1, 2).contiguous() for t in (q, k, v))
    attend = compiled_flex_attention() if compiled else eager_flex_attention
    y = attend(q, k, v, block_mask=block_mask)  # (B, H, T, D)
    y = y.transpose(1, 2).contiguous().view(B, T, C)  # -> (B, T, C)
    return csa.proj(y)


def eager_flex_attention(q, k, v, block_mask):
    """flex_attention without compiling: the same result, every score computed.

    Slow, but it needs no compiler (and no AVX2): the tests and the masks page
    check each mask against SDPA with it, without a compile per mask_mod.
    """
    with warnings.catch_warnings():  # it warns that it runs uncompiled: on purpose
        warnings.filterwarnings("ignore", message=".*without torch.compile.*")
        return flex_attention(q, k, v, block_mask=block_mask)


# --8<-- [end:flex]


# --8<-- [start:inline]
def inline_forward(csa: CausalSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """CausalSelfAttention.forward without the module: same ops, same weights.

    Args:
        csa: the layer whose weights to use.
        x: the input (B, T, C).

    Returns:
        (B, T, C), what csa(x) returns.
    """
    B, T, C = x.shape
    H, D = csa.n_head, C // csa.n_head
    qkv = F.linear(x, csa.qkv.weight)  # (B, T, C) -> (B, T, 3C)
    q, k, v = qkv.split(C, dim=-1)  # 3 x (B, T, C)
    q = q.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
    k = k.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
    v = v.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
    y = y.transpose(1, 2).contiguous().view(B, T, C)  # -> (B, T, C)
    return F.linear(y, csa.proj.weight, csa.proj.bias)  # (B, T, C)


# --8<-- [end:inline]


def score_bytes(batch: int, n_head: int, T: int, dtype=torch.float32) -> int:
    """Bytes of one (B, H, T, T) score tensor: B * H * T * T * 4 in float32.

    Args:
        batch: B.
        n_head: H.
        T: the sequence length.
        dtype (torch.dtype): the scores' dtype.
    """
    return batch * n_head * T * T * torch.empty((), dtype=dtype).element_size()
