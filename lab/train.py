"""Training from the command line: a run, its progress bar and loss plot, the
schedule plot, and the throughput benchmark of the optimization page. The page's
training figures are drawn here; `python -m lab.figures` redraws them.

    python -m lab.train --corpus markov --steps 800 --out runs/markov
    python -m lab.train --corpus markov --steps 800 --out runs/markov --resume
    torchrun --nproc_per_node=2 -m lab.train --steps 800 --out runs/ddp
    python -m lab.train --bench-throughput     # Engineering a training run's table
    python -m lab.train --plot-schedule schedule.svg

The training itself is snippets/run/train.py; this module adds what a person at a
terminal wants around it.
"""

import argparse
import ast
import dataclasses
import inspect
import json
import os
import statistics
import sys
import textwrap
import time
from pathlib import Path

import torch.distributed as dist
from tqdm import tqdm

from lab.shared.common import (
    TRAINING_RESULTS,
    command_line,
    note_load_after,
    result_header,
    write_text,
)
from lab.shared.experiment import Command, progress
from lab.shared.result_pages import load, markdown_table, measured_note, value_table
from lab.shared.style import FIGURE_WIDTH, INK, pyplot, save_svg
from snippets.pages.measure import time_interleaved
from snippets.run.throughput import BENCH_BATCH, BENCH_MODEL, ladder, make_bench_step
from snippets.run.train import CHECKPOINT, HISTORY, TrainConfig, lr_at, train
from snippets.run.train_data import MARKOV

LOSS_PLOT = "loss.svg"  # beside the run's checkpoint and history
RUN_SCHEMA = "attention-guide/training-run/1"
THROUGHPUT_SCHEMA = "attention-guide/training-throughput/1"


def field_comments(cls) -> dict[str, str]:
    """The comment after each field of a dataclass, from its source: the help
    text of the option, written once, where the field is."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    comments = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            line = lines[node.lineno - 1]
            if "#" in line:
                comment = line.split("#", 1)[1].strip()
                comments[node.target.id] = comment.replace("%", "%%")  # argparse formats
    return comments


def _describe(record: dict, best: float | None) -> str:
    gap = "" if best is None else f" ({record['val_loss'] - best:+.3f} from best)"
    return (
        f"step {record['step']:>5}  {record['seconds']:6.1f} s  "
        f"train {record['train_loss']:.4f}  val {record['val_loss']:.4f}{gap}"
    )


def _process_seconds() -> float | None:
    """Seconds since this process started, interpreter start-up included (Linux)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - ticks / os.sysconf("SC_CLK_TCK"), 2)


# ------------------------------------------------------------------ figures


def loss_curve(history: dict):
    """Loss against seconds of training: the whole run and, with a known best
    loss, a close-up of the end below it (a history of snippets.run.train.train)."""
    plt = pyplot(FIGURE_WIDTH)
    records = history["records"]
    best = history.get("best_loss")
    trained = [r for r in records if "train_loss" in r]  # not the step-0 record
    panels = 2 if best is not None else 1
    fig, axes = plt.subplots(panels, 1, figsize=(FIGURE_WIDTH, 3.2 * panels), squeeze=False)
    for ax in axes[:, 0]:
        ax.plot(
            [r["seconds"] for r in trained],
            [r["train_loss"] for r in trained],
            label="train (mean since last point)",
        )
        ax.plot(
            [r["seconds"] for r in records],
            [r["val_loss"] for r in records],
            label="validation",
            marker=".",
        )
        if best is not None:
            ax.axhline(best, color=INK, linestyle="--", label="entropy rate H")
            ax.axhspan(best, best + 0.1, color=INK, alpha=0.15, label="within 0.1 nats of H")
        ax.set_xlabel("seconds of training")
        ax.grid(True)
    axes[0][0].set_ylabel("loss, nats per token")
    axes[0][0].legend()
    if best is not None:
        close = axes[1][0]
        close.set_ylim(best - 0.03, best + 0.12)
        close.set_title("close-up")
    fig.tight_layout()
    return fig


def lr_schedule(config):
    """The learning rate of every step of a run with this TrainConfig."""
    plt = pyplot(FIGURE_WIDTH)
    steps = range(config.steps + config.steps // 5)  # and a little past the end
    args = (config.lr, config.min_lr, config.warmup_steps, config.steps)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.2))
    ax.plot(list(steps), [lr_at(s, *args) for s in steps])
    ax.axvline(config.warmup_steps, color=INK, linestyle=":", label="end of warmup")
    ax.axvline(config.steps, color=INK, linestyle="--", label="last step")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ throughput


def bench_throughput(
    rounds: int, steps: int, with_compile: bool, argv: list[str] | None = None
) -> dict:
    """Tokens per second of every rung, the rungs taking turns round by round."""
    rungs = ladder(with_compile)
    jobs, setup = {}, {}
    for name, settings in rungs.items():
        started = time.perf_counter()
        step = make_bench_step(settings)
        step()  # the first step: allocations, and compilation with torch.compile
        setup[name] = round(time.perf_counter() - started, 2)

        def job(step=step):
            for _ in range(steps):
                step()

        jobs[name] = job
        progress(f"{name}: ready in {setup[name]} s")
    header = result_header(THROUGHPUT_SCHEMA, command_line("lab.train", argv))
    samples = time_interleaved(jobs, rounds, warmup=1)
    tokens = steps * BENCH_BATCH * BENCH_MODEL["context_length"]
    results = []
    for name, seconds in samples.items():
        wall = [tokens / s for s in seconds["seconds"]]
        cpu = [tokens / s for s in seconds["cpu_seconds"]]
        results.append(
            {
                "rung": name,
                "settings": rungs[name],
                "tokens_per_s": round(statistics.median(wall)),
                "tokens_per_cpu_s": round(statistics.median(cpu)),
                "samples_tokens_per_s": [round(t) for t in wall],
                "samples_tokens_per_cpu_s": [round(t) for t in cpu],
                "first_step_s": setup[name],
            }
        )
    note_load_after(header)
    return {
        **header,
        "model": BENCH_MODEL,
        "batch_size": BENCH_BATCH,
        "rounds": rounds,
        "steps_per_sample": steps,
        "results": results,
    }


def throughput_rows(data: dict) -> tuple[list[str], list[list[str]]]:
    """The throughput table's header and rows: tokens/s of each rung, against the last
    and the first.

    Ratios are of tokens per CPU-second, which waiting for a busy core does not
    dilute. spread: the middle half of those samples (between the quartiles),
    as a share of the median; a ratio within it tells nothing.
    """
    rows = data["results"]
    first = rows[0]["tokens_per_cpu_s"]
    out = []
    for before, row in zip([None, *rows], rows, strict=False):
        cpu = row["tokens_per_cpu_s"]
        q1, _, q3 = statistics.quantiles(row["samples_tokens_per_cpu_s"], n=4)
        above = "" if before is None else f"x{cpu / before['tokens_per_cpu_s']:.2f}"
        out.append(
            [row["rung"], f"{row['tokens_per_s']:,}", f"{cpu:,}", f"±{(q3 - q1) / 2 / cpu:.0%}",
             above, f"x{cpu / first:.2f}"]
        )  # fmt: skip
    return ["", "tokens/s", "per CPU s", "spread", "vs above", "vs readable"], out


def throughput_table(data: dict) -> str:
    """throughput_rows() as the command prints it."""
    header, rows = throughput_rows(data)
    widths = (18, 9, 11, 8, 10, 13)
    lines = []
    for cells in (header, *rows):
        first, *rest = cells
        lines.append(
            first.ljust(widths[0])
            + "".join(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))
        )
    return "\n".join(lines)


def throughput_result() -> str:
    """The optimization page's throughput table and how it was measured."""
    data = load("training/throughput.json")
    compiled = data["results"][-1]
    note = measured_note(
        data,
        [
            f"the model: {', '.join(f'{k}={v}' for k, v in data['model'].items())};"
            f" batch {data['batch_size']}, {data['rounds']} rounds of"
            f" {data['steps_per_sample']} steps per sample",
            f"{compiled['rung']}: first step, compilation included,"
            f" {compiled['first_step_s']:.0f} s",
        ],
    )
    return f"{markdown_table(*throughput_rows(data))}\n\n{note}"


def markov_result() -> str:
    """The one-minute run of the optimization page: its validation curve at some steps."""
    run = load("training/markov.json")
    rows = [
        [str(r["step"]), f"{r['seconds']:.1f}", f"{r['val_loss']:.4f}",
         f"{r['val_loss'] - run['best_loss']:+.3f}", f"{r['val_loss'] - run['val_floor']:+.4f}"]
        for r in run["records"]
        if r["step"] in (0, 50, 100, 200, 400, 800) or r is run["records"][-1]
    ]  # fmt: skip
    table = markdown_table(["step", "seconds", "val loss", "- rate", "- floor"], rows)
    note = measured_note(run, seeds=run["config"]["seed"], seconds=run["process_seconds"])
    return f"{table}\n\n{note}"


def markov_values() -> dict[str, str]:
    run = load("training/markov.json")
    first = next(r for r in run["records"] if r["val_loss"] - run["best_loss"] < 0.1)
    return value_table(
        {
            "first_step": str(first["step"]),
            "first_seconds": f"{first['seconds']:.1f}",
            "whole": f"{run['process_seconds']:.0f}",
        }
    )


# ------------------------------------------------------------------ command line


def command() -> Command:
    """The command line: --out is the run's folder (ckpt.pt, history.json, loss.svg),
    or with --bench-throughput where throughput.json goes."""
    cmd = Command(
        "lab.train",
        "Train the guide's GPT on a CPU; also under torchrun (DDP).",
        threads=None,
        out=TRAINING_RESULTS,
        quick=False,
    )
    p = cmd.parser
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from OUT/ckpt.pt if it exists",
    )
    p.add_argument(
        "--stop-after",
        type=int,
        metavar="STEP",
        help="stop after this step, as if interrupted (for --resume)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    run = p.add_argument_group("run settings (snippets.run.train.TrainConfig)")
    help_texts = field_comments(TrainConfig)
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        text = help_texts.get(field.name, "") + f" (default: {default})"
        if isinstance(default, bool):
            run.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=text,
            )
        else:
            run.add_argument(
                flag,
                type=type(default),
                default=default,
                help=text,
                metavar=field.name.upper(),
            )
    bench = p.add_argument_group("measurements instead of a run")
    bench.add_argument(
        "--bench-throughput",
        action="store_true",
        help="tokens/s of the readable and the fast paths, taking "
        "turns; writes throughput.json into OUT or the committed folder",
    )
    bench.add_argument(
        "--rounds",
        type=int,
        default=7,
        help="--bench-throughput: rounds timed (default: 7)",
    )
    bench.add_argument(
        "--bench-steps",
        type=int,
        default=10,
        help="--bench-throughput: steps per sample (default: 10)",
    )
    bench.add_argument(
        "--plot-schedule",
        type=Path,
        metavar="SVG",
        help="draw the learning-rate schedule of the settings",
    )
    return cmd


def main(argv: list[str] | None = None) -> int:
    """Run the command line; argv defaults to sys.argv[1:]."""
    cmd = command()
    p = cmd.parser
    args = cmd.parse(argv)
    argv = cmd.argv
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    try:
        config = TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})
    except ValueError as err:
        p.error(str(err))
    if args.plot_schedule:
        save_svg(lr_schedule(config), args.plot_schedule)
        return 0
    if args.bench_throughput:
        data = bench_throughput(args.rounds, args.bench_steps, config.compile, argv)
        print(throughput_table(data))
        cmd.write("throughput.json", data)
        return 0
    if args.out is None:
        p.error("--out is required to train, e.g. --out runs/markov")
    # torchrun starts every process with WORLD_SIZE, RANK and the address of
    # process 0 in its environment; init_process_group reads them from there.
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("gloo")  # gloo: the CPU backend (GPUs: nccl)
    rank = dist.get_rank() if distributed else 0
    bar = tqdm(
        total=config.steps,
        disable=args.no_progress or rank != 0,
        unit="step",
        dynamic_ncols=True,
    )

    def on_step(step: int, loss: float, tokens_per_s: float) -> None:
        postfix = {"loss": f"{loss:.3f}", "tokens_per_s": f"{tokens_per_s:,.0f}"}
        bar.set_postfix(postfix, refresh=False)  # drawn by update, a few times a s
        bar.update(step - bar.n)  # from where a resumed run starts

    def on_record(record: dict) -> None:
        bar.write(_describe(record, best_loss))

    best_loss = MARKOV.entropy_rate() if config.corpus == "markov" else None
    try:
        history = train(
            config,
            args.out,
            resume=args.resume,
            stop_after=args.stop_after,
            header=result_header(RUN_SCHEMA, command_line("lab.train", argv)),
            on_step=on_step,
            on_record=on_record,
        )
    finally:
        bar.close()
        if distributed:
            dist.destroy_process_group()
    if rank == 0:  # the time the whole command took, and the plot
        history["process_seconds"] = _process_seconds()
        write_text(args.out / HISTORY, json.dumps(history, indent=1) + "\n")
        save_svg(loss_curve(history), args.out / LOSS_PLOT)
    if rank == 0 and history["records"]:
        last = history["records"][-1]
        print(
            f"wrote {args.out / CHECKPOINT} at step {last['step']}, "
            f"{history['process_seconds']} s since the command started"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
