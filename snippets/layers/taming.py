"""Taming softmax: QK-norm, soft-capped scores, learned sinks and an output gate.

Four small pieces that today's open models put around softmax attention, each a
function on the tensors attention already has: queries and keys (B, H, T, D),
scores (B, H, T, T_k), the heads' outputs (B, T, C). TamedAttention composes
them into a layer the guide's GPT can train with (a TamedSpec in its layers).
Shape letters: B batch, T sequence length (T_k keys), C
channels (n_embed), H heads, D head size (C // H).
"""

# --8<-- [start:imports]
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.attention import CausalSpec, alibi_mask
from snippets.core.blocks import rms_norm
from snippets.core.cache import kv_cache, read
from snippets.core.checks import check_config, check_input, check_shape
from snippets.core.masks import visible
from snippets.core.positions import check_position

# --8<-- [end:imports]

__all__ = [
    "QK_NORMS",
    "GATES",
    "qk_norm",
    "QKNorm",
    "soft_cap",
    "soft_cap_score_mod",
    "sink_softmax",
    "sink_attention",
    "gate_output",
    "OutputGate",
    "TamedAttention",
    "TamedSpec",
    "check_taming",
    "taming_parameters",
]

QK_NORMS = (None, "head", "all")  # per head (Qwen3, Gemma 3), all heads (OLMo 2)
GATES = (None, "elementwise", "head")  # per head and channel (Qwen3-Next), per head


# --8<-- [start:qk_norm]
def qk_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    across_heads: bool = False,
) -> torch.Tensor:
    """RMSNorm on queries or keys x (B, H, T, D), before RoPE -> (B, H, T, D).

    Per head (Qwen3, Gemma 3): each head's D channels, weight (D,). Across heads
    (OLMo 2): the H * D channels of a position together, as OLMo 2 normalises the
    projection before splitting it into heads, weight (H * D,).
    """
    if x.dim() != 4:
        raise ValueError(
            f"qk_norm needs queries or keys of shape (B, H, T, D), got "
            f"{x.dim()} dimensions {tuple(x.shape)}"
        )
    if not across_heads:
        return rms_norm(x, weight, eps)  # over D: every head has rms 1
    B, H, T, D = x.shape
    flat = x.transpose(1, 2).reshape(B, T, H * D)  # heads side by side, as before
    flat = rms_norm(flat, weight, eps)  # over H * D: one rms per position
    return flat.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)


class QKNorm(nn.Module):
    """Learned RMSNorm scales for queries and keys, applied together.

    Args:
        n_head: H.
        head_size: D.
        across_heads: False, per head (scales (D,)); True, OLMo 2's (H * D,).
        eps: added to the mean square, as transformers' rms_norm_eps.
    """

    def __init__(
        self,
        n_head: int,
        head_size: int,
        *,
        across_heads: bool = False,
        eps: float = 1e-6,
    ):
        super().__init__()
        width = n_head * head_size if across_heads else head_size
        self.across_heads, self.eps = across_heads, eps
        self.q_weight = nn.Parameter(torch.ones(width))
        self.k_weight = nn.Parameter(torch.ones(width))

    def forward(self, q: torch.Tensor, k: torch.Tensor):
        """q, k (B, H, T, D) -> both normalised, (B, H, T, D) each."""
        options = {"eps": self.eps, "across_heads": self.across_heads}
        q = qk_norm(q, self.q_weight, **options)
        return q, qk_norm(k, self.k_weight, **options)


# --8<-- [end:qk_norm]


# --8<-- [start:soft_cap]
def _check_cap(cap: float) -> None:
    if isinstance(cap, bool) or not isinstance(cap, (int, float)):
        raise ValueError(f"cap ({cap!r}) must be a positive number")
    if not (cap > 0 and math.isfinite(cap)):
        raise ValueError(
            f"cap ({cap!r}) must be positive and finite: scores become "
            f"cap * tanh(score / cap), inside (-cap, cap)"
        )


def soft_cap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    """cap * tanh(scores / cap): about the score when small, never beyond +-cap.

    Gemma 2 applies it to the scaled scores (B, H, T, T_k) before the mask, with
    cap 50 (config.attn_logit_softcapping).
    """
    _check_cap(cap)
    return cap * torch.tanh(scores / cap)


def soft_cap_score_mod(cap: float):
    """The same cap as a FlexAttention score_mod, applied to the scaled scores."""
    _check_cap(cap)

    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return score_mod


# --8<-- [end:soft_cap]


# --8<-- [start:sinks]
def _check_sinks(sinks: torch.Tensor, n_head: int) -> None:
    if not isinstance(sinks, torch.Tensor) or tuple(sinks.shape) != (n_head,):
        shape = tuple(sinks.shape) if isinstance(sinks, torch.Tensor) else sinks
        raise ValueError(
            f"sinks {shape!r} must be a tensor of shape ({n_head},): one logit "
            f"per head"
        )
    # The values are read on the CPU only (elsewhere, a wait for the device);
    # all() is False for +inf and for NaN.
    if sinks.device.type == "cpu" and not bool((sinks < math.inf).all()):
        raise ValueError(
            f"sinks ({sinks.tolist()}) must be below +inf and not NaN: a sink of "
            f"+inf takes all of a row's weight, and softmax returns NaN"
        )


def sink_softmax(scores: torch.Tensor, sinks: torch.Tensor) -> torch.Tensor:
    """Softmax over the keys and one more logit per head, which is then dropped.

    scores (B, H, T, T_k), masked (-inf) already; sinks (H,). As gpt-oss: the
    sink logit joins each row as an extra column, softmax, the column goes. Rows
    of the result sum to 1 minus the sink's share: a head may attend to nothing.
    """
    B, H, T, _ = check_shape("scores", scores, "B H T T_k")
    _check_sinks(sinks, H)
    column = sinks.to(scores.dtype).view(1, H, 1, 1).expand(B, H, T, 1)
    weights = F.softmax(torch.cat([scores, column], dim=-1), dim=-1)  # T_k + 1
    return weights[..., :-1]  # (B, H, T, T_k)


def sink_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sinks: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """sink_softmax(q k^T / sqrt(D)) @ v, in one F.scaled_dot_product_attention.

    The sink is one extra key of zeros, whose score q . 0 = 0 plus the mask's
    value sinks[h] is the sink logit for every query, and whose value is zeros:
    it takes its share of the weight and adds nothing. q (B, H, T, D), k and v
    (B, H, T_k, D); mask: bool (T, T_k), True where a query may attend, or a
    float bias (H, T, T_k) to add; None: every key. -> (B, H, T, D).
    """
    B, H, T, D = q.shape
    _check_sinks(sinks, H)
    T_k = k.size(-2)
    bias = torch.zeros(H, T, T_k, dtype=q.dtype, device=q.device)  # 0: attend
    if mask is not None and mask.dtype == torch.bool:
        bias = bias.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        bias = bias + mask
    column = sinks.to(q.dtype).view(H, 1, 1).expand(H, T, 1)
    bias = torch.cat([bias, column], dim=-1)  # (H, T, T_k + 1)
    zero = k.new_zeros(*k.shape[:-2], 1, D)  # (B, H, 1, D): its key and value
    k, v = torch.cat([k, zero], dim=-2), torch.cat([v, zero], dim=-2)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # (B, H, T, D)


# --8<-- [end:sinks]


# --8<-- [start:gate]
def gate_output(y: torch.Tensor, gate: torch.Tensor, n_head: int) -> torch.Tensor:
    """The heads' outputs y (B, T, C) times sigmoid(gate), before the projection.

    gate (B, T, C): one gate per head and channel, as Qwen3-Next; (B, T, H): one
    per head, shared by its D channels. A gate near 0 lets a head add nothing.
    """
    B, T, C = y.shape
    width = gate.size(-1)
    if width == C:
        return y * torch.sigmoid(gate)  # (B, T, C)
    if width != n_head or C % n_head:
        raise ValueError(
            f"gate width ({width}) must be C={C} (a gate per channel) or "
            f"n_head={n_head} (a gate per head)"
        )
    heads = y.view(B, T, n_head, C // n_head)  # (B, T, H, D)
    return (heads * torch.sigmoid(gate)[..., None]).view(B, T, C)


class OutputGate(nn.Module):
    """The gate's logits computed from the layer's input x, as Qiu et al. 2025.

    Args:
        n_head: H.
        n_embed: C.
        per_head: a gate per head instead of per channel.
    """

    def __init__(self, n_head: int, n_embed: int, *, per_head: bool = False):
        super().__init__()
        self.n_head = n_head
        width = n_head if per_head else n_embed
        self.logits = nn.Linear(n_embed, width, bias=False)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) the layer's input, y (B, T, C) the heads' outputs."""
        return gate_output(y, self.logits(x), self.n_head)


# --8<-- [end:gate]


# --8<-- [start:layer]
def check_taming(qk_norm=None, soft_cap=None, sinks=False, gate=None) -> None:
    """Reject a piece that is not one of the choices, naming it."""
    if qk_norm not in QK_NORMS:
        raise ValueError(f"qk_norm ({qk_norm!r}) must be one of {list(QK_NORMS)}")
    if soft_cap is not None:
        _check_cap(soft_cap)
    if not isinstance(sinks, bool):
        raise ValueError(f"sinks ({sinks!r}) must be True or False")
    if gate not in GATES:
        raise ValueError(f"gate ({gate!r}) must be one of {list(GATES)}")


def taming_parameters(n_head, n_embed, qk_norm=None, sinks=False, gate=None) -> int:
    """The parameters the pieces add to one layer (the cap has none)."""
    D = n_embed // n_head
    count = {None: 0, "head": 2 * D, "all": 2 * n_embed}[qk_norm]
    count += n_head if sinks else 0
    count += {None: 0, "head": n_embed * n_head, "elementwise": n_embed**2}[gate]
    return count


class TamedAttention(nn.Module):
    """CausalSelfAttention with any of the pieces; with none, exactly that layer.

    Args:
        n_head: H, as CausalSelfAttention (whose parameters qkv and proj have
            the same names here).
        n_embed: C.
        context_length: the training length.
        position: a name in POSITIONS; "rope" and "alibi" act here.
        max_length: the longest sequence accepted (None: context_length).
        qk_norm: None, "head" or "all" (see QK_NORMS).
        soft_cap: None, or c > 0: scores become c * tanh(s / c).
        sinks: a learned sink logit per head, starting at 0.
        gate: None, "elementwise" or "head" (see GATES).
    """

    def __init__(
        self,
        n_head: int,
        n_embed: int,
        context_length: int,
        *,
        position: str = "learned",
        max_length: int | None = None,
        qk_norm: str | None = None,
        soft_cap: float | None = None,
        sinks: bool = False,
        gate: str | None = None,
    ):
        super().__init__()
        check_config(n_head, n_embed, context_length)
        check_position(position, n_embed // n_head, context_length, max_length)
        check_taming(qk_norm, soft_cap, sinks, gate)
        self.n_head, self.n_embed = n_head, n_embed
        self.context_length, self.max_length = context_length, max_length
        self.position, self.cap = position, soft_cap
        self.qkv = nn.Linear(n_embed, 3 * n_embed, bias=False)
        self.proj = nn.Linear(n_embed, n_embed)
        D = n_embed // n_head
        self.norm = None
        if qk_norm is not None:
            self.norm = QKNorm(n_head, D, across_heads=qk_norm == "all")
        self.sinks = nn.Parameter(torch.zeros(n_head)) if sinks else None
        self.gate = None
        if gate is not None:
            self.gate = OutputGate(n_head, n_embed, per_head=gate == "head")

    def project(self, x: torch.Tensor):
        """x (B, T, C) -> q, k, v (B, H, T, D), normalised, not yet rotated."""
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=-1)  # 3 x (B, T, C)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        if self.norm is not None:
            q, k = self.norm(q, k)  # before RoPE, as Qwen3 and OLMo 2
        return q, k, v

    def attend(self, q, k, v, k_pos, x, *, return_weights=False):
        """Rotated q (B, H, T, D), k and v (B, H, T_k, D) at positions k_pos
        (T_k,), the input x (B, T, C); the queries are the last T of the T_k
        positions (T_k > T after a cache). -> (B, T, C), and weights (B, H, T, T_k).
        """
        B, H, T, D = q.shape
        T_k = k.size(-2)
        mask = visible(k_pos[-T:], k_pos)  # (T, T_k) bool: the last rows
        if self.position == "alibi":  # a float bias holding the causal mask
            mask = alibi_mask(H, T, T_k).to(device=q.device, dtype=q.dtype)
        weights = None
        if self.cap is not None or return_weights:  # the scores, written out
            scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, T_k)
            if self.cap is not None:
                scores = soft_cap(scores, self.cap)  # before the mask (Gemma 2)
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(~mask, float("-inf"))
            else:
                scores = scores + mask
            if self.sinks is None:
                weights = F.softmax(scores, dim=-1)
            else:
                weights = sink_softmax(scores, self.sinks)
            y = weights @ v  # (B, H, T, D)
        elif self.sinks is not None:
            y = sink_attention(q, k, v, self.sinks, mask)
        elif T == T_k and mask.dtype == torch.bool:  # the kernel's own mask
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).reshape(B, T, H * D)  # heads side by side
        if self.gate is not None:
            y = self.gate(x, y)  # each head's output times its gate
        y = self.proj(y)  # (B, T, C)
        return (y, weights) if return_weights else y

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) -> (B, T, C); with return_weights, also (B, H, T, T_all).
        A cache (snippets/core/cache.py) adds the positions it has seen."""
        check_input(x, self.n_embed, self.context_length, self.max_length)
        q, k, v, k_pos = read(cache, *self.project(x), self.position)  # + cache
        return self.attend(q, k, v, k_pos, x, return_weights=return_weights)

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """An empty cache of its keys and values (snippets/core/cache.py):
        max_length rows, or a rolling window with sinks."""
        return kv_cache(max_length, window, sinks)


# --8<-- [end:layer]


# --8<-- [start:spec]
@dataclasses.dataclass(frozen=True)
class TamedSpec(CausalSpec):
    """A block's TamedAttention: CausalSpec's sizes and position, and pieces."""

    qk_norm: str | None = None
    soft_cap: float | None = None
    sinks: bool = False
    gate: str | None = None

    def __post_init__(self):
        super().__post_init__()
        check_taming(self.qk_norm, self.soft_cap, self.sinks, self.gate)

    def build(self) -> TamedAttention:
        s = self
        where = {"position": s.position, "max_length": s.max_length}
        pieces = {"qk_norm": s.qk_norm, "soft_cap": s.soft_cap}
        pieces |= {"sinks": s.sinks, "gate": s.gate}
        return TamedAttention(
            s.n_head, s.n_embed, s.context_length, **where, **pieces
        )

    def parameters(self) -> int:
        s = self
        pieces = taming_parameters(s.n_head, s.n_embed, s.qk_norm, s.sinks, s.gate)
        return super().parameters() + pieces


# --8<-- [end:spec]
