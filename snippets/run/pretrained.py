"""A Hugging Face checkpoint folder as the guide's GPT: same weights, same logits.

    gpt = load_pretrained("path/to/Qwen3-0.6B")  # config.json, *.safetensors
    out = generate(gpt, ids, 30, greedy=True)

The dense families of FAMILIES: Llama 3 (and SmolLM2, a Llama), Qwen3, Gemma 3's
text model, Olmo 3 and SmolLM3. config.json gives the GPTConfig: each layer's
AttentionSpec and a BlockSpec (the norms' placement, the gated MLP). The
.safetensors files give the tensors, renamed to the GPT's keys; the query and key
rows are reordered from the (i, i + D/2) RoPE pairs the checkpoints store into the
guide's (2i, 2i + 1). The safetensors format is read here with the standard
library and torch: 8 bytes of header length, a JSON header, then raw bytes.

from_state_dict takes the same two things already in memory (a config dict and a
name -> tensor dict): a transformers model's config.to_dict() and state_dict().
Bad input raises a ValueError naming the value and the rule: a family not in
FAMILIES, a config field the GPT cannot express, a missing tensor, a shape that
does not fit.
"""

import json
import mmap
from pathlib import Path

import torch

from snippets.core.blocks import BlockSpec
from snippets.core.model import GPT, GPTConfig
from snippets.core.rope_scaling import SCALINGS, RopeSpec
from snippets.layers.configurable import AttentionSpec

__all__ = [
    "FAMILIES",
    "load_pretrained",
    "from_state_dict",
    "gpt_config",
    "rope_spec",
]

# model_type -> where its norms sit (snippets.core.blocks.NORMS)
FAMILIES = {
    "llama": "pre",  # Llama 3, SmolLM2
    "qwen3": "pre",
    "smollm3": "pre",
    "gemma3_text": "pre+post",  # a norm before and after each sublayer
    "olmo3": "post",  # a norm on what each sublayer adds, none before
}
GEMMA = ("gemma3_text",)  # scales stored as w - 1; token vectors times sqrt(C)
QK_NORM = {"qwen3": "head", "gemma3_text": "head", "olmo3": "all"}
ACTIVATIONS = {"silu": "silu", "gelu_pytorch_tanh": "gelu-tanh"}
# A field config.json may leave out -> its value in transformers' config class.
DEFAULTS = {
    "llama": {"tie_word_embeddings": False, "rope_theta": 10000.0},
    "qwen3": {"tie_word_embeddings": False, "rope_theta": 10000.0, "head_dim": 128},
    "smollm3": {"tie_word_embeddings": True, "rope_theta": 2000000.0},
    "gemma3_text": {
        "tie_word_embeddings": True,
        "rope_theta": 1000000.0,  # full layers; window layers: rope_local_base_freq
        "rope_local_base_freq": 10000.0,
        "head_dim": 256,
        "query_pre_attn_scalar": 256,
        "sliding_window": 4096,
    },
    "olmo3": {"tie_word_embeddings": False, "rope_theta": 500000.0},
}
DEFAULTS["olmo3"] |= {"rms_norm_eps": 1e-5, "sliding_window": 4096}
DEFAULTS["qwen3"]["sliding_window"] = 4096
# What no default stands in for: the sizes.
SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
SIZES += ("intermediate_size", "max_position_embeddings")


# --- the config -------------------------------------------------------------------


def _refuse(name: str, value, rule: str):
    raise ValueError(f"config.{name} ({value!r}): {rule}")


def _get(config: dict, name: str, default=None):
    """A field of config.json, else the family's default, else `default`."""
    value = config.get(name)
    if value is None:
        value = DEFAULTS[config["model_type"]].get(name, default)
    return value


def _family(config: dict) -> str:
    family = config.get("model_type")
    if family not in FAMILIES:
        _refuse("model_type", family, f"not one of {list(FAMILIES)}")
    return family


def _layer_types(config: dict) -> list[str]:
    """Each layer's kind, "full_attention" or "sliding_attention", as
    transformers fills layer_types when config.json has none."""
    family, L = config["model_type"], config["num_hidden_layers"]
    if config.get("layer_types"):
        return list(config["layer_types"])
    window = [False] * L
    if family == "qwen3" and config.get("use_sliding_window"):
        first = config.get("max_window_layers", 28)
        window = [i >= first for i in range(L)]
    if family == "gemma3_text":  # five window layers, then a full one
        every = config.get("sliding_window_pattern", 6)
        window = [(i + 1) % every != 0 for i in range(L)]
    if family == "olmo3":
        window = [(i + 1) % 4 != 0 for i in range(L)]
    if family == "smollm3" and config.get("use_sliding_window"):
        window = [not rope for rope in _rope_layers(config)]
    return ["sliding_attention" if w else "full_attention" for w in window]


def _rope_layers(config: dict) -> list[bool]:
    """Which layers turn q and k: all, but SmolLM3's every fourth (NoPE)."""
    L = config["num_hidden_layers"]
    if config["model_type"] != "smollm3":
        return [True] * L
    if config.get("no_rope_layers") is not None:
        return [bool(r) for r in config["no_rope_layers"]]
    every = config.get("no_rope_layer_interval", 4)
    return [(i + 1) % every != 0 for i in range(L)]


def _rope_parameters(config: dict, kind: str) -> dict:
    """The RoPE fields of a layer of type `kind`: config.rope_parameters (nested
    by layer type for Gemma 3 and Olmo 3), or, in a config.json written before
    transformers 5, rope_theta and rope_scaling (Gemma 3's window layers:
    rope_local_base_freq; both families scale their full layers only)."""
    params = config.get("rope_parameters")
    if params is not None:
        return params.get(kind, params)
    theta = _get(config, "rope_theta")
    scaling = config.get("rope_scaling") or {}
    nested = config["model_type"] in ("gemma3_text", "olmo3")
    if nested and kind == "sliding_attention":
        scaling = {}
        if config["model_type"] == "gemma3_text":
            theta = _get(config, "rope_local_base_freq")
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    return {**scaling, "rope_type": rope_type, "rope_theta": theta}


def rope_spec(params: dict, head_size: int, max_positions: int) -> RopeSpec:
    """The RopeSpec of a layer from its RoPE fields (transformers' rope_parameters
    of that layer) and config.max_position_embeddings."""
    scaling = params.get("rope_type", "default")
    if scaling not in SCALINGS:
        _refuse(
            "rope_parameters['rope_type']",
            scaling,
            f"not a scaling the guide's layer has: {list(SCALINGS)}",
        )
    partial = params.get("partial_rotary_factor", 1.0)
    rotary = int(head_size * partial)
    if scaling == "proportional":  # transformers' count: whole pairs of the head
        rotary = 2 * int(partial * head_size // 2)
    original = params.get("original_max_position_embeddings")
    if scaling == "dynamic":
        original = max_positions
    factor = params.get("factor") or 1.0
    if scaling == "yarn" and params.get("factor") is None:
        factor = max_positions / original
    return RopeSpec(
        base=float(params["rope_theta"]),
        rotary_dim=None if rotary == head_size else rotary,
        scaling=scaling,
        factor=float(factor),
        original_length=original,
        low_freq_factor=params.get("low_freq_factor", 1.0),
        high_freq_factor=params.get("high_freq_factor", 4.0),
        beta_fast=params.get("beta_fast") or 32.0,
        beta_slow=params.get("beta_slow") or 1.0,
        truncate=params.get("truncate", True),
        attention_factor=params.get("attention_factor"),
        mscale=params.get("mscale"),
        mscale_all_dim=params.get("mscale_all_dim"),
    )


def _attention_spec(config: dict, i: int, kind: str, rope: bool) -> AttentionSpec:
    family = config["model_type"]
    C, H = config["hidden_size"], config["num_attention_heads"]
    D = _get(config, "head_dim", C // H)
    if kind not in ("full_attention", "sliding_attention"):
        _refuse("layer_types", kind, f"layer {i}: full or sliding attention only")
    window = kind == "sliding_attention"
    if family == "smollm3" and window and not config.get("use_sliding_window"):
        _refuse("use_sliding_window", False, "layer_types say sliding_attention")
    scale = None  # 1 / sqrt(D); Gemma: 1 / sqrt(query_pre_attn_scalar)
    if family in GEMMA:
        scale = _get(config, "query_pre_attn_scalar") ** -0.5
    bias = bool(config.get("attention_bias", False))
    turn = None
    if rope:
        params = _rope_parameters(config, kind)
        turn = rope_spec(params, D, config["max_position_embeddings"])
    return AttentionSpec(
        n_embed=C,
        n_head=H,
        n_kv_head=config.get("num_key_value_heads") or H,
        head_size=D,
        kind="window" if window else "full",
        size=_get(config, "sliding_window") if window else None,
        rope=turn,
        bias=bias,
        out_bias=bias,
        qk_norm=QK_NORM.get(family),
        eps=_get(config, "rms_norm_eps", 1e-6),
        soft_cap=config.get("attn_logit_softcapping"),
        scale=scale,
    )


def _block_spec(config: dict) -> BlockSpec:
    family = config["model_type"]
    act = config.get("hidden_activation") or config.get("hidden_act") or "silu"
    if act not in ACTIVATIONS:
        _refuse("hidden_act", act, f"not one of {list(ACTIVATIONS)}")
    if cap := config.get("final_logit_softcapping"):
        _refuse("final_logit_softcapping", cap, "the GPT has no cap")
    return BlockSpec(
        hidden=config["intermediate_size"],
        activation=ACTIVATIONS[act],
        mlp_bias=bool(config.get("mlp_bias", False)),
        norms=FAMILIES[family],
        eps=_get(config, "rms_norm_eps", 1e-6),
        one_plus=family in GEMMA,
        embed_scale=family in GEMMA,
    )


def gpt_config(config: dict) -> GPTConfig:
    """The GPTConfig of a config.json (a dict) of a family in FAMILIES."""
    _family(config)
    for name in SIZES:
        if not isinstance(config.get(name), int):
            _refuse(name, config.get(name), "config.json must give it, an int")
    if both_ways := config.get("use_bidirectional_attention"):
        _refuse("use_bidirectional_attention", both_ways, "the layer is causal")
    block = _block_spec(config)
    kinds, ropes = _layer_types(config), _rope_layers(config)
    L = config["num_hidden_layers"]
    layers = [_attention_spec(config, i, kinds[i], ropes[i]) for i in range(L)]
    return GPTConfig(
        vocab_size=config["vocab_size"],
        context_length=config["max_position_embeddings"],
        n_embed=config["hidden_size"],
        n_head=config["num_attention_heads"],
        n_layer=L,
        tie_weights=bool(_get(config, "tie_word_embeddings")),
        position="none",  # RoPE (or none) inside each layer, as its spec says
        layers=tuple(layers),
        block=block,
    )


# --- the tensors ------------------------------------------------------------------

# --8<-- [start:names]
# A decoder layer's tensors: transformers' names -> the guide's Block's
ATTENTION = {
    "self_attn.q_proj": "attn.q",  # rows reordered for RoPE (below)
    "self_attn.k_proj": "attn.k",  # rows reordered for RoPE
    "self_attn.v_proj": "attn.v",
    "self_attn.o_proj": "attn.proj",
    "self_attn.q_norm": "attn.q_norm",  # QK-norm: Qwen3, Gemma 3, Olmo 3
    "self_attn.k_norm": "attn.k_norm",
}
MLP = {f"mlp.{n}_proj": f"mlp.{n}" for n in ("gate", "up", "down")}  # mlp.gate, ...
NORMS = {  # per placement: the norms a family's layer has
    "pre": {"input_layernorm": "ln1", "post_attention_layernorm": "ln2"},
    "pre+post": {
        "input_layernorm": "ln1",
        "post_attention_layernorm": "post1",
        "pre_feedforward_layernorm": "ln2",
        "post_feedforward_layernorm": "post2",
    },
    "post": {
        "post_attention_layernorm": "post1",
        "post_feedforward_layernorm": "post2",
    },
}
OUTSIDE = {  # the tensors outside the layers
    "model.embed_tokens.weight": "tok_emb.weight",
    "model.norm.weight": "ln_f.weight",
    "lm_head.weight": "lm_head.weight",  # none in the file when tied
}
# --8<-- [end:names]


def _names(config: GPTConfig) -> dict[str, str]:
    """Each tensor of the GPT -> its name in the checkpoint."""
    names = {ours: theirs for theirs, ours in OUTSIDE.items()}
    per_layer = {**ATTENTION, **MLP, **NORMS[config.block.norms]}
    for i in range(config.n_layer):
        for theirs, ours in per_layer.items():
            theirs = f"model.layers.{i}.{theirs}"
            if ours.endswith("_norm"):  # QK-norm: a scale of the layer itself
                names[f"blocks.{i}.{ours}"] = f"{theirs}.weight"
                continue
            for leaf in ("weight", "bias"):
                names[f"blocks.{i}.{ours}.{leaf}"] = f"{theirs}.{leaf}"
    return names


# --8<-- [start:rope_rows]
def _adjacent_order(D: int, R: int) -> torch.Tensor:
    """Row i + R/2 after row i, for each RoPE pair of a head (R channels turn;
    the D - R others stay in place). D = R = 8: [0, 4, 1, 5, 2, 6, 3, 7]."""
    pairs = [c for i in range(R // 2) for c in (i, i + R // 2)]
    return torch.tensor(pairs + list(range(R, D)))


def _rows_by_head(t: torch.Tensor, n: int, order: torch.Tensor) -> torch.Tensor:
    """Each of n heads' rows reordered: a weight (n * D, C) or a scale (n * D,)."""
    heads = t.reshape(n, -1, *t.shape[1:])  # (n, D, C) or (n, D)
    return heads[:, order].reshape(t.shape)  # back to (n * D, C) or (n * D,)


# --8<-- [end:rope_rows]


def _convert(key: str, t: torch.Tensor, config: GPTConfig) -> torch.Tensor:
    """A checkpoint tensor as the GPT's key `key` holds it."""
    parts = key.split(".")
    if parts[0] != "blocks" or parts[2] != "attn":
        return t
    spec = config.layers[int(parts[1])]
    name = parts[3]
    if name in ("q_norm", "k_norm") and config.block.one_plus:
        # Gemma stores w - 1; the layer's QK-norm multiplies by w. In a bfloat16
        # checkpoint 1 + w is rounded to bfloat16 here (transformers adds the 1
        # in float32): a relative error up to 2^-9 on these scales.
        t = t + 1
    if spec.rope is None or name not in ("q", "k", "q_norm", "k_norm"):
        return t
    D = spec.head_size
    order = _adjacent_order(D, spec.rope.rotary_dim or D)
    heads = spec.n_head if name.startswith("q") else spec.n_kv_head
    if name.endswith("norm") and spec.qk_norm == "head":
        heads = 1  # one scale per channel of a head, shared by all
    return _rows_by_head(t, heads, order)


@torch.no_grad()
def from_state_dict(config: dict, state: dict) -> GPT:
    """The guide's GPT from a config.json dict and a checkpoint's name -> tensor
    dict, in eval mode. It holds the given tensors themselves (their dtype and
    device) but the query and key rows, which are reordered copies."""
    gpt_cfg = gpt_config(config)
    with torch.device("meta"):  # no memory: every tensor comes from `state`
        gpt = GPT(gpt_cfg)
    names, ours = _names(gpt_cfg), {}
    for key, meta in gpt.state_dict().items():
        if key == "lm_head.weight" and gpt_cfg.tie_weights:
            continue  # the token embedding's table, tied below
        theirs = names[key]
        if theirs not in state:
            raise ValueError(f"checkpoint: no tensor {theirs!r} (the GPT's {key})")
        t = _convert(key, state[theirs], gpt_cfg)
        if t.shape != meta.shape:
            raise ValueError(
                f"checkpoint: {theirs!r} has shape {tuple(t.shape)}, the GPT's "
                f"{key} needs {tuple(meta.shape)} (from config.json)"
            )
        ours[key] = t
    used = {names[key] for key in ours} | {"lm_head.weight"}  # tied: the same
    if unused := sorted(set(state) - used):  # a bias the config says is not there
        raise ValueError(
            f"checkpoint: {len(unused)} tensor(s) the GPT has no place for, "
            f"first {unused[:3]} (is config.json this checkpoint's?)"
        )
    gpt.load_state_dict(ours, strict=False, assign=True)
    if gpt_cfg.tie_weights:  # --8<-- [start:tied]
        gpt.lm_head.weight = gpt.tok_emb.weight  # one tensor, the embedding's
    # --8<-- [end:tied]
    return gpt.eval()


# --- the files --------------------------------------------------------------------

# --8<-- [start:safetensors]
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of one .safetensors file, mapped from disk, not read in.

    The file: 8 bytes, the header's length n (little-endian); n bytes of JSON,
    {name: {"dtype", "shape", "data_offsets": [start, end]}}; then the tensors'
    bytes, each at its offsets past the header."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        # a private copy-on-write map: torch needs a writable buffer, the file
        # stays as it is, and a page is read from disk when a tensor touches it
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    header.pop("__metadata__", None)
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] not in DTYPES:
            raise ValueError(
                f"{path.name}: {name!r} has dtype {entry['dtype']!r}, "
                f"not one of {list(DTYPES)}"
            )
        dtype, (start, end) = DTYPES[entry["dtype"]], entry["data_offsets"]
        count = (end - start) // dtype.itemsize
        if 8 + n + end > len(data):
            raise ValueError(f"{path.name}: {name!r} ends past the file's end")
        t = torch.frombuffer(data, dtype=dtype, count=count, offset=8 + n + start)
        tensors[name] = t.reshape(entry["shape"])
    return tensors


# --8<-- [end:safetensors]


# --8<-- [start:load_pretrained]
def load_pretrained(folder) -> GPT:
    """The guide's GPT from a Hugging Face checkpoint folder: config.json and
    model.safetensors, or the shards that model.safetensors.index.json lists."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"folder ({str(folder)!r}): no config.json in it")
    config = json.loads((folder / "config.json").read_text())
    _family(config)  # before reading gigabytes
    index = folder / "model.safetensors.index.json"
    if index.is_file():  # sharded: tensor name -> the file holding it
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise ValueError(
            f"folder ({str(folder)!r}): neither model.safetensors nor "
            "model.safetensors.index.json in it"
        )
    state = {}
    for name in files:
        state |= _read_safetensors(folder / name)
    return from_state_dict(config, state)


# --8<-- [end:load_pretrained]
