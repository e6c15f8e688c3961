"""Text from a trained GPT: greedy decoding, temperature, top-k, top-p, a KV cache.

Needs torch and snippets/model.py (and snippets/train.py, to load its
checkpoints). The command line and the KV-cache benchmark are lab/generate.py:
`python -m lab.generate --help`. Shape letters: B batch, T sequence length,
C channels, H heads, D head size, V vocabulary size, L layers.
"""

# --8<-- [start:imports]
from pathlib import Path

import torch
import torch.nn.functional as F

from snippets.attention import CausalSelfAttention, alibi_mask, apply_position
from snippets.kv_heads import GroupedQueryAttention, MultiHeadLatentAttention
from snippets.linear_attention import GatedDeltaNet
from snippets.linear_cache import LinearState
from snippets.model import GPT

# --8<-- [end:imports]

__all__ = [
    "check_sampling",
    "next_token_probs",
    "pick_next",
    "KVCache",
    "forward_with_cache",
    "stream",
    "generate",
    "load_model",
]


# --8<-- [start:check_sampling]
def check_sampling(
    temperature: float, top_k: int | None, top_p: float | None
) -> None:
    """Reject settings that mean nothing, naming the argument, value and rule.

    Args:
        temperature: a number > 0.
        top_k: None, or an int >= 1.
        top_p: None, or a float in (0, 1].

    Raises:
        TypeError: temperature is not a number, or top_k not an int.
        ValueError: a value is outside its range.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature ({temperature!r}) must be a number")
    if not temperature > 0:  # also catches nan
        raise ValueError(
            f"temperature ({temperature}) must be > 0: the logits are divided by "
            f"it; for the most likely token every time, use greedy=True"
        )
    if top_k is not None and (
        isinstance(top_k, bool) or not isinstance(top_k, int)
    ):
        raise TypeError(f"top_k ({top_k!r}) must be an int or None")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k ({top_k}) must be >= 1: keep at least one token")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(
            f"top_p ({top_p}) must be in (0, 1]: the share of probability to keep"
        )


# --8<-- [end:check_sampling]


# --8<-- [start:next_token_probs]
def next_token_probs(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """The distribution to sample the next token from: logits (B, V) -> (B, V).

    Temperature first, then top-k, then top-p, each narrowing what is left.

    Args:
        logits: scores (B, V) of the next token.
        temperature: the logits are divided by it; > 0.
        top_k: keep the k most likely tokens (ties stay); None keeps all.
        top_p: keep the most likely tokens whose probabilities add up to top_p;
            None keeps all.

    Returns:
        Probabilities (B, V), each row summing to 1.
    """
    check_sampling(temperature, top_k, top_p)
    # Below 1, dividing stretches the gaps between logits: softmax gets peakier.
    # Above 1 it shrinks them: the distribution flattens towards uniform.
    logits = logits / temperature  # (B, V)
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1): k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))  # ties stay
    probs = logits.softmax(dim=-1)  # (B, V)
    if top_p is not None and top_p < 1:
        # The nucleus: the most likely tokens whose probabilities add up to top_p.
        sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V) each
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass ahead of each
        # A token stays if the tokens ahead of it hold less than top_p: the
        # first always stays, and the one that crosses top_p is kept too.
        sorted_probs = sorted_probs.masked_fill(before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)  # unsort
        probs = probs / probs.sum(dim=-1, keepdim=True)  # renormalise to 1
    return probs


# --8<-- [end:next_token_probs]


# --8<-- [start:pick_next]
def pick_next(
    logits: torch.Tensor,
    *,
    greedy: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The next token of each row: logits (B, V) -> ids (B, 1).

    Args:
        logits: scores (B, V) of the next token.
        greedy: take the most likely token, with no sampling options.
        temperature: as next_token_probs takes it.
        top_k: as next_token_probs takes it.
        top_p: as next_token_probs takes it.
        generator: the source of the draws; None uses torch's global one.

    Returns:
        Token ids (B, 1).

    Raises:
        ValueError: greedy with a sampling option, or a bad sampling option.
    """
    if greedy:
        if (temperature, top_k, top_p) != (1.0, None, None):
            raise ValueError(
                "greedy=True takes the most likely token: temperature, top_k and "
                "top_p would change nothing, leave them out"
            )
        return logits.argmax(dim=-1, keepdim=True)  # (B, V) -> (B, 1)
    probs = next_token_probs(logits, temperature, top_k, top_p)  # (B, V)
    return torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)


# --8<-- [end:pick_next]


# --8<-- [start:kv_cache]
class KVCache:
    """What every layer must keep of the positions computed so far.

    Keys and values, (L, B, G, T_max, D) each, where G is the number of key/value
    heads (H without sharing); or, for attention="mla", the latents,
    (L, B, T_max, R). T_max is the longest sequence the model accepts
    (context_length, or max_length if set). Allocated once and filled in place:
    appending never copies what is already there.

    Args:
        model: gives L, the heads, D or R, T_max, the dtype and the device.
        batch_size: B.
    """

    def __init__(self, model: GPT, batch_size: int):
        config = model.config
        L, T_max = config.n_layer, config.longest
        D = config.n_embed // config.n_head
        weight = model.lm_head.weight
        like = {"dtype": weight.dtype, "device": weight.device}
        if config.attention == "mla":
            R = config.kv_latent
            self.latent = torch.zeros(L, batch_size, T_max, R, **like)
        else:
            G = config.n_kv_head or config.n_head  # None: one per query head
            self.k = torch.zeros(L, batch_size, G, T_max, D, **like)
            self.v = torch.zeros_like(self.k)
        # A Gated DeltaNet block (layer_types) keeps a fixed-size state instead;
        # its rows of k and v stay empty.
        self.linear = {
            i: LinearState(block.attn, batch_size)
            for i, block in enumerate(model.blocks)
            if isinstance(block.attn, GatedDeltaNet)
        }
        self.length = 0  # positions 0 .. length - 1 are filled
        self.capacity = T_max
        # Named in the error of a full cache: the field that set the capacity.
        self.limit = "max_length" if config.max_length else "context_length"

    def tensors(self) -> list[torch.Tensor]:
        """Everything the cache holds (for counting its bytes)."""
        states = [t for state in self.linear.values() for t in state.tensors()]
        if hasattr(self, "latent"):
            return [self.latent, *states]
        return [self.k, self.v, *states]


def attend_with_cache(
    attn: CausalSelfAttention | GroupedQueryAttention | MultiHeadLatentAttention,
    x: torch.Tensor,
    cache: KVCache,
    layer: int,
) -> torch.Tensor:
    """attn(x) for new positions only: x (B, T_new, C) -> (B, T_new, C).

    The new positions' keys and values (or latents) go into the cache; their
    queries attend to every position in it: all earlier ones and their own.

    Args:
        attn: the layer, whose weights are used.
        x: the layer's input (B, T_new, C) at the new positions.
        cache: what earlier positions left; written to.
        layer: the index of this layer in the cache.

    Returns:
        (B, T_new, C), what attn would give at those positions.
    """
    B, T_new, C = x.shape
    start, end = cache.length, cache.length + T_new
    if isinstance(attn, MultiHeadLatentAttention):
        cache.latent[layer, :, start:end] = attn.latent(x)  # (B, T_new, R)
        # Read the latents as they are, without projecting them up to keys.
        return attn.attend_absorbed(x, cache.latent[layer, :, :end])
    if isinstance(attn, CausalSelfAttention):  # its layout is GQA's with G = H
        H = G = attn.n_head
    else:
        H, G = attn.n_head, attn.n_kv_head
    D = C // H
    q, k, v = attn.qkv(x).split([H * D, G * D, G * D], dim=-1)
    q = q.view(B, T_new, H, D).transpose(1, 2)  # (B, H, T_new, D)
    k = k.view(B, T_new, G, D).transpose(1, 2)  # (B, G, T_new, D)
    # RoPE turns the new queries and keys to their own positions, start onwards;
    # cached keys were turned when they were new and stay as they are.
    q, k = apply_position(q, k, attn.position, offset=start)
    cache.k[layer, :, :, start:end] = k
    cache.v[layer, :, :, start:end] = v.view(B, T_new, G, D).transpose(1, 2)
    keys = cache.k[layer, :, :, :end]  # (B, G, end, D)
    values = cache.v[layer, :, :, :end]  # (B, G, end, D)
    if attn.position == "alibi":
        # Rows start .. end - 1 of the (H, end, end) bias, causal part included.
        mask = alibi_mask(H, T_new, end).to(device=x.device, dtype=q.dtype)
    elif T_new == 1:
        mask = None  # the newest position may see every position
    else:
        # New position start + i sees keys 0 .. start + i: the causal mask,
        # shifted right by the cached positions. (T_new, end) bool.
        mask = torch.ones(T_new, end, dtype=torch.bool, device=x.device)
        mask = mask.tril(diagonal=start)
    # enable_gqa: query head h reads key/value head h // (H // G).
    y = F.scaled_dot_product_attention(
        q, keys, values, attn_mask=mask, enable_gqa=True
    )  # (B, H, T_new, D)
    y = y.transpose(1, 2).contiguous().view(B, T_new, C)  # (B, T_new, C)
    return attn.proj(y)


@torch.no_grad()
def forward_with_cache(model: GPT, idx: torch.Tensor, cache: KVCache):
    """model(idx)[0] for tokens at positions cache.length onwards, from the cache.

    The same steps as GPT.forward and Block.forward, written with the model's own
    modules; the tests check that the logits are the ones a full forward pass
    computes.

    Args:
        model: a GPT with attention="fused".
        idx: token ids (B, T_new) at positions cache.length onwards.
        cache: the keys and values of earlier positions; extended.

    Returns:
        logits (torch.Tensor): (B, T_new, V).

    Raises:
        ValueError: the new positions do not fit into context_length.
    """
    B, T_new = idx.shape
    if cache.length + T_new > cache.capacity:
        raise ValueError(
            f"{cache.length} cached + {T_new} new positions exceed "
            f"{cache.limit}={cache.capacity}"
        )
    x = model.drop(model.embed(idx, start=cache.length))  # (B, T_new, C)
    for layer, block in enumerate(model.blocks):
        if layer in cache.linear:  # a Gated DeltaNet block: its state moves on
            attention = cache.linear[layer].step(block.attn, block.ln1(x))
        else:
            attention = attend_with_cache(block.attn, block.ln1(x), cache, layer)
        x = x + block.drop(attention)
        x = x + block.mlp(block.ln2(x))  # (B, T_new, C)
    cache.length += T_new
    return model.lm_head(model.ln_f(x))  # (B, T_new, C) -> (B, T_new, V)


# --8<-- [end:kv_cache]


# --8<-- [start:stream]
def _check_generate_args(model: GPT, idx: torch.Tensor, max_new_tokens: int):
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.size(1) == 0:
        got = tuple(idx.shape) if isinstance(idx, torch.Tensor) else type(idx)
        raise ValueError(f"idx must be (B, T) token ids with T >= 1, got {got}")
    if type(max_new_tokens) is not int or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens ({max_new_tokens!r}) must be an int >= 0")


@torch.no_grad()
def stream(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    kv_cache: bool = True,
    **sampling,
):
    """Yield max_new_tokens new tokens, (B, 1) each, continuing the ids idx (B, T).

    Only the last context_length tokens are fed to the model: the position table
    has no row for more.

    Args:
        model: a GPT; with kv_cache, one with attention="fused".
        idx: the prompt, token ids (B, T) with T >= 1.
        max_new_tokens: how many tokens to yield, >= 0.
        kv_cache: reuse earlier positions' keys and values (KVCache) instead of
            running the whole context again for every token.
        **sampling (Any): greedy, temperature, top_k, top_p, generator, as pick_next
            takes them.

    Yields:
        next_id (torch.Tensor): the next token ids (B, 1).

    Raises:
        TypeError: model is not a GPT, or kv_cache with per-head attention.
        ValueError: idx is not (B, T), max_new_tokens is negative, or a sampling
            option is bad.
    """
    _check_generate_args(model, idx, max_new_tokens)
    if not sampling.get("greedy"):  # fail before the first forward pass
        check_sampling(
            sampling.get("temperature", 1.0),
            sampling.get("top_k"),
            sampling.get("top_p"),
        )
    T_max = model.config.context_length
    was_training = model.training
    model.eval()  # no dropout while generating
    try:
        if not kv_cache:
            for _ in range(max_new_tokens):
                logits, _ = model(idx[:, -T_max:])  # (B, T, V), T <= T_max
                next_id = pick_next(logits[:, -1], **sampling)  # (B, 1)
                idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
                yield next_id
            return
        if model.config.attention == "per-head":
            raise TypeError(
                "kv_cache=True needs attention='fused' or 'mla'; convert a "
                "per-head model with GPT.from_per_head(model), or pass "
                "kv_cache=False"
            )
        cache = KVCache(model, idx.size(0))
        logits = forward_with_cache(model, idx[:, -T_max:], cache)  # the prompt
        for i in range(max_new_tokens):
            next_id = pick_next(logits[:, -1], **sampling)  # (B, 1)
            idx = torch.cat([idx, next_id], dim=1)
            yield next_id
            if i == max_new_tokens - 1:
                break  # nobody needs the logits after the last token
            if cache.length < T_max:
                logits = forward_with_cache(model, next_id, cache)  # one position
            else:
                # Full. With learned absolute positions, dropping the oldest
                # token moves every other one to a new position: all their
                # keys and values change. Start again from the cropped context.
                cache = KVCache(model, idx.size(0))  # and fresh linear states
                logits = forward_with_cache(model, idx[:, -T_max:], cache)
    finally:
        model.train(was_training)


def generate(
    model: GPT, idx: torch.Tensor, max_new_tokens: int, **options
) -> torch.Tensor:
    """idx (B, T) followed by max_new_tokens generated ids: (B, T + new).

    Args:
        model: a GPT.
        idx: the prompt, token ids (B, T).
        max_new_tokens: how many tokens to add.
        **options (Any): kv_cache and the sampling options, as stream takes them.

    Returns:
        Token ids (B, T + max_new_tokens).
    """
    new = list(stream(model, idx, max_new_tokens, **options))
    return torch.cat([idx, *new], dim=1)


# --8<-- [end:stream]


# ------------------------------------------------------------------ a checkpoint


def load_model(checkpoint: Path) -> tuple[GPT, str]:
    """The model of a snippets.train checkpoint, and its tokenizer's characters.

    Args:
        checkpoint: a ckpt.pt written by snippets.train.train.

    Returns:
        The GPT in eval mode, and the characters of its CharTokenizer.
    """
    from snippets.train import TrainConfig

    state = torch.load(checkpoint, weights_only=True)
    config = TrainConfig(**state["config"])
    model = GPT(config.model_config(len(state["chars"])))
    model.load_state_dict(state["model"])
    return model.eval(), state["chars"]
