"""Exercises that grade themselves: write a piece of attention, see what is wrong.

`check(name, answer)` runs your function `answer` on fixed inputs and returns a
Verdict: `.passed`, and `.message` (its str), the first property your answer
breaks, in the page's terms, with a hint at the idea (never the code). An answer
that raises gets the error and the shapes it was given. Each exercise has the
signature and conventions of the guide's own function of that name, which is
also what grading compares against. EXERCISES lists the names and the tasks.
"""

import dataclasses

import torch

from snippets.core.attention import scaled_dot_product_attention
from snippets.core.masks import causal_mask, padding_mask, sliding_window_mask
from snippets.core.positions import alibi_slopes, apply_rope
from snippets.layers.kv_heads import expand_kv
from snippets.layers.sparse_attention import topk_mask
from snippets.layers.taming import sink_softmax
from snippets.pages.cache_graders import grade_block_slots, grade_kv_cache_step
from snippets.pages.grading import (
    Raised,
    close,
    coded,
    mask_problem,
    qkv,
    run,
    tensor,
)
from snippets.run.generate import next_token_probs

__all__ = ["EXERCISES", "Verdict", "check"]

EXERCISES = {
    "causal_mask": "causal_mask(T): (T, T) bool, True where query i may see key j",
    "scaled_dot_product_attention": "scaled_dot_product_attention(q, k, v, "
    "mask=None): (out, weights), softmax(q k^T / sqrt(D)) @ v",
    "expand_kv": "expand_kv(kv, group_size): (B, G, T, D) -> (B, G * group_size, "
    "T, D), query head h reading key/value head h // group_size",
    "apply_rope": "apply_rope(x, offset=0, base=10000.0, theta=None): turn each "
    "adjacent pair (2i, 2i + 1) of row t by (offset + t) * theta_i",
    "padding_mask": "padding_mask(lengths, T): (B, 1, T) bool, True at the real "
    "tokens of rows padded on the left",
    "sliding_window_mask": "sliding_window_mask(T, window): (T, T) bool, causal, "
    "only the last `window` positions",
    "sink_softmax": "sink_softmax(scores, sinks): softmax over the keys and one "
    "sink logit per head, the sink's share left out",
    "next_token_probs": "next_token_probs(logits, temperature=1.0, top_k=None, "
    "top_p=None): (B, V) probabilities after temperature, top-k, top-p",
    "split_heads": "split_heads(x, n_head): (B, T, C) -> (B, H, T, D), head h "
    "holding channels h * D .. h * D + D - 1",
    "merge_heads": "merge_heads(y): (B, H, T, D) -> (B, T, C), heads side by side",
    "alibi_bias": "alibi_bias(n_head, T): (H, T, T) float, -slope_h * (i - j) for "
    "key j <= query i, -inf above the diagonal",
    "kv_cache_step": "kv_cache_step(cached_k, cached_v, q, k, v): append the new "
    "keys and values, attend from the new queries: (out, k_all, v_all)",
    "topk_mask": "topk_mask(scores, top_k): (B, T, T) bool, True at each query's "
    "top_k highest-scoring earlier keys",
    "block_slots": "block_slots(table, positions, block_size): (n,) the storage "
    "rows of a sequence's positions in a paged cache, through its block table",
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What grading found: passed, and the message a learner reads."""

    passed: bool
    message: str

    def __str__(self) -> str:
        return self.message


def _causal_mask(answer) -> str | None:
    for T in (1, 5):
        mask = tensor(run(answer, T), (T, T), f"causal_mask({T})")
        problem = mask_problem(mask, causal_mask(T), f"causal_mask({T})")
        if problem:
            return problem
    return None


def _sdpa(answer) -> str | None:
    q, k, v = qkv(0, 3, 5)  # 3 queries, 5 keys: rows and columns differ
    out = run(answer, q, k, v)
    if not isinstance(out, tuple) or len(out) != 2:
        return "return two things, (out, weights): the weighted values, the weights"
    out, w = out
    w = tensor(w, (2, 2, 3, 5), "the weights (B, H, T_q, T_k)")
    out = tensor(out, (2, 2, 3, 8), "out (B, H, T_q, D_v)")
    if not close(w.sum(-1), torch.ones(2, 2, 3)):
        if close(w.sum(-2), torch.ones(2, 2, 5)):
            return (
                "the columns of your weights sum to 1: softmax runs over the keys"
            )
        return "each row of the weights should sum to 1: softmax over the keys"
    want = scaled_dot_product_attention(q, k, v)[1]
    if not close(w, want):
        scores = q @ k.transpose(-2, -1)
        if close(w, scores.softmax(-1)):
            return (
                "the scores are not scaled: divide q k^T by sqrt(D) before softmax"
            )
        if close(w, (scores / q.size(-1)).softmax(-1)):
            return "the scores are divided by D: the scale is 1 / sqrt(D)"
        return "the weights are not softmax(q k^T / sqrt(D)): check the scores"
    if not close(out, w @ v):
        return "out should be the weights times the values: weights @ v"
    q, k, v = qkv(1, 4, 4)
    mask = causal_mask(4)
    out, w = run(answer, q, k, v, mask)
    w = tensor(w, (2, 2, 4, 4), "the weights with a (4, 4) mask")
    hidden = w.masked_select(~mask)
    if bool((w.masked_select(mask) == 0).any()) and bool((hidden != 0).all()):
        return (
            "the mask is read backwards: True means a query may attend to that key"
        )
    if bool((hidden != 0).any()):
        return (
            "masked keys still get weight: fill their scores with -inf before "
            "softmax (a score of 0 is not hidden)"
        )
    if not close(w.sum(-1), torch.ones(2, 2, 4)):
        return "rows sum to less than 1: mask the scores before softmax, not after"
    if not close(w, scaled_dot_product_attention(q, k, v, mask)[1]):
        return "with a mask, the weights differ from softmax over the visible keys"
    return None


def _expand_kv(answer) -> str | None:
    kv = torch.arange(2 * 2 * 3 * 4, dtype=torch.float).view(2, 2, 3, 4)  # G = 2
    for group in (3, 1):
        out = run(answer, kv, group)
        along_t = (2, 2, 3 * group, 4)  # what repeating dim 2 gives
        along_t = isinstance(out, torch.Tensor) and out.shape == along_t
        if along_t and group > 1:
            return "you repeated along the positions (dim 2): the heads are dim 1"
        shape = (2, 2 * group, 3, 4)
        out = tensor(out, shape, f"expand_kv(kv (2, 2, 3, 4), {group})")
        if torch.equal(out, kv.repeat(1, group, 1, 1)) and group > 1:
            return (
                "the heads come out tiled (0, 1, 0, 1, ...): query head h reads "
                "key/value head h // group_size, so copies of "
                "one head sit side by side"
            )
        if not torch.equal(out, expand_kv(kv, group)):
            return f"head h of the result should be a copy of head h // {group}"
    return None


def _halves(x, offset, base):
    """RoPE with the halves layout (channel i pairs with i + D / 2)."""
    D = x.size(-1)
    inv = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    t = torch.arange(offset, offset + x.size(-2), dtype=torch.float64)
    angle = t[:, None] * inv  # (T, D / 2)
    a, b = x[..., : D // 2].double(), x[..., D // 2 :].double()
    cos, sin = angle.cos(), angle.sin()
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1).to(x.dtype)


def _apply_rope(answer) -> str | None:
    x = torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(2))
    out = tensor(run(answer, x), x.shape, "apply_rope(x)")
    if not close(out[..., 0, :], x[..., 0, :]):
        return "row 0 changed: at position 0 the angle is 0, nothing turns"
    pairs = out.unflatten(-1, (-1, 2)).norm(dim=-1)
    if not close(pairs, x.unflatten(-1, (-1, 2)).norm(dim=-1)):
        if close(out, _halves(x, 0, 10000.0)):
            return (
                "the pairs are adjacent channels (2i, 2i + 1), not the two halves "
                "(i, i + D / 2): the RoFormer layout this guide uses"
            )
        return (
            "a rotation keeps the length of each pair (2i, 2i + 1): yours does not"
        )
    want = apply_rope(x)
    if not close(out, want):
        if close(
            out, apply_rope(x, theta=-(10000.0 ** (-torch.arange(0, 8, 2) / 8)))
        ):
            return (
                "the pairs turn the wrong way: (a, b) -> (a "
                "cos - b sin, a sin + b cos)"
            )
        return "the angles are off: pair i turns by t * base ** (-2i / D) at row t"
    if not close(run(answer, x, 3), apply_rope(x, 3)):
        return "offset is not used: row t of x sits at position offset + t"
    if not close(run(answer, x, 0, 100.0), apply_rope(x, 0, 100.0)):
        return "base is not used: the frequencies are base ** (-2i / D)"
    theta = torch.tensor([1.0, 0.5, 0.25, 0.125])
    if not close(run(answer, x, 0, 10000.0, theta), apply_rope(x, theta=theta)):
        return "theta, when given, replaces the frequencies base ** (-2i / D)"
    return None


def _padding_mask(answer) -> str | None:
    lengths = torch.tensor([4, 2, 1])
    mask = tensor(run(answer, lengths, 4), (3, 1, 4), "padding_mask([4, 2, 1], 4)")
    want = padding_mask(lengths, 4)
    if mask.dtype != torch.bool:
        return "the mask should be bool: True at a real token, False at padding"
    if torch.equal(mask, want.flip(-1)):
        return "the padding is on the left: a row's real tokens are its last ones"
    if torch.equal(mask, ~want):
        return (
            "True marks the real tokens, False the padding: yours is the other way"
        )
    if not torch.equal(mask, want):
        return (
            "row b has lengths[b] real tokens, the last "
            "lengths[b] of the T positions"
        )
    return None


def _sliding_window_mask(answer) -> str | None:
    for T, window in ((6, 3), (4, 1), (3, 5)):
        mask = tensor(
            run(answer, T, window), (T, T), f"sliding_window_mask({T}, {window})"
        )
        want = sliding_window_mask(T, window)
        if T == 6 and torch.equal(mask, sliding_window_mask(T, window + 1)):
            return (
                "the window is one too wide: `window` keys "
                "counting the query itself, "
                "keys i - window + 1 .. i"
            )
        problem = mask_problem(mask, want, f"sliding_window_mask({T}, {window})")
        if problem:
            return problem
    return None


def _sink_softmax(answer) -> str | None:
    g = torch.Generator().manual_seed(3)
    scores, sinks = (
        torch.randn(2, 3, 4, 5, generator=g),
        torch.tensor([0.0, 1.0, -2.0]),
    )
    w = tensor(
        run(answer, scores, sinks), (2, 3, 4, 5), "the weights (B, H, T, T_k)"
    )
    if close(w, scores.softmax(-1)):
        return "the sinks are not used: each head's sink logit joins the softmax"
    if close(w.sum(-1), torch.ones(2, 3, 4)):
        return (
            "rows sum to 1: the sink takes its share, so "
            "the keys' weights sum to less"
        )
    if close(w, torch.cat([scores, sinks.view(1, 3, 1, 1).expand(2, 3, 4, 1)], -1)
              .softmax(-1)[..., 1:]):  # fmt: skip
        return (
            "you dropped the first key, not the sink: the sink is the extra column"
        )
    if not close(w, sink_softmax(scores, sinks)):
        return (
            "head h's sink logit is sinks[h], beside "
            "every row of that head's scores"
        )
    return None


def _next_token_probs(answer) -> str | None:
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0], [0.0, 3.0, 1.0, 1.0, -2.0]])
    for options in ({}, {"temperature": 0.5}, {"top_k": 2}, {"top_p": 0.7}):
        p = tensor(
            run(answer, logits, **options), (2, 5), "the probabilities (B, V)"
        )
        want = next_token_probs(logits, **options)
        if not close(p.sum(-1), torch.ones(2)):
            return (
                f"with {options or 'no options'} the rows "
                "must sum to 1: renormalise"
            )
        if "temperature" in options and close(p, (logits * 0.5).softmax(-1)):
            return "divide the logits by the temperature, do not multiply"
        wider = bool(((p > 0).sum(-1) > (want > 0).sum(-1)).any())
        if "top_k" in options and wider:
            return (
                "top-k keeps the top_k most likely tokens (ties too), others get 0"
            )
        if "top_p" in options and not close(p, want):
            if bool(((p > 0).sum(-1) < (want > 0).sum(-1)).any()):
                return (
                    "top-p keeps one token too few: keep the "
                    "token that crosses top_p too"
                )
            return (
                "top-p keeps the most likely tokens whose probabilities reach top_p"
            )
        if not close(p, want):
            return (
                f"with {options or 'no options'} the "
                "probabilities differ from the guide's"
            )
    return None


def _heads(answer, split: bool) -> str | None:
    """split_heads (B, T, C) -> (B, H, T, D) or merge_heads, back: entries spell
    their index (coded), position t in the tens, so a mix-up shows what moved."""
    for H in (2, 4) if split else (2,):
        D, name = 8 // H, "split_heads" if split else "merge_heads"
        x = (
            coded(2, 3, 8) if split else coded(2, H, 3, D)
        )  # (B, T, C), (B, H, T, D)
        heads = x.view(2, 3, H, D).transpose(1, 2) if split else x
        out = run(answer, x, H) if split else run(answer, x)
        if isinstance(out, torch.Tensor) and out.shape == (2, 3, H, D):
            return "the result is (B, T, H, D): " + (
                "the head dim goes next to B"
                if split
                else "its H heads of D make C"
            )
        want = heads if split else heads.transpose(1, 2).reshape(2, 3, 8)
        out = tensor(out, want.shape, f"{name}(x {tuple(x.shape)})")
        if not torch.equal(out // 10 % 10, want // 10 % 10):
            return (
                "the positions are mixed up: row t must hold position t's channels,"
                " and a reshape straight across T and H mixes them"
            )
        if not torch.equal(out, want):
            return (
                "head h owns D adjacent channels, h * D .. h * D + D - 1, in order:"
                " MultiHeadAttention puts its heads side by side"
            )
    return None


def _alibi_bias(answer) -> str | None:
    for H, T in ((4, 5), (8, 3), (6, 4)):
        what = f"alibi_bias({H}, {T})"
        bias = tensor(run(answer, H, T), (H, T, T), what)
        if not bias.is_floating_point():
            return f"{what} should be float: a bias added to the scores"
        later = torch.ones(T, T, dtype=torch.bool).triu(1)  # key j > query i
        if not bool((bias[:, later] == float("-inf")).all()):
            if bool((bias[:, later.T] == float("-inf")).all()):
                return f"{what} is transposed: rows are queries, columns keys"
            return (
                "query i may see a later key j > i: above the diagonal the bias "
                "is -inf, ALiBi's bias is the causal mask too"
            )
        if bool((bias.diagonal(dim1=1, dim2=2) != 0).any()):
            return "the diagonal should be 0: a query is at distance 0 from itself"
        if bool((bias[:, ~later] > 0).any()):
            return "older keys get a bonus: the bias is -slope * distance, it falls"
        back = (torch.arange(T)[None, :] - torch.arange(T)[:, None]).double()
        slopes = -bias[:, 1, 0].double()  # each head's cost of one step back
        line = (slopes[:, None, None] * back).masked_fill(back > 0, float("-inf"))
        if not close(bias, line):
            return (
                "each step back should cost the same: the bias is -slope * (i - j)"
            )
        if close(slopes, alibi_slopes(H).flip(0)):
            return "the slopes run the wrong way: head 0 is the steepest"
        if not close(slopes, alibi_slopes(H)):
            if H & (H - 1) == 0:  # a power of two
                return f"with H = {H}, head h's slope is 2 ** (-8 (h + 1) / H)"
            return (
                f"with H = {H}, not a power of two: the slopes of "
                f"{2 ** (H.bit_length() - 1)} heads, then every other one of "
                f"{2 ** H.bit_length()} heads', until there are {H}"
            )
    return None


def _topk_mask(answer) -> str | None:
    scores = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(5))
    causal = causal_mask(6)
    for k in (3, 1, 8):
        try:
            got = run(answer, scores, k)
        except Raised as raised:  # at top_k > T, every earlier key stays
            hint = f"with top_k = {k} >= T = 6: " if k >= 6 else ""
            raise Raised(hint + str(raised)) from None
        if isinstance(got, torch.Tensor) and got.dtype == torch.long:
            return "return the mask (B, T, T), True at the chosen keys, not indices"
        what = f"topk_mask(scores (2, 6, 6), {k})"
        mask, want = tensor(got, (2, 6, 6), what), topk_mask(scores, k)
        if mask.dtype != torch.bool:
            return f"{what} should be bool: True at the keys a query reads"
        if bool((mask & ~causal).any()):
            return "a query chose a later key: leave those out before choosing"
        kept, most = mask.sum(-1), causal.sum(-1).clamp(max=k)  # (B, T), (T,)
        if bool((kept > most).any()):
            return f"a query keeps more than top_k = {k} keys"
        if bool((kept < most).any()):
            return (
                f"query t should keep min(top_k, t + 1) keys: with top_k = {k}, "
                "choose among its earlier keys, not all of them"
            )
        if torch.equal(mask, topk_mask(-scores, k)) and k < 6:
            return "you kept the lowest scores: top-k keeps the highest"
        if not torch.equal(mask, want):
            return "each query (a row) keeps its top_k highest-scoring earlier keys"
    return None


_CHECKS = {
    "causal_mask": _causal_mask,
    "scaled_dot_product_attention": _sdpa,
    "expand_kv": _expand_kv,
    "apply_rope": _apply_rope,
    "padding_mask": _padding_mask,
    "sliding_window_mask": _sliding_window_mask,
    "sink_softmax": _sink_softmax,
    "next_token_probs": _next_token_probs,
    "split_heads": lambda answer: _heads(answer, split=True),
    "merge_heads": lambda answer: _heads(answer, split=False),
    "alibi_bias": _alibi_bias,
    "kv_cache_step": grade_kv_cache_step,
    "topk_mask": _topk_mask,
    "block_slots": grade_block_slots,
}


def check(name: str, answer) -> Verdict:
    """Grade `answer`, your function for exercise `name` (a key of EXERCISES)."""
    if name not in _CHECKS:
        raise ValueError(f"name ({name!r}) must be one of {list(EXERCISES)}")
    if not callable(answer):
        raise TypeError(
            f"answer must be your function, got {type(answer).__name__}"
        )
    try:
        with torch.no_grad():
            problem = _CHECKS[name](answer)
    except Raised as raised:
        return Verdict(False, f"{name}: {raised}")
    if problem:
        return Verdict(False, f"{name}: {problem}")
    return Verdict(True, f"{name}: correct, every property holds")


assert set(_CHECKS) == set(EXERCISES)
