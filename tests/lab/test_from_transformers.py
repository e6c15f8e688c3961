"""The oracle: every layer of every family equals its transformers layer.

Tiny random models built from configs (lab/oracle/tiny_models.py, nothing downloaded),
their attention weights redrawn so that attention is sharp, T = 3 windows (past
every window and chunk). Forward hooks record what each transformers layer got
and returned in one full forward; the guide's layer, loaded with that layer's
weights, must return the same within 1e-5 relative (float32), on the whole
sequence and in cached decode steps.
"""

import functools
import re

import pytest
import torch

pytest.importorskip("transformers")

from lab.oracle.from_transformers import FAMILIES, load_attention, spec_from_config  # noqa: E402
from lab.oracle.tiny_models import TINY, WINDOW, record_layers, tiny_config, tiny_model  # noqa: E402
from lab.todays_models import T, compare  # noqa: E402

RTOL = 1e-5


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


@functools.cache
def recorded(family: str):
    """The model and, per layer, what its attention got and returned."""
    model = tiny_model(family)
    tokens = torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_layer_equals_transformers(family):
    r = compare(family)  # every layer, whole sequence and cached decode steps
    layers = {"gemma3_text": 6, "gemma4_text": 8, "mistral_large4_text": 6}
    assert r["layers"] == layers.get(family, 4)  # linear layers too
    # Sharp: the mean of each row's largest weight (uniform over 24 keys: 0.04).
    assert r["sharpness"] > 0.4, f"attention too flat to tell layers apart: {r['sharpness']:.2f}"
    assert r["whole"] < RTOL, f"{family}: whole sequence differs by {r['whole']:.2e}"
    assert r["cached"] < RTOL, f"{family}: cached decode differs by {r['cached']:.2e}"
    # Window and chunk layers keep at most W positions; full layers all of them
    # (DeepSeek-V4's compressed ones: tests/lab/test_from_transformers_deepseek.py).
    bounded = [n for kind, n in r["longest_cache"].items() if kind not in ("full", "compressed")]
    assert all(n <= WINDOW for n in bounded)
    assert r["longest_cache"].get("full", T) == T


def test_the_schedules_are_the_published_ones():
    # Each family's layers are of the kinds its config says, in its order.
    kinds = {
        family: [
            getattr(spec_from_config(tiny_config(family), i), "kind", "full")
            for i in range(tiny_config(family).num_hidden_layers)
        ]
        for family in ("gemma3_text", "gpt_oss", "llama4_text", "mistral")
    }
    assert kinds["gemma3_text"] == ["window"] * 5 + ["full"]
    assert kinds["gpt_oss"] == ["window", "full"] * 2
    assert kinds["llama4_text"] == ["chunk"] * 3 + ["full"]
    assert kinds["mistral"] == ["window"] * 4
    llama4 = [spec_from_config(tiny_config("llama4_text"), i) for i in range(4)]
    assert [s.rope is None for s in llama4] == [False] * 3 + [True]  # NoPE every 4th
    assert llama4[3].temperature == (4, 0.1) and llama4[0].temperature is None


def test_a_wrong_layer_is_caught():
    # The comparison can fail: the same weights with the window of a full layer.
    model, seen = recorded("gemma2")
    layer = load_attention(model, 0)  # a window layer
    layer.spec = type(layer.spec)(**{**layer.spec.__dict__, "kind": "full", "size": None})
    with torch.no_grad():
        assert relative(layer(seen[0]["x"]), seen[0]["y"]) > 1e-2


@pytest.mark.parametrize(
    "family, change, field",
    [
        (
            "llama",
            {
                "rope_parameters": {
                    "rope_type": "longrope",
                    "rope_theta": 1e4,
                    "short_factor": [1.0] * 8,
                    "long_factor": [2.0] * 8,
                    "original_max_position_embeddings": 16,
                }
            },
            "rope_parameters['rope_type']",
        ),
        ("gemma3_text", {"use_bidirectional_attention": True}, "use_bidirectional_attention"),
        ("qwen3_next", {}, "layer_types"),
    ],
)
def test_a_config_it_cannot_express_names_the_field(family, change, field):
    config = tiny_config(family, **change)
    index = 0  # Qwen3-Next's layer 0 is a linear-attention layer
    with pytest.raises(ValueError, match=rf"config\.{re.escape(field)}"):
        spec_from_config(config, index)


def test_an_unknown_family_names_model_type():
    import transformers

    config = transformers.Olmo2Config(num_hidden_layers=1)
    with pytest.raises(ValueError, match=r"config\.model_type \('olmo2'\)"):
        spec_from_config(config, 0)


def test_tiny_families_cover_the_loader():
    assert set(TINY) == set(FAMILIES)


def test_a_window_smollm3_does_not_use_names_use_sliding_window():
    # SmolLM3's masks follow layer_types, its attention's window use_sliding_window:
    # a sliding layer with the window switched off is two layers at once.
    types = ["full_attention"] * 3 + ["sliding_attention"]
    config = tiny_config("smollm3", layer_types=types, sliding_window=WINDOW)
    with pytest.raises(ValueError, match=r"config\.use_sliding_window \(False\)"):
        spec_from_config(config, 3)
    windowed = tiny_config(
        "smollm3", layer_types=types, sliding_window=WINDOW, use_sliding_window=True
    )
    assert spec_from_config(windowed, 3).kind == "window"
