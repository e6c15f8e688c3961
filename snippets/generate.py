"""Text from a trained GPT: greedy decoding, temperature, top-k, top-p, a KV cache.

    python -m snippets.generate runs/markov/ckpt.pt --prompt "a" --tokens 200
    python -m snippets.generate --bench-kv-cache   # the generation page's numbers

Needs torch and snippets/model.py (and, for the command line, the checkpoints of
snippets/train.py). Shape letters: B batch, T sequence length, C channels,
H heads, D head size, V vocabulary size, L layers.
"""

# --8<-- [start:imports]
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from snippets.attention import CausalSelfAttention
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
]

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "docs" / "assets" / "results" / "training"


# --8<-- [start:check_sampling]
def check_sampling(
    temperature: float, top_k: int | None, top_p: float | None
) -> None:
    """Reject settings that mean nothing, naming the argument, value and rule."""
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
    """The next token of each row: logits (B, V) -> ids (B, 1)."""
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
    """Keys and values of every layer for the positions computed so far.

    Allocated once for context_length positions, (L, B, H, context_length, D)
    each, and filled in place: appending never copies what is already there.
    """

    def __init__(self, model: GPT, batch_size: int):
        config = model.config
        H = config.n_head
        D = config.n_embed // H
        shape = (config.n_layer, batch_size, H, config.context_length, D)
        weight = model.lm_head.weight
        self.k = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.v = torch.zeros_like(self.k)
        self.length = 0  # positions 0 .. length - 1 are filled
        self.capacity = config.context_length


def attend_with_cache(
    attn: CausalSelfAttention, x: torch.Tensor, cache: KVCache, layer: int
) -> torch.Tensor:
    """attn(x) for new positions only: x (B, T_new, C) -> (B, T_new, C).

    The new positions' keys and values go into the cache; their queries attend
    to every key in it, which are those of all earlier positions and their own.
    """
    B, T_new, C = x.shape
    H, D = attn.n_head, C // attn.n_head
    start, end = cache.length, cache.length + T_new
    q, k, v = attn.qkv(x).split(C, dim=-1)  # (B, T_new, 3C) -> 3 x (B, T_new, C)
    q = q.view(B, T_new, H, D).transpose(1, 2)  # (B, T_new, C) -> (B, H, T_new, D)
    cache.k[layer, :, :, start:end] = k.view(B, T_new, H, D).transpose(1, 2)
    cache.v[layer, :, :, start:end] = v.view(B, T_new, H, D).transpose(1, 2)
    keys = cache.k[layer, :, :, :end]  # (B, H, end, D)
    values = cache.v[layer, :, :, :end]  # (B, H, end, D)
    if T_new == 1:
        mask = None  # the newest position may see every position
    else:
        # New position start + i sees keys 0 .. start + i: the causal mask,
        # shifted right by the cached positions. (T_new, end) bool.
        mask = torch.ones(T_new, end, dtype=torch.bool, device=x.device)
        mask = mask.tril(diagonal=start)
    y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
    y = y.transpose(1, 2).contiguous().view(B, T_new, C)  # (B, T_new, C)
    return attn.proj(y)


@torch.no_grad()
def forward_with_cache(model: GPT, idx: torch.Tensor, cache: KVCache):
    """model(idx)[0] for tokens at positions cache.length onwards, from the cache.

    idx (B, T_new) -> logits (B, T_new, V). The same steps as GPT.forward and
    Block.forward, written with the model's own modules; the tests check that
    the logits are the ones a full forward pass computes.
    """
    B, T_new = idx.shape
    if cache.length + T_new > cache.capacity:
        raise ValueError(
            f"{cache.length} cached + {T_new} new positions exceed "
            f"context_length={cache.capacity}"
        )
    positions = torch.arange(cache.length, cache.length + T_new, device=idx.device)
    x = model.drop(model.tok_emb(idx) + model.pos_emb(positions))  # (B, T_new, C)
    for layer, block in enumerate(model.blocks):
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
    has no row for more. sampling: greedy, temperature, top_k, top_p, generator,
    as pick_next takes them.
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
        if not isinstance(model.blocks[0].attn, CausalSelfAttention):
            raise TypeError(
                "kv_cache=True needs attention='fused'; convert a per-head model "
                "with GPT.from_per_head(model), or pass kv_cache=False"
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
                cache.length = 0
                logits = forward_with_cache(model, idx[:, -T_max:], cache)
    finally:
        model.train(was_training)


def generate(
    model: GPT, idx: torch.Tensor, max_new_tokens: int, **options
) -> torch.Tensor:
    """idx (B, T) followed by max_new_tokens generated ids: (B, T + new)."""
    new = list(stream(model, idx, max_new_tokens, **options))
    return torch.cat([idx, *new], dim=1)


# --8<-- [end:stream]


# ------------------------------------------------------------------ measuring


BENCH_PROMPT = 16  # tokens of prompt before the timed ones


def time_per_token(model: GPT, new_tokens: int, kv_cache: bool) -> list[float]:
    """Seconds each new token took, greedy, from a fixed random prompt."""
    prompt = torch.randint(
        model.config.vocab_size,
        (1, BENCH_PROMPT),
        generator=torch.Generator().manual_seed(0),
    )
    seconds, tokens = (
        [],
        stream(model, prompt, new_tokens, kv_cache=kv_cache, greedy=True),
    )
    start = time.perf_counter()
    for _ in tokens:
        now = time.perf_counter()
        seconds.append(now - start)
        start = now
    return seconds


def bench_kv_cache(new_tokens: int, rounds: int) -> dict:
    """Time per generated token with and without the cache, taking turns."""
    from snippets.train import BENCH_MODEL, GPTConfig, machine_info

    # The throughput model of the optimization page, with room for every token:
    # the cache helps until the context is full.
    context = BENCH_PROMPT + new_tokens
    config = GPTConfig(**{**BENCH_MODEL, "context_length": context})
    torch.manual_seed(0)
    model = GPT(config).eval()  # untrained: the time does not depend on weights
    load_before = os.getloadavg()[0]
    samples = {True: [], False: []}
    for round_ in range(rounds + 1):  # round 0 is a warm-up
        for kv_cache in (True, False) if round_ % 2 else (False, True):
            seconds = time_per_token(model, new_tokens, kv_cache)
            if round_:
                samples[kv_cache].append(seconds)
    # The same tokens either way: the page's claim, checked on the timed runs.
    same = torch.equal(
        generate(model, torch.zeros(1, 1, dtype=torch.long), 32, greedy=True),
        generate(
            model,
            torch.zeros(1, 1, dtype=torch.long),
            32,
            greedy=True,
            kv_cache=False,
        ),
    )

    def summary(runs: list[list[float]]) -> dict:
        per_run = [sum(r) / len(r) * 1e3 for r in runs]  # mean ms per token
        per_position = [statistics.median(s) * 1e3 for s in zip(*runs, strict=True)]
        return {
            "ms_per_token": round(statistics.median(per_run), 4),
            "runs_ms_per_token": [round(m, 4) for m in per_run],
            "median_ms_by_position": [round(m, 4) for m in per_position],
        }

    cached, recompute = summary(samples[True]), summary(samples[False])
    return {
        "schema": "attention-guide/kv-cache/1",
        "command": "python -m snippets.generate " + " ".join(sys.argv[1:]),
        "model": {**BENCH_MODEL, "context_length": context},
        "prompt_tokens": BENCH_PROMPT,
        "new_tokens": new_tokens,
        "rounds": rounds,
        "same_tokens": same,
        "machine": {
            **machine_info(),
            "load_1min_before": round(load_before, 2),
            "load_1min_after": round(os.getloadavg()[0], 2),
        },
        "kv_cache": cached,
        "recompute": recompute,
        "speedup": round(recompute["ms_per_token"] / cached["ms_per_token"], 2),
    }


def plot_kv_cache(data: dict, path: Path) -> None:
    """Milliseconds per token against its position, both ways, as SVG."""
    from snippets.train import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    start = data["prompt_tokens"]
    for key, label in (("recompute", "recompute"), ("kv_cache", "KV cache")):
        ms = data[key]["median_ms_by_position"]
        ax.plot(range(start + 1, start + 1 + len(ms)), ms, label=label)
    ax.set_xlabel("length of the sequence after the new token")
    ax.set_ylabel("ms for the token")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


# ------------------------------------------------------------------ command line


def load_model(checkpoint: Path) -> tuple[GPT, str]:
    """The model of a snippets.train checkpoint, and its tokenizer's characters."""
    from snippets.train import TrainConfig

    state = torch.load(checkpoint, weights_only=True)
    config = TrainConfig(**state["config"])
    model = GPT(config.model_config(len(state["chars"])))
    model.load_state_dict(state["model"])
    return model.eval(), state["chars"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m snippets.generate",
        description="Sample text from a checkpoint of snippets.train.",
    )
    p.add_argument("checkpoint", type=Path, nargs="?", help="a ckpt.pt")
    p.add_argument("--prompt", default="", help="text to continue")
    p.add_argument(
        "--tokens",
        type=int,
        help="new tokens to write (default: 200; 256 to benchmark)",
    )
    p.add_argument("--greedy", action="store_true", help="most likely token always")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int)
    p.add_argument("--top-p", type=float)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-kv-cache", action="store_true")
    p.add_argument(
        "--bench-kv-cache",
        action="store_true",
        help="time per token with and without the cache; writes "
        "kv-cache.json and kv-cache.svg (or to --out)",
    )
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--threads", type=int, help="torch threads (default: torch's choice)"
    )
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.bench_kv_cache:
        data = bench_kv_cache(args.tokens or 256, args.rounds)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kv-cache.json").write_text(json.dumps(data, indent=1) + "\n")
        plot_kv_cache(data, args.out / "kv-cache.svg")
        print(
            f"recompute {data['recompute']['ms_per_token']:.2f} ms per token, "
            f"KV cache {data['kv_cache']['ms_per_token']:.2f} ms: "
            f"x{data['speedup']:.1f}; wrote {args.out / 'kv-cache.json'}"
        )
        return 0
    if args.checkpoint is None:
        p.error("give a checkpoint (e.g. runs/markov/ckpt.pt) or --bench-kv-cache")
    model, chars = load_model(args.checkpoint)
    stoi = {c: i for i, c in enumerate(chars)}
    unknown = sorted(set(args.prompt) - set(stoi))
    if unknown:
        p.error(f"--prompt has characters the model never saw: {unknown}")
    prompt = [stoi[c] for c in args.prompt] or [0]  # no prompt: start from id 0
    sampling = (
        {"greedy": True}
        if args.greedy
        else {
            "temperature": args.temperature,
            "top_k": args.top_k,
            "top_p": args.top_p,
            "generator": torch.Generator().manual_seed(args.seed),
        }
    )
    if not args.greedy:
        try:
            check_sampling(args.temperature, args.top_k, args.top_p)
        except (TypeError, ValueError) as err:
            p.error(str(err))
    sys.stdout.write(args.prompt)
    idx = torch.tensor([prompt])
    tokens = 200 if args.tokens is None else args.tokens
    for next_id in stream(
        model, idx, tokens, kv_cache=not args.no_kv_cache, **sampling
    ):
        sys.stdout.write(chars[next_id.item()])  # each token as soon as it exists
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
