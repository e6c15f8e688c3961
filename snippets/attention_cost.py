"""What attention costs: three implementations of causal self-attention, one
set of weights, and the same layer written inline.

Needs torch and snippets/attention.py; snippets/measure.py measures them, and
`python -m lab.bench` runs the measurements. Shape letters as in
snippets/attention.py: B batch, T sequence length, C channels, H heads, D head size.
"""

# --8<-- [start:imports]
import torch
import torch.nn.functional as F

from snippets.attention import CausalSelfAttention, MultiHeadAttention

# --8<-- [end:imports]

__all__ = [
    "VARIANTS",
    "make_variants",
    "forward",
    "forward_backward",
    "inline_forward",
    "score_bytes",
]


# --8<-- [start:variants]
VARIANTS = ("per-head", "manual", "sdpa")
VARIANT_LABELS = {"per-head": "per-head", "manual": "manual", "sdpa": "SDPA"}


def make_variants(n_head: int, n_embed: int, T: int, seed: int = 0):
    """The three implementations, sharing one set of weights.

    - per-head: MultiHeadAttention, H Head modules one after another, each
      materialising its own (B, T, T) scores and weights.
    - manual: CausalSelfAttention(x, return_weights=True), all heads in one
      batched matmul, softmax written out: (B, H, T, T) scores and weights.
    - sdpa: CausalSelfAttention(x), F.scaled_dot_product_attention with
      is_causal=True, a fused kernel that never holds a (T, T) matrix.

    Args:
        n_head: H.
        n_embed: C, divisible by H.
        T: the sequence length.
        seed: seed of the weights.

    Returns:
        variants (tuple): A dict of calls x (B, T, C) -> (B, T, C), keyed by
            VARIANTS, and the two modules, whose gradients the caller resets
            between runs.
    """
    torch.manual_seed(seed)
    # context_length=T: the tril buffers are (T, T), made before any measurement.
    mha = MultiHeadAttention(n_head, n_embed, context_length=T)
    csa = CausalSelfAttention.from_multihead(mha)  # the same function, batched

    def manual(x):
        out, _weights = csa(x, return_weights=True)  # weights made, then dropped
        return out

    calls = {"per-head": mha, "manual": manual, "sdpa": csa}
    return calls, (mha, csa)


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
