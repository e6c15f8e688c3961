"""The graders of the exercises on caches: a KV cache's step (the generation
and KV heads pages) and a paged cache's block table (the serving page).

snippets.pages.exercises registers them: `check("kv_cache_step", answer)` and
`check("block_slots", answer)`. Each grader runs the learner's function on
fixed inputs through snippets.pages.grading and returns None when every
property holds, else the first one the answer breaks, in the page's words.
"""

import torch

from snippets.core.attention import scaled_dot_product_attention
from snippets.core.masks import causal_mask
from snippets.pages.grading import close, qkv, run, tensor
from snippets.run.paged import block_slots

__all__ = ["grade_kv_cache_step", "grade_block_slots"]


def grade_kv_cache_step(answer) -> str | None:
    """Exercise kv_cache_step: append the new keys and values, attend from the
    new queries; None when every property holds, else the first broken."""
    q, k, v = qkv(4, 6, 6)  # a whole sequence of 6 positions, (2, 2, 6, 8)
    full = scaled_dot_product_attention(q, k, v, causal_mask(6))[0]
    for seen in (5, 3, 0):  # one new token; three; the prompt, into an empty cache
        qn, kn, vn = q[:, :, seen:], k[:, :, seen:], v[:, :, seen:]  # the new ones
        got = run(answer, k[:, :, :seen], v[:, :, :seen], qn, kn, vn)
        if not isinstance(got, tuple) or len(got) != 3:
            return "return three things: out, and the keys and values now cached"
        out, k_all, v_all = got
        what = f"the keys cached after {seen} + {6 - seen} positions"
        k_all = tensor(k_all, (2, 2, 6, 8), what)
        if close(k_all, torch.cat([kn, k[:, :, :seen]], 2)) and seen:
            return "the new keys go after the cached ones: positions stay in order"
        if not close(k_all, k) or not close(v_all, v):
            return "return the cached keys and values with the new ones appended"
        out = tensor(out, (2, 2, 6 - seen, 8), "out (B, H, T_new, D)")
        if close(out, full[:, :, seen:]):
            continue
        if close(out, scaled_dot_product_attention(qn, kn, vn)[0]):
            return "the new queries see only the new keys: attend to the cached too"
        if close(out, scaled_dot_product_attention(qn, k, v)[0]):
            return (
                f"with {6 - seen} new queries, one sees a later new key: they are "
                "the last rows of the causal mask over all positions"
            )
        return (
            f"with {seen} cached and {6 - seen} new positions, out differs from "
            "recomputing: query t sees the keys at positions 0 .. t"
        )
    return None


def grade_block_slots(answer) -> str | None:
    """Exercise block_slots: a sequence's storage rows through its block
    table; None when every property holds, else the first broken."""
    table = torch.tensor([7, 2, 5, 0])  # a sequence's blocks, in order
    for bs, n in ((4, 14), (3, 10)):
        p = torch.arange(n).flip(0)  # positions in any order: n - 1 .. 0
        out = tensor(run(answer, table, p, bs), (n,), f"block_slots(..., {bs})")
        want = block_slots(table, p, bs)
        if out.is_floating_point():
            return f"block_slots should return integer rows, got {out.dtype}"
        wrong = (out != want).nonzero()[:1, 0]  # the first wrong position
        if wrong.numel():
            at, row = int(p[wrong]), int(want[wrong])
            e, b = at // bs, int(table[at // bs])  # its entry in the table, block
            # fmt: off
            for mistake, message in [  # a learner's answer, and what to say
                (p, f"the cache is paged: position {at} is in entry {e}, "
                    f"block {b}"),
                (table[p % bs] * bs + p // bs, f"position {at} sits in the table's "
                    f"entry p // block_size = {e}, at p % block_size = {at % bs}"),
                (table[p // bs] + p % bs, f"block {b}'s rows start at {b} * "
                    f"block_size = {b * bs}, not at {b}"),
                (want + 1, "a block's first position is its row 0: one too far"),
            ]:
                if torch.equal(out, mistake):
                    return message
            # fmt: on
            return f"position {at} should be row {row}: block {b}, row {at % bs}"
    return None
