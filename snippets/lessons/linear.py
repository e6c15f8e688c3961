"""Plain causal linear attention, as the linear-attention page builds it before the
delta rule: attention with the softmax left out, computed as a masked (T, T)
matrix of scores and as a running sum of outer products, a state whose size does
not depend on T.

Plain torch, and only what the attention pages explain: one head, no feature map,
no normaliser, no decay. Shape letters: T sequence length, K the key (and query)
width, V the value width.
"""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]

__all__ = ["linear_attention_parallel", "linear_attention_recurrent"]


# --8<-- [start:parallel]
def linear_attention_parallel(q, k, v):
    """Causal attention without the softmax: q, k (T, K), v (T, V) -> (T, V)."""
    T = q.size(0)
    scores = q @ k.T  # (T, T): q_t . k_s, used as they are, no softmax
    mask = torch.ones(T, T, dtype=torch.bool).tril()  # row t sees keys s <= t
    # A hidden key weighs 0 (with no softmax after it, -inf would give -inf).
    return scores.masked_fill(~mask, 0.0) @ v  # (T, T) @ (T, V) -> (T, V)


# --8<-- [end:parallel]


# --8<-- [start:recurrent]
def linear_attention_recurrent(q, k, v):
    """The same outputs from a state S_t = sum over s <= t of k_s v_s^T."""
    S = torch.zeros(k.size(1), v.size(1), dtype=v.dtype)  # (K, V), whatever T is
    out = []
    for t in range(q.size(0)):
        S = S + torch.outer(k[t], v[t])  # write first: S_t includes k_t v_t^T
        out.append(q[t] @ S)  # then read: (K,) @ (K, V) -> (V,)
    return torch.stack(out), S  # (T, V) and the last state (K, V)


# --8<-- [end:recurrent]
