"""Gated DeltaNet: linear attention whose memory is a fixed-size matrix, no cache.

Yang, Kautz and Hatamizadeh (2024), "Gated Delta Networks", arXiv:2412.06464;
the layer as Qwen3-Next uses it (three of these for every softmax layer). Shape
letters: B batch, T sequence length, C channels, H heads, K the key width of a
head, V the value width of a head, N the chunk length.

Each head keeps a state S of shape (K, V). At every position it forgets a share of
it (the gate alpha = exp(g)), reads what S recalls for the new key, and writes back
a beta-sized step of the difference to the new value (the delta rule):

    S <- alpha * S;   S <- S + beta * k (v - S^T k)^T;   o = S^T q

The state never grows: a layer holds H * K * V numbers whatever T is.
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from snippets.core.cache import A_STATE, LinearState, no_rolling

# --8<-- [end:imports]

__all__ = [
    "gated_delta_recurrent",
    "gated_delta_chunked",
    "GatedDeltaNet",
    "state_bytes",
    "check_delta_inputs",
]


# --8<-- [start:checks]
from snippets.core.checks import check_positive_int  # a size: a positive int


def check_delta_inputs(q, k, v, g, beta, state) -> None:
    """q, k (B, H, T, K); v (B, H, T, V); g, beta (B, H, T); state (B, H, K, V)."""
    if q.dim() != 4 or q.shape != k.shape or q.size(2) == 0:
        raise ValueError(
            f"q and k must both be (B, H, T, K) with T >= 1, got {tuple(q.shape)} "
            f"and {tuple(k.shape)}"
        )
    B, H, T, K = q.shape
    if v.dim() != 4 or v.shape[:3] != (B, H, T):
        raise ValueError(
            f"v must be (B, H, T, V) = ({B}, {H}, {T}, V), got {tuple(v.shape)}"
        )
    for name, t in (("g", g), ("beta", beta)):
        if t.shape != (B, H, T):
            raise ValueError(
                f"{name} must be (B, H, T) = {(B, H, T)}, got {tuple(t.shape)}"
            )
    # The values are read on the CPU only: elsewhere, a wait for the device.
    if g.device.type == "cpu" and bool((g > 0).any()):
        raise ValueError(
            f"g must be <= 0, got a largest value of {g.max().item():.4g}: it is "
            f"the log of the forget gate alpha = exp(g), at most 1"
        )
    if state is not None and state.shape != (B, H, K, v.size(-1)):
        raise ValueError(
            f"state must be (B, H, K, V) = {(B, H, K, v.size(-1))}, got "
            f"{tuple(state.shape)}"
        )


# --8<-- [end:checks]


# --8<-- [start:recurrent]
def gated_delta_recurrent(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The gated delta rule one position at a time: what the layer computes.

    Args:
        q: queries (B, H, T, K), unit length and scaled by K ** -0.5.
        k: keys (B, H, T, K), unit length.
        v: values (B, H, T, V).
        g: log of the forget gate (B, H, T), <= 0: alpha = exp(g) in (0, 1].
        beta: the write strength (B, H, T), in (0, 1).
        state: S before position 0 (B, H, K, V), or None for zeros.

    Returns:
        o (B, H, T, V) and the state after the last position (B, H, K, V).

    Raises:
        ValueError: a shape does not match (the state's too), T = 0 or g > 0.
    """
    check_delta_inputs(q, k, v, g, beta, state)
    B, H, T, K = k.shape
    S = q.new_zeros(B, H, K, v.size(-1)) if state is None else state
    outputs = []
    for t in range(T):
        k_t, v_t, q_t = k[:, :, t], v[:, :, t], q[:, :, t]  # (B, H, K) / (B, H, V)
        S = S * g[:, :, t].exp()[..., None, None]  # forget: S <- alpha S
        recalled = torch.einsum("bhk,bhkv->bhv", k_t, S)  # what S says k_t maps to
        delta = beta[:, :, t, None] * (v_t - recalled)  # a step towards v_t
        S = S + torch.einsum(
            "bhk,bhv->bhkv", k_t, delta
        )  # write: S <- S + k delta^T
        outputs.append(torch.einsum("bhk,bhkv->bhv", q_t, S))  # read: o = S^T q
    return torch.stack(outputs, dim=2), S


# --8<-- [end:recurrent]


# --8<-- [start:chunked]
def gated_delta_chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    state: Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """The same function, N positions at a time: matrix products instead of a loop.

    Inside a chunk the T writes depend on each other only through a triangular
    system: the write u_i at position i is beta_i (v_i - what the state holds for
    k_i), and that state holds the chunk's earlier writes u_j, decayed by
    exp(G_i - G_j) (G the running sum of g inside the chunk). Solving
    (I + A) U = beta (V - decayed S_0 reads) for all N writes at once replaces N
    sequential steps; only the state passes from chunk to chunk. T need not be a
    multiple of N: padding with k = v = beta = g = 0 leaves the state unchanged.

    Args:
        q: queries (B, H, T, K), as in gated_delta_recurrent.
        k: keys (B, H, T, K).
        v: values (B, H, T, V).
        g: log of the forget gate (B, H, T), <= 0.
        beta: the write strength (B, H, T).
        state: S before position 0 (B, H, K, V), or None for zeros.
        chunk_size: N, positions per chunk (a positive int).

    Returns:
        o (B, H, T, V) and the final state (B, H, K, V).

    Raises:
        ValueError: chunk_size not positive, a shape not matching, T = 0, g > 0.
        TypeError: chunk_size not an int.
    """
    check_delta_inputs(q, k, v, g, beta, state)
    check_positive_int("chunk_size", chunk_size)
    B, H, T, K = k.shape
    N, pad = chunk_size, -T % chunk_size
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = F.pad(g, (0, pad)), F.pad(beta, (0, pad))
    n = (
        T + pad
    ) // N  # (B, H, n, N, .): chunk c holds positions c N .. c N + N - 1
    q, k, v = (x.reshape(B, H, n, N, -1) for x in (q, k, v))
    G = g.reshape(B, H, n, N).cumsum(-1)  # log decay from the chunk's start to i
    beta = beta.reshape(B, H, n, N, 1)
    past = torch.ones(N, N, dtype=torch.bool, device=q.device).tril()  # j <= i
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~past, -torch.inf).exp()
    A = (beta * k @ k.transpose(-1, -2) * decay).tril(-1)  # (B, H, n, N, N), j < i
    eye = torch.eye(N, dtype=q.dtype, device=q.device)
    # U = W (V - exp(G) K S_0): solve once, W = (I + A)^-1 diag(beta)
    u_free = torch.linalg.solve_triangular(eye + A, beta * v, upper=False)
    k_read = torch.linalg.solve_triangular(
        eye + A, beta * k * G[..., None].exp(), upper=False
    )
    scores = q @ k.transpose(-1, -2) * decay  # (B, H, n, N, N), zero for j > i
    S = q.new_zeros(B, H, K, v.size(-1)) if state is None else state
    outputs = []
    for c in range(n):  # only the state crosses chunk borders
        u = u_free[:, :, c] - k_read[:, :, c] @ S  # the chunk's writes (B, H, N, V)
        from_state = (
            q[:, :, c] * G[:, :, c, :, None].exp()
        ) @ S  # decayed S_0 reads
        outputs.append(from_state + scores[:, :, c] @ u)
        to_end = (G[:, :, c, -1:] - G[:, :, c]).exp()[..., None]  # (B, H, N, 1)
        S = (
            S * G[:, :, c, -1].exp()[..., None, None]
            + (k[:, :, c] * to_end).transpose(-1, -2) @ u
        )
    o = torch.stack(outputs, dim=2).reshape(B, H, n * N, -1)[:, :, :T]
    return o, S


# --8<-- [end:chunked]


# --8<-- [start:layer]
def _unit(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x scaled to length 1 along its last axis (eps inside the root, as in FLA)."""
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


class GatedDeltaNet(nn.Module):
    """A Gated DeltaNet layer as in Qwen3-Next: (B, T, C) -> (B, T, C), causal.

    Projections to queries, keys, values, the output gate z, beta and the
    decay's input a; a short causal depthwise convolution (width conv_size, then
    SiLU) over q, k and v; unit-length q and k; the gated delta rule (chunked);
    an RMS norm of each head's output, scaled and gated by SiLU(z); a projection
    back to C. No position scheme: order enters through the recurrence and the
    convolution. The decay per head: g = -exp(A_log) * softplus(a + dt_bias).

    Args:
        n_head: H, heads of the recurrence (value heads).
        n_embed: C, the width of the input and output.
        head_k: K, the key (and query) width of a head.
        head_v: V, the value width of a head.
        n_k_head: heads of queries and keys (None: n_head); each is shared by
            n_head // n_k_head value heads, as grouped-query attention shares keys.
        conv_size: the convolution's width.
        chunk_size: N, positions per chunk of the chunked form.
        eps: inside the square roots of the unit lengths and of the RMS norm.
    """

    def __init__(
        self,
        n_head: int,
        n_embed: int,
        head_k: int,
        head_v: int,
        *,
        n_k_head: int | None = None,
        conv_size: int = 4,
        chunk_size: int = 64,
        eps: float = 1e-6,
    ):
        super().__init__()
        n_k_head = n_head if n_k_head is None else n_k_head
        for name, value in (
            ("n_embed", n_embed),
            ("n_head", n_head),
            ("head_k", head_k),
            ("head_v", head_v),
            ("n_k_head", n_k_head),
            ("conv_size", conv_size),
            ("chunk_size", chunk_size),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} ({value!r}) must be a positive int")
        if n_head % n_k_head:
            raise ValueError(f"n_k_head ({n_k_head}) must divide n_head ({n_head})")
        self.n_head, self.n_k_head, self.head_k, self.head_v = (
            n_head,
            n_k_head,
            head_k,
            head_v,
        )
        self.chunk_size, self.eps, self.unit_eps = chunk_size, eps, eps
        qk, vv = n_k_head * head_k, n_head * head_v
        self.q = nn.Linear(n_embed, qk, bias=False)
        self.k = nn.Linear(n_embed, qk, bias=False)
        self.v = nn.Linear(n_embed, vv, bias=False)
        self.z = nn.Linear(n_embed, vv, bias=False)  # the output gate
        self.b = nn.Linear(n_embed, n_head, bias=False)  # beta = sigmoid(b(x))
        self.a = nn.Linear(n_embed, n_head, bias=False)  # the decay's input
        # Initialised as in Mamba 2 and the paper's code: A in (1, 16), the step
        # softplus(dt_bias) log-uniform in (0.001, 0.1), so that at first exp(g)
        # keeps 20 % to 99.9 % of the state per position.
        self.A_log = nn.Parameter(torch.empty(n_head).uniform_(1, 16).log())
        dt = torch.exp(torch.empty(n_head).uniform_(-6.9, -2.3))  # log-uniform
        self.dt_bias = nn.Parameter(
            dt + torch.log(-torch.expm1(-dt))
        )  # softplus^-1
        channels = 2 * qk + vv  # one depthwise filter per channel of q, k and v
        self.conv = nn.Conv1d(
            channels,
            channels,
            conv_size,
            groups=channels,
            padding=conv_size - 1,
            bias=False,
        )
        self.norm_weight = nn.Parameter(torch.ones(head_v))
        self.out = nn.Linear(vv, n_embed, bias=False)

    def gates(self, x):
        """x (B, T, C) -> q, k (B, H, T, K), v (B, H, T, V), g, beta (B, H, T)."""
        B, T, _ = x.shape
        qkv = torch.cat(
            [self.q(x), self.k(x), self.v(x)], dim=-1
        )  # (B, T, 2HK + HV)
        qkv = F.silu(self.conv(qkv.transpose(1, 2))[..., :T]).transpose(
            1, 2
        )  # causal
        q, k, v = qkv.split(
            [self.q.out_features, self.k.out_features, self.v.out_features], -1
        )
        q, k = (
            t.reshape(B, T, self.n_k_head, self.head_k).transpose(1, 2)
            for t in (q, k)
        )
        group = self.n_head // self.n_k_head  # value heads per key head
        q, k = (t.repeat_interleave(group, dim=1) for t in (q, k))  # (B, H, T, K)
        k = _unit(k, self.unit_eps)  # unit keys: the delta rule's step stays stable
        q = _unit(q, self.unit_eps) * self.head_k**-0.5
        v = v.reshape(B, T, self.n_head, self.head_v).transpose(
            1, 2
        )  # (B, H, T, V)
        beta = self.b(x).sigmoid().transpose(1, 2)  # (B, H, T) in (0, 1)
        return q, k, v, self.decay(x), beta

    def decay(self, x):
        """x (B, T, C) -> g (B, H, T) <= 0, the log of the forget gate per head."""
        g = -self.A_log.exp() * F.softplus(self.a(x) + self.dt_bias)  # (B, T, H)
        return g.transpose(1, 2)

    def output_gate(self, x):
        """x (B, T, C) -> the gate on each head's normed output (B, T, H, V)."""
        B, T, _ = x.shape
        return F.silu(self.z(x)).reshape(B, T, self.n_head, self.head_v)

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """A LinearState: the state (H, K, V) and the convolution's last
        inputs (its projections into it have no bias: x is as good)."""
        no_rolling(self, window, A_STATE)
        state = (self.n_head, self.head_k, self.head_v)
        return LinearState(batch_size, state, self.conv.kernel_size[0] - 1)

    def forward(self, x, cache=None, *, return_weights=False, recurrent=False):
        """x (B, T, C) -> (B, T, C); recurrent=True uses the step-by-step form.

        With a cache (a LinearState), x holds the positions after those it has
        seen: the state moves on past them (one token: one recurrent step).
        """
        if x.dim() != 3 or x.size(-1) != self.q.in_features:
            raise ValueError(
                f"x must be (B, T, {self.q.in_features}), got {tuple(x.shape)}"
            )
        if return_weights:
            raise ValueError(
                f"{type(self).__name__} has no attention weights: it mixes "
                "positions through a fixed-size state, never a (T, T) matrix"
            )
        S = None
        if cache is None:
            q, k, v, g, beta = self.gates(x)
        else:  # the state so far; the convolution reads the cached inputs too
            S, context = cache.update(x)  # (B, H, K, V), (B, w + T, C)
            w = context.size(1) - x.size(1)
            q, k, v, g, beta = (t[:, :, w:] for t in self.gates(context))
            recurrent = recurrent or x.size(1) == 1
        if recurrent:
            o, state = self.recurrent_rule(q, k, v, g, beta, S)
        else:
            o, state = self.chunked_rule(
                q, k, v, g, beta, S, chunk_size=self.chunk_size
            )
        if cache is not None:
            S.copy_(state)  # the cache's state, past the new positions
        o = o.transpose(1, 2)  # (B, T, H, V)
        o = (
            o
            * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + self.eps)
            * self.norm_weight
        )
        B, T, H, V = o.shape
        return self.out((o * self.output_gate(x)).reshape(B, T, H * V))

    # The rule in its two forms; a variant of the layer may bring its own.
    recurrent_rule = staticmethod(gated_delta_recurrent)
    chunked_rule = staticmethod(gated_delta_chunked)


# --8<-- [end:layer]


# --8<-- [start:bytes]
def state_bytes(
    n_head: int,
    head_k: int,
    head_v: int,
    *,
    conv_channels: int = 0,
    conv_size: int = 4,
    batch: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes a Gated DeltaNet layer carries between tokens, whatever T is.

    The state (H, K, V) per sequence, plus the convolution's last conv_size - 1
    inputs of each of its conv_channels channels. A softmax layer's KV cache
    instead grows by a key and a value per token
    (snippets.layers.kv_heads.kv_cache_bytes).
    """
    numbers = n_head * head_k * head_v + conv_channels * (conv_size - 1)
    return batch * numbers * bytes_per_element


# --8<-- [end:bytes]
