"""Exercises that grade themselves: write a piece of attention, see what is wrong.

`check(name, answer)` runs your function `answer` on fixed inputs and returns a
Verdict: `.passed`, and `.message` (its str), the first property your answer
breaks, in the page's terms, with a hint at the idea (never the code). An answer
that raises gets the error and the shapes it was given. Each exercise has the
signature and conventions of the guide's own function of that name, which is
also what grading compares against. EXERCISES lists the names and the tasks.

Needs torch and, from this folder, the functions the answers are checked
against: masks.py, attention.py, kv_heads.py, positions.py, taming.py, generate.py.
"""

import dataclasses

import torch

from snippets.attention import scaled_dot_product_attention
from snippets.generate import next_token_probs
from snippets.kv_heads import expand_kv
from snippets.masks import causal_mask, padding_mask, sliding_window_mask
from snippets.positions import apply_rope
from snippets.taming import sink_softmax

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
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What grading found: passed, and the message a learner reads."""

    passed: bool
    message: str

    def __str__(self) -> str:
        return self.message


class _Raised(Exception):
    """The answer raised: carries the message for the learner."""


def _shapes(args) -> str:
    def one(a):
        return (
            f"tensor {tuple(a.shape)}" if isinstance(a, torch.Tensor) else repr(a)
        )

    return ", ".join(one(a) for a in args)


def _run(answer, *args, **kwargs):
    try:
        return answer(*args, **kwargs)
    except Exception as error:  # the learner's error, shown, never hidden
        given = _shapes([*args, *kwargs.values()])
        raise _Raised(
            f"your function raised {type(error).__name__}: {error} (given {given})"
        ) from None


def _close(a, b, atol=1e-5) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and a.shape == b.shape
        and torch.allclose(a.double(), b.double(), atol=atol)
    )


def _tensor(out, shape, what: str):
    if not isinstance(out, torch.Tensor):
        raise _Raised(f"return a torch.Tensor ({what}), got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise _Raised(
            f"{what} should have shape {tuple(shape)}, got {tuple(out.shape)}"
        )
    return out


def _check_bool_mask(mask, want, what: str) -> str | None:
    """The first difference of two (T, T) bool masks, in a learner's words."""
    if mask.dtype != torch.bool:
        return (
            f"{what} should be a bool tensor (True = may attend), got "
            f"{mask.dtype}: a float mask is added to the scores, it hides nothing"
        )
    if torch.equal(mask, want.T) and not torch.equal(mask, want):
        return (
            f"{what} is the transpose of the right one: "
            "rows are queries, columns keys"
        )
    for i, j in (mask & ~want).nonzero().tolist():
        if j > i:
            return (
                f"row {i} may see position {j}, a later one: nothing may look ahead"
            )
        return f"row {i} may see position {j}, which it must not"
    for i, j in (~mask & want).nonzero().tolist():
        if i == j:
            return (
                f"row {i} cannot see position {i} itself: a "
                "token may attend to itself"
            )
        return f"row {i} cannot see position {j}, an earlier one it should see"
    return None


def _causal_mask(answer) -> str | None:
    for T in (1, 5):
        mask = _tensor(_run(answer, T), (T, T), f"causal_mask({T})")
        problem = _check_bool_mask(mask, causal_mask(T), f"causal_mask({T})")
        if problem:
            return problem
    return None


def _qkv(seed: int, T_q: int, T_k: int, D: int = 8):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 2, n, D, generator=g) for n in (T_q, T_k, T_k))


def _sdpa(answer) -> str | None:
    q, k, v = _qkv(0, 3, 5)  # 3 queries, 5 keys: rows and columns differ
    out = _run(answer, q, k, v)
    if not isinstance(out, tuple) or len(out) != 2:
        return (
            "return two things, (out, weights): the weighted values and the weights"
        )
    out, w = out
    w = _tensor(w, (2, 2, 3, 5), "the weights (B, H, T_q, T_k)")
    out = _tensor(out, (2, 2, 3, 8), "out (B, H, T_q, D_v)")
    if not _close(w.sum(-1), torch.ones(2, 2, 3)):
        if _close(w.sum(-2), torch.ones(2, 2, 5)):
            return (
                "the columns of your weights sum to 1: softmax runs over the keys"
            )
        return "each row of the weights should sum to 1: softmax over the keys"
    want = scaled_dot_product_attention(q, k, v)[1]
    if not _close(w, want):
        scores = q @ k.transpose(-2, -1)
        if _close(w, scores.softmax(-1)):
            return (
                "the scores are not scaled: divide q k^T by sqrt(D) before softmax"
            )
        if _close(w, (scores / q.size(-1)).softmax(-1)):
            return "the scores are divided by D: the scale is 1 / sqrt(D)"
        return "the weights are not softmax(q k^T / sqrt(D)): check the scores"
    if not _close(out, w @ v):
        return "out should be the weights times the values: weights @ v"
    q, k, v = _qkv(1, 4, 4)
    mask = causal_mask(4)
    out, w = _run(answer, q, k, v, mask)
    w = _tensor(w, (2, 2, 4, 4), "the weights with a (4, 4) mask")
    hidden = w.masked_select(~mask)
    if bool((w.masked_select(mask) == 0).any()) and bool((hidden != 0).all()):
        return (
            "the mask is read backwards: True means a query may attend to that key"
        )
    if bool((hidden != 0).any()):
        return (
            "masked keys still get weight: fill their "
            "scores with -inf before softmax "
            "(a score of 0 is not hidden)"
        )
    if not _close(w.sum(-1), torch.ones(2, 2, 4)):
        return "rows sum to less than 1: mask the scores before softmax, not after"
    if not _close(w, scaled_dot_product_attention(q, k, v, mask)[1]):
        return "with a mask, the weights differ from softmax over the visible keys"
    return None


def _expand_kv(answer) -> str | None:
    kv = torch.arange(2 * 2 * 3 * 4, dtype=torch.float).view(2, 2, 3, 4)  # G = 2
    for group in (3, 1):
        out = _run(answer, kv, group)
        along_t = (2, 2, 3 * group, 4)  # what repeating dim 2 gives
        along_t = isinstance(out, torch.Tensor) and out.shape == along_t
        if along_t and group > 1:
            return "you repeated along the positions (dim 2): the heads are dim 1"
        shape = (2, 2 * group, 3, 4)
        out = _tensor(out, shape, f"expand_kv(kv (2, 2, 3, 4), {group})")
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
    out = _tensor(_run(answer, x), x.shape, "apply_rope(x)")
    if not _close(out[..., 0, :], x[..., 0, :]):
        return "row 0 changed: at position 0 the angle is 0, nothing turns"
    pairs = out.unflatten(-1, (-1, 2)).norm(dim=-1)
    if not _close(pairs, x.unflatten(-1, (-1, 2)).norm(dim=-1)):
        if _close(out, _halves(x, 0, 10000.0)):
            return (
                "the pairs are adjacent channels (2i, 2i + 1), not the two halves "
                "(i, i + D / 2): the RoFormer layout this guide uses"
            )
        return (
            "a rotation keeps the length of each pair (2i, 2i + 1): yours does not"
        )
    want = apply_rope(x)
    if not _close(out, want):
        if _close(
            out, apply_rope(x, theta=-(10000.0 ** (-torch.arange(0, 8, 2) / 8)))
        ):
            return (
                "the pairs turn the wrong way: (a, b) -> (a "
                "cos - b sin, a sin + b cos)"
            )
        return "the angles are off: pair i turns by t * base ** (-2i / D) at row t"
    if not _close(_run(answer, x, 3), apply_rope(x, 3)):
        return "offset is not used: row t of x sits at position offset + t"
    if not _close(_run(answer, x, 0, 100.0), apply_rope(x, 0, 100.0)):
        return "base is not used: the frequencies are base ** (-2i / D)"
    theta = torch.tensor([1.0, 0.5, 0.25, 0.125])
    if not _close(_run(answer, x, 0, 10000.0, theta), apply_rope(x, theta=theta)):
        return "theta, when given, replaces the frequencies base ** (-2i / D)"
    return None


def _padding_mask(answer) -> str | None:
    lengths = torch.tensor([4, 2, 1])
    mask = _tensor(
        _run(answer, lengths, 4), (3, 1, 4), "padding_mask([4, 2, 1], 4)"
    )
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
        mask = _tensor(
            _run(answer, T, window), (T, T), f"sliding_window_mask({T}, {window})"
        )
        want = sliding_window_mask(T, window)
        if T == 6 and torch.equal(mask, sliding_window_mask(T, window + 1)):
            return (
                "the window is one too wide: `window` keys "
                "counting the query itself, "
                "keys i - window + 1 .. i"
            )
        problem = _check_bool_mask(
            mask, want, f"sliding_window_mask({T}, {window})"
        )
        if problem:
            return problem
    return None


def _sink_softmax(answer) -> str | None:
    g = torch.Generator().manual_seed(3)
    scores, sinks = (
        torch.randn(2, 3, 4, 5, generator=g),
        torch.tensor([0.0, 1.0, -2.0]),
    )
    w = _tensor(
        _run(answer, scores, sinks), (2, 3, 4, 5), "the weights (B, H, T, T_k)"
    )
    if _close(w, scores.softmax(-1)):
        return "the sinks are not used: each head's sink logit joins the softmax"
    if _close(w.sum(-1), torch.ones(2, 3, 4)):
        return (
            "rows sum to 1: the sink takes its share, so "
            "the keys' weights sum to less"
        )
    if _close(w, torch.cat([scores, sinks.view(1, 3, 1, 1).expand(2, 3, 4, 1)], -1)
              .softmax(-1)[..., 1:]):  # fmt: skip
        return (
            "you dropped the first key, not the sink: the sink is the extra column"
        )
    if not _close(w, sink_softmax(scores, sinks)):
        return (
            "head h's sink logit is sinks[h], beside "
            "every row of that head's scores"
        )
    return None


def _next_token_probs(answer) -> str | None:
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0], [0.0, 3.0, 1.0, 1.0, -2.0]])
    for options in ({}, {"temperature": 0.5}, {"top_k": 2}, {"top_p": 0.7}):
        p = _tensor(
            _run(answer, logits, **options), (2, 5), "the probabilities (B, V)"
        )
        want = next_token_probs(logits, **options)
        if not _close(p.sum(-1), torch.ones(2)):
            return (
                f"with {options or 'no options'} the rows "
                "must sum to 1: renormalise"
            )
        if "temperature" in options and _close(p, (logits * 0.5).softmax(-1)):
            return "divide the logits by the temperature, do not multiply"
        if "top_p" in options and not _close(p, want):
            if bool(((p > 0).sum(-1) < (want > 0).sum(-1)).any()):
                return (
                    "top-p keeps one token too few: keep the "
                    "token that crosses top_p too"
                )
            return (
                "top-p keeps the most likely tokens whose probabilities reach top_p"
            )
        if not _close(p, want):
            return (
                f"with {options or 'no options'} the "
                "probabilities differ from the guide's"
            )
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
    except _Raised as raised:
        return Verdict(False, f"{name}: {raised}")
    if problem:
        return Verdict(False, f"{name}: {problem}")
    return Verdict(True, f"{name}: correct, every property holds")


assert set(_CHECKS) == set(EXERCISES)
