"""The tiny configs of every family lab/oracle/tiny_models.py builds: a family's model type ->
the config fields that shrink it while keeping its choices (window and chunk sizes below the
test length, RoPE scaling with its published rule, a published layer schedule).

Shape letters: C channels, H query heads, G key/value heads, D head size.
"""

WINDOW = 8  # every window and chunk; the tests run T = 3 * WINDOW
# What every tiny model shares: C = 48 channels, H = 4 heads of D = 16
# (H * D = 64 != C: the head size is its own number), G = 2 key/value heads.
COMMON = {
    "vocab_size": 64,
    "hidden_size": 48,
    "intermediate_size": 32,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 64,
}
MOE = {"num_experts_per_tok": 1}
# The MLA sizes of the DeepSeek-like families (q_rank 24, kv_latent 16, Dn = Dr = 8).
MLA_TINY = {
    "q_lora_rank": 24,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8,
    "v_head_dim": 12,
    "num_key_value_heads": 4,
    "n_routed_experts": 2,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "moe_intermediate_size": 16,
    **MOE,
}
# DSA's indexer: 16 heads of 16, RoPE on 8 of them (as 64 of 128), top 6 keys of up to
# 24. Enough heads that a key scored 0 by all (ReLU), a tie top-k breaks anyhow, is rare.
DSA_TINY = {
    "index_n_heads": 16,
    "index_head_dim": 16,
    "index_topk": 6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
}
# The Mamba2 hybrids: 4 heads of P = 12 (H P = C, mamba_expand 1) on a state of N = 5 in
# 2 groups, conv width 4, chunks of WINDOW (the tests' T spans three).
MAMBA_TINY = {"mamba_n_heads": 4, "mamba_d_head": 12, "mamba_d_state": 5, "mamba_n_groups": 2}
MAMBA_TINY |= {"mamba_d_conv": 4, "mamba_chunk_size": WINDOW, "mamba_expand": 1}
# Falcon-H1's attention: its key multiplier inside it, the in and out ones in the layer around.
FALCON_ATTENTION = {"key_multiplier": 1.6, "attention_in_multiplier": 1.25, "attention_bias": True}
FALCON_ATTENTION |= {"attention_out_multiplier": 1.3}
# Kimi K2.5's vision tower: one layer of 16 channels, 2 heads.
VISION = {"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1}
VISION |= {"num_attention_heads": 2, "pos_emb_height": 4, "pos_emb_width": 4}
# model_type -> (config class name, the family's own fields).
TINY = {
    "llama": (
        "LlamaConfig",
        {
            "rope_parameters": {  # Llama 3.1's rule, lengths shrunk
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        },
    ),
    "mistral": ("MistralConfig", {"sliding_window": WINDOW}),
    "qwen3": ("Qwen3Config", {}),
    "gemma2": (
        "Gemma2Config",
        {
            "sliding_window": WINDOW,
            "query_pre_attn_scalar": 16,
            "attn_logit_softcapping": 50.0,
        },
    ),
    "gemma3_text": (
        "Gemma3TextConfig",
        {
            "sliding_window": WINDOW,
            "query_pre_attn_scalar": 16,
            "num_hidden_layers": 6,  # the published 5 window layers to 1 full
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {
                    "rope_type": "linear",
                    "rope_theta": 1000000.0,
                    "factor": 8.0,
                },
            },
        },
    ),
    "gpt_oss": (
        "GptOssConfig",
        {
            "sliding_window": WINDOW,
            "num_local_experts": 2,
            **MOE,
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 150000.0,
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 16,
            },
        },
    ),
    "deepseek_v3": (
        "DeepseekV3Config",
        {
            **MLA_TINY,
            "head_dim": 8,  # transformers' RoPE reads head_dim: the rope part's
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 40.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "original_max_position_embeddings": 16,
            },
        },
    ),
    "deepseek_v32": ("DeepseekV32Config", {**MLA_TINY, **DSA_TINY}),
    "glm_moe_dsa": (
        "GlmMoeDsaConfig",
        # GLM-5's layers without an indexer of their own reuse the last one's.
        {**MLA_TINY, **DSA_TINY, "indexer_types": ["full", "shared", "full", "shared"]},
    ),
    "mistral4": (
        "Mistral4Config",
        {
            **MLA_TINY,
            "rope_parameters": {  # Mistral 4's, its length shrunk: temperature rises at 8, 16
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 8.0,  # 1M / 8192 there: 128; 64 / 8 here
                "original_max_position_embeddings": WINDOW,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale_all_dim": 1.0,
                "mscale": 1.0,
                "llama_4_scaling_beta": 0.1,
                "partial_rotary_factor": 0.5,  # Dr / (Dn + Dr)
            },
        },
    ),
    "mistral_large4_text": (
        "MistralLarge4TextConfig",
        {  # every kind of its layers: RoPE and NoPE, latents stored and read, indexers
            # of their own and shared (on a layer that reads another's latents too)
            **{k: v for k, v in MLA_TINY.items() if k != "q_lora_rank"},  # q from x
            **DSA_TINY,
            "num_hidden_layers": 6,
            "no_rope_layers": [1, 1, 0, 1, 0, 1],  # 1: RoPE
            "kv_source_layers": [0, 0, 2, 3, 2, 3],  # 1 reads 0's latents, 4 2's, 5 3's
            "indexer_types": ["full", "shared", "full", "full", "shared", "full"],
            "rope_parameters": {  # its YaRN, the length shrunk, with an mscale on the scores
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "original_max_position_embeddings": WINDOW,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "attention_factor": 1.0,
                "mscale_all_dim": 1.0,
            },
        },
    ),
    "deepseek_v4": (
        "DeepseekV4Config",
        {  # a window of 8; HCA's entry per 6 tokens (128); CSA's per 2 (4), top 3 of 12
            "num_key_value_heads": 1,
            "q_lora_rank": 24,
            "partial_rotary_factor": 0.5,  # RoPE on the last 8 of 16 (64 of 512)
            "sliding_window": WINDOW,
            "compress_rates": {"compressed_sparse_attention": 2, "heavily_compressed_attention": 6},
            "o_groups": 2,
            "o_lora_rank": 8,
            "index_n_heads": 8,
            "index_head_dim": 16,
            "index_topk": 3,
            "n_routed_experts": 2,
            "n_shared_experts": 1,
            "moe_intermediate_size": 16,
            "hc_mult": 2,
            **MOE,
            # YaRN on the compressed layers only (base 160,000; the window layers' 10,000
            # unscaled), its attention factor 1, as transformers sets for V4; lengths shrunk
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 16,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
            },
            "layer_types": [
                "sliding_attention",
                "compressed_sparse_attention",
                "heavily_compressed_attention",
                "compressed_sparse_attention",
            ],
        },
    ),
    "llama4_text": (
        "Llama4TextConfig",
        {
            "attention_chunk_size": WINDOW,
            "num_local_experts": 2,
            "intermediate_size_mlp": 32,
            "floor_scale": 4,
            "attn_scale": 0.1,
            **MOE,
        },
    ),
    "qwen3_next": (
        "Qwen3NextConfig",
        {
            "num_experts": 2,
            "moe_intermediate_size": 16,
            "shared_expert_intermediate_size": 16,
            "linear_num_value_heads": 2,
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 8,
            "linear_value_head_dim": 8,
            **MOE,
        },
    ),
    "gemma4_text": (
        "Gemma4TextConfig",
        {
            "sliding_window": WINDOW,
            # 5 window layers to 1 full, twice; the last two (a window layer
            # and a full one) reuse layers 4's and 5's keys and values.
            "num_hidden_layers": 8,
            "layer_types": ["sliding_attention"] * 5
            + ["full_attention", "sliding_attention", "full_attention"],
            "num_kv_shared_layers": 2,
            "attention_k_eq_v": True,  # full layers: values from k_proj
            "global_head_dim": 32,  # full layers' D, as the published 512 to 256
            "num_global_key_value_heads": 1,
            "hidden_size_per_layer_input": 4,  # its per-layer embeddings, small
            "vocab_size_per_layer_input": 64,
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {
                    "rope_type": "proportional",
                    "partial_rotary_factor": 0.25,
                    "rope_theta": 1000000.0,
                },
            },
        },
    ),
    "olmo3": ("Olmo3Config", {"sliding_window": WINDOW}),  # 3 window : 1 full
    "smollm3": ("SmolLM3Config", {"pad_token_id": None}),  # 3 RoPE : 1 NoPE, all full
    "seed_oss": ("SeedOssConfig", {"attention_bias": True, "attention_dropout": 0.0}),
    "apertus": (
        "ApertusConfig",
        {
            "rope_parameters": {  # its published Llama 3 rule, lengths shrunk
                "rope_type": "llama3",
                "rope_theta": 12000000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        },
    ),
    "exaone4": ("Exaone4Config", {"sliding_window": WINDOW}),  # 3 window : 1 full NoPE
    "minimax_m2": (
        "MiniMaxM2Config",
        {
            "num_local_experts": 2,
            **MOE,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 5000000.0,
                "partial_rotary_factor": 0.5,
            },
        },
    ),
    "qwen3_5_text": (
        "Qwen3_5TextConfig",
        {
            "linear_num_value_heads": 4,  # two value heads per key head, as 32 : 16
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 8,
            "linear_value_head_dim": 6,
        },
    ),
    "minimax": (
        "MiniMaxConfig",
        {
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],
            "block_size": WINDOW,  # lightning attention's chunk, below T
            "num_local_experts": 2,
            **MOE,
        },
    ),
    "kimi_linear": (
        "KimiLinearConfig",
        {
            "num_key_value_heads": 4,  # MLA: one latent, every head its own key
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],  # 3 KDA : 1 MLA
            "kv_lora_rank": 16,
            "qk_nope_head_dim": 8,
            "qk_rope_head_dim": 8,
            "v_head_dim": 12,
            "linear_num_heads": 4,
            "linear_head_dim": 8,
            "num_local_experts": 2,
            "n_group": 1,
            "topk_group": 1,
            "moe_intermediate_size": 16,
            **MOE,
            "pad_token_id": None,  # its defaults are ids of the 163840-token vocabulary
            "bos_token_id": None,
            "eos_token_id": None,
        },
    ),
    "glm5_next_text": (
        "Glm5NextTextConfig",
        {  # GLM-5-Next's text model: 3 KDA layers : 1 MLA layer without RoPE, its
            # indexer scoring pools of 4 keys (index_kpool), top 8 (two pools) of 24
            "num_key_value_heads": 4,  # MLA: one latent, every head its own key
            "layer_types": ["linear_attention"] * 3 + ["indexed_attention"],
            "mlp_layer_types": ["dense"] * 4,
            "q_lora_rank": 24,
            "kv_lora_rank": 16,
            "qk_nope_head_dim": 8,
            "qk_rope_head_dim": 0,  # NoPE: its config refuses RoPE on these layers
            "v_head_dim": 12,
            "linear_num_heads": 4,
            "linear_head_dim": 8,
            "index_n_heads": 16,
            "index_head_dim": 16,
            "index_topk": 8,
            "index_kpool": 4,
            "pad_token_id": None,  # its defaults are ids of the 154880-token vocabulary
        },
    ),
    "nemotron_h": (
        "NemotronHConfig",
        {  # Mamba2 and attention blocks (its MLP blocks are not attention: none here)
            "layers_block_type": ["linear_attention", "linear_attention", "full_attention"]
            + ["linear_attention"],
            "mamba_num_heads": 4,
            "mamba_head_dim": 12,
            "ssm_state_size": 5,
            "n_groups": 2,
            "conv_kernel": 4,
            "chunk_size": WINDOW,
            "use_conv_bias": True,
        },
    ),
    "granitemoehybrid": (
        "GraniteMoeHybridConfig",
        {  # 3 Mamba2 layers : 1 attention layer, NoPE, a scale of its own
            **MAMBA_TINY,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],
            "num_local_experts": 2,
            **MOE,
            "shared_intermediate_size": 32,
            "attention_multiplier": 0.3,
        },
    ),
    "kimi_k25": (  # its text model the tiny DeepSeek-V3 above (changes go to it)
        "Kimi_K25Config",
        {"text_config": "deepseek_v3", "projection_hidden_size": 16, "vision_config": VISION},
    ),
    "falcon_h1": (
        "FalconH1Config",
        {  # every layer Mamba2 beside attention; its multipliers not 1, to be folded
            **MAMBA_TINY,
            "mamba_d_ssm": 48,
            "ssm_multipliers": [0.5, 2.0, 1.5, 0.75, 1.25],
            "ssm_in_multiplier": 0.8,
            "mamba_proj_bias": True,
            **FALCON_ATTENTION,
        },
    ),
}

# Families AutoModelForCausalLM does not map (transformers 5.23): their own class.
NOT_AUTO = {
    "mistral4": "Mistral4ForCausalLM",
    "mistral_large4_text": "MistralLarge4TextModel",
    "glm5_next_text": "Glm5NextTextModel",  # transformers has its multimodal model only
}
AUTO = {"kimi_k25": "AutoModelForImageTextToText"}  # a multimodal model: its own auto class
