"""GLM-5-Next's indexer: DSA's, scoring pools of keys instead of single keys.

It extends sparse_mla.py's DSAIndexer, and plugs into its SparseLatentAttention
as layer.indexer. The indexer's keys are cut into consecutive pools of P
positions (0 .. P - 1, P .. 2P - 1, ...); each complete pool is one entry: the
average of its P keys, channel by channel, with weights softmax over the pool of
(a gate score of each position, from x, plus a learned score of each place in
the pool). Each query scores the pools it sees whole (their last position at or
before its own), keeps its top_k / P best, and attends to all their positions,
plus (tail=True) the positions of its own pool not yet complete. Scoring costs
Ta / P entries, not Ta; the keys kept per position are the key and its gate
score.

Shape letters: B batch, Tn new positions, Ta attended, E the indexer's head
size, P the pool size, Np the complete pools.
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn

from snippets.core.checks import check_positive_int, check_shape
from snippets.layers.sparse_mla import DSAIndexer, IndexerSpec, choose

# --8<-- [end:imports]

__all__ = ["pool_keys", "pool_choice", "PooledIndexer"]


# --8<-- [start:pool]
def pool_keys(
    keys: torch.Tensor, gates: torch.Tensor, place: torch.Tensor
) -> torch.Tensor:
    """keys, gates (B, Ta, E), place (P, E) -> (B, Ta // P, E): each complete
    pool's keys averaged per channel, weights softmax over the pool of
    gates + place. An incomplete last pool is left out."""
    P, E = place.shape
    B, Ta, _ = check_shape("keys", keys, "B T E", E=E)
    check_shape("gates", gates, "B T E", B=B, T=Ta, E=E)
    n = Ta // P
    k = keys[:, : n * P].reshape(B, n, P, E)
    w = (gates[:, : n * P].reshape(B, n, P, E) + place).softmax(dim=2)
    return (w * k).sum(dim=2)


def pool_choice(scores, allowed, pool: int, top_k: int, tail: bool = True):
    """scores (B, Tn, Np) of the complete pools, allowed (Tn, Ta) the causal
    mask -> chosen (B, Tn, Ta): the positions of each query's top_k // pool
    best pools among those it sees whole, and (tail) those of its own
    incomplete pool."""
    check_positive_int("pool", pool)
    B, Tn, Np = scores.shape
    Ta = allowed.size(-1)
    if Np != Ta // pool:
        raise ValueError(f"scores has {Np} pools, not Ta // pool = {Ta // pool}")
    ends = torch.arange(Np, device=scores.device) * pool + pool - 1
    seen_whole = allowed[:, ends]  # (Tn, Np): the pool's last position visible
    pools = choose(scores, seen_whole, top_k // pool) if Np else scores.bool()
    chosen = pools.repeat_interleave(pool, dim=-1)  # (B, Tn, Np * pool)
    chosen = torch.cat([chosen, chosen.new_zeros(B, Tn, Ta - Np * pool)], -1)
    if tail:
        seen = allowed.sum(-1, keepdim=True)  # (Tn, 1): positions 0 .. seen - 1
        start = seen - seen % pool
        own = allowed & (torch.arange(Ta, device=allowed.device) >= start)
        chosen = chosen | own
    return chosen & allowed


# --8<-- [end:pool]


# --8<-- [start:indexer]
class PooledIndexer(DSAIndexer):
    """DSAIndexer over pools of `pool` keys (GLM-5-Next's index_kpool).

    keys() gives what a cache keeps per position: [key | gate score] (2E);
    choose() the positions each query attends to.
    """

    def __init__(
        self,
        spec: IndexerSpec,
        n_embed: int,
        q_rank: int,
        rope,
        *,
        pool: int,
        tail=True,
    ):
        super().__init__(spec, n_embed, q_rank, rope)
        check_positive_int("pool", pool)
        if spec.top_k % pool:
            raise ValueError(
                f"top_k ({spec.top_k}) must be a multiple of pool ({pool})"
            )
        self.pool, self.tail = pool, bool(tail)
        E = spec.head_size
        self.gate = nn.Linear(
            n_embed, E, bias=False
        )  # a score per channel and position
        self.place = nn.Parameter(torch.zeros(pool, E))

    def keys(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x (B, T, C) -> (B, T, 2E): the normed key and the gate score."""
        return torch.cat([super().keys(x, offset), self.gate(x)], dim=-1)

    def choose(self, x, latent, keys, offset: int, allowed) -> torch.Tensor:
        """The positions each query attends to, (B, Tn, Ta)."""
        E = self.spec.head_size
        pooled = pool_keys(keys[..., :E], keys[..., E:], self.place)
        scores = self(x, latent, pooled, offset)  # (B, Tn, Np)
        return pool_choice(scores, allowed, self.pool, self.spec.top_k, self.tail)


# --8<-- [end:indexer]
