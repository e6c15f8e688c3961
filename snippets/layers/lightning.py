"""Lightning attention: linear attention with a fixed decay per head, no softmax.

MiniMax (2025), "MiniMax-01: Scaling Foundation Models with Lightning
Attention", arXiv:2501.08313; seven of these for every softmax layer in
MiniMax-Text-01. Shape letters: B batch, T sequence length, C channels, H heads,
D the width of a head, N the chunk length.

Each head keeps a state S (D, D) that forgets the same share lambda = exp(-s)
at every position (s the head's slope, fixed, not computed from the input) and
adds the new key-value product; nothing is read back before writing:

    S <- lambda S + k v^T;   o = S^T q

so it is causal linear attention whose weights decay as lambda^(i - j). The
state never grows: H * D * D numbers a layer whatever T is.
"""

# --8<-- [start:imports]
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from snippets.core.cache import A_STATE, LinearState, no_rolling
from snippets.core.checks import check_positive_int

# --8<-- [end:imports]

__all__ = ["lightning_recurrent", "lightning_chunked", "LightningAttention"]


# --8<-- [start:checks]
def _check(q, k, v, slope, state) -> None:
    """q, k, v (B, H, T, D); slope (H,) >= 0; state (B, H, D, D) or None."""
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape or q.size(2) == 0:
        raise ValueError(
            f"q, k and v must all be (B, H, T, D) with T >= 1, got "
            f"{tuple(q.shape)}, {tuple(k.shape)} and {tuple(v.shape)}"
        )
    B, H, T, D = q.shape
    # The values are read on the CPU only: elsewhere, a wait for the device.
    cpu = slope.device.type == "cpu"
    if slope.shape != (H,) or (cpu and bool((slope < 0).any())):
        raise ValueError(
            f"slope must be (H,) = ({H},) and >= 0 (lambda = exp(-slope) <= 1), "
            f"got shape {tuple(slope.shape)}, smallest {slope.min().item():.4g}"
        )
    if state is not None and state.shape != (B, H, D, D):
        raise ValueError(
            f"state must be (B, H, D, D) = {(B, H, D, D)}, got {tuple(state.shape)}"
        )


# --8<-- [end:checks]


# --8<-- [start:recurrent]
def lightning_recurrent(
    q: Tensor, k: Tensor, v: Tensor, slope: Tensor, state: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The rule one position at a time: S <- exp(-slope) S + k v^T, o = S^T q.

    Args:
        q: queries (B, H, T, D).
        k: keys (B, H, T, D).
        v: values (B, H, T, D).
        slope: (H,), >= 0: each head keeps exp(-slope) of its state per position.
        state: S before position 0 (B, H, D, D), or None for zeros.

    Returns:
        o (B, H, T, D) and the state after the last position (B, H, D, D).

    Raises:
        ValueError: a shape does not match, T = 0 or a slope < 0.
    """
    _check(q, k, v, slope, state)
    B, H, T, D = q.shape
    S = q.new_zeros(B, H, D, D) if state is None else state
    keep = torch.exp(-slope)[:, None, None]  # (H, 1, 1)
    outputs = []
    for t in range(T):
        S = (
            keep * S + k[:, :, t, :, None] * v[:, :, t, None, :]
        )  # forget, then write
        outputs.append(torch.einsum("bhd,bhde->bhe", q[:, :, t], S))  # read
    return torch.stack(outputs, dim=2), S


# --8<-- [end:recurrent]


# --8<-- [start:chunked]
def lightning_chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    slope: Tensor,
    state: Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """The same function N positions at a time (the paper's tiling).

    Inside a chunk: softmax-free attention, (q_i . k_j) lambda^(i - j) for j <= i;
    from before it: the state read by q_i decayed i + 1 times; the state then
    moves on past the chunk's m positions:
    lambda^m S + sum_j lambda^(m - 1 - j) k_j v_j^T.
    The last chunk may be shorter than N.

    Raises:
        ValueError: as lightning_recurrent, or chunk_size not positive.
        TypeError: chunk_size not an int.
    """
    _check(q, k, v, slope, state)
    check_positive_int("chunk_size", chunk_size)
    B, H, T, D = q.shape
    S = q.new_zeros(B, H, D, D) if state is None else state
    s = slope[:, None, None]  # (H, 1, 1)
    outputs = []
    for start in range(0, T, chunk_size):
        qc, kc, vc = (x[:, :, start : start + chunk_size] for x in (q, k, v))
        m = qc.size(2)
        i = torch.arange(m, device=q.device, dtype=q.dtype)
        gap = i[:, None] - i[None, :]  # i - j
        within = torch.exp(-s * gap.clamp(min=0)) * (gap >= 0)  # (H, m, m)
        from_state = (qc * torch.exp(-s * (i[:, None] + 1))) @ S
        outputs.append(from_state + (qc @ kc.transpose(-1, -2) * within) @ vc)
        to_end = torch.exp(-s * (m - 1 - i[:, None]))  # (H, m, 1)
        S = torch.exp(-s * m) * S + (kc * to_end).transpose(-1, -2) @ vc
    return torch.cat(outputs, dim=2), S


# --8<-- [end:chunked]


# --8<-- [start:layer]
class LightningAttention(nn.Module):
    """MiniMax-01's lightning-attention layer: (B, T, C) -> (B, T, C), causal.

    q, k, v = SiLU of three projections; the decaying rule above (chunked); an
    RMS norm over all H * D output channels together; a sigmoid output gate from
    x; a projection back to C. No position scheme: order enters through the
    decay. Its cache is a LinearState (the state; no convolution inputs).

    Args:
        n_head: H.
        n_embed: C.
        head_size: D, the width of a head's query, key and value.
        slope: (H,) the heads' decay rates, >= 0 (MiniMax: ALiBi's slopes,
            scaled down with the layer's depth).
        chunk_size: N, positions per chunk of the chunked form.
        eps: inside the RMS norm's square root.
    """

    def __init__(
        self,
        n_head: int,
        n_embed: int,
        head_size: int,
        slope: Tensor | list[float],
        *,
        chunk_size: int = 64,
        eps: float = 1e-6,
    ):
        super().__init__()
        for name, value in (
            ("n_embed", n_embed),
            ("n_head", n_head),
            ("head_size", head_size),
            ("chunk_size", chunk_size),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} ({value!r}) must be a positive int")
        slope = torch.as_tensor(slope, dtype=torch.float32)
        if slope.shape != (n_head,) or bool((slope < 0).any()):
            raise ValueError(
                f"slope must be {n_head} numbers >= 0, got {slope.tolist()}"
            )
        self.n_head, self.head_k, self.head_v = n_head, head_size, head_size
        self.chunk_size, self.eps = chunk_size, eps
        width = n_head * head_size
        self.q, self.k, self.v = (
            nn.Linear(n_embed, width, bias=False) for _ in range(3)
        )
        self.gate = nn.Linear(n_embed, width, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(width))
        self.out = nn.Linear(width, n_embed, bias=False)
        self.register_buffer("slope", slope)

    def new_cache(self, batch_size, max_length, *, window=None, sinks=0):
        """A LinearState: the state (H, D, D); no convolution."""
        no_rolling(self, window, A_STATE)
        return LinearState(batch_size, (self.n_head, self.head_k, self.head_v))

    def forward(self, x, cache=None, *, return_weights=False, recurrent=False):
        """x (B, T, C) -> (B, T, C); with a cache (a LinearState), x holds the
        positions after those it has seen; recurrent=True: the step-by-step form."""
        if x.dim() != 3 or x.size(-1) != self.q.in_features:
            raise ValueError(
                f"x must be (B, T, {self.q.in_features}), got {tuple(x.shape)}"
            )
        if return_weights:
            raise ValueError(
                "LightningAttention has no attention weights: it mixes positions "
                "through a fixed-size state, never a (T, T) matrix"
            )
        B, T, _ = x.shape
        q, k, v = (
            F.silu(p(x)).view(B, T, self.n_head, -1).transpose(1, 2)
            for p in (self.q, self.k, self.v)
        )
        S = None
        if cache is not None:  # the state so far (no convolution rows)
            S, _ = cache.update(x)
            recurrent = recurrent or T == 1
        slope = self.slope.to(x.dtype)
        if recurrent:
            o, state = lightning_recurrent(q, k, v, slope, S)
        else:
            o, state = lightning_chunked(q, k, v, slope, S, self.chunk_size)
        if cache is not None:
            S.copy_(state)  # the cache's state, past the new positions
        o = o.transpose(1, 2).reshape(B, T, -1)  # (B, T, H * D)
        o = (
            o
            * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + self.eps)
            * self.norm_weight
        )
        return self.out(o * self.gate(x).sigmoid())


# --8<-- [end:layer]
