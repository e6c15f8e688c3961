"""The linear-attention page's lesson computes causal attention without the softmax.

Its parallel form (a masked (T, T) matrix of scores) equals its recurrent form (a
running sum of k v^T), and both equal the definition written term by term,
out_t = sum over s <= t of (q_t . k_s) v_s, with no mask tensor and no state. The
recurrent form equals the package's lightning attention with its decay switched off
(slope 0: lambda = exp(0) = 1), recurrent and chunked, head by head.

It is not the gated delta rule with the gate at 1 in general: the delta rule
subtracts what the state already holds for the key before it writes. The two agree
exactly when every key is orthogonal to the keys before it (then that read is 0)
and the write strength beta is 1; a key written twice tells them apart, which is
the difference the page names before the delta rule.
"""

import pytest
import torch

from snippets.layers.lightning import lightning_chunked, lightning_recurrent
from snippets.layers.linear_attention import gated_delta_recurrent
from snippets.lessons import linear as lesson

SIZES = [(1, 3, 5), (7, 4, 4), (40, 8, 3)]  # (T, K, V): K != V catches a transpose


def qkv(T, K, V, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(T, K, generator=gen, dtype=torch.float64)
    k = torch.randn(T, K, generator=gen, dtype=torch.float64)
    v = torch.randn(T, V, generator=gen, dtype=torch.float64)
    return q, k, v


def by_definition(q, k, v):
    """out_t = sum over s <= t of (q_t . k_s) v_s, one term at a time."""
    rows = []
    for t in range(q.size(0)):
        row = torch.zeros(v.size(1), dtype=v.dtype)
        for s in range(t + 1):
            row = row + torch.dot(q[t], k[s]) * v[s]
        rows.append(row)
    return torch.stack(rows)


@pytest.mark.parametrize("T, K, V", SIZES)
def test_the_two_forms_and_the_definition_agree(T, K, V):
    q, k, v = qkv(T, K, V)
    parallel = lesson.linear_attention_parallel(q, k, v)
    recurrent, S = lesson.linear_attention_recurrent(q, k, v)
    expected = by_definition(q, k, v)
    assert parallel.shape == recurrent.shape == (T, V)
    torch.testing.assert_close(parallel, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(recurrent, expected, rtol=0, atol=1e-12)
    # The last state is the sum of every k_s v_s^T, of shape (K, V) whatever T is.
    assert S.shape == (K, V)
    torch.testing.assert_close(S, k.T @ v, rtol=0, atol=1e-12)


def test_an_output_never_depends_on_a_later_token():
    q, k, v = qkv(12, 4, 4)
    later = [x.clone() for x in (q, k, v)]
    for x in later:
        x[7:] = torch.randn(5, 4, generator=torch.Generator().manual_seed(9))
    forms = (
        lesson.linear_attention_parallel,
        lambda *qkv: lesson.linear_attention_recurrent(*qkv)[0],  # outputs only
    )
    for form in forms:
        before, after = form(q, k, v), form(*later)
        assert torch.equal(before[:7], after[:7])
        assert not torch.allclose(before[7:], after[7:])  # the change reached them


def test_the_page_s_table():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = torch.tensor([[1.0, 2.0], [3.0, 0.0], [0.0, 1.0]])
    out, S = lesson.linear_attention_recurrent(q, k, v)
    assert out.tolist() == [[1.0, 2.0], [3.0, 0.0], [1.0, 3.0]]
    assert S.tolist() == [[1.0, 3.0], [3.0, 1.0]]
    # The states after tokens 1 and 2, as the table shows them.
    assert lesson.linear_attention_recurrent(q[:1], k[:1], v[:1])[1].tolist() == [
        [1.0, 2.0],
        [0.0, 0.0],
    ]
    assert lesson.linear_attention_recurrent(q[:2], k[:2], v[:2])[1].tolist() == [
        [1.0, 2.0],
        [3.0, 0.0],
    ]


@pytest.mark.parametrize("chunk_size", [64, 5])
def test_equals_lightning_attention_without_its_decay(chunk_size):
    B, H, T, D = 2, 3, 23, 6
    gen = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(3, B, H, T, D, generator=gen, dtype=torch.float64)
    slope = torch.zeros(H, dtype=torch.float64)  # keep exp(0) = all of the state
    o_rec, S_rec = lightning_recurrent(q, k, v, slope)
    o_chunk, S_chunk = lightning_chunked(q, k, v, slope, chunk_size=chunk_size)
    for b in range(B):
        for h in range(H):
            mine, S = lesson.linear_attention_recurrent(q[b, h], k[b, h], v[b, h])
            torch.testing.assert_close(mine, o_rec[b, h], rtol=0, atol=1e-12)
            torch.testing.assert_close(mine, o_chunk[b, h], rtol=0, atol=1e-12)
            torch.testing.assert_close(S, S_rec[b, h], rtol=0, atol=1e-12)
            torch.testing.assert_close(S, S_chunk[b, h], rtol=0, atol=1e-12)


def delta_rule_no_gate(q, k, v):
    """The package's gated delta rule for one head, gate 1 (g = 0), beta = 1."""
    T = q.size(0)
    ones = torch.ones(1, 1, T, dtype=q.dtype)
    o, S = gated_delta_recurrent(q[None, None], k[None, None], v[None, None], 0 * ones, ones)
    return o[0, 0], S[0, 0]


def test_equals_the_delta_rule_only_while_keys_are_orthogonal():
    T, K, V = 6, 8, 5
    q, _, v = qkv(T, K, V, seed=2)
    # T orthonormal keys (rows of an orthogonal matrix): S holds nothing for k_t yet.
    k = torch.linalg.qr(
        torch.randn(K, K, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    )[0][:T]
    mine, S = lesson.linear_attention_recurrent(q, k, v)
    theirs, S_delta = delta_rule_no_gate(q, k, v)
    torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-12)
    torch.testing.assert_close(S, S_delta, rtol=0, atol=1e-12)

    # The key of position 0 written again: the sum adds the new value to the old,
    # the delta rule replaces it. Read with that key, each returns what it holds.
    k2, v2 = torch.cat([k, k[:1]]), torch.cat([v, v[:1] + 1.0])
    _, S = lesson.linear_attention_recurrent(torch.cat([q, q[:1]]), k2, v2)
    _, S_delta = delta_rule_no_gate(torch.cat([q, q[:1]]), k2, v2)
    torch.testing.assert_close(k[0] @ S, v[0] + v2[-1], rtol=0, atol=1e-12)
    torch.testing.assert_close(k[0] @ S_delta, v2[-1], rtol=0, atol=1e-12)
