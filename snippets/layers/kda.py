"""Kimi Delta Attention: Gated DeltaNet with a forget gate per channel.

Kimi Team (2025), "Kimi Linear: An Expressive, Efficient Attention
Architecture", arXiv:2510.26692; three of these for every MLA layer in Kimi
Linear. The layer extends GatedDeltaNet (linear_attention.py). Shape letters as
there: B batch, T sequence length, C channels, H heads, K the key width of a
head, V the value width of a head, N the chunk length.

Gated DeltaNet forgets the same share alpha of every row of a head's state S
(K, V). Kimi Delta Attention gives each of the K rows (each key channel) its
own share: alpha is a vector, and the forget step is a diagonal matrix,

    S <- diag(alpha) S;   S <- S + beta * k (v - S^T k)^T;   o = S^T q

so a head can keep some channels for thousands of tokens and renew others at
every one. The state is the same size as Gated DeltaNet's: H * K * V numbers.
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from snippets.core.checks import check_positive_int
from snippets.layers.linear_attention import GatedDeltaNet, check_delta_inputs

# --8<-- [end:imports]

__all__ = [
    "kda_recurrent",
    "kda_chunked",
    "KimiDeltaAttention",
    "BoundedKimiDeltaAttention",
]


# --8<-- [start:checks]
def _check(q, k, v, g, beta, state) -> None:
    """g (B, H, T, K): one decay per key channel; the rest as Gated DeltaNet's."""
    if g.shape != k.shape:
        raise ValueError(
            f"g must have the keys' shape (B, H, T, K) = {tuple(k.shape)}, one "
            f"decay per key channel, got {tuple(g.shape)}"
        )
    check_delta_inputs(q, k, v, g.amax(-1), beta, state)  # amax > 0 iff some g > 0


# --8<-- [end:checks]


# --8<-- [start:recurrent]
def kda_recurrent(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The rule one position at a time. As gated_delta_recurrent, but g is
    (B, H, T, K): the log of each key channel's forget gate, <= 0.

    Returns o (B, H, T, V) and the state after the last position (B, H, K, V).

    Raises:
        ValueError: a shape does not match (g's is the keys'), T = 0 or g > 0.
    """
    _check(q, k, v, g, beta, state)
    B, H, T, K = k.shape
    S = q.new_zeros(B, H, K, v.size(-1)) if state is None else state
    outputs = []
    for t in range(T):
        k_t, v_t, q_t = k[:, :, t], v[:, :, t], q[:, :, t]  # (B, H, K) / (B, H, V)
        S = S * g[:, :, t, :, None].exp()  # forget row by row: S <- diag(alpha) S
        recalled = torch.einsum("bhk,bhkv->bhv", k_t, S)
        delta = beta[:, :, t, None] * (v_t - recalled)
        S = S + torch.einsum("bhk,bhv->bhkv", k_t, delta)
        outputs.append(torch.einsum("bhk,bhkv->bhv", q_t, S))
    return torch.stack(outputs, dim=2), S


# --8<-- [end:recurrent]


# --8<-- [start:chunked]
def kda_chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    state: Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """The same function N positions at a time, as gated_delta_chunked.

    What changes with a decay per channel: from position j to i channel c
    keeps exp(G_i,c - G_j,c) (G the running sum of g inside the chunk), so the
    pairwise products k_i . k_j and q_i . k_j weigh each channel by its own
    decay, a (N, N, K) tensor per chunk instead of Gated DeltaNet's (N, N).

    Returns o (B, H, T, V) and the final state (B, H, K, V).

    Raises:
        ValueError: chunk_size not positive, a shape not matching, T = 0, g > 0.
        TypeError: chunk_size not an int.
    """
    _check(q, k, v, g, beta, state)
    check_positive_int("chunk_size", chunk_size)
    B, H, T, K = k.shape
    N, pad = chunk_size, -T % chunk_size
    q, k, v, g = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, g))  # g = 0: no decay
    n = (T + pad) // N
    q, k, v = (x.reshape(B, H, n, N, -1) for x in (q, k, v))
    G = g.reshape(B, H, n, N, K).cumsum(-2)  # per channel, from the chunk's start
    beta = F.pad(beta, (0, pad)).reshape(B, H, n, N, 1)
    past = torch.ones(N, N, dtype=torch.bool, device=q.device).tril()[..., None]
    decay = (
        (G[..., :, None, :] - G[..., None, :, :])
        .masked_fill(~past, -torch.inf)
        .exp()
    )
    pair = "bhcik,bhcjk,bhcijk->bhcij"  # sum over channels, each with its decay
    A = (beta * torch.einsum(pair, k, k, decay)).tril(-1)  # (B, H, n, N, N), j < i
    eye = torch.eye(N, dtype=q.dtype, device=q.device)
    u_free = torch.linalg.solve_triangular(eye + A, beta * v, upper=False)
    k_read = torch.linalg.solve_triangular(eye + A, beta * k * G.exp(), upper=False)
    scores = torch.einsum(pair, q, k, decay)  # zero for j > i
    S = q.new_zeros(B, H, K, v.size(-1)) if state is None else state
    outputs = []
    for c in range(n):  # only the state crosses chunk borders
        u = u_free[:, :, c] - k_read[:, :, c] @ S  # the chunk's writes (B, H, N, V)
        from_state = (q[:, :, c] * G[:, :, c].exp()) @ S  # decayed S_0 reads
        outputs.append(from_state + scores[:, :, c] @ u)
        to_end = (G[:, :, c, -1:] - G[:, :, c]).exp()  # (B, H, N, K)
        S = (
            S * G[:, :, c, -1, :, None].exp()
            + (k[:, :, c] * to_end).transpose(-1, -2) @ u
        )
    o = torch.stack(outputs, dim=2).reshape(B, H, n * N, -1)[:, :, :T]
    return o, S


# --8<-- [end:chunked]


# --8<-- [start:layer]
class KimiDeltaAttention(GatedDeltaNet):
    """A Kimi Delta Attention layer as in Kimi Linear: (B, T, C) -> (B, T, C).

    GatedDeltaNet's layer (projections, short convolution, unit q and k, the
    RMS norm of each head's output, its cache: a LinearState) with three
    changes: the decay per channel, g = -exp(A_log) * softplus(a + dt_bias)
    with a and dt_bias of H * K numbers (A_log still one per head); a and the
    output gate each through a low-rank pair of projections (C -> rank ->
    H * K or H * V); the output gate a sigmoid, not SiLU.

    Args:
        n_head: H, heads.
        n_embed: C, the width of the input and output.
        head_k: K, the key (and query) width of a head.
        head_v: V, the value width of a head.
        rank: the width between the low-rank projections (None: head_k).
        eps: inside the RMS norm of the output.
        conv_size: the short convolution's width.
        chunk_size: N, positions per chunk of the chunked form.
        unit_eps: inside the square root of the unit lengths of q and k.
    """

    def __init__(
        self,
        n_head: int,
        n_embed: int,
        head_k: int,
        head_v: int,
        *,
        rank: int | None = None,
        conv_size: int = 4,
        chunk_size: int = 64,
        eps: float = 1e-6,
        unit_eps: float = 1e-6,
    ):
        super().__init__(
            n_head,
            n_embed,
            head_k,
            head_v,
            conv_size=conv_size,
            chunk_size=chunk_size,
            eps=eps,
        )
        rank = head_k if rank is None else rank
        if isinstance(rank, bool) or not isinstance(rank, int) or rank <= 0:
            raise ValueError(f"rank ({rank!r}) must be a positive int")
        self.unit_eps = unit_eps
        HK, HV = n_head * head_k, n_head * head_v

        def low_rank(width):
            return nn.Sequential(
                nn.Linear(n_embed, rank, bias=False),
                nn.Linear(rank, width, bias=False),
            )

        self.a, self.z = (
            low_rank(HK),
            low_rank(HV),
        )  # the decay's input, the output gate
        # The step softplus(dt_bias) log-uniform in (0.001, 0.1), now per channel.
        dt = torch.exp(torch.empty(HK).uniform_(-6.9, -2.3))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))

    def decay(self, x):
        """x (B, T, C) -> g (B, H, T, K) <= 0: each channel's log forget gate."""
        B, T, _ = x.shape
        a = (self.a(x) + self.dt_bias).view(B, T, self.n_head, self.head_k)
        g = -self.A_log.exp()[:, None] * F.softplus(a)  # (B, T, H, K)
        return g.transpose(1, 2)

    def output_gate(self, x):
        """x (B, T, C) -> sigmoid of the low-rank gate (B, T, H, V)."""
        B, T, _ = x.shape
        return self.z(x).sigmoid().reshape(B, T, self.n_head, self.head_v)

    recurrent_rule = staticmethod(kda_recurrent)
    chunked_rule = staticmethod(kda_chunked)


# --8<-- [end:layer]


# --8<-- [start:bounded]
class BoundedKimiDeltaAttention(KimiDeltaAttention):
    """Kimi Delta Attention with a bounded decay, as GLM-5-Next's linear layers:
    g = lower * sigmoid(exp(A_log) * (a + dt_bias)), each channel's log forget
    gate in (lower, 0), so no channel forgets more than exp(lower) per token
    (lower = -5: at least e^-5 of the state kept). All else, and every other
    argument, as KimiDeltaAttention's.

    Args:
        lower: the bound, a negative float (GLM-5-Next's -5.0).
    """

    def __init__(self, *args, lower: float = -5.0, **kwargs):
        super().__init__(*args, **kwargs)
        number = isinstance(lower, (int, float)) and not isinstance(lower, bool)
        if not number or not lower < 0:
            raise ValueError(f"lower ({lower!r}) must be a negative number")
        self.lower = float(lower)

    def decay(self, x):
        """x (B, T, C) -> g (B, H, T, K) in (lower, 0)."""
        B, T, _ = x.shape
        a = (self.a(x) + self.dt_bias).view(B, T, self.n_head, self.head_k)
        g = self.lower * torch.sigmoid(self.A_log.exp()[:, None] * a)
        return g.transpose(1, 2)


# --8<-- [end:bounded]
