"""What a Gated DeltaNet block carries between generated tokens: a fixed-size state.

A softmax block's KV cache grows by a key and a value per token
(snippets/generate.py's KVCache); a GatedDeltaNet block needs only its delta-rule
state S, (B, H, K, V), and the last conv_size - 1 inputs of its short convolution.
snippets/generate.py keeps one LinearState per linear block of a `layer_types` GPT.
Shape letters: B batch, T sequence length, C channels, H heads, K and V a head's
key and value widths.
"""

# --8<-- [start:state]
import torch
import torch.nn.functional as F

from snippets.linear_attention import (
    GatedDeltaNet,
    gated_delta_chunked,
    gated_delta_recurrent,
)

__all__ = ["LinearState"]


class LinearState:
    """A GatedDeltaNet block's memory of the positions read so far.

    Args:
        attn: the block's layer (gives H, K, V, C, the convolution's width).
        batch_size: B.
    """

    def __init__(self, attn: GatedDeltaNet, batch_size: int):
        like = {"dtype": attn.q.weight.dtype, "device": attn.q.weight.device}
        H, K, V = attn.n_head, attn.head_k, attn.head_v
        self.S = torch.zeros(batch_size, H, K, V, **like)  # the delta-rule state
        # The convolution reads conv_size - 1 earlier positions. The projections
        # into it have no bias, so earlier *inputs* x (zeros before the first
        # token, as the layer's own padding) are as good as their projections.
        width = attn.conv.kernel_size[0] - 1
        self.recent = torch.zeros(batch_size, width, attn.q.in_features, **like)

    def tensors(self) -> list[torch.Tensor]:
        """Everything it holds: the same bytes after 1 token or 100,000."""
        return [self.S, self.recent]

    def step(self, attn: GatedDeltaNet, x: torch.Tensor) -> torch.Tensor:
        """attn(x) at the new positions, given every earlier one; the state moves
        past them.

        Args:
            attn: the block's layer, whose weights are used.
            x: the layer's input at the new positions (B, T_new, C).

        Returns:
            (B, T_new, C), what attn would give there in a full forward pass.
        """
        width, T_new = self.recent.size(1), x.size(1)
        context = torch.cat([self.recent, x], dim=1)  # (B, width + T_new, C)
        q, k, v, g, beta = (t[:, :, width:] for t in attn.gates(context))
        if T_new == 1:  # one token: one step of the recurrence
            o, self.S = gated_delta_recurrent(q, k, v, g, beta, self.S)
        else:  # a prompt: the chunked form, from the state so far
            o, self.S = gated_delta_chunked(
                q, k, v, g, beta, self.S, chunk_size=attn.chunk_size
            )
        self.recent = context[:, context.size(1) - width :]
        # The rest as in GatedDeltaNet.forward: each head's output RMS-normed,
        # scaled, gated by SiLU(z), projected back to C.
        o = o.transpose(1, 2)  # (B, T_new, H, V)
        o = (
            o
            * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + attn.eps)
            * attn.norm_weight
        )
        B, T, H, V = o.shape
        z = attn.z(x).reshape(B, T, H, V)
        return attn.out((o * F.silu(z)).reshape(B, T, H * V))


# --8<-- [end:state]
