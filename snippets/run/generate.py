"""Text from a trained GPT: greedy decoding, temperature, top-k, top-p, a KV cache.

The command line and the KV-cache benchmark are lab/generate.py:
`python -m lab.generate --help`. Shape letters: B batch, T sequence length,
C channels, H heads, D head size, V vocabulary size, L layers.
"""

# --8<-- [start:imports]
from pathlib import Path

import torch

from snippets.core.cache import ModelCache
from snippets.core.model import GPT, check_ids

# --8<-- [end:imports]

__all__ = [
    "check_sampling",
    "next_token_probs",
    "pick_next",
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


# --8<-- [start:stream]
def _check_generate_args(model: GPT, idx: torch.Tensor, max_new_tokens: int):
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.size(1) == 0:
        got = tuple(idx.shape) if isinstance(idx, torch.Tensor) else type(idx)
        raise ValueError(f"idx must be (B, T) token ids with T >= 1, got {got}")
    if type(max_new_tokens) is not int or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens ({max_new_tokens!r}) must be an int >= 0")
    check_ids(idx, model.config.vocab_size)  # once: the forward passes do not


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
        model: a GPT; with kv_cache, one whose layers keep a cache.
        idx: the prompt, token ids (B, T) with T >= 1.
        max_new_tokens: how many tokens to yield, >= 0.
        kv_cache: reuse earlier positions' keys and values (a ModelCache)
            instead of running the whole context again for every token.
        **sampling (Any): greedy, temperature, top_k, top_p, generator, as pick_next
            takes them.

    Yields:
        next_id (torch.Tensor): the next token ids (B, 1).

    Raises:
        TypeError: model is not a GPT, or kv_cache with the per-head layer.
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
        cache = ModelCache.for_model(model, idx.size(0))
        logits, _ = model(idx[:, -T_max:], cache=cache)  # the prompt
        for i in range(max_new_tokens):
            next_id = pick_next(logits[:, -1], **sampling)  # (B, 1)
            idx = torch.cat([idx, next_id], dim=1)
            yield next_id
            if i == max_new_tokens - 1:
                break  # nobody needs the logits after the last token
            if cache.seen < T_max:
                logits, _ = model(next_id, cache=cache)  # one position
            else:
                # Full. With learned absolute positions, dropping the oldest
                # token moves every other one to a new position: all their
                # keys and values change. Start again from the cropped context.
                cache = ModelCache.for_model(model, idx.size(0))  # fresh states
                logits, _ = model(idx[:, -T_max:], cache=cache)
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
    """The model of a snippets.run.train checkpoint, and its tokenizer's characters.

    Args:
        checkpoint: a ckpt.pt written by snippets.run.train.train.

    Returns:
        The GPT in eval mode, and the characters of its CharTokenizer.
    """
    from snippets.run.train import TrainConfig

    state = torch.load(checkpoint, weights_only=True)
    config = TrainConfig(**state["config"])
    model = GPT(config.model_config(len(state["chars"])))
    model.load_state_dict(state["model"])
    return model.eval(), state["chars"]
