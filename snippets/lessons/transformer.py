"""The decoder-only Transformer as the transformer page builds it: a config of
sizes, the MLP, the pre-norm block, the GPT around the attention page's batched
layer, and its parameters counted by hand.

Plain torch, and only what that page and the ones before it explain: learned
positions, no cache (the generation page adds one), no checks. Shape letters:
B batch, T sequence length, C channels (n_embed), V vocabulary size.
"""

# --8<-- [start:imports]
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.lessons.attention import CausalSelfAttention

# --8<-- [end:imports]

__all__ = ["GPTConfig", "MLP", "Block", "GPT", "parameter_count"]


# --8<-- [start:config]
@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """The sizes of a GPT."""

    vocab_size: int = 96  # V
    context_length: int = 32  # the longest T: the position table has this many rows
    n_embed: int = 64  # C, the width of the residual stream
    n_head: int = 4  # H; each head is D = C // H wide
    n_layer: int = 2  # L blocks
    dropout: float = 0.0  # 0 keeps outputs deterministic; 0.1-0.2 regularises
    tie_weights: bool = False  # True: the LM head reuses the token embedding table


# --8<-- [end:config]


# --8<-- [start:mlp]
class MLP(nn.Module):
    """Per position: widen to 4C, GELU, back to C. Positions do not mix here."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        C = config.n_embed
        self.fc = nn.Linear(C, 4 * C)
        # The non-linearity attention lacks: its output is a weighted average.
        self.gelu = nn.GELU()
        self.proj = nn.Linear(4 * C, C)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x):
        h = self.gelu(self.fc(x))  # (B, T, C) -> (B, T, 4C)
        return self.drop(self.proj(h))  # (B, T, 4C) -> (B, T, C)


# --8<-- [end:mlp]


# --8<-- [start:block]
class Block(nn.Module):
    """Pre-norm residual block: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        C = config.n_embed
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(config.n_head, C)
        self.drop = nn.Dropout(config.dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(config)

    def forward(self, x):
        # Each sublayer reads a normalised copy of the stream and adds its result;
        # the stream itself is never normalised on the way through.
        x = x + self.drop(self.attn(self.ln1(x)))  # positions exchange information
        x = x + self.mlp(self.ln2(x))  # each position works on what it gathered
        return x  # (B, T, C)


# --8<-- [end:block]


# --8<-- [start:gpt]
class GPT(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, V), and a loss given targets."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        V, C = config.vocab_size, config.n_embed
        self.tok_emb = nn.Embedding(V, C)  # row v: the vector of token v
        self.pos_emb = nn.Embedding(config.context_length, C)  # row t: position t
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(C)  # the stream: embeddings + sublayer outputs
        self.lm_head = nn.Linear(C, V, bias=False)  # row v scores token v as next
        if config.tie_weights:  # one (V, C) table reads tokens in and scores them
            self.lm_head.weight = self.tok_emb.weight
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        # Small weights (std 0.02, as in GPT-2) make the first logits nearly equal:
        # an untrained model predicts almost uniformly, its loss starts near ln(V).
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        positions = torch.arange(T, device=idx.device)  # (T,)
        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, C)
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, C) -> (B, T, V)
        loss = None
        if targets is not None:  # the objectives page: cross-entropy per position
            V = logits.size(-1)
            loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
        return logits, loss


# --8<-- [end:gpt]


# --8<-- [start:parameter_count]
def parameter_count(config: GPTConfig) -> int:
    """The number of parameters of GPT(config), counted by hand."""
    V, C, L = config.vocab_size, config.n_embed, config.n_layer
    embeddings = V * C + config.context_length * C  # token and position tables
    layer_norm = 2 * C  # a scale and a shift per channel
    attention = 3 * C * C + (C * C + C)  # q, k, v: no bias; proj: weight and bias
    mlp = (C * 4 * C + 4 * C) + (4 * C * C + C)  # fc and proj, each with a bias
    block = 2 * layer_norm + attention + mlp  # 12 C^2 + 10 C
    head = 0 if config.tie_weights else V * C  # no bias; tied: counted already
    return embeddings + L * block + layer_norm + head


# --8<-- [end:parameter_count]
