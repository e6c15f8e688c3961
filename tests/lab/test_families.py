"""lab/oracle/families.py: the published configs the page's table reads, through the loader the
oracle tests; the KV-cache bytes it prints, checked against the guide's kv_cache_bytes."""

import pytest

pytest.importorskip("transformers")

from lab.oracle.families import (  # noqa: E402
    NO_ROW,
    PUBLISHED,
    kv_bytes,
    kv_within_context,
    layer_specs,
    specs_kv_bytes,
    table_rows,
)
from lab.oracle.from_transformers import spec_from_config  # noqa: E402
from lab.oracle.tiny_models import TINY  # noqa: E402
from snippets.layers.kv_heads import kv_cache_bytes  # noqa: E402


def test_every_published_family_is_one_the_suite_proves_equal():
    published = {entry["model_type"] for entry in PUBLISHED.values()}
    assert published | set(NO_ROW) == set(TINY) and not published & set(NO_ROW)


def test_full_layers_cache_what_kv_cache_bytes_counts():
    for tokens in (1, 32768):
        expected = kv_cache_bytes(n_layer=32, tokens=tokens, n_kv_head=8, head_size=128)
        assert kv_bytes("Llama 3.1 8B", tokens) == expected
    mla = kv_cache_bytes(n_layer=61, tokens=4096, kv_latent=512, rope_head_size=64)
    assert kv_bytes("DeepSeek-V3", 4096) == mla


def test_window_and_chunk_layers_are_capped_at_their_size():
    assert kv_bytes("Mistral 7B v0.1", 131072) == kv_bytes("Mistral 7B v0.1", 4096)
    # Gemma 2: 21 window layers stop at 4096, 21 full layers go on.
    per_layer = 2 * 8 * 256 * 2  # bytes per token and layer
    assert kv_bytes("Gemma 2 9B", 8192) == 21 * per_layer * (4096 + 8192)
    # Qwen3-Next: only its 12 attention layers cache per token.
    specs = layer_specs("Qwen3-Next 80B-A3B")
    assert sum(s is not None for s in specs) == 12
    assert kv_bytes("Qwen3-Next 80B-A3B", 1) == 12 * 2 * 2 * 256 * 2


def test_the_table_has_a_row_per_family_with_its_source():
    rows = table_rows()
    assert [r["family"] for r in rows] == list(PUBLISHED)
    assert all(r["source"].startswith("https://huggingface.co/") for r in rows)
    gemma3 = next(r for r in rows if r["family"] == "Gemma 3 4B")
    assert gemma3["schedule"] == "29 window 1024, 5 full"


def test_k_eq_v_and_shared_layers_cache_what_they_hold():
    import transformers

    def stack(**changes):
        config = transformers.AutoConfig.for_model("gemma4_text", **changes)
        return [spec_from_config(config, i) for i in range(config.num_hidden_layers)]

    plain = stack()  # 25 window layers of 4 x 256, 5 full of 4 x 512
    per_token = 2 * 4 * 2  # K and V, 4 heads, 2 bytes
    assert specs_kv_bytes(plain, 1000) == per_token * (25 * 256 * 512 + 5 * 512 * 1000)
    # K=V: the full layers cache one tensor of their 2 heads; the window layers as before.
    kv = stack(attention_k_eq_v=True, num_global_key_value_heads=2)
    assert specs_kv_bytes(kv, 1000) == per_token * 25 * 256 * 512 + 2 * 2 * 512 * 1000 * 5
    # The last 12 layers reuse earlier ones': 10 window and 2 full layers cache nothing.
    shared = stack(num_kv_shared_layers=12)
    assert sum(s.kv_source is not None for s in shared) == 12
    assert specs_kv_bytes(shared, 1000) == per_token * (15 * 256 * 512 + 3 * 512 * 1000)


def test_lengths_past_the_configs_positions_are_left_out():
    # Llama 3.1 8B allows 131,072 positions: 128k is exactly that, 1M is past it.
    at = kv_within_context("Llama 3.1 8B")
    assert at["128k"] == kv_bytes("Llama 3.1 8B", 128 * 1024)
    assert at["1M"] is None
    # Gemma 2 9B allows 8,192: every column past it.
    assert set(kv_within_context("Gemma 2 9B").values()) == {None}
    rows = {r["family"]: r for r in table_rows()}
    assert rows["Llama 4 Scout"]["kv_at"]["1M"] == kv_bytes("Llama 4 Scout", 2**20)
    assert rows["Qwen3 8B"]["context"] == 40960
