"""Induction heads: a two-layer attention-only model learns to continue a repeat.

Shape letters: B batch, T sequence length, C channels (n_embed), H heads, L
layers, V vocabulary size.

An induction head completes patterns: having seen "... q k ..." once, at the next
"q" it attends to the "k" that followed the earlier "q", and copies it. It takes
two layers: a previous-token head in layer 1 writes "the token before me was q"
into the position of "k"; a head in layer 2 then looks, from the current "q",
for the position whose previous token was "q".
"""

# --8<-- [start:imports]
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.attention import CausalSelfAttention
from snippets.pages.tasks import repeated_tokens  # the copy task's rows

# --8<-- [end:imports]

__all__ = [
    "InductionConfig",
    "AttentionOnly",
    "repeated_tokens",
    "train_induction",
    "induction_scores",
    "previous_token_scores",
    "uniform_induction_score",
]


# --8<-- [start:config]
@dataclasses.dataclass(frozen=True)
class InductionConfig:
    """The model's sizes, the data's periods and the run, checked when made.

    Raises:
        ValueError: a size is not a positive int, or the periods do not satisfy
            2 <= min_period <= max_period <= vocab_size.
    """

    vocab_size: int = 26  # V: shown as the letters a-z
    context_length: int = 32  # T
    n_embed: int = 64  # C
    n_head: int = 4  # H per layer
    n_layer: int = 2  # L: an induction head needs two
    # Each training row repeats a segment of distinct tokens whose length (the
    # period) is drawn from [min_period, max_period]. A fixed period would let a
    # head find the earlier copy by position alone, with no induction at all.
    min_period: int = 4
    max_period: int = 16
    batch_size: int = 32
    steps: int = 300  # induction appears after 150-250 steps
    lr: float = 3e-3
    seed: int = 0

    def __post_init__(self):
        sizes = ("vocab_size", "context_length", "n_embed", "n_head", "n_layer")
        for name in sizes + ("batch_size", "steps"):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ValueError(f"{name} ({value!r}) must be a positive int")
        if not 2 <= self.min_period <= self.max_period <= self.vocab_size:
            raise ValueError(
                f"periods must satisfy 2 <= min_period ({self.min_period}) "
                f"<= max_period ({self.max_period}) <= vocab_size "
                f"({self.vocab_size}): a period holds distinct tokens"
            )


# --8<-- [end:config]


# --8<-- [start:model]
class AttentionOnly(nn.Module):
    """Embeddings, L attention layers added to the stream, a final LayerNorm and
    an unembedding: a transformer without MLPs, so attention does all the work.

    Args:
        config: gives V, T, C, H and L.
    """

    def __init__(self, config: InductionConfig):
        super().__init__()
        self.config = config
        V, T, C = config.vocab_size, config.context_length, config.n_embed
        self.tok_emb = nn.Embedding(V, C)
        self.pos_emb = nn.Embedding(T, C)  # a previous-token head needs positions
        self.layers = nn.ModuleList(
            CausalSelfAttention(config.n_head, C, T) for _ in range(config.n_layer)
        )
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Next-token scores, and every head's attention weights to look at.

        Args:
            idx: token ids (B, T).

        Returns:
            logits (B, T, V) and the attention weights (B, L, H, T, T).
        """
        T = idx.size(1)
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))  # (B, T, C)
        weights = []
        for attn in self.layers:
            # The readable path, which keeps the weights: we want to look at them.
            out, w = attn(x, return_weights=True)  # (B, T, C), (B, H, T, T)
            x = x + out
            weights.append(w)
        logits = self.lm_head(self.ln_f(x))  # (B, T, C) -> (B, T, V)
        # L x (B, H, T, T) -> (B, L, H, T, T)
        return logits, torch.stack(weights, dim=1)


# --8<-- [end:model]


# --8<-- [start:train]
def train_induction(config: InductionConfig) -> tuple[AttentionOnly, list[float]]:
    """An AttentionOnly model trained on repeated tokens, seeded by config.seed.

    Args:
        config: the model, the data and the run.

    Returns:
        The trained model, in eval mode, and the training loss at every step
            (config.steps floats).
    """
    torch.manual_seed(config.seed)  # the initial weights
    generator = torch.Generator().manual_seed(config.seed)  # the batches
    model = AttentionOnly(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    T, V = config.context_length, config.vocab_size
    losses = []
    for _ in range(config.steps):
        batch = repeated_tokens(
            config.batch_size,
            T + 1,
            V,
            config.min_period,
            config.max_period,
            generator,
        )  # (B, T + 1)
        x, y = batch[:, :-1], batch[:, 1:]  # (B, T) each: y is x shifted by one
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model.eval(), losses


# --8<-- [end:train]


# --8<-- [start:scores]
def induction_scores(weights: torch.Tensor, period: int) -> torch.Tensor:
    """Per head: the mean weight from a token of a later repeat to the token that
    followed its previous occurrence, period - 1 positions back.

    Args:
        weights: (B, L, H, T, T) attention weights on rows that repeat with this
            period (repeated_tokens with min_period = period).
        period: the length of the repeated segment.

    Returns:
        (L, H) scores in [0, 1]; 1 means all of the attention goes there.
    """
    T = weights.size(-1)
    if not 1 <= period < T:
        raise ValueError(f"period ({period}) must be in [1, T) with T={T}")
    t = torch.arange(period, T)  # the queries in the later repeats
    # weights[..., t, t - period + 1] pairs query t with key t - period + 1.
    return weights[..., t, t - period + 1].mean(dim=(0, -1))  # (L, H)


def previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """Per head: the mean weight from each position to the one just before it.

    Args:
        weights: (B, L, H, T, T) attention weights.

    Returns:
        (L, H) scores in [0, 1].
    """
    T = weights.size(-1)
    t = torch.arange(1, T)
    return weights[..., t, t - 1].mean(dim=(0, -1))  # (L, H)


def uniform_induction_score(period: int, T: int) -> float:
    """The induction score of a head that spreads its attention evenly: query t
    sees t + 1 keys, so it gives 1 / (t + 1) to the one that matters.

    Args:
        period: the length of the repeated segment.
        T: the sequence length.

    Returns:
        The mean of 1 / (t + 1) over the queries t in [period, T).

    Raises:
        ValueError: unless 1 <= period < T.
    """
    if not 1 <= period < T:
        raise ValueError(f"period ({period}) must be in [1, T) with T={T}")
    queries = range(period, T)
    return sum(1 / (t + 1) for t in queries) / len(queries)


# --8<-- [end:scores]
