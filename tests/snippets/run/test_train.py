"""Tests for snippets/run/train.py: the optimization page's claims, at small sizes.

No timing is asserted: times depend on the machine and on what else runs on it. The
committed results are checked for what the page says about them, not re-measured.
"""

import dataclasses

import pytest
import torch
from torch.testing import assert_close

from snippets.core.model import GPT, GPTConfig
from snippets.run.checkpoint import save_checkpoint
from snippets.run.train import (
    CHECKPOINT,
    TrainConfig,
    fit,
    lr_at,
    make_optimizer,
    param_groups,
    train,
    train_step,
)

SMALL_MODEL = GPTConfig(vocab_size=11, context_length=16, n_embed=32, n_head=4, n_layer=2)
# A run of a few seconds' worth: the sizes every training test uses.
TINY = TrainConfig(
    corpus_chars=20_000,
    steps=12,
    batch_size=8,
    context_length=16,
    n_layer=1,
    n_embed=32,
    warmup_steps=3,
    eval_interval=4,
    val_windows=16,
)


def model(config: GPTConfig = SMALL_MODEL, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(config)


def ids(*shape: int, V: int = SMALL_MODEL.vocab_size, seed: int = 1) -> torch.Tensor:
    return torch.randint(V, shape, generator=torch.Generator().manual_seed(seed))


# --- parameter groups -------------------------------------------------------------------------


@pytest.mark.parametrize("tie", [False, True])
def test_param_groups_decay_only_linear_weights(tie):
    m = model(dataclasses.replace(SMALL_MODEL, tie_weights=tie))
    decay, no_decay = param_groups(m, weight_decay=0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    linear_weights = {
        id(mod.weight)
        for mod in m.modules()
        if isinstance(mod, torch.nn.Linear) and mod.weight is not m.tok_emb.weight
    }
    assert {id(p) for p in decay["params"]} == linear_weights
    # Every parameter in exactly one group; a tied tensor only once, with no decay.
    everything = [id(p) for group in (decay, no_decay) for p in group["params"]]
    assert sorted(everything) == sorted(id(p) for p in m.parameters())
    no_decay_ids = {id(p) for p in no_decay["params"]}
    assert id(m.tok_emb.weight) in no_decay_ids and id(m.pos_emb.weight) in no_decay_ids
    assert (id(m.lm_head.weight) in no_decay_ids) == tie
    for block in m.blocks:
        assert id(block.ln1.weight) in no_decay_ids and id(block.mlp.fc.bias) in no_decay_ids


def test_weight_decay_reaches_only_the_decay_group():
    # With a zero gradient, AdamW's only change to a weight is the decay itself.
    m = model()
    optimizer = make_optimizer(m, lr=0.1, weight_decay=0.5, adamw="for-loop")
    before = {name: p.detach().clone() for name, p in m.named_parameters()}
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for name, p in m.named_parameters():
        if name.endswith(("qkv.weight", "fc.weight", "proj.weight", "lm_head.weight")):
            assert_close(p, before[name] * (1 - 0.1 * 0.5))  # shrunk by lr * decay
        else:
            assert torch.equal(p, before[name]), name


def test_adamw_implementations_agree():
    models = [model() for _ in range(3)]
    x, y = ids(4, 16), ids(4, 16, seed=2)
    for m, impl in zip(models, ("for-loop", "foreach", "fused"), strict=True):
        optimizer = make_optimizer(m, lr=1e-2, weight_decay=0.1, adamw=impl)
        for _ in range(3):
            train_step(m, optimizer, [(x, y)], grad_clip=1.0)
    for other in models[1:]:
        for p, q in zip(models[0].parameters(), other.parameters(), strict=True):
            assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_make_optimizer_rejects_unknown_implementation():
    with pytest.raises(ValueError, match=r"adamw \('fast'\) must be one of"):
        make_optimizer(model(), 1e-3, 0.1, adamw="fast")


# --- schedule ---------------------------------------------------------------------------------

MAX, MIN, WARMUP, TOTAL = 1e-3, 1e-4, 10, 100


def lr(step: int) -> float:
    return lr_at(step, MAX, MIN, WARMUP, TOTAL)


def test_warmup_climbs_linearly_to_max_lr():
    warmup = [lr(s) for s in range(WARMUP)]
    assert warmup[0] == pytest.approx(MAX / WARMUP)  # the first step already moves
    assert warmup[-1] == pytest.approx(MAX)
    steps = [b - a for a, b in zip(warmup, warmup[1:], strict=False)]
    assert all(s == pytest.approx(MAX / WARMUP) for s in steps)


def test_cosine_decays_to_the_floor_and_stays_there():
    decay = [lr(s) for s in range(WARMUP, TOTAL + 1)]
    assert decay[0] == pytest.approx(MAX)
    assert all(b <= a for a, b in zip(decay, decay[1:], strict=False))
    assert lr((WARMUP + TOTAL) // 2) == pytest.approx((MAX + MIN) / 2)  # half-way
    assert lr(TOTAL - 1) > MIN
    # At the last step and every step after it: the floor, not a cosine climbing back.
    assert all(lr(s) == MIN for s in range(TOTAL, 3 * TOTAL))


def test_schedule_without_warmup_starts_at_max_lr():
    assert lr_at(0, MAX, MIN, 0, TOTAL) == MAX


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 1e-3, 1e-2, 10, 100), r"need 0 <= min_lr \(0.01\) <= max_lr \(0.001\)"),
        ((0, 1e-3, 1e-4, 200, 100), r"warmup_steps \(200\) <= total_steps \(100\)"),
        ((-1, 1e-3, 1e-4, 10, 100), r"step \(-1\) must be >= 0"),
    ],
)
def test_schedule_errors(args, message):
    with pytest.raises(ValueError, match=message):
        lr_at(*args)


# --- clipping and accumulation ----------------------------------------------------------------


class GradRecorder:
    """Stands in for the optimizer: keeps the gradients train_step hands it."""

    def __init__(self, m: torch.nn.Module):
        self.param_groups = [{"params": list(m.parameters())}]
        self.grads = None

    def step(self):
        self.grads = [p.grad.detach().clone() for p in self.param_groups[0]["params"]]

    def zero_grad(self, set_to_none=True):
        for p in self.param_groups[0]["params"]:
            p.grad = None


@pytest.mark.parametrize("k", [2, 4])
def test_accumulated_gradients_equal_the_big_batch_gradient(k):
    x, y = ids(8, 16), ids(8, 16, seed=2)
    big, pieces = model(), model()
    big_grads, acc_grads = GradRecorder(big), GradRecorder(pieces)
    big_loss, _ = train_step(big, big_grads, [(x, y)], grad_clip=0)
    split = list(zip(x.chunk(k), y.chunk(k), strict=True))
    acc_loss, _ = train_step(pieces, acc_grads, split, grad_clip=0)
    assert acc_loss == pytest.approx(big_loss, rel=1e-6)
    for a, b in zip(acc_grads.grads, big_grads.grads, strict=True):
        assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_accumulation_without_dividing_by_k_would_not_match():
    # The test above can fail: summing the k pieces' losses gives k times the gradient.
    x, y = ids(8, 16), ids(8, 16, seed=2)
    m = model()
    m(x, y)[1].backward()
    once = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    for xs, ys in zip(x.chunk(2), y.chunk(2), strict=True):
        m(xs, ys)[1].backward()
    assert not torch.allclose(next(m.parameters()).grad, once[0])


def test_gradient_clipping_bounds_the_norm_and_reports_it_before():
    m = model()
    recorder = GradRecorder(m)
    x, y = ids(4, 16), ids(4, 16, seed=2)
    _, unclipped = train_step(m, recorder, [(x, y)], grad_clip=0)
    _, reported = train_step(m, recorder, [(x, y)], grad_clip=unclipped / 10)
    assert reported == pytest.approx(unclipped, rel=1e-5)
    clipped = torch.linalg.vector_norm(torch.stack([g.norm() for g in recorder.grads]))
    assert clipped.item() == pytest.approx(unclipped / 10, rel=1e-4)


# --- the loop ---------------------------------------------------------------------------------


def test_fit_takes_each_step_at_its_scheduled_rate_and_yields_what_train_step_returned():
    # fit against the loop written out: the rate each step ran at, its loss and norm,
    # and the weights after, bitwise.
    rows = [(ids(4, 16, seed=s), ids(4, 16, seed=s + 100)) for s in range(5)]
    schedule = (3e-3, 3e-4, 0, 6)  # lr_at's: a different rate at every step
    by_hand, looped = model(), model()
    optimizer = make_optimizer(by_hand, 1.0, 0.1, adamw="for-loop")
    expected = []
    for step in range(1, 5):  # a run resumed after step 0: steps 1 to 4
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, *schedule)
        loss, norm = train_step(by_hand, optimizer, [rows[step]], 1.0)
        expected.append((step + 1, lr_at(step, *schedule), loss, norm))
    batches = iter(rows[1:])
    optimizer = make_optimizer(looped, 1.0, 0.1, adamw="for-loop")
    got = list(fit(looped, optimizer, lambda: [next(batches)], schedule, range(1, 5), 1.0))
    # the rate of step i is lr_at(i), not lr_at(i + 1): the rates all differ
    rates = [lr_at(i, *schedule) for i in range(6)]
    assert len(set(rates)) == 6 and [lr for _, lr, _, _ in got] == rates[1:5]
    assert got == expected
    for a, b in zip(looped.parameters(), by_hand.parameters(), strict=True):
        assert torch.equal(a, b)


def test_fit_is_lazy_a_step_is_taken_only_when_asked_for():
    # A caller validates or checkpoints between steps: the next batch must not be drawn
    # (nor the weights moved) before the caller asks for the next step.
    m = model()
    before = [p.detach().clone() for p in m.parameters()]
    drawn = []

    def batches():
        drawn.append(1)
        return [(ids(4, 16), ids(4, 16, seed=2))]

    steps = fit(m, make_optimizer(m, 1e-3, 0.0), batches, (1e-3, 1e-3, 0, 3), range(3), 1.0)
    unmoved = [torch.equal(a, b) for a, b in zip(before, m.parameters(), strict=True)]
    assert drawn == [] and all(unmoved)
    next(steps)
    moved = [not torch.equal(a, b) for a, b in zip(before, m.parameters(), strict=True)]
    assert drawn == [1] and any(moved)


def test_whole_runs_with_and_without_accumulation_agree(tmp_path):
    one = train(TINY, tmp_path / "one")
    four = train(dataclasses.replace(TINY, grad_accum=4), tmp_path / "four")
    a = torch.load(tmp_path / "one" / CHECKPOINT, weights_only=True)["model"]
    b = torch.load(tmp_path / "four" / CHECKPOINT, weights_only=True)["model"]
    for name in a:
        assert_close(a[name], b[name], rtol=1e-4, atol=1e-5)
    val = [[r["val_loss"] for r in h["records"]] for h in (one, four)]
    assert val[0] == pytest.approx(val[1], abs=1e-4)


# --- checkpoints ------------------------------------------------------------------------------


# Dropout on: the resumed run must also restore the dropout masks' random stream.
RESUMABLE = dataclasses.replace(TINY, dropout=0.1)


def final_state(out):
    return torch.load(out / CHECKPOINT, weights_only=True)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The run that never stopped: its folder and its history."""
    out = tmp_path_factory.mktemp("straight")
    return out, train(RESUMABLE, out)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """The same run stopped after step 6: a folder to copy and resume."""
    out = tmp_path_factory.mktemp("stopped")
    train(RESUMABLE, out, stop_after=6)
    return out


def resume_copy(stopped, tmp_path, change=None):
    """Resume a copy of the stopped run, after change(state) if given."""
    state = final_state(stopped)
    if change is not None:
        change(state)
    save_checkpoint(state, tmp_path / CHECKPOINT)
    return train(RESUMABLE, tmp_path, resume=True)


def test_resumed_run_ends_bitwise_equal_to_an_uninterrupted_one(straight, stopped, tmp_path):
    straight_dir, straight_history = straight
    assert final_state(stopped)["step"] == 6
    resumed = resume_copy(stopped, tmp_path)
    a, b = final_state(straight_dir), final_state(tmp_path)
    assert a["step"] == b["step"] == RESUMABLE.steps
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    states = zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values(), strict=True)
    for s, t in states:
        assert torch.equal(s["exp_avg"], t["exp_avg"])
        assert torch.equal(s["exp_avg_sq"], t["exp_avg_sq"])
    assert torch.equal(a["batch_rng"], b["batch_rng"])
    assert torch.equal(a["torch_rng"][0], b["torch_rng"][0])
    losses = [
        [(r.get("train_loss"), r["val_loss"]) for r in h["records"]]
        for h in (straight_history, resumed)
    ]
    assert losses[0] == losses[1]
    assert resumed["resumed_at"] == [6]


@pytest.mark.parametrize("forget", ["batch_rng", "torch_rng"])
def test_resume_without_a_random_state_would_differ(straight, stopped, tmp_path, forget):
    # The equality above can fail: resume with one random stream started afresh.
    fresh = torch.Generator().manual_seed(123).get_state()

    def change(state):
        state[forget] = fresh if forget == "batch_rng" else [fresh]

    resume_copy(stopped, tmp_path, change)
    a, b = final_state(straight[0]), final_state(tmp_path)
    assert not all(torch.equal(a["model"][n], b["model"][n]) for n in a["model"])


def test_resume_refuses_a_different_config(tmp_path):
    train(TINY, tmp_path, stop_after=4)
    with pytest.raises(ValueError, match=r"made with lr=0.003, this run has lr=0.001"):
        train(dataclasses.replace(TINY, lr=1e-3), tmp_path, resume=True)
