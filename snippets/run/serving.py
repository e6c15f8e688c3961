"""Serving many sequences at once with a paged cache (snippets/run/paged.py):
continuous batching and speculative decoding, both greedy.

- `generate_batch`: continuous batching (Orca, Yu et al. 2022): sequences
  join and leave the running batch step by step; a long prompt is read in
  chunks between the others' steps (chunked prefill).
- `speculative_generate`: a small model drafts k tokens, the target checks
  them all in one pass and keeps the longest run it agrees with (Leviathan et
  al. 2023; Chen et al. 2023).

Shape letters: N the tokens of one step, V vocabulary size.
"""

# --8<-- [start:imports]
import math

import torch

from snippets.core.model import GPT, check_ids
from snippets.run.paged import PagedCache

# --8<-- [end:imports]

__all__ = ["generate_batch", "speculative_generate", "check_speculative"]


def _as_ids(prompt, name: str) -> list[int]:
    """A prompt as a list of token ids: a 1-D tensor, a (1, T) one, or a list."""
    if isinstance(prompt, torch.Tensor):
        if prompt.dim() == 2 and prompt.size(0) == 1:
            prompt = prompt[0]
        if prompt.dim() != 1 or prompt.is_floating_point():
            raise ValueError(
                f"{name} must be token ids (T,) or (1, T), got "
                f"{tuple(prompt.shape)}"
            )
        prompt = prompt.tolist()
    prompt = list(prompt)
    if not prompt:
        raise ValueError(f"{name} is empty: a prompt needs at least one token")
    return prompt


def _check_fits(model: GPT, length: int, name: str) -> None:
    """A sequence of `length` positions must fit the model's positions."""
    limit, field = model.config.longest, "context_length"
    if model.config.max_length:
        field = "max_length"
    if length > limit:
        raise ValueError(f"{name} reaches {length} positions, past {field}={limit}")


# --8<-- [start:generate_batch]
@torch.no_grad()
def generate_batch(
    model: GPT,
    prompts: list,
    max_new_tokens: int | list[int],
    *,
    block_size: int = 16,
    n_blocks: int | None = None,
    max_seqs: int = 8,
    max_tokens: int | None = None,
    static: bool = False,
    share_prefixes: bool = True,
    stats: dict | None = None,
) -> list[torch.Tensor]:
    """Greedy continuations of many prompts, run together: continuous batching.

    Each step runs one packed forward pass of at most max_tokens tokens: the
    next token of every sequence that is generating, then chunks of prompts
    still being read (chunked prefill). A sequence leaves as soon as it has
    its max_new_tokens, and a waiting one joins in its place, if the pool has
    the blocks it may need. static=True waits instead until the whole batch
    has finished (static batching, for comparison).

    Args:
        model: a GPT whose layers a PagedCache can hold.
        prompts: token ids, each a list or a 1-D tensor, of any lengths.
        max_new_tokens: tokens to add to each prompt, an int or one per prompt.
        block_size: positions per block of the cache.
        n_blocks: blocks in the pool; None: enough for max_seqs of the longest.
        max_seqs: sequences running at once.
        max_tokens: tokens per step, at most context_length (the longest row
            one forward pass reads); None: context_length.
        static: admit a new batch only when the running one has finished.
        share_prefixes: a new sequence shares the blocks of the longest prefix
            a running sequence has written.
        stats: a dict to fill with what the run did (steps, peak_blocks, ...).

    Returns:
        One tensor per prompt: its ids followed by its new ones (T + new,),
        equal to generate(model, prompt, new, greedy=True) run alone.
    """
    prompts = [_as_ids(p, f"prompt {i}") for i, p in enumerate(prompts)]
    if isinstance(max_new_tokens, int):
        max_new_tokens = [max_new_tokens] * len(prompts)
    if len(max_new_tokens) != len(prompts):
        raise ValueError(
            f"max_new_tokens has {len(max_new_tokens)} counts for "
            f"{len(prompts)} prompts"
        )
    for name, value in (("max_seqs", max_seqs), ("block_size", block_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} ({value!r}) must be an int >= 1")
    rows = model.config.context_length
    max_tokens = rows if max_tokens is None else max_tokens
    if not 1 <= max_tokens <= rows:
        raise ValueError(
            f"max_tokens ({max_tokens}) must be in [1, context_length={rows}]"
        )
    lengths = []
    for i, (prompt, new) in enumerate(zip(prompts, max_new_tokens, strict=True)):
        if type(new) is not int or new < 0:
            raise ValueError(
                f"max_new_tokens of prompt {i} ({new!r}) must be an int >= 0"
            )
        check_ids(torch.tensor(prompt), model.config.vocab_size)
        _check_fits(
            model,
            len(prompt) + new,
            f"prompt {i} ({len(prompt)} tokens + {new} new)",
        )
        lengths.append(
            len(prompt) + max(new - 1, 0)
        )  # the last token is never read
    longest = max(lengths, default=1)
    if n_blocks is None:
        n_blocks = max_seqs * math.ceil(longest / block_size)
    cache = PagedCache(model, n_blocks, block_size)
    for i, length in enumerate(lengths):
        if cache.blocks_needed(length) > n_blocks:
            raise ValueError(
                f"prompt {i} needs {cache.blocks_needed(length)} blocks of "
                f"{block_size} positions; the pool has n_blocks={n_blocks}"
            )
    out = [list(p) for p in prompts]
    waiting = [i for i in range(len(prompts)) if max_new_tokens[i] > 0]
    running: list[int] = []
    todo = {}  # sequence -> its tokens not yet read: a prompt's rest, or its newest
    record = {"steps": 0, "tokens": 0, "peak_blocks": 0, "shared_positions": 0}
    was_training = model.training
    model.eval()
    try:
        while waiting or running:
            # Join: while a slot is open and the pool keeps, besides what the
            # running sequences may still need, room for the newcomer's worst
            # case (+ 1: a block it shares may have to be copied).
            joining = not static or not running
            while joining and waiting and len(running) < max_seqs:
                s = waiting[0]
                promised = sum(
                    cache._cost(r, lengths[r] - len(cache.tokens[r]))
                    for r in running
                )
                room = len(cache.pool.free) - promised
                if running and cache.blocks_needed(lengths[s]) + 1 > room:
                    break  # it waits for a sequence to finish
                waiting.pop(0)
                shared = cache.add(s, prompts[s] if share_prefixes else ())
                record["shared_positions"] += shared
                todo[s] = prompts[s][shared:]
                running.append(s)
            # One step: every generating sequence's token, then prompt chunks.
            budget, chunks = max_tokens, []
            for s in sorted(running, key=lambda s: len(todo[s]) > 1):
                take = todo[s][:budget]
                if take:
                    chunks.append((s, take))
                    budget -= len(take)
            idx = cache.plan(chunks)
            logits, _ = model(idx, cache=cache)  # (1, N, V)
            record["steps"] += 1
            record["tokens"] += idx.size(1)
            record["peak_blocks"] = max(
                record["peak_blocks"], n_blocks - len(cache.pool.free)
            )
            end = 0
            for s, take in chunks:
                end += len(take)
                todo[s] = todo[s][len(take) :]
                if todo[s]:
                    continue  # the prompt is not read yet
                next_id = int(logits[0, end - 1].argmax())
                out[s].append(next_id)
                if len(out[s]) - len(prompts[s]) == max_new_tokens[s]:
                    running.remove(s)  # done: its blocks go back to the pool
                    cache.free(s)
                else:
                    todo[s] = [next_id]
    finally:
        model.train(was_training)
    if stats is not None:
        stats.update(record, n_blocks=n_blocks, block_size=block_size)
    return [torch.tensor(ids, dtype=torch.long) for ids in out]


# --8<-- [end:generate_batch]


def check_speculative(target, draft, prompt, max_new_tokens, k) -> list[int]:
    """speculative_generate's arguments, checked where they enter; the
    prompt's ids as a list."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k ({k!r}) must be an int >= 1: the drafts per round")
    if type(max_new_tokens) is not int or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens ({max_new_tokens!r}) must be an int >= 0")
    V, V_draft = target.config.vocab_size, draft.config.vocab_size
    if V != V_draft:
        raise ValueError(
            f"the draft's vocab_size ({V_draft}) differs from the target's "
            f"({V}): a draft must propose the target's tokens"
        )
    tokens = _as_ids(prompt, "prompt")
    check_ids(torch.tensor(tokens), V)
    total = len(tokens) + max_new_tokens
    for name, model in (("target", target), ("draft", draft)):
        _check_fits(
            model,
            total,
            f"the prompt ({len(tokens)}) + {max_new_tokens} new, in the {name},",
        )
    return tokens


# --8<-- [start:speculative]
@torch.no_grad()
def speculative_generate(
    target: GPT,
    draft: GPT,
    prompt: torch.Tensor | list[int],
    max_new_tokens: int,
    k: int = 4,
    *,
    stats: dict | None = None,
) -> torch.Tensor:
    """target's greedy continuation of prompt, drafted k tokens at a time.

    Each round the draft proposes k tokens, one forward pass each; the target
    reads them all in one pass, its causal mask letting each see only what
    comes before it, and keeps the drafts up to the first it would not have
    chosen, then adds its own choice there. The output is the target's
    greedy output exactly; the target runs once per round, not per token.

    Args:
        target: the GPT whose output this is.
        draft: a smaller GPT over the same vocabulary.
        prompt: token ids, (T,), (1, T) or a list.
        max_new_tokens: tokens to add, >= 0.
        k: tokens drafted per round, >= 1.
        stats: a dict to fill: rounds (one pass of the target each), drafted,
            accepted.

    Returns:
        The ids (1, T + max_new_tokens), as generate(target, prompt,
        max_new_tokens, greedy=True) gives them.
    """
    tokens = check_speculative(target, draft, prompt, max_new_tokens, k)
    end = len(tokens) + max_new_tokens
    blocks = math.ceil((end + k) / 16)  # of 16 positions: the whole sequence
    t_cache, d_cache = PagedCache(target, blocks, 16), PagedCache(draft, blocks, 16)
    t_cache.add(0), d_cache.add(0)  # one sequence each, called 0
    record = {"rounds": 0, "drafted": 0, "accepted": 0}
    modes = target.training, draft.training
    target.eval(), draft.eval()
    try:
        while len(tokens) < end:
            n = min(k, end - len(tokens) - 1)  # drafts this round
            drafts = []
            for _ in range(n):  # the draft: one pass per token
                unread = tokens[len(d_cache.tokens[0]) :] + drafts[-1:]
                logits, _ = draft(d_cache.plan([(0, unread)]), cache=d_cache)
                drafts.append(int(logits[0, -1].argmax()))
            # The target reads every unread token and the n drafts in one pass.
            unread = tokens[len(t_cache.tokens[0]) :] + drafts
            logits, _ = target(t_cache.plan([(0, unread)]), cache=t_cache)
            choices = logits[0, -(n + 1) :].argmax(dim=-1).tolist()  # (n + 1,)
            kept = 0
            while kept < n and drafts[kept] == choices[kept]:
                kept += 1
            tokens += drafts[:kept] + [choices[kept]]
            # Forget the rejected drafts' keys: each cache keeps what it read of
            # tokens, all but the newest (which no model has read yet).
            for cache in (t_cache, d_cache):
                cache.truncate(0, min(len(cache.tokens[0]), len(tokens) - 1))
            record["rounds"] += 1
            record["drafted"] += n
            record["accepted"] += kept
    finally:
        target.train(modes[0]), draft.train(modes[1])
    if stats is not None:
        stats.update(record)
    return torch.tensor([tokens], dtype=torch.long)


# --8<-- [end:speculative]
