"""A model as data: each layer's attention from a spec, the block's pieces from one.

snippets/core/model.py's GPTConfig takes two of these:

- `layers`: one spec per block, a LayerSpec (snippets/core/spec.py) that builds
  its layer (spec.build()) and counts its parameters (spec.parameters()): a
  CausalSpec the plain causal layer (every block's, without layers), a
  TamedSpec that layer with the taming pieces, an AttentionSpec a
  ConfigurableAttention, an MLASpec DeepSeek's
  LatentAttention, a LinearSpec a linear layer (Gated DeltaNet, Kimi Delta
  Attention, Mamba2, lightning), a DSASpec DeepSeek-V3.2's sparse MLA, a
  CompressedSpec DeepSeek-V4's compressed attention, a DiffAttentionSpec
  differential attention (snippets/layers/differential.py). Each layer takes
  `forward(x, cache=None, *, return_weights=False)` and makes its own cache
  with `new_cache(batch_size, max_length)`, so the GPT, generate and
  gpt_attention run every layer alike. Another kind of
  layer enters as one more spec class.
- `block`: a BlockSpec, the pieces around attention that today's dense
  families choose: RMSNorm (Gemma's scales stored as w - 1), where the norms
  sit, a gated MLP of its own width, and Gemma's sqrt(C) on the token vectors.
  The GPT's Block and GPT build those pieces from it (norm, mlp) when made.
  None: the teaching block (LayerNorm before each sublayer, the 4C GELU MLP).

The rules between these options and GPTConfig's other fields live here
(check_layers). Shape letters: B batch, T positions, C channels.
"""

# --8<-- [start:imports]
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.checks import check_positive_int
from snippets.core.spec import LayerSpec, Spec

# --8<-- [end:imports]

__all__ = [
    "rms_norm",
    "check_layers",
    "RMSNorm",
    "GatedMLP",
    "BlockSpec",
    "ScaledEmbedding",
    "no_norm",
]


def check_layers(config) -> None:
    """The rules of `layers` and `block` against a GPTConfig's other fields."""
    if config.block is not None and not isinstance(config.block, BlockSpec):
        got = type(config.block).__name__
        raise TypeError(f"block must be a BlockSpec, got {got}")
    layers = config.layers
    if layers is None:
        return
    if not isinstance(layers, tuple) or len(layers) != config.n_layer:
        raise ValueError(
            f"layers must be a tuple of n_layer ({config.n_layer}) specs, got "
            f"{type(layers).__name__} of {len(layers)}"
        )
    for i, spec in enumerate(layers):
        if not isinstance(spec, LayerSpec):
            got = type(spec).__name__
            raise TypeError(
                f"layers[{i}] must be a LayerSpec (a spec that builds its "
                f"layer), got {got}"
            )
        spec.check_in_gpt(i, config)
    if config.position in ("rope", "alibi"):
        raise ValueError(
            f"position={config.position!r} acts inside attention: with layers, "
            f"each spec says it (CausalSpec's position, AttentionSpec's rope or "
            f"alibi); position adds to the embeddings only "
            f"('learned', 'sinusoidal' or 'none')"
        )


# --8<-- [start:rms_norm]
def rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6
) -> torch.Tensor:
    """x divided by its root mean square over the last dimension, times weight.

    (..., N) -> (..., N); weight (N,), one learned scale per channel. Computed in
    float32 as transformers' Qwen3RMSNorm does. Gemma 3 and Qwen3-Next store the
    scale minus one: pass 1 + their weight.
    """
    N = x.size(-1)
    if weight is not None and tuple(weight.shape) != (N,):
        raise ValueError(
            f"weight of shape {tuple(weight.shape)} must be ({N},): one scale per "
            f"channel of the last dimension of x {tuple(x.shape)}"
        )
    if not eps > 0:  # under the root: a zero row would give 0 / 0, NaN
        raise ValueError(f"eps ({eps!r}) must be > 0: it keeps the root above 0")
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)  # rms 1
    y = y.to(x.dtype)
    return y if weight is None else y * weight


# --8<-- [end:rms_norm]


# --8<-- [start:norm]
def no_norm(x: torch.Tensor) -> torch.Tensor:
    """Where a block has no norm: x as it is."""
    return x


class RMSNorm(nn.Module):
    """x / rms(x) times a learned scale per channel (Zhang and Sennrich, 2019):
    LayerNorm without its mean and shift. Gemma stores each scale as w - 1
    (zeros at the start) and applies 1 + w: one_plus.

    Args:
        n_embed: C.
        eps: added under the root.
        one_plus: the scales are stored minus one.
    """

    def __init__(self, n_embed: int, eps: float = 1e-6, one_plus: bool = False):
        super().__init__()
        check_positive_int("n_embed", n_embed)
        self.eps, self.one_plus = eps, one_plus
        start = torch.zeros(n_embed) if one_plus else torch.ones(n_embed)
        self.weight = nn.Parameter(start)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}, one_plus={self.one_plus}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., C) -> (..., C)."""
        weight = 1 + self.weight if self.one_plus else self.weight
        return rms_norm(x, weight, self.eps)


# --8<-- [end:norm]


# --8<-- [start:mlp]
ACTIVATIONS = {"silu": F.silu, "gelu-tanh": lambda z: F.gelu(z, approximate="tanh")}


class GatedMLP(nn.Module):
    """down(act(gate(x)) * up(x)) (Shazeer, 2020): one half of the hidden layer
    gates the other. SiLU (SwiGLU: Llama, Qwen3, Olmo, SmolLM3) or tanh-GELU
    (GeGLU: Gemma).

    Args:
        n_embed: C.
        hidden: the hidden width (a config's intermediate_size).
        activation (str): a key of ACTIVATIONS.
        bias (bool): biases on the three projections.
    """

    def __init__(self, n_embed: int, hidden: int, activation="silu", bias=False):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation ({activation!r}): not one of {list(ACTIVATIONS)}"
            )
        self.act = ACTIVATIONS[activation]
        self.gate = nn.Linear(n_embed, hidden, bias=bias)
        self.up = nn.Linear(n_embed, hidden, bias=bias)
        self.down = nn.Linear(hidden, n_embed, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C)."""
        return self.down(self.act(self.gate(x)) * self.up(x))  # via (B, T, hidden)


# --8<-- [end:mlp]


# --8<-- [start:block_spec]
# Where a block's norms sit: before each sublayer (pre-norm), also on what it
# adds to the stream (Gemma 3's four norms per block), or there only (Olmo 2, 3).
NORMS = {"pre": ("before",), "pre+post": ("before", "after"), "post": ("after",)}


@dataclasses.dataclass(frozen=True)
class BlockSpec(Spec):
    """The pieces around a block's attention, and at the stack's two ends.

    Args:
        hidden: the gated MLP's hidden width.
        activation: its gate's, a key of ACTIVATIONS.
        mlp_bias: biases in the MLP.
        norms: a key of NORMS.
        eps: every RMSNorm's epsilon (the final norm's too).
        one_plus: RMSNorm scales stored as w - 1 (Gemma).
        embed_scale: token vectors times sqrt(C), rounded to their dtype (Gemma).
    """

    hidden: int
    activation: str = "silu"
    mlp_bias: bool = False
    norms: str = "pre"
    eps: float = 1e-6
    one_plus: bool = False
    embed_scale: bool = False

    def __post_init__(self):
        check_positive_int("hidden", self.hidden)
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation ({self.activation!r}) must be one of "
                f"{list(ACTIVATIONS)}"
            )
        if self.norms not in NORMS:
            raise ValueError(f"norms ({self.norms!r}) must be one of {list(NORMS)}")
        if not self.eps > 0:
            raise ValueError(f"eps ({self.eps!r}) must be > 0")

    def norm(self, n_embed: int, where: str):
        """The norm "before" or "after" a sublayer (no_norm if it has none
        there), or the "final" one before the LM head."""
        if where == "final" or where in NORMS[self.norms]:
            return RMSNorm(n_embed, self.eps, self.one_plus)
        return no_norm

    def mlp(self, n_embed: int) -> GatedMLP:
        return GatedMLP(n_embed, self.hidden, self.activation, self.mlp_bias)

    def embedding(self, vocab_size: int, n_embed: int) -> nn.Embedding:
        """The token table: Gemma's scales its vectors by sqrt(C)."""
        scaled = ScaledEmbedding if self.embed_scale else nn.Embedding
        return scaled(vocab_size, n_embed)

    def parameters(self, n_embed: int) -> tuple[int, int]:
        """(one block's norms and MLP, the final norm), counted by hand."""
        C, n = n_embed, 2 * len(NORMS[self.norms])  # two sublayers
        mlp = 3 * C * self.hidden + self.mlp_bias * (2 * self.hidden + C)
        return n * C + mlp, C


# --8<-- [end:block_spec]


# --8<-- [start:scaled_embedding]
class ScaledEmbedding(nn.Embedding):
    """Token vectors times sqrt(C), the factor rounded to their dtype (Gemma)."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = super().forward(idx)
        return x * torch.tensor(math.sqrt(x.size(-1)), dtype=x.dtype)


# --8<-- [end:scaled_embedding]
