"""Tests for snippets/checkpoint.py: the atomic save. That a resumed run refuses another
config, and ends bitwise where an uninterrupted one does, is tested with the run itself in
tests/snippets/test_train.py."""

import pytest
import torch

from snippets import checkpoint
from snippets.checkpoint import check_same_config, save_checkpoint


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
    from snippets.train import TrainConfig

    saved = {**TrainConfig().__dict__, "compile": True}
    check_same_config(saved, TrainConfig())  # compile changes nothing computed
    with pytest.raises(ValueError, match=r"made with steps=800, this run has steps=90"):
        check_same_config(saved, TrainConfig(steps=90))
