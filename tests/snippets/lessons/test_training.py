"""The optimization page's lesson loop takes the package's steps: the same groups,
the same schedule, the same validation loss, and, from the same seed, weights and
batches, the same loss at every step as snippets.run.train.fit, the loop every
experiment trains with.

Bitwise, except where clipping scales the gradients: clip_grad_norm_ adds up the
per-tensor norms in the order it is given them, the package's train_step in the
optimizer's order (the decayed matrices first), the lesson in model.parameters()
order. The total norm can then differ in its last bit, and so can everything after
it; the losses agree to a few parts in 10^7 (a wrong step is off by 10^-2)."""

import dataclasses
import math

import pytest
import torch

from snippets.core import model as library
from snippets.lessons import training as lesson
from snippets.lessons import transformer
from snippets.run import train as package
from snippets.run.data import get_batch
from snippets.run.train_data import load_corpus, val_windows

SIZES = {"vocab_size": 11, "context_length": 16, "n_embed": 32, "n_head": 4}
SIZES |= {"n_layer": 2, "tie_weights": True}
# 24 steps: 5 of warmup, then the cosine; a validation every 10 steps.
RUN = lesson.TrainConfig(steps=24, batch_size=8, warmup_steps=5, eval_interval=10)


@pytest.fixture(scope="module")
def data():
    corpus = load_corpus("markov", 20_000)
    return corpus.train, *val_windows(corpus.val, SIZES["context_length"], 16)


def both_models(tie=True):
    """The lesson's GPT and the package's, with the same weights (one seed)."""
    sizes = SIZES | {"tie_weights": tie}
    torch.manual_seed(0)
    mine = transformer.GPT(transformer.GPTConfig(**sizes))
    torch.manual_seed(0)
    theirs = library.GPT(library.GPTConfig(**sizes))
    return mine, theirs


def run_both(config, data):
    """The lesson's train and the package's fit, from the same weights and batches
    and on the same schedule: (the lesson's losses, its validation losses, model)
    and (fit's losses, the package's evaluate at the same steps, norms, model)."""
    train_ids, val_x, val_y = data
    mine, theirs = both_models()
    batches = torch.Generator().manual_seed(0)
    losses, val = lesson.train(mine, config, train_ids, val_x, val_y, batches)
    optimizer = package.make_optimizer(
        theirs, config.lr, config.weight_decay, config.beta2, adamw="for-loop"
    )
    batches = torch.Generator().manual_seed(0)
    T = SIZES["context_length"]
    schedule = (config.lr, config.min_lr, config.warmup_steps, config.steps)
    ref_val = {0: package.evaluate(theirs, val_x, val_y, 32)}
    ref_losses, norms = [], []
    steps = package.fit(
        theirs,
        optimizer,
        lambda: [get_batch(train_ids, config.batch_size, T, batches)],
        schedule,
        range(config.steps),
        config.grad_clip,
    )
    for done, _, loss, norm in steps:
        ref_losses.append(loss)
        norms.append(norm)
        if done % config.eval_interval == 0:
            ref_val[done] = package.evaluate(theirs, val_x, val_y, 32)
    return (losses, val, mine), (ref_losses, ref_val, norms, theirs)


def test_without_clipping_the_lesson_loop_is_fit_bitwise(data):
    # grad_clip=inf: the clip factor is 1.0 at every step, an exact no-op in both.
    config = dataclasses.replace(RUN, grad_clip=math.inf)
    (losses, val, mine), (ref, ref_val, _, theirs) = run_both(config, data)
    assert len(losses) == RUN.steps and losses == ref
    assert list(val) == [0, 10, 20] and val == ref_val
    ref_weights = theirs.state_dict()
    for name, p in mine.state_dict().items():
        assert torch.equal(p, ref_weights[name]), name


def test_with_clipping_the_lesson_loop_is_fit_within_the_norm_s_rounding(data):
    config = dataclasses.replace(RUN, grad_clip=0.5)
    (losses, val, mine), (ref, ref_val, norms, theirs) = run_both(config, data)
    assert sum(n > config.grad_clip for n in norms) > len(norms) // 2  # it clips
    assert losses == pytest.approx(ref, rel=1e-5, abs=0)
    assert list(val) == list(ref_val)
    assert list(val.values()) == pytest.approx(list(ref_val.values()), rel=1e-5)
    for p, q in zip(mine.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_the_schedule_is_the_package_s_at_every_step():
    for args in [(3e-3, 3e-4, 50, 800), (1e-3, 1e-4, 0, 10), (1.0, 0.0, 7, 7)]:
        for step in range(args[3] + 20):
            assert lesson.lr_at(step, *args) == package.lr_at(step, *args), (step, args)


@pytest.mark.parametrize("tie", [False, True])
def test_the_parameter_groups_are_the_package_s(tie):
    mine, theirs = both_models(tie)
    names = {id(p): n for n, p in mine.named_parameters()}
    ref_names = {id(p): n for n, p in theirs.named_parameters()}
    groups = lesson.param_groups(mine, 0.1)
    ref = package.param_groups(theirs, 0.1)
    for group, ref_group in zip(groups, ref, strict=True):
        assert group["weight_decay"] == ref_group["weight_decay"]
        assert [names[id(p)] for p in group["params"]] == [
            ref_names[id(p)] for p in ref_group["params"]
        ]
    optimizer = lesson.make_optimizer(mine, RUN)
    settings = optimizer.param_groups[0]
    assert settings["betas"] == (0.9, RUN.beta2) and settings["lr"] == RUN.lr


def test_the_lesson_s_defaults_are_the_package_s():
    # The page's numbers: the run the lesson describes is the run the package makes.
    ref = package.TrainConfig()
    for field in dataclasses.fields(lesson.TrainConfig):
        assert getattr(lesson.TrainConfig(), field.name) == getattr(ref, field.name)
