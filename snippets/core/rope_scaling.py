"""RoPE for today's models: scaled frequencies, partial rotation, a base per layer.

A model trained on sequences of length L has seen every angle t * theta_i for t
< L; a longer context shows it angles it never saw. The context extensions
change the frequencies theta_i so that the positions up to the new length turn
the pairs no further than training did:

- linear (position interpolation, Chen et al. 2023): every theta_i / factor;
- dynamic NTK (bloc97, emozilla 2023): a larger base, growing with the length;
- YaRN (Peng et al. 2023): slow pairs interpolated, fast pairs left alone, a
  ramp between them, and a temperature on the scores;
- Llama 3's: YaRN's split by wavelength without the temperature.

And one rule that is not an extension: Gemma 4's proportional RoPE turns only
the fastest pairs of a whole head's frequencies and leaves the slow ones still.

Shape letters: T sequence length, D head size, P = rotary_dim / 2 the pairs.
The rules are transformers' (modeling_rope_utils), computed in float64.
"""

# --8<-- [start:imports]
import dataclasses
import math

import torch

from snippets.core.positions import apply_rope, rope_frequencies
from snippets.core.spec import Spec

# --8<-- [end:imports]

__all__ = [
    "SCALINGS",
    "RopeSpec",
    "linear_frequencies",
    "ntk_frequencies",
    "yarn_frequencies",
    "llama3_frequencies",
    "proportional_frequencies",
    "frequencies",
    "rotate",
]

SCALINGS = ("default", "linear", "dynamic", "yarn", "llama3", "proportional")


# --8<-- [start:spec]
@dataclasses.dataclass(frozen=True)
class RopeSpec(Spec):
    """How one layer turns its queries and keys.

    Args:
        base: theta_i = base ** (-2i / rotary_dim) before any scaling.
        rotary_dim: channels rotated, the first rotary_dim of each head (even);
            the rest pass unturned (partial RoPE). None: the whole head.
            With scaling="proportional", the pairs turned keep the head's
            frequencies (base ** (-2i / D)), not rotary_dim's.
        scaling: one of SCALINGS.
        factor: how many times longer the new context is.
        original_length: the training length L (YaRN, Llama 3; for dynamic
            NTK the length up to which nothing changes).
        low_freq_factor: Llama 3: wavelengths above L / low_freq_factor are
            divided by factor.
        high_freq_factor: Llama 3: wavelengths below L / high_freq_factor are
            kept.
        beta_fast: YaRN: pairs turning more often over L are kept.
        beta_slow: YaRN: pairs turning less often over L are interpolated.
        truncate: YaRN: round the ramp's ends to whole pairs.
        attention_factor: YaRN's multiplier of the turned channels (None: the
            paper's 0.1 ln(factor) + 1, or DeepSeek's ratio of two mscales).
        mscale: DeepSeek's numerator of that ratio.
        mscale_all_dim: DeepSeek's denominator.
    """

    base: float = 10000.0
    rotary_dim: int | None = None
    scaling: str = "default"
    factor: float = 1.0
    original_length: int | None = None
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None

    def __post_init__(self):
        if self.scaling not in SCALINGS:
            raise ValueError(
                f"scaling ({self.scaling!r}) must be one of {list(SCALINGS)}"
            )
        if not self.factor >= 1:
            raise ValueError(f"factor ({self.factor}) must be >= 1")
        needs_length = self.scaling in ("dynamic", "yarn", "llama3")
        if needs_length and self.original_length is None:
            raise ValueError(
                f"scaling={self.scaling!r} needs original_length, the training "
                f"length its rule is measured against"
            )
        if self.rotary_dim is not None and (
            self.rotary_dim <= 0 or self.rotary_dim % 2
        ):
            raise ValueError(
                f"rotary_dim ({self.rotary_dim}) must be a positive even int"
            )


# --8<-- [end:spec]


# --8<-- [start:linear]
def linear_frequencies(theta: torch.Tensor, factor: float) -> torch.Tensor:
    """Position interpolation: position t turns as t / factor did."""
    return theta / factor


# --8<-- [end:linear]


# --8<-- [start:ntk]
def ntk_frequencies(
    D: int, base: float, factor: float, T: int, original_length: int
) -> torch.Tensor:
    """Dynamic NTK: a larger base once T passes original_length.

    The base grows by (factor * T / L - (factor - 1)) ** (D / (D - 2)): the
    fastest pair (i = 0) keeps theta_0 = 1, the slowest is slowed by about
    factor * T / L, and the ones between by a geometric amount in i.
    """
    T = max(T, original_length)
    grow = (factor * T / original_length - (factor - 1)) ** (D / (D - 2))
    return rope_frequencies(D, base * grow)


# --8<-- [end:ntk]


# --8<-- [start:yarn]
def _turns_to_pair(turns: float, D: int, base: float, L: int) -> float:
    """The (fractional) pair index i that makes `turns` turns over L positions."""
    return D * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))


def yarn_frequencies(theta: torch.Tensor, spec: "RopeSpec", D: int) -> torch.Tensor:
    """YaRN's "NTK-by-parts": a pair that turns more than beta_fast times over
    L keeps its frequency (it has seen every angle), one that turns less than
    beta_slow times is interpolated (theta / factor), a linear ramp between."""
    L = spec.original_length
    low = _turns_to_pair(spec.beta_fast, D, spec.base, L)  # fast end
    high = _turns_to_pair(spec.beta_slow, D, spec.base, L)  # slow end
    if spec.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, D - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    i = torch.arange(D // 2, dtype=torch.float64)
    ramp = ((i - low) / (high - low)).clamp(0, 1)  # 0: keep, 1: interpolate
    return theta / spec.factor * ramp + theta * (1 - ramp)


def yarn_attention_factor(spec: "RopeSpec") -> float:
    """The multiplier of the turned channels: scores grow by its square,
    sharpening attention that a longer context would otherwise spread."""
    if spec.attention_factor is not None:
        return spec.attention_factor

    def mscale(m: float = 1.0) -> float:
        return 1.0 if spec.factor <= 1 else 0.1 * m * math.log(spec.factor) + 1.0

    if spec.mscale and spec.mscale_all_dim:  # DeepSeek's ratio
        return mscale(spec.mscale) / mscale(spec.mscale_all_dim)
    return mscale()


# --8<-- [end:yarn]


# --8<-- [start:llama3]
def llama3_frequencies(theta: torch.Tensor, spec: "RopeSpec") -> torch.Tensor:
    """Llama 3.1's split by wavelength 2 pi / theta_i, against L: shorter
    than L / high_freq_factor kept, longer than L / low_freq_factor divided
    by factor, and a smooth mix of the two between."""
    L = spec.original_length
    wavelength = 2 * math.pi / theta
    slowed = torch.where(
        wavelength > L / spec.low_freq_factor, theta / spec.factor, theta
    )
    smooth = (L / wavelength - spec.low_freq_factor) / (
        spec.high_freq_factor - spec.low_freq_factor
    )
    mixed = (1 - smooth) * slowed / spec.factor + smooth * slowed
    medium = (wavelength >= L / spec.high_freq_factor) & (
        wavelength <= L / spec.low_freq_factor
    )
    return torch.where(medium, mixed, slowed)


# --8<-- [end:llama3]


# --8<-- [start:proportional]
def proportional_frequencies(
    head_size: int, rotary_dim: int, base: float
) -> torch.Tensor:
    """Gemma 4's full layers: the rotary_dim / 2 fastest pairs of a whole head's
    RoPE, theta_i = base ** (-2i / head_size); the slower pairs stay unturned.

    Partial RoPE (rotary_dim alone) spreads the whole range of frequencies over
    the pairs it turns, down to nearly 1 / base; this rule keeps the fast end
    of the head's range and drops the slow end, the pairs that turn least.
    """
    if rotary_dim > head_size:
        raise ValueError(
            f"rotary_dim ({rotary_dim}) must be <= head_size ({head_size})"
        )
    return rope_frequencies(head_size, base)[: rotary_dim // 2]  # (P,)


# --8<-- [end:proportional]


# --8<-- [start:frequencies]
def frequencies(
    spec: "RopeSpec", head_size: int, T: int | None = None
) -> tuple[torch.Tensor, float]:
    """(theta (P,) float64, attention_factor) of one layer.

    T, the sequence length so far, matters only to dynamic NTK.
    """
    D = spec.rotary_dim or head_size
    if D > head_size:
        raise ValueError(f"rotary_dim ({D}) must be <= head_size ({head_size})")
    theta = rope_frequencies(D, spec.base)  # (P,)
    if spec.scaling == "proportional":  # Gemma 4: linear too, if a factor
        theta = proportional_frequencies(head_size, D, spec.base)
        return linear_frequencies(theta, spec.factor), 1.0
    if spec.scaling == "linear":
        return linear_frequencies(theta, spec.factor), 1.0
    if spec.scaling == "dynamic":
        T = spec.original_length if T is None else T
        return ntk_frequencies(
            D, spec.base, spec.factor, T, spec.original_length
        ), 1.0
    if spec.scaling == "yarn":
        return yarn_frequencies(theta, spec, D), yarn_attention_factor(spec)
    if spec.scaling == "llama3":
        return llama3_frequencies(theta, spec), 1.0
    return theta, 1.0


# --8<-- [end:frequencies]


# --8<-- [start:rotate]
def rotate(
    x: torch.Tensor, spec: "RopeSpec", offset: int = 0, T_all: int | None = None
) -> torch.Tensor:
    """Turn the first rotary_dim channels of x (..., T, D) to positions
    offset .. offset + T - 1, scaled by the attention factor; the other
    channels pass unchanged. T_all: the length so far (dynamic NTK)."""
    D = x.size(-1)
    if T_all is None and isinstance(offset, torch.Tensor):  # rows' own positions
        T_all = int(offset.max()) + 1 if offset.numel() else 0
    T_all = offset + x.size(-2) if T_all is None else T_all
    theta, factor = frequencies(spec, D, T_all)
    R = theta.numel() * 2  # channels turned
    turned = apply_rope(x[..., :R], offset, theta=theta)
    if factor != 1.0:
        turned = turned * factor
    if R == D:
        return turned
    return torch.cat([turned, x[..., R:]], dim=-1)  # (..., T, D)


# --8<-- [end:rotate]
