"""Gemma 4 (text) in the oracle: what its config says each layer is, as spec fields.

lab/oracle/from_transformers.py builds every family's AttentionSpec the same way and
asks this module for what Gemma 4 changes (gemma4_fields); its weight loader
handles the three layouts that follow from those fields (K=V, a layer without
k and v, proportional RoPE's pairs). The facts, from transformers 5.23's
models/gemma4 (Gemma4TextConfig, Gemma4TextAttention):

- Full layers have their own head size (`global_head_dim`, in the config's
  per_layer_config) and, with `attention_k_eq_v`, their own key/value heads
  (`num_global_key_value_heads`) and no v_proj: the values are k_proj's
  output, taken before k_norm and RoPE.
- Every layer that makes values normalises them by an RMSNorm without scales
  (v_norm); queries and keys by RMSNorm with scales stored as w (not w - 1).
- Scores are not scaled (scaling = 1.0): the QK-norms set their size.
- The last `num_kv_shared_layers` layers make no keys or values: each reuses
  those of the last earlier layer of its type (config.kv_sharing_modes:
  "store" on the source, "reuse" on the reader).
- The full layers' RoPE is "proportional": partial_rotary_factor of the
  head's pairs turn, at a whole head's frequencies (snippets/core/rope_scaling.py).
"""

__all__ = ["FAMILY", "kv_source", "gemma4_fields"]

FAMILY = "gemma4_text"


def kv_source(config, index: int) -> int | None:
    """The layer whose keys and values layer `index` reuses, or None: the
    last layer before the shared ones whose type is layer `index`'s."""
    modes = config.kv_sharing_modes
    if modes[index] != "reuse":
        return None
    first_shared = config.num_hidden_layers - config.num_kv_shared_layers
    kind = config.layer_types[index]
    return max(i for i in range(first_shared) if config.layer_types[i] == kind)


def gemma4_fields(config, index: int) -> dict:
    """The AttentionSpec fields of layer `index` that Gemma 4 sets."""
    layer = config.per_layer_config[index]  # head_dim and G of full layers
    full = config.layer_types[index] == "full_attention"
    source = kv_source(config, index)
    return {
        "head_size": layer.head_dim,
        "n_kv_head": layer.num_key_value_heads,
        "scale": 1.0,
        "qk_norm": "head",
        "k_eq_v": bool(config.attention_k_eq_v and full and source is None),
        "v_norm": source is None,
        "kv_source": source,
    }
