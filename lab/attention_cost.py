"""What attention costs, measured: the attention-cost page's command.

    python -m lab.attention_cost attention          # the page's numbers, a few minutes
    python -m lab.attention_cost attention --quick  # small sizes, seconds (the tests)
    python -m lab.attention_cost overhead           # CausalSelfAttention vs inline ops

`attention` prints tables and writes a JSON result file and two SVG plots;
`overhead` prints a table and writes a JSON result file. The implementations are
in snippets/pages/attention_cost.py, the instruments in snippets/pages/measure.py; the runners
in lab/parts/attention_cost_runs.py, the tables and figures in lab/parts/attention_cost_tables.py.
Shape letters: B batch, T sequence length, C channels, H heads, D head size.
"""

import time

from lab.parts.attention_cost_runs import run_attention, run_overhead
from lab.parts.attention_cost_tables import (
    compile_table,
    describe_run,
    describe_settings,
    heads_table,
    memory_table,
    overhead_table,
    plots,
    time_table,
)
from lab.shared.common import note_load_after
from lab.shared.experiment import Command, int_list, progress
from snippets.pages.measure import MAX_WAITED

SCHEMA = "attention-guide/attention-cost/1"
OVERHEAD_SCHEMA = "attention-guide/attention-overhead/1"
DEFAULT_T = [64, 128, 256, 512, 1024, 2048, 4096]


def cmd_attention(cmd: Command) -> None:
    """`attention`: measure, write the JSON and the plots, print the tables."""
    args = cmd.args
    quick = args.quick
    # --quick: one single-tile T and one of two tiles (where FlexAttention skips one and
    # recompiles, as in the full run): every path of the full run, at two sizes.
    seq_lens = sorted(set(args.seq_lens or ([64, 256] if quick else DEFAULT_T)))
    heads = sorted(set(args.heads or ([2] if quick else [2, 4, 8])))
    n_embed = args.n_embed or (64 if quick else 256)
    repetitions = args.repetitions or (2 if quick else 5)
    warmup = 0 if args.warmup is None else args.warmup
    plot_heads = args.plot_heads or max(heads)
    if any(n_embed % n_head for n_head in heads):
        raise SystemExit(f"--n-embed ({n_embed}) must be divisible by every --heads value")
    if plot_heads not in heads:
        raise SystemExit(f"--plot-heads ({plot_heads}) must be one of --heads {heads}")
    header = cmd.header(SCHEMA)  # the machine, with the load average before the run
    started = time.perf_counter()
    retries = args.retries if args.retries is not None else 0 if quick else 3
    results = run_attention(
        seq_lens, heads, args.batch, n_embed, repetitions, warmup, retries, args.clock
    )
    note_load_after(header)  # the load average after the run, beside the one before
    if args.note:
        header["note"] = args.note
    data = {
        **header,
        "settings": {
            "batch": args.batch,
            "n_embed": n_embed,
            "dtype": "float32",
            "seq_lens": seq_lens,
            "heads": heads,
            "repetitions": repetitions,
            "warmup": warmup,
            "retries": retries,
            "max_waited": MAX_WAITED,
            "plot_heads": plot_heads,
            "clock": args.clock,
            "memory": "torch.profiler(profile_memory=True): most bytes of tensors"
            " alive at once during one run, above those alive before it",
            "timing": "time.perf_counter around each run; the eleven jobs (6 variants"
            " x 2 modes, FlexAttention forward only) take turns in rotating order;"
            " median over repetitions; every job has run twice (memory, page"
            " faults) before the first, after one first forward of each variant",
            "flex": "torch.compile(flex_attention, dynamic=True), compiled once per"
            " process; its first call at each T (first_call_seconds) is not in the"
            " timed runs; no backward on the CPU in this torch",
            "page_faults": "minor page faults (ru_minflt) in one unprofiled run",
        },
        "variants": {
            "per-head": "MultiHeadAttention(x): H Head modules, (B, T, T) per head",
            "manual": "CausalSelfAttention(x, return_weights=True): batched,"
            " explicit softmax, (B, H, T, T) scores and weights",
            "einsum": "einsum_attention(csa, x): the manual path's arithmetic as"
            " torch.einsum calls, (B, H, T, T) scores and weights",
            "torch-mha": "torch.nn.MultiheadAttention with csa's weights,"
            " attn_mask + is_causal=True, need_weights=False",
            "flex": "FlexAttention, causal block mask (128 x 128 tiles), compiled",
            "sdpa": "CausalSelfAttention(x): F.scaled_dot_product_attention, is_causal=True",
        },
        "elapsed_seconds": round(time.perf_counter() - started, 1),
        "results": results,
    }
    cmd.write("attention-cost.json", data)
    for name, text in plots(data).items():
        cmd.write(name, text)
    print(f"{describe_run(data)}\n{describe_settings(data)}\n")
    flex = compile_table(data, heads[0])
    print(f"FlexAttention's first call (compiles) per T, H={heads[0]}\n{flex}\n")
    for n_head in heads:
        D = n_embed // n_head
        print(f"H={n_head} (D={D}), time\n{time_table(data, n_head)}\n")
        print(f"H={n_head} (D={D}), memory\n{memory_table(data, n_head)}\n")
    print(f"T={seq_lens[-1]}, by head count\n{heads_table(data, seq_lens[-1])}")
    progress(f"done in {data['elapsed_seconds']:.0f} s")
    _warn_if_busy(results)


def _warn_if_busy(results: list[dict]) -> None:
    shares = [r["others_cpu_share"] for r in results if r.get("others_cpu_share")]
    if shares and max(shares) > 0.1:
        progress(
            f"warning: other processes took up to {max(shares):.0%} of the CPU"
            " during the run: times are unreliable (memory, page faults are not)"
        )


def cmd_overhead(cmd: Command) -> None:
    """`overhead`: time the module against inline_forward, write the JSON."""
    args = cmd.args
    quick = args.quick
    seq_lens = sorted(set(args.seq_lens or ([64] if quick else [64, 256, 1024])))
    repetitions = args.repetitions or (3 if quick else 21)
    sample_s = args.sample_seconds or (0.01 if quick else 0.05)
    warmup = 1 if args.warmup is None else args.warmup
    retries = args.retries if args.retries is not None else 0 if quick else 3
    header = cmd.header(OVERHEAD_SCHEMA)
    results = run_overhead(
        seq_lens,
        args.n_head,
        args.batch,
        args.n_embed,
        repetitions,
        warmup,
        sample_s,
        retries,
    )
    data = {
        **header,
        "settings": {
            "batch": args.batch,
            "n_embed": args.n_embed,
            "n_head": args.n_head,
            "dtype": "float32",
            "seq_lens": seq_lens,
            "repetitions": repetitions,
            "warmup": warmup,
            "retries": retries,
            "max_waited": MAX_WAITED,
            "sample_seconds": sample_s,
            "mode": "forward under torch.no_grad()",
        },
        "results": results,
    }
    cmd.write("attention-overhead.json", data)
    print(describe_run(data))
    print(
        f"CausalSelfAttention.forward vs inline_forward, B={args.batch},"
        f" C={args.n_embed}, H={args.n_head}, no_grad, median of {repetitions}"
        f" samples\n{overhead_table(data)}"
    )


def command() -> Command:
    """The command line: `attention` and `overhead`, with their options."""
    cmd = Command(
        "lab.attention_cost",
        "Measure what causal self-attention costs on this CPU.",
        threads=None,
        subcommands=True,
    )
    attention = cmd.subcommand(
        "attention",
        help="time and peak memory of three implementations over T",
        description="Time (forward, forward+backward) and peak tensor memory of"
        " the per-head, manual and SDPA implementations of causal self-attention."
        " Defaults: T 64 to 4096, heads 2 4 8, C 256, B 1, 5 repetitions.",
    )
    overhead = cmd.subcommand(
        "overhead",
        help="CausalSelfAttention.forward against the same ops inline",
        description="Time CausalSelfAttention.forward against inline_forward, the"
        " same ops on the same tensors (forward under no_grad, interleaved"
        " samples, medians). Defaults: T 64 256 1024, H 8, C 256, 21 samples.",
    )
    for sub in (attention, overhead):
        add = sub.add_argument
        add(
            "-T",
            "--seq-lens",
            type=int_list(),
            metavar="'T ...'",
            help="sequence lengths (default: attention 64 128 ... 4096, overhead 64 256 1024)",
        )
        add("--batch", type=int, default=1, help="batch size B (default 1)")
        add(
            "--repetitions",
            type=int,
            help="rounds kept for the median (default: attention 5, overhead 21)",
        )
        add(
            "--warmup",
            type=int,
            help="extra rounds run first and not kept (default: attention 0, after"
            " its memory and page-fault runs; overhead 1)",
        )
        add(
            "--retries",
            type=int,
            help="times a run may be taken again when another process held a CPU"
            " during it (default 3; 0 with --quick)",
        )
    attention.add_argument(
        "--heads",
        type=int_list(),
        metavar="'H ...'",
        help="head counts (default '2 4 8')",
    )
    attention.add_argument("--n-embed", type=int, help="channels C (default 256)")
    attention.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall: time.perf_counter (default); cpu: this process's CPU time,"
        " which does not count waiting for a core other processes hold",
    )
    attention.add_argument(
        "--note",
        help="a sentence kept in the result file, e.g. how busy the machine was",
    )
    attention.add_argument(
        "--plot-heads",
        type=int,
        help="the head count plotted (default: the largest)",
    )
    overhead.add_argument("--n-head", type=int, default=8, help="heads H (default 8)")
    overhead.add_argument("--n-embed", type=int, default=256, help="C (default 256)")
    overhead.add_argument(
        "--sample-seconds", type=float, help="length of one sample (default 0.05)"
    )
    return cmd


def main(argv: list[str] | None = None) -> None:
    """Run the command line; argv defaults to sys.argv[1:]."""
    cmd = command()
    args = cmd.parse(argv)
    if args.command == "attention":
        cmd_attention(cmd)
    else:
        cmd_overhead(cmd)


if __name__ == "__main__":
    main()
