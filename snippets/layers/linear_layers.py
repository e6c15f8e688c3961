"""One spec for the linear layers a GPT block can hold, as AttentionSpec is for
the softmax ones: the rule, its sizes, the layer it builds, its parameters.

Each takes `forward(x, cache=None, *, return_weights=False)` and makes its
LinearState with `new_cache(batch_size, max_length)`. Shape letters: C channels,
H heads, K a head's key width (Mamba2: the state size N), V its value width
(Mamba2: P).
"""

# --8<-- [start:spec]
import dataclasses

import torch.nn as nn

from snippets.core.checks import check_positive_int
from snippets.core.spec import LayerSpec
from snippets.layers.kda import KimiDeltaAttention
from snippets.layers.lightning import LightningAttention
from snippets.layers.linear_attention import GatedDeltaNet
from snippets.layers.mamba2 import Mamba2

__all__ = [
    "LinearSpec",
    "RULES",
]

# The rules a LinearSpec names -> the layer each builds.
RULES = {
    "gated_deltanet": GatedDeltaNet,
    "kda": KimiDeltaAttention,
    "mamba2": Mamba2,
    "lightning": LightningAttention,
}


@dataclasses.dataclass(frozen=True)
class LinearSpec(LayerSpec):
    """One linear layer's choices: which rule, H heads of a K x V state.

    Args:
        n_head: H.
        n_embed: C, the width of the input and output.
        head_k: K, a head's key width (Mamba2: its state size N).
        head_v: V, a head's value width (Mamba2: its head size P).
        rule: a key of RULES.
        chunk_size: positions per chunk of the chunked form (the function
            is the same for any size).
        slopes: lightning's fixed decay rate per head, H numbers >= 0
            (MiniMax's differ from layer to layer); the other rules learn
            theirs and take None.
    """

    n_head: int
    n_embed: int
    head_k: int
    head_v: int
    rule: str = "gated_deltanet"
    chunk_size: int = 64
    slopes: tuple[float, ...] | None = None

    gpt_sizes = ("n_embed",)  # a state's heads need not be the GPT's

    def __post_init__(self):
        for name in ("n_head", "n_embed", "head_k", "head_v", "chunk_size"):
            check_positive_int(name, getattr(self, name))
        if self.rule not in RULES:
            raise ValueError(f"rule ({self.rule!r}) must be one of {list(RULES)}")
        if self.rule != "lightning" and self.slopes is not None:
            raise ValueError(
                f"slopes ({self.slopes!r}) are lightning's fixed decays; "
                f"rule={self.rule!r} learns its own: leave slopes None"
            )
        if self.rule != "lightning":
            return
        slopes = self.slopes
        if (
            not isinstance(slopes, tuple)
            or len(slopes) != self.n_head
            or not all(isinstance(r, (int, float)) and r >= 0 for r in slopes)
        ):
            raise ValueError(
                f"rule='lightning' needs slopes, a tuple of n_head ({self.n_head}) "
                f"decay rates >= 0, got {slopes!r}"
            )
        if self.head_k != self.head_v:
            raise ValueError(
                f"lightning's heads are one width: head_k ({self.head_k}) must "
                f"equal head_v ({self.head_v})"
            )

    def build(self) -> nn.Module:
        """The layer of this rule (each rule's own defaults otherwise)."""
        s = self
        if s.rule == "mamba2":  # Mamba2 takes (H, C, P, N)
            sizes = (s.n_head, s.n_embed, s.head_v, s.head_k)
        elif s.rule == "lightning":  # (H, C, D, its slopes)
            sizes = (s.n_head, s.n_embed, s.head_k, list(s.slopes))
        else:
            sizes = (s.n_head, s.n_embed, s.head_k, s.head_v)
        return RULES[s.rule](*sizes, chunk_size=s.chunk_size)

    def parameters(self) -> int:
        """build()'s parameters, counted by hand (the short convolution 4
        wide, one filter per channel it reads)."""
        C, H, K, V = self.n_embed, self.n_head, self.head_k, self.head_v
        if self.rule == "lightning":  # q, k, v and the gate; the norm; out
            return 4 * C * H * K + H * K + H * K * C
        if self.rule == "mamba2":  # in_proj to z, x B C (the conv's) and dt
            conv = H * V + 2 * K  # x, B and C of one group
            return C * (H * V + conv + H) + 5 * conv + 3 * H + H * V + H * V * C
        # q and k; v and the out map; b; the conv over q, k, v; A_log; the norm
        common = 2 * C * H * K + 2 * C * H * V + C * H
        common += 4 * (2 * H * K + H * V) + H + V
        if self.rule == "gated_deltanet":  # z, a, dt_bias
            return common + C * H * V + C * H + H
        # KDA: the low-rank (rank K) decay input and gate, a dt_bias per channel
        return common + (C * K + K * H * K) + (C * K + K * H * V) + H * K


# --8<-- [end:spec]
