"""Kimi K2.5 through the oracle: a multimodal model whose text model is DeepSeek-V3's.

The tiny model is the whole Kimi_K25ForConditionalGeneration (a one-layer vision
tower of 16 channels beside the tiny DeepSeek-V3 text model of lab/oracle/tiny_models.py);
load_attention takes its text model's MLA layers. compare() (every layer whole and
cached) runs with every family in tests/lab/test_from_transformers.py; here: what is
loaded, and a planted fault the comparison must catch.
"""

import functools
import math

import pytest
import torch

pytest.importorskip("transformers")

from lab.oracle.from_transformers import load_attentions, spec_from_config  # noqa: E402
from lab.oracle.tiny_models import record_layers, tiny_model  # noqa: E402
from lab.todays_models import BATCH, T, compare, relative, run_all  # noqa: E402
from snippets.layers.mla import LatentAttention, MLASpec  # noqa: E402

FAMILY = "kimi_k25"


@functools.cache
def recorded():
    model = tiny_model(FAMILY)
    tokens = torch.randint(0, 64, (BATCH, T), generator=torch.Generator().manual_seed(1))
    return model, record_layers(model, tokens)


def worst(layers) -> tuple[float, float]:
    _, seen = recorded()
    with torch.no_grad():
        whole, cached, _ = run_all(layers, [s["x"] for s in seen])
    ys = [s["y"] for s in seen]
    return max(map(relative, whole, ys)), max(map(relative, cached, ys))


def test_the_whole_multimodal_model_loads_as_deepseek_v3s_mla():
    model, _ = recorded()
    assert type(model).__name__ == "Kimi_K25ForConditionalGeneration"
    assert model.config.text_config.model_type == "deepseek_v3"
    layers = load_attentions(model)
    assert [type(layer) for layer in layers] == [LatentAttention] * 4
    assert isinstance(spec_from_config(model.config, 0), MLASpec)  # through its text config
    r = compare(FAMILY)
    assert r["layers"] == 4 and r["sharpness"] > 0.4
    assert r["whole"] < 1e-5 and r["cached"] < 1e-5
    assert worst(layers) == pytest.approx((r["whole"], r["cached"]))


def test_yarns_mscale_left_out_is_caught():
    model, _ = recorded()
    layers = load_attentions(model)
    for layer in layers:  # planted: 1 / sqrt(Dn + Dr), without YaRN's mscale squared
        layer.scale = 1 / math.sqrt(16)
    whole, cached = worst(layers)
    assert whole > 1e-3 and cached > 1e-3
