"""Tests for snippets/run/checkpoint.py: the atomic save. That a resumed run refuses another
config, and ends bitwise where an uninterrupted one does, is tested with the run itself in
tests/snippets/run/test_train.py."""

import pytest
import torch

from snippets.run import checkpoint
from snippets.run.checkpoint import check_same_config, save_checkpoint


def test_save_checkpoint_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint({"step": 1}, path)
    assert torch.load(path, weights_only=True) == {"step": 1}

    def crash(state, f):  # a save that dies half-way, as a kill or a full disk would
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({"step": 2}, path)
    assert torch.load(path, weights_only=True) == {"step": 1}  # the old one, whole
    monkeypatch.undo()
    save_checkpoint({"step": 3}, path)  # the leftover temporary file is overwritten
    assert torch.load(path, weights_only=True) == {"step": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


def test_the_resume_check_names_the_field_that_differs_and_lets_compile_change():
    from snippets.run.train import TrainConfig

    saved = {**TrainConfig().__dict__, "compile": True}
    check_same_config(saved, TrainConfig())  # compile changes nothing computed
    with pytest.raises(ValueError, match=r"made with steps=800, this run has steps=90"):
        check_same_config(saved, TrainConfig(steps=90))


def test_a_config_with_specs_comes_back_from_its_data_and_a_strange_tag_is_named():
    from snippets.core.model import GPTConfig
    from snippets.core.rope_scaling import RopeSpec
    from snippets.layers.configurable import AttentionSpec
    from snippets.layers.linear_layers import LinearSpec
    from snippets.run.checkpoint import config_data, config_from_data

    layers = (
        LinearSpec(4, 32, 8, 8, rule="kda"),
        AttentionSpec(32, 4, 2, 8, rope=RopeSpec(base=500.0)),
    )
    config = GPTConfig(n_embed=32, n_head=4, n_layer=2, position="none", layers=layers)
    data = config_data(config)
    assert (
        data["layers"][1]["spec"] == "snippets.layers.configurable.AttentionSpec"
        and data["layers"][1]["rope"]["base"] == 500.0
    )
    assert config_from_data(GPTConfig, data) == config
    old = {
        **data,
        "layers": tuple({**d, "spec": d["spec"].rpartition(".")[2]} for d in data["layers"]),
    }
    assert config_from_data(GPTConfig, old) == config  # a checkpoint of bare names reads back
    for tag in ("LinearSpek", "snippets.layers.linear_layers.LinearSpek"):
        data["layers"][0]["spec"] = tag
        with pytest.raises(
            ValueError, match=rf"a spec named '{tag}' is not one of \['AttentionSpec'"
        ):
            config_from_data(GPTConfig, data)
