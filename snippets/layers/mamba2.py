"""Mamba2: a selective state space layer, the state beside attention in hybrids.

Dao and Gu (2024), "Transformers are SSMs: Generalized Models and Efficient
Algorithms Through Structured State Space Duality", arXiv:2405.21060; the layer
of Nemotron-H, Falcon-H1 and Granite 4's hybrids. Shape letters: B batch, T
sequence length, C channels, H heads, P the width of a head, N the state size, G
groups (heads in a group share B and C), L the chunk length.

Each head keeps a state h (N, P) that forgets one share a_t = exp(dt_t A) of
itself at every position (a scalar per head and position: A < 0 fixed, the step
dt_t > 0 from the input) and writes the input x_t, weighted by the step, along
the direction B_t; C_t reads it:

    h_t = a_t h_{t-1} + dt_t B_t x_t^T;   y_t = h_t^T C_t + D x_t

which is linear attention with C as the query, B as the key and dt x as the
value, its weights C_i . B_j decayed by a_{j+1} ... a_i (the paper's SSD
duality, its section 5). The state never grows: H * N * P numbers a layer.
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from snippets.core.cache import A_STATE, LinearState, no_rolling
from snippets.core.checks import check_positive_int, check_shape

# --8<-- [end:imports]

__all__ = ["ssd_recurrent", "ssd_chunked", "Mamba2", "NORMS", "mamba2_state_bytes"]


# --8<-- [start:checks]
def _check(x, dt, A, B, C, state) -> None:
    """x (B, H, T, P); dt (B, H, T) > 0; A (H,) < 0; B, C (B, H, T, N); state
    (B, H, N, P) or None."""
    b, H, T, P = check_shape("x", x, "B H T P")
    if T == 0:
        raise ValueError(f"x must hold T >= 1 positions, got {tuple(x.shape)}")
    check_shape("dt", dt, "B H T", B=b, H=H, T=T)
    _, _, _, N = check_shape("B", B, "B H T N", B=b, H=H, T=T)
    check_shape("C", C, "B H T N", B=b, H=H, T=T, N=N)
    check_shape("A", A, "H", H=H)
    # The values are read on the CPU only: elsewhere, a wait for the device.
    if A.device.type == "cpu" and (bool((A >= 0).any()) or bool((dt <= 0).any())):
        raise ValueError(
            f"A must be < 0 and dt > 0 (a decay a = exp(dt A) < 1), got largest A "
            f"{A.max().item():.4g}, smallest dt {dt.min().item():.4g}"
        )
    if state is not None:
        check_shape("state", state, "B H N P", B=b, H=H, N=N, P=P)


# --8<-- [end:checks]


# --8<-- [start:recurrent]
def ssd_recurrent(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One position at a time: h <- exp(dt A) h + dt B x^T, y = h^T C.

    Args:
        x: inputs (B, H, T, P).
        dt: steps (B, H, T), > 0.
        A: (H,), < 0: the head's decay rate.
        B: write directions (B, H, T, N).
        C: read directions (B, H, T, N).
        state: h before position 0 (B, H, N, P), or None for zeros.

    Returns:
        y (B, H, T, P), without the D x skip, and the state after the last position.

    Raises:
        ValueError: a shape does not match, T = 0, A >= 0 or dt <= 0.
    """
    _check(x, dt, A, B, C, state)
    b, H, T, P = x.shape
    h = x.new_zeros(b, H, B.size(-1), P) if state is None else state
    a = torch.exp(dt * A[:, None])  # (B, H, T): one share per head and position
    outputs = []
    for t in range(T):
        write = (dt[:, :, t, None] * B[:, :, t])[..., None] * x[:, :, t, None, :]
        h = a[:, :, t, None, None] * h + write  # forget, then write: (B, H, N, P)
        outputs.append(torch.einsum("bhn,bhnp->bhp", C[:, :, t], h))  # read
    return torch.stack(outputs, dim=2), h


# --8<-- [end:recurrent]


# --8<-- [start:chunked]
def ssd_chunked(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    state: Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """The same function L positions at a time: the SSD block decomposition.

    With l_i the running sum of log a = dt A inside a chunk, the diagonal block
    is masked attention, (C_i . B_j) exp(l_i - l_j) dt_j x_j for j <= i; the
    state from before the chunk is read by C_i decayed exp(l_i); the state
    then moves on past the chunk's m positions:
    exp(l_m) h + sum_j exp(l_m - l_j) dt_j B_j x_j^T. The last chunk may be short.

    Raises:
        ValueError: as ssd_recurrent, or chunk_size not positive.
        TypeError: chunk_size not an int.
    """
    _check(x, dt, A, B, C, state)
    check_positive_int("chunk_size", chunk_size)
    b, H, T, P = x.shape
    h = x.new_zeros(b, H, B.size(-1), P) if state is None else state
    log_a = dt * A[:, None]  # (B, H, T), <= 0
    outputs = []
    for start in range(0, T, chunk_size):
        end = min(start + chunk_size, T)
        xc, Bc, Cc = (t[:, :, start:end] for t in (x, B, C))
        v = dt[:, :, start:end, None] * xc  # the values: dt x (B, H, m, P)
        run = log_a[:, :, start:end].cumsum(-1)  # l_i (B, H, m)
        gap = run[..., :, None] - run[..., None, :]  # l_i - l_j
        past = torch.ones_like(gap, dtype=torch.bool).tril()
        decay = gap.masked_fill(~past, -torch.inf).exp()  # 0 above the diagonal
        scores = Cc @ Bc.transpose(-1, -2) * decay  # (B, H, m, m)
        from_state = (Cc * run.exp()[..., None]) @ h  # (B, H, m, P)
        outputs.append(scores @ v + from_state)
        to_end = (run[..., -1:] - run).exp()[..., None]  # (B, H, m, 1)
        h = run[..., -1, None, None].exp() * h + (Bc * to_end).transpose(-1, -2) @ v
    return torch.cat(outputs, dim=2), h


# --8<-- [end:chunked]

# Where the output gate SiLU(z) goes: "gate_first" multiplies it in before the
# grouped RMS norm (Mamba2's default; Nemotron-H, Granite 4); "norm_first"
# after it (Falcon-H1's mamba_norm_before_gate); "none" gates without a norm
# (Falcon-H1's default).
NORMS = ("gate_first", "norm_first", "none")


# --8<-- [start:layer]
class Mamba2(nn.Module):
    """A Mamba2 layer: (B, T, C) -> (B, T, C), causal.

    One projection to the gate z (H P), the conv's input xBC (H P + 2 G N) and
    the step's input (H); a causal depthwise convolution over xBC (width
    conv_size, then SiLU), split into x, B and C; dt = softplus(. + dt_bias),
    clamped to dt_limit; the recurrence above (chunked) plus D x; the output
    gated by SiLU(z) and RMS-normed per group of H P / G channels; a projection
    back to C. Its cache is a LinearState: the state and the last
    conv_size - 1 rows of xBC (the convolution's own inputs).

    Args:
        n_head: H.
        n_embed: C.
        head_size: P, the width of a head's input and output.
        state_size: N, the width of B and C.
        n_groups: G, which must divide H.
        conv_size: the convolution's width.
        chunk_size: L, positions per chunk of the chunked form.
        norm: where the gate goes, one of NORMS.
        eps: inside the RMS norm's square root.
        dt_limit: (low, high) the step is clamped to.
        bias: the in-projection's bias; out_bias: the out-projection's (None:
            as bias); conv_bias: the convolution's.
    """

    def __init__(
        self,
        n_head: int,
        n_embed: int,
        head_size: int,
        state_size: int,
        *,
        n_groups: int = 1,
        conv_size: int = 4,
        chunk_size: int = 64,
        norm: str = "gate_first",
        eps: float = 1e-5,
        dt_limit: tuple[float, float] = (0.0, float("inf")),
        bias: bool = False,
        out_bias: bool | None = None,
        conv_bias: bool = True,
    ):
        super().__init__()
        for name, value in (
            ("n_embed", n_embed),
            ("n_head", n_head),
            ("head_size", head_size),
            ("state_size", state_size),
            ("n_groups", n_groups),
            ("conv_size", conv_size),
            ("chunk_size", chunk_size),
        ):
            check_positive_int(name, value)
        if n_head % n_groups:
            raise ValueError(f"n_groups ({n_groups}) must divide n_head ({n_head})")
        if norm not in NORMS:
            raise ValueError(f"norm ({norm!r}) must be one of {NORMS}")
        self.n_head, self.n_groups, self.head_k, self.head_v = (
            n_head,
            n_groups,
            state_size,
            head_size,
        )
        self.chunk_size, self.norm, self.eps, self.dt_limit = (
            chunk_size,
            norm,
            eps,
            dt_limit,
        )
        inner, bc = n_head * head_size, 2 * n_groups * state_size
        self.conv_channels = inner + bc  # what the convolution reads per position
        self.in_proj = nn.Linear(
            n_embed, inner + self.conv_channels + n_head, bias=bias
        )
        self.conv = nn.Conv1d(
            self.conv_channels,
            self.conv_channels,
            conv_size,
            groups=self.conv_channels,
            padding=conv_size - 1,
            bias=conv_bias,
        )
        # As Mamba2 starts: A in (1, 16), the step log-uniform in (0.001, 0.1).
        self.A_log = nn.Parameter(torch.empty(n_head).uniform_(1, 16).log())
        step = torch.exp(torch.empty(n_head).uniform_(-6.9, -2.3))
        self.dt_bias = nn.Parameter(
            step + torch.log(-torch.expm1(-step))
        )  # softplus^-1
        self.D = nn.Parameter(torch.ones(n_head))
        self.norm_weight = nn.Parameter(torch.ones(inner))
        self.out = nn.Linear(
            inner, n_embed, bias=bias if out_bias is None else out_bias
        )

    def gate_and_norm(self, y: Tensor, z: Tensor) -> Tensor:
        """y, z (B, T, H P) -> y gated by SiLU(z) and RMS-normed per group."""
        B, T, width = y.shape
        if self.norm == "gate_first":
            y = y * F.silu(z)
        if self.norm != "none":
            g = y.view(B, T, self.n_groups, width // self.n_groups)
            g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
            y = g.view(B, T, width) * self.norm_weight
        return y * F.silu(z) if self.norm != "gate_first" else y

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """A LinearState: the state (H, N, P) and the last rows of xBC."""
        no_rolling(self, window, A_STATE)
        state = (self.n_head, self.head_k, self.head_v)
        return LinearState(batch_size, state, self.conv.kernel_size[0] - 1)

    def forward(self, x, cache=None, *, return_weights=False, recurrent=False):
        """x (B, T, C) -> (B, T, C); with a cache (a LinearState), x holds the
        positions after those it has seen; recurrent=True: the step-by-step form."""
        check_shape("x", x, "B T C", C=self.in_proj.in_features)
        if return_weights:
            raise ValueError(
                "Mamba2 has no attention weights: it mixes positions through a "
                "fixed-size state, never a (T, T) matrix"
            )
        b, T, _ = x.shape
        if T == 0:
            raise ValueError(f"x must hold T >= 1 positions, got {tuple(x.shape)}")
        H, G, P, N = self.n_head, self.n_groups, self.head_v, self.head_k
        z, xBC, dt = self.in_proj(x).split([H * P, self.conv_channels, H], dim=-1)
        S, w = None, 0
        if cache is not None:  # the state so far; the cached rows before xBC
            S, xBC = cache.update(xBC)  # (B, H, N, P), (B, w + T, channels)
            w = xBC.size(1) - T
            recurrent = recurrent or T == 1
        xBC = F.silu(self.conv(xBC.transpose(1, 2))[..., w : w + T]).transpose(1, 2)
        xs, Bm, Cm = xBC.split([H * P, G * N, G * N], dim=-1)
        xs = xs.view(b, T, H, P).transpose(1, 2)  # (B, H, T, P)
        Bm, Cm = (  # each group's B and C serve its H / G heads
            t.view(b, T, G, N).transpose(1, 2).repeat_interleave(H // G, dim=1)
            for t in (Bm, Cm)
        )
        dt = F.softplus(dt + self.dt_bias).clamp(*self.dt_limit).transpose(1, 2)
        A = -torch.exp(self.A_log)
        if recurrent:
            y, state = ssd_recurrent(xs, dt, A, Bm, Cm, S)
        else:
            y, state = ssd_chunked(xs, dt, A, Bm, Cm, S, self.chunk_size)
        if cache is not None:
            S.copy_(state)  # the cache's state, past the new positions
        y = y + self.D[:, None, None] * xs  # the skip, per head
        y = y.transpose(1, 2).reshape(b, T, H * P)
        return self.out(self.gate_and_norm(y, z))


# --8<-- [end:layer]


# --8<-- [start:bytes]
def mamba2_state_bytes(
    n_head: int,
    head_size: int,
    state_size: int,
    *,
    n_groups: int = 1,
    conv_size: int = 4,
    batch: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes a Mamba2 layer carries between tokens, whatever T is: the state
    (H, N, P) and the convolution's last conv_size - 1 rows of xBC
    (H P + 2 G N channels)."""
    channels = n_head * head_size + 2 * n_groups * state_size
    numbers = n_head * state_size * head_size + channels * (conv_size - 1)
    return batch * numbers * bytes_per_element


# --8<-- [end:bytes]
