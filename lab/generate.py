"""Generating from the command line, and the KV-cache benchmark and its figure.

    python -m lab.generate runs/markov/ckpt.pt --prompt "a" --tokens 200
    python -m lab.generate --bench-kv-cache   # the generation page's numbers

The sampling and the cache are snippets/run/generate.py. Shape letters: B batch,
T sequence length, V vocabulary size.
"""

import statistics
import sys
import time
from pathlib import Path

import torch

from lab.shared.common import TRAINING_RESULTS, command_line, note_load_after, result_header
from lab.shared.experiment import Command
from lab.shared.result_pages import load, markdown_table, measured_note, value_table
from lab.shared.style import FIGURE_WIDTH, pyplot
from snippets.core.model import GPT, GPTConfig
from snippets.run.generate import check_sampling, generate, load_model, stream
from snippets.run.throughput import BENCH_MODEL

KV_CACHE_SCHEMA = "attention-guide/kv-cache/1"


BENCH_PROMPT = 16  # tokens of prompt before the timed ones


def time_per_token(model: GPT, new_tokens: int, kv_cache: bool) -> list[float]:
    """Seconds each new token took, greedy, from a fixed random prompt."""
    prompt = torch.randint(
        model.config.vocab_size,
        (1, BENCH_PROMPT),
        generator=torch.Generator().manual_seed(0),
    )
    seconds, tokens = (
        [],
        stream(model, prompt, new_tokens, kv_cache=kv_cache, greedy=True),
    )
    start = time.perf_counter()
    for _ in tokens:
        now = time.perf_counter()
        seconds.append(now - start)
        start = now
    return seconds


def bench_kv_cache(
    new_tokens: int,
    rounds: int,
    argv: list[str] | None = None,
    recompute: bool = True,
) -> dict:
    """Time per generated token with and without the cache, taking turns.

    recompute=False times the cache alone: at a few thousand tokens the
    recomputing loop would take minutes per round.
    """
    # The throughput model of the optimization page, with room for every token:
    # the cache helps until the context is full.
    context = BENCH_PROMPT + new_tokens
    config = GPTConfig(**{**BENCH_MODEL, "context_length": context})
    torch.manual_seed(0)
    model = GPT(config).eval()  # untrained: the time does not depend on weights
    header = result_header(KV_CACHE_SCHEMA, command_line("lab.generate", argv))
    samples = {True: [], False: []}
    for round_ in range(rounds + 1):  # round 0 is a warm-up
        ways = (True, False) if round_ % 2 else (False, True)
        for kv_cache in ways if recompute else (True,):
            seconds = time_per_token(model, new_tokens, kv_cache)
            if round_:
                samples[kv_cache].append(seconds)
    # The same tokens either way: the page's claim, checked on the timed runs.
    same = torch.equal(
        generate(model, torch.zeros(1, 1, dtype=torch.long), 32, greedy=True),
        generate(
            model,
            torch.zeros(1, 1, dtype=torch.long),
            32,
            greedy=True,
            kv_cache=False,
        ),
    )

    def summary(runs: list[list[float]]) -> dict:
        per_run = [sum(r) / len(r) * 1e3 for r in runs]  # mean ms per token
        per_position = [statistics.median(s) * 1e3 for s in zip(*runs, strict=True)]
        return {
            "ms_per_token": round(statistics.median(per_run), 4),
            "runs_ms_per_token": [round(m, 4) for m in per_run],
            "median_ms_by_position": [round(m, 4) for m in per_position],
        }

    cached = summary(samples[True])
    note_load_after(header)
    data = {
        **header,
        "model": {**BENCH_MODEL, "context_length": context},
        "prompt_tokens": BENCH_PROMPT,
        "new_tokens": new_tokens,
        "rounds": rounds,
        "same_tokens": same,
        "kv_cache": cached,
    }
    if recompute:
        data["recompute"] = summary(samples[False])
        data["speedup"] = round(data["recompute"]["ms_per_token"] / cached["ms_per_token"], 2)
    return data


def kv_cache_figure(data: dict):
    """Milliseconds per generated token against its position, with and without
    the cache (a result of `python -m lab.generate --bench-kv-cache`)."""
    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.4))
    start = data["prompt_tokens"]
    for key, label in (("recompute", "recompute"), ("kv_cache", "KV cache")):
        if key not in data:  # --cache-only: no recomputation
            continue
        ms = data[key]["median_ms_by_position"]
        if len(ms) > 512:
            # Over thousands of tokens, single slow tokens (the machine) hide the
            # trend: a running median of 33 tokens shows it.
            ms = [statistics.median(ms[max(0, i - 16) : i + 17]) for i in range(len(ms))]
            label += " (running median of 33 tokens)"
        ax.plot(range(start + 1, start + 1 + len(ms)), ms, label=label)
    ax.set_xlabel("length of the sequence after the new token")
    ax.set_ylabel("ms for the token")
    ax.set_ylim(bottom=0)
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    return fig


def command() -> Command:
    cmd = Command(
        "lab.generate",
        "Sample text from a checkpoint of python -m lab.train.",
        threads=None,
        out=TRAINING_RESULTS,
        quick=False,
    )
    p = cmd.parser
    p.add_argument("checkpoint", type=Path, nargs="?", help="a ckpt.pt")
    p.add_argument("--prompt", default="", help="text to continue")
    p.add_argument(
        "--tokens",
        type=int,
        help="new tokens to write (default: 200; 256 to benchmark)",
    )
    p.add_argument("--greedy", action="store_true", help="most likely token always")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int)
    p.add_argument("--top-p", type=float)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-kv-cache", action="store_true")
    p.add_argument(
        "--bench-kv-cache",
        action="store_true",
        help="time per token with and without the cache; writes "
        "kv-cache.json and kv-cache.svg (or to --out)",
    )
    p.add_argument(
        "--cache-only",
        action="store_true",
        help="with --bench-kv-cache: time the cache alone (for long texts); "
        "writes kv-cache-long.json and .svg",
    )
    p.add_argument("--rounds", type=int, default=5)
    return cmd


def main(argv: list[str] | None = None) -> int:
    """Run the command line; argv defaults to sys.argv[1:]."""
    cmd = command()
    p = cmd.parser
    args = cmd.parse(argv)
    if args.bench_kv_cache:
        data = bench_kv_cache(
            args.tokens or 256, args.rounds, cmd.argv, recompute=not args.cache_only
        )
        name = "kv-cache-long" if args.cache_only else "kv-cache"
        cmd.write(f"{name}.json", data)
        cmd.write(f"{name}.svg", kv_cache_figure(data))
        if args.cache_only:
            print(f"KV cache {data['kv_cache']['ms_per_token']:.2f} ms per token")
        else:
            print(
                f"recompute {data['recompute']['ms_per_token']:.2f} ms per token, "
                f"KV cache {data['kv_cache']['ms_per_token']:.2f} ms: "
                f"x{data['speedup']:.1f}"
            )
        return 0
    if args.checkpoint is None:
        p.error("give a checkpoint (e.g. runs/markov/ckpt.pt) or --bench-kv-cache")
    model, chars = load_model(args.checkpoint)
    stoi = {c: i for i, c in enumerate(chars)}
    unknown = sorted(set(args.prompt) - set(stoi))
    if unknown:
        p.error(f"--prompt has characters the model never saw: {unknown}")
    prompt = [stoi[c] for c in args.prompt] or [0]  # no prompt: start from id 0
    sampling = (
        {"greedy": True}
        if args.greedy
        else {
            "temperature": args.temperature,
            "top_k": args.top_k,
            "top_p": args.top_p,
            "generator": torch.Generator().manual_seed(args.seed),
        }
    )
    if not args.greedy:
        try:
            check_sampling(args.temperature, args.top_k, args.top_p)
        except (TypeError, ValueError) as err:
            p.error(str(err))
    sys.stdout.write(args.prompt)
    idx = torch.tensor([prompt])
    tokens = 200 if args.tokens is None else args.tokens
    for next_id in stream(model, idx, tokens, kv_cache=not args.no_kv_cache, **sampling):
        sys.stdout.write(chars[next_id.item()])  # each token as soon as it exists
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the generation page
# Rendered into docs/generation-in-depth.md and docs/generation.md by the build (hooks/results.py).


def _bench_numbers(data: dict) -> dict:
    """What the page reads from a --bench-kv-cache result: per-token medians."""
    C, first, last = (
        data["model"]["n_embed"],
        1 + data["prompt_tokens"],
        data["model"]["context_length"],
    )
    ms = data["kv_cache"]["median_ms_by_position"]
    return {"C": C, "first": first, "last": last, "ms": ms}


def kv_cache_result() -> str:
    """The recompute-against-cache table of docs/generation-in-depth.md, and how it was measured."""
    data = load("training/kv-cache.json")
    rows = []
    for key, label in (("recompute", "recompute"), ("kv_cache", "KV cache")):
        ms = data[key]["median_ms_by_position"]
        rows.append([label, f"{data[key]['ms_per_token']:.2f}", f"{ms[0]:.2f}", f"{ms[-1]:.2f}"])
    table = markdown_table(["", "ms per token, mean", "first token", "last token"], rows)
    note = measured_note(
        data,
        [
            f"{data['new_tokens']} tokens after a {data['prompt_tokens']}-token prompt, greedy,"
            f" the two ways taking turns; each token's median over {data['rounds']} rounds",
            f"same tokens both ways: {data['same_tokens']}",
        ],
    )
    return f"{table}\n\n{note}"


def kv_cache_long_result() -> str:
    """How the long run was measured (docs/generation-in-depth.md)."""
    data = load("training/kv-cache-long.json")
    return measured_note(
        data,
        [
            f"{data['new_tokens']} tokens after a {data['prompt_tokens']}-token prompt, the"
            f" cache only; each token's median over {data['rounds']} rounds",
        ],
    )


def generation_values() -> dict[str, str]:
    """The numbers of docs/generation-in-depth.md's prose, from the committed result files."""
    bench, long = load("training/kv-cache.json"), load("training/kv-cache-long.json")
    n = _bench_numbers(bench)
    C, first, last, ms = n["C"], n["first"], n["last"], n["ms"]
    work = {t: 12 * C**2 + 2 * t * C for t in (first, last)}  # per layer and token
    early, late = statistics.median(ms[1:17]), statistics.median(ms[-16:])
    long_ms = long["kv_cache"]["median_ms_by_position"]
    start, end = statistics.median(long_ms[:256]), statistics.median(long_ms[-256:])
    return value_table(
        {
            "speedup": f"{bench['speedup']:.1f}",
            "growing_share": f"{2 * last * C / (12 * C**2):.2f}",
            "work_growth": f"{work[last] / work[first]:.2f}",
            "time_growth": f"{late / early:.2f}",
            "long_tokens": f"{long['new_tokens']:,}",
            "long_first": f"{start:.2f}",
            "long_last": f"{end:.2f}",
            "long_growth": f"{end / start:.1f}",
        }
    )


def guide_result() -> str:
    """The guide-text run of docs/generation-in-depth.md: its losses, its sample, how it ran."""
    run = load("training/guide.json")
    rows = [
        [str(r["step"]), f"{r['train_loss']:.2f}", f"{r['val_loss']:.2f}"]
        for r in run["records"][-3:]
    ]
    table = markdown_table(["step", "train loss", "validation loss"], rows)
    sample = (TRAINING_RESULTS / "guide-sample.txt").read_text(encoding="utf-8").rstrip()
    fence = "````" if "```" in sample else "```"
    last = run["records"][-1]
    note = measured_note(
        run,
        [
            f"{last['step']} steps, {last['seconds']:.0f} s of training",
            'the sample: `python -m lab.generate runs/guide/ckpt.pt --prompt "The attention"'
            " --tokens 300 --top-p 0.9 --seed 7 --threads 1`",
        ],
        seeds=run["config"]["seed"],
        seconds=run.get("process_seconds"),
    )
    return (
        f"Losses in nats per character, at the last records:\n\n{table}\n\n"
        f"The sample:\n\n{fence}text\n{sample}\n{fence}\n\n{note}"
    )
