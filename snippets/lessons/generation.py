"""The KV cache as the generation page builds it: the attention page's batched layer
and the transformer page's Block and GPT, copied, with the lines that keep and read
every layer's keys and values; and a greedy generate that reads the prompt once.

Plain torch, and only what those pages and the generation page explain: learned
positions, one cache per layer with one verb, `update`. Shape letters: B batch,
T new positions, S all positions (the cached ones and the new), C channels,
H heads, D head size (C // H), V vocabulary size.
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.lessons.transformer import MLP, GPTConfig

# --8<-- [end:imports]

__all__ = [
    "LayerCache",
    "CausalSelfAttention",
    "Block",
    "GPT",
    "new_cache",
    "generate",
]


# --8<-- [start:layer_cache]
class LayerCache:
    """One layer's keys and values of every position so far, (B, H, seen, D)."""

    def __init__(self):
        self.k = self.v = None
        self.seen = 0  # positions cached: the next new one is position `seen`

    def update(self, k, v):
        """Append the new positions' keys and values (B, H, T, D); return all."""
        if self.k is not None:
            # cat copies what is cached at every step: simple, not fast.
            k = torch.cat([self.k, k], dim=2)  # (B, H, seen + T, D)
            v = torch.cat([self.v, v], dim=2)  # (B, H, seen + T, D)
        self.k, self.v, self.seen = k, v, k.size(2)
        return k, v  # (B, H, S, D) each


# --8<-- [end:layer_cache]


# --8<-- [start:attention]
class CausalSelfAttention(nn.Module):
    """What MultiHeadAttention computes, with all heads in one batched matmul."""

    def __init__(self, n_head: int, n_embed: int):
        super().__init__()
        self.n_head = n_head
        # One (C -> 3C) matmul instead of 3H small ones. Output channels: [0, C)
        # queries, [C, 2C) keys, [2C, 3C) values; in each, H heads of D channels.
        self.qkv = nn.Linear(n_embed, 3 * n_embed, bias=False)
        self.proj = nn.Linear(n_embed, n_embed)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=-1)  # (B, T, 3C) -> 3 x (B, T, C)
        # Split channels into heads, move H next to B: each head is a batch entry.
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        k = k.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        v = v.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        if cache is not None:  # the earlier positions' keys and values, then these
            k, v = cache.update(k, v)  # (B, H, T, D) -> (B, H, S, D)
        S = k.size(2)
        # The T queries are the last T of S positions: the causal mask's last T
        # rows (aligned bottom right). Without a cache S = T: the full mask.
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
        # One fused kernel: scores, causal mask, softmax and weighted sum.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B,H,T,D)
        # Heads back side by side, the channel layout of MultiHeadAttention's cat.
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)  # (B, T, C)


# --8<-- [end:attention]


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

    def forward(self, x, cache=None):
        # Each sublayer reads a normalised copy of the stream and adds its result;
        # the stream itself is never normalised on the way through.
        x = x + self.drop(self.attn(self.ln1(x), cache))  # positions exchange info
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

    def forward(self, idx, targets=None, cache=None):
        B, T = idx.shape
        start = cache[0].seen if cache else 0  # idx follows the cached positions
        positions = torch.arange(start, start + T, device=idx.device)  # (T,)
        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, C)
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, cache[i] if cache else None)  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, C) -> (B, T, V)
        loss = None
        if targets is not None:  # the objectives page: cross-entropy per position
            V = logits.size(-1)
            loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
        return logits, loss


# --8<-- [end:gpt]


# --8<-- [start:generate]
def new_cache(model: GPT) -> list[LayerCache]:
    """An empty cache for each of the model's layers."""
    return [LayerCache() for _ in model.blocks]


@torch.no_grad()
def generate(model: GPT, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy: idx (B, T) followed by its max_new_tokens most likely next ids.

    The prompt goes through the model once (the prefill), then each new token
    alone, its query reading the cached keys and values of all before it.

    Raises:
        ValueError: the prompt and the new tokens do not fit in context_length.
    """
    T, limit = idx.size(1) + max_new_tokens, model.config.context_length
    if T > limit:
        raise ValueError(
            f"T={T} exceeds context_length={limit}: the prompt's {idx.size(1)} "
            f"tokens and {max_new_tokens} new ones make a text longer than the "
            f"position table's {limit} rows"
        )
    cache = new_cache(model)
    new = idx  # what the model has not read yet: first the whole prompt
    for _ in range(max_new_tokens):
        logits, _ = model(new, cache=cache)  # (B, T_new, V)
        new = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1): the next token
        idx = torch.cat([idx, new], dim=1)  # (B, T + 1)
    return idx


# --8<-- [end:generate]
