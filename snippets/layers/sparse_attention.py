"""Sparse attention: each query reads only the keys a cheap score picks.

Two ways to pick, both as a boolean mask over keys (True: attend), both causal:

- DeepSeek Sparse Attention (DeepSeek-AI 2025, DeepSeek-V3.2-Exp): a small
  "lightning indexer" scores every earlier key for every query,
  I[t, s] = sum_j w[t, j] * ReLU(q[t, j] . k[s]), and each query keeps its
  top_k keys. Every head of the main attention uses the same selection.
- MoBA (Lu et al. 2025, arXiv:2502.13189): keys in blocks of block_size; a query
  scores each earlier block by its dot product with the block's mean key and
  keeps its top_k blocks, its own block always among them.

Shape letters: B batch, T sequence length, C channels, H heads, D head size, I
indexer heads, E the indexer's head size, n blocks.
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn
import torch.nn.functional as F

# --8<-- [end:imports]
# --8<-- [start:check_imports]
from snippets.core.checks import check_qkv, check_shape

# --8<-- [end:check_imports]

__all__ = [
    "LightningIndexer",
    "index_scores",
    "topk_mask",
    "topk_indices",
    "moba_mask",
    "masked_attention",
    "gather_attention",
]


# --8<-- [start:checks]
def _check_k(name: str, value) -> None:
    """A count (top_k, block_size, a size) must be a positive int; else name it."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} ({value!r}) must be a positive int")


# --8<-- [end:checks]


# --8<-- [start:indexer]
class LightningIndexer(nn.Module):
    """Scores (B, T, T): how much query t wants key s, for the top-k choice.

    I small heads of width E, each with its own query, and one key per position
    shared by all heads (as in DeepSeek-V3.2-Exp); a weight per head and query,
    w = weights(x), says how much each head counts. ReLU, not softmax: a head
    that finds nothing adds zero. The scale factors are those of DeepSeek's code.

    Args:
        n_head: I, indexer heads (64 in DeepSeek-V3.2-Exp).
        n_embed: C, the width of the input.
        head_size: E, their width (128 there).
    """

    def __init__(self, n_head: int, n_embed: int, head_size: int):
        super().__init__()
        for name, value in (
            ("n_embed", n_embed),
            ("n_head", n_head),
            ("head_size", head_size),
        ):
            _check_k(name, value)
        self.n_head, self.head_size = n_head, head_size
        self.q = nn.Linear(n_embed, n_head * head_size, bias=False)
        self.k = nn.Linear(n_embed, head_size, bias=False)  # one key for all heads
        self.weights = nn.Linear(n_embed, n_head, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) -> scores (B, T, T); the causal mask is topk_mask's job."""
        B, T, _ = check_shape("x", x, "B T C", C=self.q.in_features)
        q = self.q(x).view(B, T, self.n_head, self.head_size)  # (B, T, I, E)
        k = self.k(x)  # (B, T, E)
        w = self.weights(x) * (self.n_head * self.head_size) ** -0.5  # (B, T, I)
        return index_scores(q, k, w)


def index_scores(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The indexer's score core: sum_j w[t, j] * ReLU(q[t, j] . k[s]).

    q (B, Tn, I, E) the queries of I heads, k (B, Ta, E) one key per position,
    w (B, Tn, I) the heads' weights, scale included -> scores (B, Tn, Ta).
    """
    scores = q.new_zeros(q.size(0), q.size(1), k.size(1))
    for j in range(q.size(2)):  # one (Tn, Ta) at a time, not (Tn, Ta, I)
        hit = torch.relu(q[:, :, j] @ k.transpose(1, 2))  # (B, Tn, Ta)
        scores += w[:, :, j, None] * hit
    return scores


# --8<-- [end:indexer]


# --8<-- [start:topk]
def topk_indices(scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """The top_k earlier keys of each query by score: (B, T, T) -> (B, T, top_k).

    Later keys are excluded before the choice. A query with fewer than top_k
    earlier keys (t + 1 < top_k) also gets some later ones, scored -inf: the
    caller masks them again (topk_mask does; gather_attention does).

    Raises:
        ValueError: top_k is not a positive int, or scores is not (B, T, T).
    """
    _check_k("top_k", top_k)
    _, _, T = check_shape("scores", scores, "B T T")  # square: T queries, T keys
    causal = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
    scores = scores.masked_fill(~causal, -torch.inf)
    return scores.topk(min(top_k, T), dim=-1).indices


def topk_mask(scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """Mask (B, T, T): True where key s is among query t's top_k earlier keys.

    top_k >= T keeps every earlier key: the causal mask, dense attention.
    """
    T = scores.size(-1)
    chosen = torch.zeros_like(scores, dtype=torch.bool)
    chosen.scatter_(-1, topk_indices(scores, top_k), True)
    causal = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
    return chosen & causal


# --8<-- [end:topk]


# --8<-- [start:moba]
def moba_mask(
    q: torch.Tensor, k: torch.Tensor, block_size: int, top_k: int
) -> torch.Tensor:
    """MoBA's choice as a mask (B, H, T, T): each head picks its own blocks.

    Block b's score for query t: q_t . mean(keys of block b). Blocks that start
    after t are out; t's own block is always in (its causal part only); of the
    blocks wholly before t's, the best top_k - 1 join it.

    Args:
        q: queries (B, H, T, D).
        k: keys (B, H, T, D).
        block_size: keys per block; must divide T.
        top_k: blocks per query, its own included (a positive int).

    Raises:
        ValueError: top_k or block_size is not a positive int, q is not
            (B, H, T, D), k not of q's shape, or block_size does not divide T.
    """
    _check_k("top_k", top_k)
    _check_k("block_size", block_size)
    B, H, T, D = check_shape("q", q, "B H T D")
    check_shape("k", k, "B H T D", B=B, H=H, T=T, D=D)  # a key for each query
    if T % block_size:
        raise ValueError(f"block_size ({block_size}) must divide T ({T})")
    n = T // block_size
    pooled = k.reshape(B, H, n, block_size, D).mean(dim=3)  # (B, H, n, D)
    gate = q @ pooled.transpose(-1, -2)  # (B, H, T, n)
    own = torch.arange(T, device=q.device) // block_size  # (T,) each query's block
    blocks = torch.arange(n, device=q.device)
    gate = gate.masked_fill(blocks > own[:, None], -torch.inf)  # later blocks out
    gate = gate.masked_fill(blocks == own[:, None], torch.inf)  # own block in
    best = gate.topk(min(top_k, n), dim=-1).indices  # (B, H, T, top_k)
    chosen = torch.zeros_like(gate, dtype=torch.bool).scatter_(-1, best, True)
    chosen &= blocks <= own[:, None]  # a later block picked to fill top_k: out
    keys = chosen.repeat_interleave(block_size, dim=-1)  # (B, H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    return keys & causal


# --8<-- [end:moba]


# --8<-- [start:attend]
def masked_attention(q, k, v, mask: torch.Tensor) -> torch.Tensor:
    """Softmax attention restricted to the mask's keys: q, k, v (B, H, T, D).

    mask: (B, T, T) shared by the heads (the indexer's), or (B, H, T, T) (MoBA's).
    This still computes every score and throws most away: it shows what is
    attended, gather_attention shows what it saves.
    """
    if mask.dim() == 3:
        mask = mask[:, None]  # (B, 1, T, T): one selection for every head
    check_qkv(q, k, v, mask)  # a bool mask that fits the scores (B, H, T, T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def gather_attention(q, k, v, indices: torch.Tensor) -> torch.Tensor:
    """Attention of each query on its top_k keys only: O(T * top_k), not O(T^2).

    q, k, v (B, H, T, D); indices (B, T, top_k) from topk_indices. The chosen
    keys and values are copied out, (B, H, T, top_k, D), and each query's scores
    are top_k dot products; keys after the query (chosen only to fill top_k)
    are masked.
    """
    B, H, T, D = k.shape
    flat = indices.reshape(B, 1, -1, 1).expand(B, H, -1, D)  # (B, H, T * top_k, D)
    keys = k.gather(2, flat).view(B, H, T, -1, D)  # (B, H, T, top_k, D)
    values = v.gather(2, flat).view(B, H, T, -1, D)
    scores = torch.einsum("bhtd,bhtkd->bhtk", q, keys) * D**-0.5
    later = indices > torch.arange(T, device=q.device)[:, None]  # (B, T, top_k)
    scores = scores.masked_fill(later[:, None], -torch.inf)
    return torch.einsum("bhtk,bhtkd->bhtd", scores.softmax(dim=-1), values)


# --8<-- [end:attend]
