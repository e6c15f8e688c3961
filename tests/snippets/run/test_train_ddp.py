"""The training loop under torchrun: 2 processes (DDP, gloo) against 1 on the same batches.

The page tells readers to run `torchrun --standalone --nproc_per_node=2 -m lab.train`;
this test runs that command. --standalone starts the rendezvous on localhost on a free port.
Each process imports torch, so the test takes several seconds on 2 cores.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

from lab.shared.common import ROOT
from snippets.run.train import CHECKPOINT, HISTORY, TrainConfig, train

TORCHRUN = Path(sys.executable).parent / "torchrun"
# batch_size 8 with grad_accum 2: each of the 2 processes takes 2 windows per micro-step.
CONFIG = TrainConfig(
    corpus_chars=20_000,
    steps=8,
    batch_size=8,
    grad_accum=2,
    context_length=16,
    n_layer=1,
    n_embed=32,
    warmup_steps=2,
    eval_interval=4,
    val_windows=16,
)


def as_args(config: TrainConfig) -> list[str]:
    args = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        flag = "--" + field.name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        else:
            args += [flag, str(value)]
    return args


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ddp")
    command = [
        str(TORCHRUN), "--standalone", "--nproc_per_node=2",
        "-m", "lab.train", *as_args(CONFIG), "--out", str(out), "--no-progress",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Process 0 alone prints and writes: one summary line, not two.
    assert proc.stdout.count("wrote ") == 1, proc.stdout
    return out


def test_two_processes_match_one_process_on_the_same_global_batch(two_processes, tmp_path):
    single = train(CONFIG, tmp_path)
    ddp = json.loads((two_processes / HISTORY).read_text())
    assert ddp["world_size"] == 2 and single["world_size"] == 1
    a = torch.load(two_processes / CHECKPOINT, weights_only=True)
    b = torch.load(tmp_path / CHECKPOINT, weights_only=True)
    assert a["step"] == b["step"] == CONFIG.steps
    # Same windows, same mean gradient; only the order of the float additions differs.
    for name in a["model"]:
        assert_close(a["model"][name], b["model"][name], rtol=1e-4, atol=1e-5)
    for key in ("val_loss", "train_loss"):
        values = [[r.get(key) for r in h["records"]] for h in (ddp, single)]
        assert values[0] == pytest.approx(values[1], abs=1e-4)
    # The two processes drew different dropout streams (one each), both saved.
    assert len(a["torch_rng"]) == 2 and not torch.equal(*a["torch_rng"])


def test_one_process_alone_would_not_match(two_processes, tmp_path):
    # The comparison above can fail: half the batch (one process's share) trains elsewhere.
    half = dataclasses.replace(CONFIG, batch_size=4, grad_accum=1)
    train(half, tmp_path)
    a = torch.load(two_processes / CHECKPOINT, weights_only=True)["model"]
    b = torch.load(tmp_path / CHECKPOINT, weights_only=True)["model"]
    assert not torch.allclose(a["tok_emb.weight"], b["tok_emb.weight"], atol=1e-4)
