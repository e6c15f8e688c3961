"""Cross-attention: queries from one sequence, keys and values from another.

In an encoder-decoder model, each decoder layer attends twice: to the target
tokens before it (causal self-attention), then to the encoder's output, the
"memory", with cross-attention. Queries come from the decoder's x (B, T, C),
keys and values from the memory (B, S, C); T and S need not be equal, and no
causal mask applies, since the whole source is known before decoding starts.

Shape letters: B batch, T target (query) length, S source (key) length,
C channels, H heads, D head size (C // H).
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.attention import scaled_dot_product_attention

# --8<-- [end:imports]

__all__ = ["CrossAttention"]


# --8<-- [start:checks]
def _check_3d(name: str, t: torch.Tensor, n_embed: int) -> None:
    """t must be a (B, length, C) tensor with C == n_embed."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 3:
        raise ValueError(
            f"{name} must have shape (B, length, C), got shape {tuple(t.shape)}"
        )
    if t.size(-1) != n_embed:
        raise ValueError(
            f"last dimension of {name} ({t.size(-1)}) must equal"
            f" n_embed ({n_embed})"
        )


def _check_mask(mask: torch.Tensor, B: int, T: int, S: int) -> torch.Tensor:
    """A bool mask broadcastable to (B, T, S), returned as 3-D."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got {got}"
        )
    if mask.dim() == 2:
        mask = mask[None]  # (T, S) -> (1, T, S), the same for every row
    ok = mask.dim() == 3 and all(
        m in (1, n) for m, n in zip(mask.shape, (B, T, S), strict=True)
    )
    if not ok:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to"
            f" (B, T, S) = ({B}, {T}, {S}); use (T, S), (B, T, S) or 1 for any"
        )
    # A query with no visible key would get softmax of all -inf: NaN.
    if not bool(mask.any(dim=-1).all()):
        raise ValueError("mask hides every key from some query: each row needs one")
    return mask


# --8<-- [end:checks]


# --8<-- [start:cross_attention]
class CrossAttention(nn.Module):
    """Multi-head attention from x (B, T, C) to a memory (B, S, C).

    Args:
        n_head: H, the number of heads; must divide n_embed.
        n_embed: C, the width of x, of the memory and of the output.
    """

    def __init__(self, n_head: int, n_embed: int):
        super().__init__()
        for name, value in (("n_head", n_head), ("n_embed", n_embed)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} ({value!r}) must be a positive int")
        if n_embed % n_head != 0:
            raise ValueError(
                f"n_embed ({n_embed}) must be divisible by n_head ({n_head})"
            )
        self.n_head, self.n_embed = n_head, n_embed
        self.query = nn.Linear(n_embed, n_embed, bias=False)  # from x
        self.key_value = nn.Linear(n_embed, 2 * n_embed, bias=False)  # from memory
        self.proj = nn.Linear(n_embed, n_embed)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        return_weights: bool = False,
    ):
        """x (B, T, C) attends to memory (B, S, C) -> out (B, T, C).

        Args:
            x: the queries' sequence, (B, T, C).
            memory: the keys' and values' sequence, (B, S, C), e.g. the
                encoder's output.
            mask: optional bool, broadcastable to (B, T, S), True where query
                t may attend to memory position s (hide source padding here).
            return_weights: also return the weights (B, H, T, S).
        """
        _check_3d("x", x, self.n_embed)
        _check_3d("memory", memory, self.n_embed)
        B, T, C = x.shape
        S = memory.size(1)
        if memory.size(0) != B:
            raise ValueError(
                f"x and memory must have the same batch size, got {B} and"
                f" {memory.size(0)}"
            )
        if mask is not None:
            mask = _check_mask(mask, B, T, S)[
                :, None
            ]  # (B|1, 1, T|1, S): all heads
        H, D = self.n_head, C // self.n_head
        q = self.query(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k, v = self.key_value(memory).split(C, dim=-1)  # 2 x (B, S, C)
        k = k.view(B, S, H, D).transpose(1, 2)  # (B, S, C) -> (B, H, S, D)
        v = v.view(B, S, H, D).transpose(1, 2)  # (B, S, C) -> (B, H, S, D)
        if return_weights:
            # (B, H, T, D) x (B, H, D, S) -> weights (B, H, T, S) -> (B, H, T, D)
            y, weights = scaled_dot_product_attention(q, k, v, mask)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        y = self.proj(y)  # (B, T, C)
        if return_weights:
            return y, weights
        return y


# --8<-- [end:cross_attention]
