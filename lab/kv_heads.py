"""MHA, GQA, MQA and MLA trained on the Markov corpus: loss, parameters, cache, speed.

    python -m lab.kv_heads                 # docs/assets/results/kv-heads.json
    python -m lab.kv_heads --quick --out /tmp/kv-heads   # seconds, for the tests

The same small GPT four times, differing only in its attention layer, trained with
the loop pieces of snippets/run/train.py on the Markov language whose entropy rate is
known. For each: the validation loss and its excess over the best possible loss on
the same windows, the parameter count, the KV cache's bytes at the full context
(by kv_cache_bytes, checked against the cache tensors), and the time per token of
greedy generation with the cache. Timings depend on the machine: the file names it.
"""

import dataclasses
import statistics
import sys
import time

import torch

from lab.shared.common import RESULTS_DIR, note_load_after
from lab.shared.experiment import Command, count, progress
from snippets.core.cache import ModelCache
from snippets.core.model import GPT, GPTConfig, parameter_count
from snippets.layers.configurable import AttentionSpec
from snippets.layers.kv_heads import kv_cache_bytes
from snippets.layers.mla import MLASpec
from snippets.pages.measure import time_interleaved
from snippets.run.generate import generate
from snippets.run.train import TrainConfig, evaluate, fit, make_optimizer
from snippets.run.train_data import (
    MARKOV,
    load_corpus,
    markov_loss,
    micro_batches,
    val_windows,
)

RESULT = RESULTS_DIR / "kv-heads.json"
SCHEMA = "attention-guide/kv-heads/1"

# The optimization page's one-minute model (4 heads of D = 16, 2 layers, width 64,
# context 64); only the attention layer changes. MLA's latent of 32 numbers per
# token and layer caches as much as MQA's one key and one value head of 16.
VARIANTS = {
    "MHA": {},  # the plain causal layer
    "GQA": {"n_kv_head": 2},
    "MQA": {"n_kv_head": 1},
    "MLA": {"kv_latent": 32},  # the kv-heads page's MLA: no RoPE part, no latent norm
}
FULL = {"steps": 400, "seeds": 2, "rounds": 21}
QUICK = {"steps": 4, "seeds": 1, "rounds": 1}


def model_config(train: TrainConfig, vocab_size: int, variant: str) -> GPTConfig:
    """The run's GPT with every layer the variant's (learned positions, no RoPE)."""
    config, v = train.model_config(vocab_size), VARIANTS[variant]
    C, H = config.n_embed, config.n_head
    D = C // H
    if "kv_latent" in v:
        layer = MLASpec(C, H, v["kv_latent"], D, 0, D, rope=None, latent_norm=False,
                        proj_bias=True)  # fmt: skip
    elif "n_kv_head" in v:
        layer = AttentionSpec(C, H, v["n_kv_head"], D, rope=None, out_bias=True)
    else:
        return config
    return dataclasses.replace(config, layers=(layer,) * config.n_layer)


def cache_bytes(config: GPTConfig, tokens: int, bytes_per_element: int) -> int:
    """kv_cache_bytes for one sequence of a GPTConfig."""
    layer = config.layer_specs()[0]
    if isinstance(layer, MLASpec):
        per_token = {"kv_latent": layer.kv_latent}
    else:
        G = getattr(layer, "n_kv_head", config.n_head)
        per_token = {"n_kv_head": G, "head_size": config.n_embed // config.n_head}
    return kv_cache_bytes(
        n_layer=config.n_layer,
        tokens=tokens,
        bytes_per_element=bytes_per_element,
        **per_token,
    )


def train_one(train: TrainConfig, config: GPTConfig, corpus, val) -> tuple[GPT, float]:
    """Train as snippets.run.train.train does (one process), return (model, val loss)."""
    torch.manual_seed(train.seed)
    model = GPT(config)
    optimizer = make_optimizer(model, train.lr, train.weight_decay, train.beta2, train.adamw)
    batches = torch.Generator().manual_seed(train.seed)  # same windows per variant
    schedule = (train.lr, train.min_lr, train.warmup_steps, train.steps)
    for _ in fit(
        model, optimizer, lambda: micro_batches(corpus.train, train, batches),
        schedule, range(train.steps), train.grad_clip,
    ):  # fmt: skip
        pass
    loss = evaluate(model, *val, train.batch_size)
    return model.eval(), loss


def held_bytes(model: GPT) -> int:
    """Bytes of the cache after generating up to the full context, counted."""
    cache = ModelCache.for_model(model, batch_size=1)
    with torch.no_grad():
        model(torch.zeros(1, model.config.context_length, dtype=torch.long), cache=cache)
    return sum(t.numel() * t.element_size() for t in cache.tensors())


def ms_per_token(models: dict[str, GPT], rounds: int) -> dict[str, list[float]]:
    """Greedy generation with the cache from one token to the full context.

    The variants take turns (time_interleaved), so that a slow spell of the
    machine is spread over all of them; one warm-up round, not kept.
    """
    prompt = torch.zeros(1, 1, dtype=torch.long)
    jobs = {
        # every token fits in the cache: context_length - 1 new ones
        name: lambda m=model: generate(m, prompt, m.config.context_length - 1, greedy=True)
        for name, model in models.items()
    }
    timed = time_interleaved(jobs, rounds, warmup=1)
    return {
        name: [s / (models[name].config.context_length - 1) * 1e3 for s in timed[name]["seconds"]]
        for name in models
    }


def run(settings: dict, header: dict) -> dict:
    """Train, count and time the four variants; the result file (after header, which
    records the machine and its load before)."""
    steps = settings["steps"]
    train = TrainConfig(steps=steps, eval_interval=steps, warmup_steps=min(50, steps))
    if steps < 50:  # a smoke test (--quick): less text and validation
        train = dataclasses.replace(train, corpus_chars=20_000, val_windows=16)
    corpus = load_corpus(train.corpus, train.corpus_chars)
    val = val_windows(corpus.val, train.context_length, train.val_windows)
    floor = markov_loss(*val)  # the true chain's loss on these very windows
    vocab = corpus.tokenizer.vocab_size
    results, models = {}, {}
    started = time.perf_counter()
    for name in VARIANTS:
        config = model_config(train, vocab, name)
        losses = []
        for seed in range(settings["seeds"]):
            t0 = time.perf_counter()
            model, loss = train_one(dataclasses.replace(train, seed=seed), config, corpus, val)
            losses.append(loss)
            progress(f"{name} seed {seed}: validation {loss:.4f} "
                     f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip
        models[name] = model  # the last seed's, for the timing
        T = config.context_length
        formula = cache_bytes(config, T, bytes_per_element=4)
        counted = held_bytes(model)
        if counted != formula:
            raise AssertionError(f"{name}: cache holds {counted}, formula {formula}")
        results[name] = {
            "config": dict(VARIANTS[name]),
            "val_loss": [round(x, 5) for x in losses],
            "excess_over_floor": [round(x - floor, 5) for x in losses],
            "parameters": parameter_count(config),
            "cache_bytes_fp32": formula,
            "cache_bytes_16bit": cache_bytes(config, T, bytes_per_element=2),
        }
    train_seconds = time.perf_counter() - started
    timings = ms_per_token(models, settings["rounds"])
    for name, samples in timings.items():
        results[name]["ms_per_token"] = round(statistics.median(samples), 4)
        results[name]["ms_per_token_runs"] = [round(s, 4) for s in samples]
    note_load_after(header)
    return {
        **header,
        "settings": settings,
        "train": dataclasses.asdict(train),
        "model": dataclasses.asdict(model_config(train, vocab, "MHA")),
        "entropy_rate": round(MARKOV.entropy_rate(), 5),
        "val_floor": round(floor, 5),
        "train_seconds": round(train_seconds, 1),
        "generated_tokens": train.context_length - 1,
        "variants": results,
    }


def table(data: dict) -> str:
    """The page's table, from a result file."""
    lines = [
        "variant  kv heads  val loss  excess  parameters  cache, KiB  ms/token",
    ]
    H = data["model"]["n_head"]
    for name, r in data["variants"].items():
        heads = r["config"].get("n_kv_head", H)
        if "kv_latent" in r["config"]:
            heads = f"R={r['config']['kv_latent']}"
        loss = statistics.mean(r["val_loss"])
        excess = statistics.mean(r["excess_over_floor"])
        lines.append(
            f"{name:<7}  {heads!s:>8}  {loss:8.4f}  {excess:+.3f}  "
            f"{r['parameters']:>10,}  {r['cache_bytes_fp32'] / 1024:10.0f}  "
            f"{r['ms_per_token']:8.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cmd = Command(
        "lab.kv_heads",
        "Train MHA, GQA, MQA and MLA on the Markov corpus; write "
        "loss, parameters, cache bytes and generation speed.",
        threads=1,
    )
    p = cmd.parser
    p.add_argument("--steps", type=count, help="training steps per run")
    p.add_argument("--seeds", type=count, help="runs per variant")
    p.add_argument("--rounds", type=count, help="timed generation rounds")
    args = cmd.parse(argv)
    settings = dict(QUICK if args.quick else FULL)
    for key in ("steps", "seeds", "rounds"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    data = run(settings, cmd.header(SCHEMA))
    cmd.write(RESULT.name, data)
    print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the page's results
# Rendered into docs/kv-recall.md by the build (hooks/results.py) from the result file.


def result() -> str:
    """The four variants' losses, parameters, cache and speed; how they were measured."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load("kv-heads.json")
    rows = []
    for name, r in data["variants"].items():
        if "kv_latent" in r["config"]:
            kept = f"latent {r['config']['kv_latent']}"
        else:
            heads = r["config"].get("n_kv_head", data["model"]["n_head"])
            kept = f"{heads} head{'s' if heads > 1 else ''}"
        excess = "..".join(f"{x:.4f}" for x in sorted(r["excess_over_floor"]))
        ms = r["ms_per_token_runs"]
        rows.append(
            [name, kept, f"{statistics.mean(r['val_loss']):.4f}", excess, f"{r['parameters']:,}",
             f"{r['cache_bytes_fp32'] / 1024:.0f}",
             f"{r['ms_per_token']:.2f} ({min(ms):.2f}..{max(ms):.2f})"]
        )  # fmt: skip
    header = ["variant", "K/V cached", "val loss", "excess over floor", "parameters"]
    header += ["cache, KiB", "ms/token (runs)"]
    s = data["settings"]
    note = measured_note(
        data,
        [
            f"{s['steps']} steps per variant and seed; speed: median of {s['rounds']} rounds",
        ],
        seeds=list(range(s["seeds"])),
        seconds=data.get("train_seconds"),
    )
    return f"{markdown_table(header, rows)}\n\n{note}"


def values() -> dict[str, str]:
    """The numbers of the page's prose about the table."""
    from lab.shared.result_pages import load, value_table

    data = load("kv-heads.json")
    v = data["variants"].values()
    means = [statistics.mean(r["val_loss"]) for r in v]
    seeds = [max(r["val_loss"]) - min(r["val_loss"]) for r in v]
    medians = [r["ms_per_token"] for r in v]
    return value_table(
        {
            "loss_spread": f"{max(means) - min(means):.4f}",
            "seed_spread": f"{max(seeds):.4f}",
            "ms_low": f"{min(medians):.2f}",
            "ms_high": f"{max(medians):.2f}",
            "fastest": f"{max(min(r['ms_per_token_runs']) for r in v):.2f}",
            "slowest": f"{min(max(r['ms_per_token_runs']) for r in v):.2f}",
            "mha_weights": f"{data['variants']['MHA']['parameters'] * 4 / 1024:,.0f}",
            "entropy_rate": f"{data['entropy_rate']:.3f}",
        }
    )
