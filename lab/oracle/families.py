"""Today's model families at their published sizes: the numbers, once.

Each entry holds the attention fields of a published config.json (its address
in "source"), under transformers' field names, so that the same loader that
builds the tested layers (lab/from_transformers.spec_from_config) reads them:
the page's table, its KV-cache sizes and the suite's equality tests all start
here. Qwen3-Next's linear-attention layers have no per-token cache (their
state has a fixed size) and are counted as such.

The families of 2026 that the suite proves equal on the same pieces (Gemma 4,
Olmo 3, SmolLM3, Seed-OSS, Apertus, EXAONE 4, Mistral Large 4) enter as transformers 5.23's
configuration defaults, which its docstrings describe as similar to the named
checkpoint ("source", the link the docstring gives): no published config.json
of theirs is at hand to copy, so their rows say "(defaults)". MiniMax-M2's
docstring names another model (MiniMax-Text-01), so it has no row.
"""

import functools

from lab.oracle.from_transformers import layer_type, spec_from_config
from snippets.layers.mla import MLASpec

__all__ = [
    "PUBLISHED",
    "NO_ROW",
    "published_config",
    "layer_specs",
    "kv_bytes",
    "specs_kv_bytes",
    "table_rows",
]

HF = "https://huggingface.co/{}/blob/main/config.json"
DEFAULTS = "https://huggingface.co/{}"  # the checkpoint a config class's docstring names
PUBLISHED = {
    "Llama 3.1 8B": {
        "source": HF.format("meta-llama/Llama-3.1-8B"),
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    },
    "Mistral 7B v0.1": {
        "source": HF.format("mistralai/Mistral-7B-v0.1"),
        "model_type": "mistral",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "sliding_window": 4096,
        "max_position_embeddings": 32768,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    },
    "Qwen3 8B": {
        "source": HF.format("Qwen/Qwen3-8B"),
        "model_type": "qwen3",
        "hidden_size": 4096,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 40960,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    },
    "Gemma 2 9B": {
        "source": HF.format("google/gemma-2-9b"),
        "model_type": "gemma2",
        "hidden_size": 3584,
        "num_hidden_layers": 42,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "sliding_window": 4096,
        "query_pre_attn_scalar": 256,
        "attn_logit_softcapping": 50.0,
        "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    },
    "Gemma 3 4B": {
        "source": HF.format("google/gemma-3-4b-pt"),
        "model_type": "gemma3_text",
        "hidden_size": 2560,
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "sliding_window": 1024,
        "query_pre_attn_scalar": 256,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 8.0},
        },
    },
    "gpt-oss-120b": {
        "source": HF.format("openai/gpt-oss-120b"),
        "model_type": "gpt_oss",
        "hidden_size": 2880,
        "num_hidden_layers": 36,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "sliding_window": 128,
        "attention_bias": True,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
    },
    "DeepSeek-V3": {
        "source": HF.format("deepseek-ai/DeepSeek-V3"),
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "max_position_embeddings": 163840,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "original_max_position_embeddings": 4096,
        },
    },
    "Llama 4 Scout": {
        "source": HF.format("meta-llama/Llama-4-Scout-17B-16E"),
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "attention_chunk_size": 8192,
        "no_rope_layer_interval": 4,
        "use_qk_norm": True,
        "attn_temperature_tuning": True,
        "floor_scale": 8192,
        "attn_scale": 0.1,
        "max_position_embeddings": 10485760,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    },
    "Qwen3-Next 80B-A3B": {
        "source": HF.format("Qwen/Qwen3-Next-80B-A3B-Instruct"),
        "model_type": "qwen3_next",
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "full_attention_interval": 4,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000000.0,
            "partial_rotary_factor": 0.25,
        },
    },
    # transformers 5.23's defaults (models/<family>/configuration_<family>.py).
    "Gemma 4 (defaults)": {
        "source": DEFAULTS.format("google/gemma-4-e2b-it"),
        "model_type": "gemma4_text",
    },
    "Olmo 3 (defaults)": {
        "source": DEFAULTS.format("allenai/Olmo-3-7B-Instruct"),
        "model_type": "olmo3",
    },
    "SmolLM3 (defaults)": {
        "source": DEFAULTS.format("HuggingFaceTB/SmolLM3-3B"),
        "model_type": "smollm3",
    },
    "Seed-OSS (defaults)": {
        "source": DEFAULTS.format("ByteDance-Seed/Seed-OSS-36B-Instruct"),
        "model_type": "seed_oss",
    },
    "Apertus (defaults)": {
        "source": DEFAULTS.format("swiss-ai/Apertus-8B-Instruct-2509"),
        "model_type": "apertus",
    },
    "EXAONE 4 (defaults)": {
        "source": DEFAULTS.format("LGAI-EXAONE/EXAONE-4.0-32B"),
        "model_type": "exaone4",
    },
    # No config.json at hand: transformers 5.23's Mistral4Config defaults, which its
    # docstring gives as mistralai/Mistral-Small-4-119B-2603's.
    "Mistral Small 4 119B": {
        "source": "https://huggingface.co/mistralai/Mistral-Small-4-119B-2603",
        "model_type": "mistral4",
        "hidden_size": 4096,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "q_lora_rank": 1024,
        "kv_lora_rank": 256,
        "qk_nope_head_dim": 64,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "max_position_embeddings": 1048576,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 128.0,
            "original_max_position_embeddings": 8192,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale_all_dim": 1.0,
            "mscale": 1.0,
            "llama_4_scaling_beta": 0.1,
            "partial_rotary_factor": 0.5,
        },
    },
    # transformers 5.23's MistralLarge4TextConfig defaults: 72 layers, every 4th NoPE, every
    # layer its own latents and indexer (no kv_source_layers or indexer_types given).
    "Mistral Large 4 (defaults)": {
        "source": DEFAULTS.format("mistralai/Mistral-Large-4-1T-A52B"),
        "model_type": "mistral_large4_text",
    },
}
# Families the suite proves equal that have no row, and why.
NO_ROW = {
    "minimax_m2": "its config's docstring names MiniMax-Text-01, another model",
    "minimax": "its config's defaults are not MiniMax-Text-01's sizes",
    "qwen3_5_text": "its config's docstring names two checkpoints (27B and 9B)",
    "kimi_linear": "its config's layer schedule is not one a primary source confirms",
    "deepseek_v32": "its config's defaults give DeepSeek-V3.2-Exp's sizes, not its RoPE scaling",
    "glm_moe_dsa": "its config's defaults give GLM-5's sizes, not its RoPE scaling",
    "kimi_k25": "its config's text config is a DeepseekV3Config with DeepSeek-V3's defaults, "
    "and its docstring names another checkpoint, Kimi-K2.6",
    "deepseek_v4": "its compressed layers hold a window and pooled entries, which the table's "
    "per-token count does not model (its section counts them, from its defaults)",
    "glm5_next_text": "its config's defaults name GLM-5.3-Flash, whose config.json is not at hand",
    # The Mamba2 hybrids: no published config.json at hand, and their defaults describe
    # no checkpoint; their Mamba2 state per layer is counted on the page (mamba2_state_bytes).
    "nemotron_h": "its config's default schedule is four blocks (Mamba2, MoE, attention, "
    "MLP), a placeholder, not the checkpoint its docstring names",
    "granitemoehybrid": "its config's docstring names granite-speech-3.2-8b, another model",
    "falcon_h1": "its config's docstring names Falcon-H1-1.5B-Deep-Instruct, whose "
    "config.json is not at hand to confirm the defaults' sizes",
}


@functools.cache
def published_config(name: str):
    """The transformers config of a published family (no weights)."""
    import transformers

    if name not in PUBLISHED:
        raise ValueError(f"name ({name!r}) must be one of {list(PUBLISHED)}")
    fields = {k: v for k, v in PUBLISHED[name].items() if k not in ("source", "model_type")}
    return transformers.AutoConfig.for_model(PUBLISHED[name]["model_type"], **fields)


def layer_specs(name: str) -> list:
    """One spec per layer; None for a layer without attention (linear)."""
    config = published_config(name)
    return [
        None if layer_type(config, i) == "linear_attention" else spec_from_config(config, i)
        for i in range(config.num_hidden_layers)
    ]


def kv_bytes(name: str, tokens: int, bytes_per_element: int = 2) -> int:
    """Bytes of KV cache for `tokens` positions of one sequence (bf16: 2)."""
    return specs_kv_bytes(layer_specs(name), tokens, bytes_per_element)


def specs_kv_bytes(specs: list, tokens: int, bytes_per_element: int = 2) -> int:
    """Bytes of KV cache of a stack of layer specs (None: a linear layer).

    Keys and values: 2 G D numbers per token and layer; MLA: R + Dr; K=V: G D,
    the one projection the guide's layer caches; a layer reading another's
    keys and values (kv_source): none. A window or chunk layer holds at most
    `size` positions.
    """
    total = 0
    for spec in specs:
        if spec is None:
            continue
        if isinstance(spec, MLASpec):
            if getattr(spec, "kv_source", None) is None:  # a reader caches nothing
                total += (spec.kv_latent + spec.rope_head_size) * tokens
            continue
        if spec.kv_source is not None:
            continue
        held = tokens if spec.size is None else min(tokens, spec.size)
        tensors = 1 if spec.k_eq_v else 2
        total += tensors * spec.n_kv_head * spec.head_size * held
    return total * bytes_per_element


def _positions(spec) -> str:
    if spec.rope is None:
        return "none (NoPE)" + (", temperature" if getattr(spec, "temperature", 0) else "")
    r = spec.rope
    text = f"RoPE {r.base:,.0f}"
    if r.rotary_dim:
        text += f" on {r.rotary_dim} of {getattr(spec, 'head_size', r.rotary_dim)}"
    if r.scaling == "proportional":
        text += ", proportional"
    elif r.scaling != "default":
        text += f", {r.scaling} x{r.factor:g}"
    return text


LENGTHS = {"32k": 32 * 1024, "128k": 128 * 1024, "1M": 1024 * 1024}


def kv_within_context(name: str) -> dict:
    """KV bytes at each of LENGTHS, None where it is past the positions the
    family's config allows (max_position_embeddings)."""
    context = published_config(name).max_position_embeddings
    return {
        label: kv_bytes(name, tokens) if tokens <= context else None
        for label, tokens in LENGTHS.items()
    }


def table_rows() -> list[dict]:
    """The page's table: one row per family, from its layers' specs."""
    rows = []
    for name in PUBLISHED:
        specs = layer_specs(name)
        attention = [s for s in specs if s is not None]
        first = attention[0]
        kinds = {}
        for s in specs:
            key = "linear" if s is None else getattr(s, "kind", "full")
            if s is not None and getattr(s, "size", None):
                key += f" {s.size}"
            kinds[key] = kinds.get(key, 0) + 1
        if isinstance(first, MLASpec):
            heads = f"{first.n_head} / latent"
            size = f"{first.nope_head_size}+{first.rope_head_size} (v {first.v_head_size})"
            q = "from x" if first.q_rank is None else first.q_rank
            extras = f"MLA: q {q}, kv {first.kv_latent}, rope key {first.rope_head_size}"
            norm = "RMSNorm on q and kv latents"
            if first.q_rank is None:
                norm = "RMSNorm on the kv latent"
        else:
            heads = "; ".join(sorted({f"{s.n_head} / {s.n_kv_head}" for s in attention}))
            size = "; ".join(str(d) for d in sorted({s.head_size for s in attention}))
            norm = {None: "", "head": "QK-norm", "all": "QK-norm (all heads)"}[first.qk_norm]
            if first.v_norm:
                norm += ", V-norm"
            if first.qk_norm and not first.qk_norm_weight:
                norm = "QK L2-norm (RoPE layers)"
            if first.soft_cap:
                norm = (norm + ", " if norm else "") + f"cap {first.soft_cap:g}"
            shared = sum(s.kv_source is not None for s in attention)
            extras = ", ".join(
                x
                for x in (
                    "sinks" if first.sinks else "",
                    "gate" if first.gate else "",
                    "K=V (full)" if any(s.k_eq_v for s in attention) else "",
                    f"{shared} layers reuse K, V" if shared else "",
                )
                if x
            )
        positions = sorted({_positions(s) for s in attention})
        rows.append(
            {
                "family": name,
                "source": PUBLISHED[name]["source"],
                "heads": heads,
                "head_size": size,
                "positions": "; ".join(positions),
                "norm": norm or "-",
                "schedule": ", ".join(f"{n} {k}" for k, n in kinds.items()),
                "extras": extras or "-",
                "model_type": PUBLISHED[name]["model_type"],
                "kv_token": kv_bytes(name, 1),
                "context": published_config(name).max_position_embeddings,
                "kv_at": kv_within_context(name),
            }
        )
    return rows
