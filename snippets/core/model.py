"""A decoder-only Transformer (GPT) around snippets/core/attention.py's attention.

Shape letters: B batch, T sequence length, C channels (n_embed), H heads, V
vocabulary size, L layers.
"""

# --8<-- [start:imports]
import dataclasses

import torch
import torch.nn as nn

from snippets.core.attention import CausalSpec
from snippets.core.blocks import BlockSpec, check_layers, no_norm
from snippets.core.cache import ModelCache
from snippets.core.checks import check_positive_int
from snippets.core.objectives import lm_loss
from snippets.core.positions import POSITIONS, WITHOUT_TABLE, sinusoidal_positions

# --8<-- [end:imports]

__all__ = ["GPTConfig", "MLP", "Block", "GPT", "parameter_count", "check_ids"]


# --8<-- [start:config]
@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """The sizes of a GPT, checked when made.

    Raises:
        TypeError: a size is not an int, or layers holds what is not a spec.
        ValueError: a size is not positive, n_head does not divide n_embed, dropout
            is outside [0, 1), position is not a known name, or layers does not
            fit the sizes (the rules live in snippets/core/blocks.py).
    """

    vocab_size: int = 96  # V
    context_length: int = 32  # the longest T: the position table has this many rows
    n_embed: int = 64  # C, the width of the residual stream
    n_head: int = 4  # H; each head is D = C // H wide
    n_layer: int = 2  # L blocks
    dropout: float = 0.0  # 0 keeps outputs deterministic; 0.1-0.2 regularises
    tie_weights: bool = False  # True: the LM head reuses the token embedding table
    position: str = "learned"  # how order gets in: a name in POSITIONS
    # The longest T accepted; None: context_length. Longer than context_length
    # only for a scheme without a table, to evaluate beyond the training length.
    max_length: int | None = None
    # One layer spec per block (snippets/core/blocks.py): GQA, MLA, the taming
    # pieces, linear layers; None: the plain causal layer in every block. block:
    # the norms and MLP of today's families; None: the teaching block.
    layers: tuple | None = dataclasses.field(default=None, repr=False)
    block: BlockSpec | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        sizes = ("vocab_size", "context_length", "n_embed", "n_head", "n_layer")
        for name in sizes:
            check_positive_int(name, getattr(self, name))
        if self.n_embed % self.n_head != 0:
            raise ValueError(
                f"n_embed ({self.n_embed}) must be divisible by "
                f"n_head ({self.n_head})"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout ({self.dropout}) must be in [0, 1)")
        if self.position not in POSITIONS:
            raise ValueError(
                f"position ({self.position!r}) must be one of {list(POSITIONS)}"
            )
        D = self.n_embed // self.n_head
        if self.position == "rope" and D % 2:
            raise ValueError(
                f"position='rope' needs an even head size D = n_embed // n_head, "
                f"got {self.n_embed} // {self.n_head} = {D}"
            )
        if self.position == "sinusoidal" and self.n_embed % 2:
            raise ValueError(
                f"position='sinusoidal' needs an even n_embed ({self.n_embed}): "
                f"sin and cos take turns"
            )
        if (longest := self.max_length) is not None:
            if type(longest) is not int or longest < self.context_length:
                raise ValueError(
                    f"max_length ({self.max_length!r}) must be None or an int >= "
                    f"context_length ({self.context_length})"
                )
            longer = self.max_length > self.context_length
            if longer and self.position not in WITHOUT_TABLE:
                raise ValueError(
                    f"max_length ({self.max_length}) > context_length "
                    f"({self.context_length}) needs a position scheme without a "
                    f"table, one of {list(WITHOUT_TABLE)}: 'learned' has only "
                    f"{self.context_length} rows"
                )
        check_layers(self)  # layers and block (snippets/core/blocks.py)

    def layer_specs(self) -> tuple:
        """Every block's layer spec: layers, or the plain causal layer."""
        if self.layers is not None:
            return self.layers
        H, C, T = self.n_head, self.n_embed, self.context_length
        where = {"position": self.position, "max_length": self.max_length}
        return (CausalSpec(C, H, T, **where),) * self.n_layer

    @property
    def longest(self) -> int:
        """The longest sequence the model accepts."""
        return self.max_length or self.context_length


# --8<-- [end:config]


# --8<-- [start:mlp]
class MLP(nn.Module):
    """Per position: widen to 4C, GELU, back to C. Positions do not mix here.

    Args:
        config: gives C (n_embed) and the dropout rate.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        C = config.n_embed
        self.fc = nn.Linear(C, 4 * C)
        # The non-linearity attention lacks: its output is a weighted average.
        self.gelu = nn.GELU()
        self.proj = nn.Linear(4 * C, C)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C)."""
        h = self.gelu(self.fc(x))  # (B, T, C) -> (B, T, 4C)
        return self.drop(self.proj(h))  # (B, T, 4C) -> (B, T, C)


# --8<-- [end:mlp]


# --8<-- [start:block]
class Block(nn.Module):
    """Pre-norm residual block: x + attention(LN(x)), then x + MLP(LN(x)).

    Args:
        config: gives C, dropout, the layer spec of block `layer` and the block
            spec (a family's norms, where they sit, and its MLP).
    """

    def __init__(self, config: GPTConfig, layer: int = 0):
        super().__init__()
        C, spec = config.n_embed, config.block
        self.ln1 = nn.LayerNorm(C) if spec is None else spec.norm(C, "before")
        self.attn = config.layer_specs()[layer].build()
        self.drop = nn.Dropout(config.dropout)
        self.ln2 = nn.LayerNorm(C) if spec is None else spec.norm(C, "before")
        self.mlp = MLP(config) if spec is None else spec.mlp(C)
        self.post1 = no_norm if spec is None else spec.norm(C, "after")
        self.post2 = no_norm if spec is None else spec.norm(C, "after")

    def forward(self, x: torch.Tensor, cache=None, *, return_weights=False):
        """x (B, T, C) -> (B, T, C); with return_weights, also the attention
        weights. A cache (snippets/core/cache.py) goes to the attention layer."""
        # Each sublayer reads a normalised copy of the stream and adds its result.
        # The stream itself is never normalised on the way through: a block starts
        # close to the identity, and gradients reach the first layers undiminished.
        cached = () if cache is None else (cache,)  # the per-head layer takes none
        out = self.attn(self.ln1(x), *cached, return_weights=return_weights)
        out, weights = out if return_weights else (out, None)
        x = x + self.drop(self.post1(out))  # positions exchange information
        x = x + self.post2(self.mlp(self.ln2(x)))  # each works on what it gathered
        return (x, weights) if return_weights else x


# --8<-- [end:block]


# --8<-- [start:gpt]
def check_ids(idx: torch.Tensor, vocab_size: int) -> None:
    """Every id of idx (B, T) in [0, vocab_size), else a ValueError naming the
    first one outside. It reads the ids: on an accelerator, a wait for it."""
    bad = (idx < 0) | (idx >= vocab_size)  # (B, T)
    if bad.any():
        b, t = bad.nonzero()[0].tolist()
        raise ValueError(
            f"token id {idx[b, t].item()} at (b={b}, t={t}) is out of range for "
            f"vocab_size={vocab_size}: ids run from 0 to {vocab_size - 1}"
        )


class GPT(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, V), and a loss given targets.

    Args:
        config: the sizes; see GPTConfig.

    Raises:
        TypeError: config is not a GPTConfig.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config)}")
        self.config = config
        V, C, spec = config.vocab_size, config.n_embed, config.block
        embedding = nn.Embedding if spec is None else spec.embedding
        self.tok_emb = embedding(V, C)  # row v: the vector of token v
        if config.position == "learned":  # row t: position t, learned
            self.pos_emb = nn.Embedding(config.context_length, C)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            [Block(config, i) for i in range(config.n_layer)]
        )
        # the stream is a sum of L blocks' outputs
        self.ln_f = nn.LayerNorm(C) if spec is None else spec.norm(C, "final")
        self.lm_head = nn.Linear(C, V, bias=False)  # row v scores token v as next
        if config.tie_weights:
            # One (V, C) matrix both reads tokens in and scores them out: V * C
            # fewer parameters, and each token's two roles learn from each other.
            self.lm_head.weight = self.tok_emb.weight
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # Small weights (std 0.02, as in GPT-2) make the first logits nearly equal:
        # an untrained model predicts almost uniformly, its loss starts near ln(V).
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        cache: ModelCache | None = None,
        return_weights: bool = False,
    ) -> tuple:
        """Next-token scores at every position, and their loss given targets.

        Args:
            idx: token ids (B, T), integers in [0, V), T <= context_length.
            targets: the next token at every position (B, T), or None.
            cache: a ModelCache (snippets/core/cache.py): idx follows the positions
                it has seen, and every layer adds what it keeps.
            return_weights: also return every layer's attention weights.

        Returns:
            logits (B, T, V), and the loss (lm_loss; None without targets);
                with return_weights, L weights (B, H, T, T_all) too.

        Raises:
            TypeError: idx is not an integer tensor.
            ValueError: idx is not 2-D, too long (with a cache: with the cached
                positions), or an id is outside [0, V).
        """
        self._check_idx(idx)
        if cache is not None:
            check_fits(cache, self.config, idx.size(1))
        # With a cache, the positions it gives: seen .. seen + T - 1 for one
        # stream; in a paged batch, each token's place in its own sequence.
        where = None if cache is None else cache.next_positions(idx.size(1))
        x = self.drop(self.embed(idx, where))  # (B, T, C)
        weights = []
        for i, block in enumerate(self.blocks):
            layer_cache = None if cache is None else cache.layers[i]
            x = block(x, layer_cache, return_weights=return_weights)  # (B, T, C)
            if return_weights:
                x, w = x
                weights.append(w)
        logits = self.lm_head(self.ln_f(x))  # (B, T, C) -> (B, T, V)
        loss = None if targets is None else lm_loss(logits, targets)  # scalar
        return (logits, loss, weights) if return_weights else (logits, loss)

    # --8<-- [start:embed]
    def embed(self, idx: torch.Tensor, positions=None) -> torch.Tensor:
        """Token vectors plus, for "learned"/"sinusoidal", position vectors.

        idx (B, T) holds the tokens at positions (T,): None for 0 .. T - 1;
        after those a KV cache holds, the positions it gives -> (B, T, C).
        """
        x = self.tok_emb(idx)  # (B, T) -> (B, T, C)
        T, C = idx.size(1), self.config.n_embed
        if positions is None:
            positions = torch.arange(T)  # (T,)
        if self.config.position == "learned":
            x = x + self.pos_emb(positions.to(idx.device))  # + (T, C), over B
        elif self.config.position == "sinusoidal":
            table = sinusoidal_positions(int(positions.max()) + 1, C)  # fixed
            x = x + table[positions].to(device=x.device, dtype=x.dtype)  # (T, C)
        # "rope" and "alibi" act inside attention; "none" adds nothing at all.
        return x  # (B, T, C)

    # --8<-- [end:embed]

    def _check_idx(self, idx: torch.Tensor) -> None:
        """idx must be (B, T) integer ids in [0, V), T within the positions the
        model has. Checked here, where the limits are known: inside nn.Embedding
        a bad id is an IndexError that names neither the id nor vocab_size."""
        c = self.config
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"idx must be a tensor of token ids, got {type(idx)}")
        if idx.dtype.is_floating_point or idx.dtype == torch.bool:
            raise TypeError(
                f"idx must hold integer token ids (torch.long), got {idx.dtype}"
            )
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (B, T), got {tuple(idx.shape)}")
        T, rows = idx.size(1), c.context_length
        if c.max_length is not None and T > c.max_length:
            raise ValueError(f"T={T} exceeds max_length={c.max_length}")
        if c.position == "learned" and T > rows:
            raise ValueError(
                f"T={T} exceeds context_length={rows}: the position table has "
                f"only {rows} rows (crop idx to its last {rows} tokens)"
            )
        if T > c.longest:
            raise ValueError(
                f"T={T} exceeds context_length={rows}, the training length; "
                f"position={c.position!r} has no table: GPTConfig(max_length=...) "
                f"accepts longer sequences"
            )
        if idx.device.type == "cpu":  # elsewhere, reading the ids waits for the
            check_ids(idx, c.vocab_size)  # device: generate checks them, once


# --8<-- [end:gpt]


def check_fits(cache, config: GPTConfig, T: int) -> None:
    """A GPT's cache and its T new positions must fit its config: one cache
    per layer, and the positions within the table's rows (learned), or within
    max_length where attention covers them (a rolling cache's never pass its
    window)."""
    if len(getattr(cache, "layers", ())) != config.n_layer:
        raise ValueError(
            f"cache must be a ModelCache with one cache per layer "
            f"(n_layer={config.n_layer}), got {type(cache).__name__}"
        )
    limit = config.longest  # learned: context_length, the table's rows
    name = "max_length" if config.max_length else "context_length"
    # Positions in the embeddings count from the stream's start; RoPE's and
    # ALiBi's only across what attention covers.
    absolute = config.position in ("learned", "sinusoidal")
    end = int(cache.next_positions(T).max()) + 1 if T else cache.seen
    if (end if absolute else cache.span(T)) > limit:
        raise ValueError(
            f"{cache.seen} cached + {T} new positions exceed {name}={limit}"
        )


# --8<-- [start:parameter_count]
def parameter_count(config: GPTConfig) -> int:
    """The number of trainable parameters of GPT(config), counted by hand.

    Args:
        config: the sizes V, C, L and the context length; tie_weights counts the
            shared (V, C) table once; each layer spec counts its own layer.

    Returns:
        The count, equal to sum(p.numel() for p in GPT(config).parameters()).
    """
    V, C, L = config.vocab_size, config.n_embed, config.n_layer
    embeddings = V * C  # the token table
    if config.position == "learned":
        embeddings += config.context_length * C  # the position table
    head = 0 if config.tie_weights else V * C  # no bias; tied: counted already
    layers = sum(spec.parameters() for spec in config.layer_specs())
    # Around each layer: two LayerNorms (a scale and a shift per channel), the
    # MLP's fc and proj with biases; and the final norm. Or a family's pieces.
    block = 2 * 2 * C + (C * 4 * C + 4 * C) + (4 * C * C + C)
    final = 2 * C
    if config.block is not None:
        block, final = config.block.parameters(C)
    return embeddings + layers + L * block + final + head


# --8<-- [end:parameter_count]
