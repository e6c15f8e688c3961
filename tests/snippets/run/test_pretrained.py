"""Tests for snippets/run/pretrained.py: a folder that transformers' save_pretrained
wrote (config.json, .safetensors) read into the guide's GPT, for each dense family:
the same logits and the same greedy tokens as the transformers model; sharded and
bfloat16 files; a config.json written before transformers 5; bad input named."""

import copy
import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from lab.oracle.from_transformers_model import sharpen
from lab.oracle.tiny_models import tiny_model
from snippets.core.model import GPT
from snippets.run import pretrained
from snippets.run.generate import generate
from snippets.run.pretrained import FAMILIES, gpt_config, load_pretrained

PROMPT, NEW = 12, 20  # T = 32 at the end: four windows of the tiny configs' 8
TIED = [f for f in FAMILIES if f in ("gemma3_text", "smollm3")]  # their defaults


def ids(T: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(seed))


def relative(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """The largest difference, relative to the largest logit."""
    return ((ours - theirs).abs().max() / theirs.abs().max()).item()


@pytest.fixture(scope="module", params=list(FAMILIES))
def saved(request, tmp_path_factory):
    """A family's tiny random model, and the folder save_pretrained wrote it to."""
    family = request.param
    hf = sharpen(tiny_model(family))
    folder = tmp_path_factory.mktemp(family)
    hf.save_pretrained(folder)
    return family, hf, folder


@pytest.fixture(scope="module")
def pair(saved):
    family, hf, folder = saved
    return family, hf, load_pretrained(folder)


def test_the_logits_are_transformers(pair):
    family, hf, gpt = pair
    x = ids(PROMPT + NEW)
    with torch.no_grad():
        theirs, (ours, _) = hf(x).logits, gpt(x)
    assert theirs.std() > 0.5  # sharp enough that a wrong piece shows
    assert relative(ours, theirs) < 1e-5, family  # float32: about 1e-6 seen


def test_greedy_tokens_are_transformers(pair):
    family, hf, gpt = pair
    prompt = ids(PROMPT, seed=1)
    hf.generation_config.eos_token_id = None  # no stop at an end-of-text id
    theirs = hf.generate(
        prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW, do_sample=False
    )
    assert torch.equal(generate(gpt, prompt, NEW, greedy=True), theirs), family


def test_the_head_is_tied_as_the_config_says(pair):
    family, hf, gpt = pair
    assert isinstance(gpt, GPT) and not gpt.training
    assert not any(p.is_meta for p in gpt.parameters())
    tied = hf.config.tie_word_embeddings
    assert tied == (family in TIED) == gpt.config.tie_weights
    assert (gpt.lm_head.weight is gpt.tok_emb.weight) == tied


def test_a_sharded_checkpoint_is_the_single_file(saved, tmp_path):
    family, hf, folder = saved
    hf.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 2
    one, shards = load_pretrained(folder).state_dict(), load_pretrained(tmp_path)
    assert shards.state_dict().keys() == one.keys()
    for key, t in shards.state_dict().items():
        assert torch.equal(t, one[key]), key


def test_bfloat16_files_give_a_bfloat16_gpt(tmp_path):
    # SmolLM3: a tied head. (Gemma's QK-norm scales, 1 + w, are rounded to
    # bfloat16 on loading, where transformers adds the 1 in float32.)
    sharpen(tiny_model("smollm3")).to(torch.bfloat16).save_pretrained(tmp_path)
    gpt = load_pretrained(tmp_path)
    assert gpt.tok_emb.weight.dtype == torch.bfloat16
    # transformers reading the same files into float32, and the GPT made float32
    hf = AutoModelForCausalLM.from_pretrained(
        tmp_path, dtype=torch.float32, attn_implementation="eager"
    )
    x = ids(PROMPT + NEW)
    with torch.no_grad():
        theirs, (ours, _) = hf(x).logits, gpt.float()(x)
    assert relative(ours, theirs) < 1e-5


def test_gemmas_score_scale_is_its_query_pre_attn_scalar(tmp_path):
    hf = sharpen(tiny_model("gemma3_text", query_pre_attn_scalar=24))  # D = 16
    hf.save_pretrained(tmp_path)
    x = ids(PROMPT + NEW)
    with torch.no_grad():
        theirs, (ours, _) = hf(x).logits, load_pretrained(tmp_path)(x)
    assert relative(ours, theirs) < 1e-5


def legacy(config: dict) -> dict:
    """config as a transformers 4 config.json says it: rope_theta and
    rope_scaling (Gemma 3's window layers: rope_local_base_freq), no
    layer_types, no no_rope_layers (each family's default schedule)."""
    config = copy.deepcopy(config)
    config.pop("layer_types", None)
    config.pop("no_rope_layers", None)
    params = config.pop("rope_parameters")
    if "full_attention" in params:  # Gemma 3, Olmo 3: one dict per layer type
        local = params["sliding_attention"]["rope_theta"]
        if config["model_type"] == "gemma3_text":
            config["rope_local_base_freq"] = local
        params = params["full_attention"]
    config["rope_theta"] = params.pop("rope_theta")
    config["rope_scaling"] = None if params["rope_type"] == "default" else params
    return config


def test_an_older_config_json_gives_the_same_gpt_config(saved):
    family, _, folder = saved
    config = json.loads((folder / "config.json").read_text())
    assert "rope_parameters" in config and "rope_theta" not in config
    assert gpt_config(legacy(config)) == gpt_config(config), family


# --- bad input, named ----------------------------------------------------------------


def test_a_family_it_does_not_take_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    with pytest.raises(ValueError, match=r"config.model_type \('gemma3'\): not one of"):
        load_pretrained(tmp_path)  # Gemma 3 with its vision tower: not its text model


def test_a_config_without_its_sizes_is_named(saved):
    _, hf, _ = saved
    config = hf.config.to_dict()
    del config["intermediate_size"]
    with pytest.raises(ValueError, match=r"config.intermediate_size \(None\): config.json"):
        gpt_config(config)


def test_a_folder_without_config_or_weights_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"\('.*'\): no config.json in it"):
        load_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ValueError, match="neither model.safetensors nor"):
        load_pretrained(tmp_path)


def test_a_missing_tensor_is_named(saved):
    family, hf, _ = saved
    state = dict(hf.state_dict())
    del state["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(ValueError, match=r"no tensor 'model.layers.1.mlp.up_proj"):
        pretrained.from_state_dict(hf.config.to_dict(), state)


def test_a_tensor_without_a_place_is_named(saved):
    family, hf, _ = saved
    state = hf.state_dict() | {"model.layers.0.self_attn.q_proj.bias": torch.zeros(64)}
    with pytest.raises(ValueError, match=r"no place for, first \['model.layers.0.self_at"):
        pretrained.from_state_dict(hf.config.to_dict(), state)


def test_a_shape_mismatch_names_the_key_and_both_shapes(saved):
    family, hf, _ = saved
    config = hf.config.to_dict() | {"intermediate_size": 40}
    with pytest.raises(
        ValueError,
        match=r"'model.layers.0.mlp.gate_proj.weight' has shape \(32, 48\), "
        r"the GPT's blocks.0.mlp.gate.weight needs \(40, 48\)",
    ):
        pretrained.from_state_dict(config, hf.state_dict())


# --- the file format, written by hand ------------------------------------------------


def write_safetensors(path, tensors: dict, dtypes: dict) -> None:
    """A .safetensors file: 8 bytes of header length, the JSON header, the bytes."""
    header, data = {}, b""
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes()
        shape = list(t.shape)
        header[name] = {"dtype": dtypes[t.dtype], "shape": shape}
        header[name]["data_offsets"] = [len(data), len(data) + len(raw)]
        data += raw
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


def test_each_dtype_reads_back_bit_for_bit(tmp_path):
    names = {v: k for k, v in pretrained.DTYPES.items()}
    g = torch.Generator().manual_seed(0)
    tensors = {str(dtype): torch.randn(3, 5, generator=g).to(dtype) for dtype in names}
    write_safetensors(tmp_path / "x.safetensors", tensors, names)
    back = pretrained._read_safetensors(tmp_path / "x.safetensors")
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and torch.equal(back[name], t), name


def test_a_dtype_it_does_not_read_is_named(tmp_path):
    t = torch.arange(4)
    write_safetensors(tmp_path / "x.safetensors", {"steps": t}, {torch.int64: "I64"})
    with pytest.raises(ValueError, match=r"'steps' has dtype 'I64', not one of"):
        pretrained._read_safetensors(tmp_path / "x.safetensors")
