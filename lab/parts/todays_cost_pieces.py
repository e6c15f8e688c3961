"""The pieces lab/todays_cost.py measures, one table: how to build each, run it, count its cache.

Each entry of PIECES is a Piece: its layer built from a dict of sizes (FULL: C = 512, 8
heads of 64; QUICK: the same heads on a narrower x, fewer keys chosen), the forward that is
timed (the layer's own, or the gathered form of the sparse and compressed layers) and the
bytes its cache holds after T positions (B = 1, float32), a formula that
lab/todays_cost.py checks against the tensors of the layer's cache. A new piece is one
more entry.
"""

import dataclasses
from collections.abc import Callable

import torch

from snippets.layers.compressed_attention import (
    CompressedAttention,
    CompressedSpec,
    compressed_gathered,
)
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention
from snippets.layers.kda import KimiDeltaAttention
from snippets.layers.lightning import LightningAttention
from snippets.layers.linear_attention import GatedDeltaNet
from snippets.layers.mamba2 import Mamba2, mamba2_state_bytes
from snippets.layers.mla import MLASpec
from snippets.layers.sparse_mla import IndexerSpec, SparseLatentAttention, sparse_gathered

FLOAT = 4  # bytes of a float32
# The full run's sizes, and the quick run's: a small layer, the same shape of choices.
FULL = {"C": 512, "H": 8, "G": 2, "D": 64, "window": 512, "v4_window": 128, "top_k": 256}
FULL |= {"hca": 128, "csa": 4, "index_heads": 2, "index_size": 32, "chunk": 64}
FULL |= {"seq_lens": [512, 1024, 2048, 4096, 8192], "repetitions": 3, "warmup": 1}
# --quick: the same heads on a narrower x (the attention's share larger), choosing fewer
# keys (sparse from T = 256 on), fewer rounds.
QUICK = {**FULL, "C": 128, "top_k": 64, "v4_window": 64, "hca": 32}
QUICK |= {"seq_lens": [512, 1024, 2048], "repetitions": 3, "warmup": 1}


@dataclasses.dataclass(frozen=True)
class Piece:
    """One attention piece: how to build it from the sizes, run it, count its cache.

    build(sizes) -> the layer; run(layer, x) -> y, the timed forward (None: layer(x));
    cache_bytes(sizes, T) -> the bytes its cache holds after T positions (B = 1).
    growth: "quadratic", "sub-quadratic" (the sparse and compressed pieces, held to
    BOUND) or "linear"; what the sources predict for its time.
    """

    label: str
    build: Callable
    cache_bytes: Callable | None  # None: a part of another piece, no cache of its own
    growth: str
    run: Callable | None = None


def _spec(z, **choices) -> AttentionSpec:
    return AttentionSpec(z["C"], z["H"], z["G"], z["D"], **choices)


def _gemma4(z, kind, **choices) -> ConfigurableAttention:
    size = z["window"] if kind == "window" else None
    return ConfigurableAttention(
        _spec(z, kind=kind, size=size, qk_norm="head", v_norm=True, **choices)
    )


def _mla(z) -> MLASpec:
    C, H, D = z["C"], z["H"], z["D"]
    return MLASpec(
        C,
        H,
        kv_latent=2 * D,
        nope_head_size=D,
        rope_head_size=D // 2,
        v_head_size=D,
        q_rank=3 * C // 8,
    )


def _dsa(z) -> SparseLatentAttention:
    E = z["index_size"]
    return SparseLatentAttention(_mla(z), IndexerSpec(z["index_heads"], E, E // 2, z["top_k"]))


def _v4_spec(z, **choices) -> CompressedSpec:
    C, H, D = z["C"], z["H"], z["D"]
    return CompressedSpec(
        C,
        H,
        D,
        rope_dims=D // 4,
        q_rank=3 * C // 8,
        window=z["v4_window"],
        o_groups=2,
        o_rank=C // 4,
        **choices,
    )


def _v4(z, **choices) -> CompressedAttention:
    return CompressedAttention(_v4_spec(z, **choices))


def _csa(z) -> dict:
    return {
        "ratio": z["csa"],
        "overlap": True,
        "indexer_heads": z["index_heads"],
        "indexer_size": z["index_size"],
        "top_k": z["top_k"],
    }


def _kv(z, T, tensors=2, kept=None) -> int:
    """A LayerCache of key/value heads: `tensors` of (G, kept positions, D)."""
    return tensors * z["G"] * z["D"] * min(T, kept or T) * FLOAT


def _state(z, T, conv=True) -> int:
    """A LinearState: S (H, D, D), and the short convolution's last 3 inputs of C."""
    return (z["H"] * z["D"] ** 2 + (3 * z["C"] if conv else 0)) * FLOAT


def _v4_bytes(z, T, ratio=None, overlap=False) -> int:
    """The raw window's window - 1 keys (D); the projections waiting for their block
    (c and z, of 2D with overlap, and the indexer's of 2E), ratio - 1 (2 ratio - 1)
    of them; the entries (D, and the indexer's E), one per ratio positions."""
    D, E = z["D"], z["index_size"]
    numbers = min(T, z["v4_window"] - 1) * D
    if ratio is not None:
        wait = 2 * ratio if overlap else ratio
        width = 2 * (2 * D + 2 * E) if overlap else 2 * D
        numbers += min(T, wait - 1) * width + T // ratio * (D + (E if overlap else 0))
    return numbers * FLOAT


def indexer_only(layer: SparseLatentAttention, x: torch.Tensor, query_chunk=256):
    """What sparse_gathered spends choosing: the indexer's scores and the top-k, a
    chunk of queries at a time, without the attention."""
    latent, keys, pos = (
        layer.q_norm(layer.q_down(x)),
        layer.indexer.keys(x),
        torch.arange(x.size(1)),
    )
    for a in range(0, x.size(1), query_chunk):
        b = min(a + query_chunk, x.size(1))
        scores = layer.indexer(x[:, a:b], latent[:, a:b], keys[:, :b], a)
        scores = scores.masked_fill(pos[:b] > pos[a:b, None], -torch.inf)
        scores.topk(min(layer.indexer.spec.top_k, b), dim=-1)


def _lightning(z) -> LightningAttention:
    slopes = [2.0 ** (-8 * (h + 1) / z["H"]) for h in range(z["H"])]  # ALiBi's
    return LightningAttention(z["H"], z["C"], z["D"], slopes, chunk_size=z["chunk"])


def _delta(cls):
    """A chunked delta-rule layer (Gated DeltaNet, KDA): H heads of D keys and values."""
    return lambda z: cls(z["H"], z["C"], z["D"], z["D"], chunk_size=z["chunk"])


def _mla_bytes(z, T) -> int:
    """The latent (2D), the RoPE key (D/2) and the indexer's key (E) of every position."""
    return (2 * z["D"] + z["D"] // 2 + z["index_size"]) * T * FLOAT


def _quadratic(label, build, cache_bytes, run=None):
    return Piece(label, build, cache_bytes, "quadratic", run)


def _linear(label, build, cache_bytes):
    return Piece(label, build, cache_bytes, "linear")


def _sub(label, build, cache_bytes, run=compressed_gathered):
    return Piece(label, build, cache_bytes, "sub-quadratic", run)


# The one table of pieces: name -> Piece. A new piece is one more line.
PIECES = {
    "dense": _quadratic("dense causal softmax", lambda z: ConfigurableAttention(_spec(z)), _kv),
    "gemma4_window": _quadratic(
        "Gemma 4 window layer",
        lambda z: _gemma4(z, "window"),
        lambda z, T: _kv(z, T, kept=z["window"] - 1),
    ),
    "gemma4_kv": _quadratic(
        "Gemma 4 K=V full layer",
        lambda z: _gemma4(z, "full", k_eq_v=True),
        lambda z, T: _kv(z, T, tensors=1),
    ),
    "kda": _linear("Kimi Delta Attention, chunked", _delta(KimiDeltaAttention), _state),
    "gated_deltanet": _linear("Gated DeltaNet, chunked", _delta(GatedDeltaNet), _state),
    "lightning": _linear("MiniMax lightning", _lightning, lambda z, T: _state(z, T, conv=False)),
    "mamba2": _linear(
        "Mamba2, chunked",
        lambda z: Mamba2(z["H"], z["C"], z["D"], z["D"], chunk_size=z["chunk"]),
        lambda z, T: mamba2_state_bytes(z["H"], z["D"], z["D"], bytes_per_element=FLOAT),
    ),
    "dsa": _sub("DeepSeek Sparse Attention (MLA + indexer)", _dsa, _mla_bytes, sparse_gathered),
    "dsa_indexer": _quadratic("its indexer and top-k alone", _dsa, None, indexer_only),
    "v4_window": _sub("DeepSeek-V4 window layer", _v4, _v4_bytes),
    "v4_hca": _sub(
        "DeepSeek-V4 heavily compressed (HCA)",
        lambda z: _v4(z, ratio=z["hca"]),
        lambda z, T: _v4_bytes(z, T, z["hca"]),
    ),
    "v4_csa": _sub(
        "DeepSeek-V4 compressed sparse (CSA)",
        lambda z: _v4(z, **_csa(z)),
        lambda z, T: _v4_bytes(z, T, z["csa"], True),
    ),
}


def build(name: str, sizes: dict, seed: int = 0) -> torch.nn.Module:
    """PIECES[name]'s layer at these sizes, its weights of its own seed, in eval mode."""
    torch.manual_seed(seed)
    return PIECES[name].build(sizes).eval()


def held_bytes(cache) -> int:
    """Bytes of every tensor a cache holds."""
    return sum(t.numel() * t.element_size() for t in cache.tensors())
