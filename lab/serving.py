"""Serving many sequences, measured: the paged cache's memory, continuous batching's
throughput, reading keys through a block table, speculative decoding's speed-up.

    python -m lab.serving                 # docs/assets/results/serving.json + SVG
    python -m lab.serving --quick --out DIR   # seconds: the suite's sign check

Four measurements of snippets/run/serving.py on this CPU, with the guide's trained
char GPTs (lab/model_cache.py): the target is SPECULATIVE_TARGET there (4 layers of
width 128, context 64, trained on the guide's text like the committed char-gpt).

1. memory: a batch of requests of mixed lengths (drawn from a fixed seed) run by
   generate_batch; the bytes a contiguous cache preallocates (ModelCache.for_model:
   context_length rows for every running sequence) against the paged blocks held at
   the busiest step (stats' peak_blocks x bytes per block), for several block sizes;
   once with unrelated prompts and once with prompts that open with one shared
   system-prompt-like prefix. The bytes depend on the lengths, not on the weights.
2. throughput: new tokens per second of static and continuous batching
   (generate_batch static=True/False, the same max_seqs) on workloads of mixed output
   lengths, one per seed; the two alternate, each run repeated, the median kept.
3. attention through a block table: one decode step of one layer's attention at
   several cache lengths, the keys and values gathered through a block table (the
   index_select PagedLayer.update does) or sliced from contiguous buffers; medians.
4. speculative decoding: drafts of several qualities (the char GPT's recipe at
   context 64, trained for 0 to 3,000 steps; the 3,000-step one is committed as
   SPECULATIVE_DRAFT) and k = 1..6 drafted tokens a round;
   the acceptance rate, the target passes saved and the wall-clock speed-up against
   the target's plain greedy generate with its KV cache.

--quick uses fewer and shorter runs, the committed target and draft, and writes under
test-artifacts/ unless --out says where. The tables it prints, the figure and the
page's results are in lab/parts/serving_page.py.
"""

import dataclasses
import functools
import random
import statistics
import sys
import time

import torch

from lab import model_cache
from lab.parts.serving_page import FIGURE, RESULT_FILE, report, speculative_figure
from lab.shared.common import note_load_after
from lab.shared.experiment import Command, progress
from snippets.core.attention import scaled_dot_product_attention
from snippets.core.cache import ModelCache
from snippets.pages.char_gpt import CharGPTConfig, train_char_gpt
from snippets.run.corpus import guide_text
from snippets.run.generate import generate
from snippets.run.paged import PagedCache
from snippets.run.serving import generate_batch, speculative_generate

SCHEMA = "attention-guide/serving/1"
TARGET = model_cache.SPECULATIVE_TARGET
DRAFT = model_cache.SPECULATIVE_DRAFT  # committed: the quick run's draft
FULL = {
    "memory": {
        "requests": 16,
        "max_seqs": 8,
        "block_sizes": [4, 8, 16, 32],
        "seed": 0,
        "prefix": 24,  # the shared workload's common opening, in tokens
        "rest": [2, 12],  # each prompt's own tokens after it
        "new": [4, 28],  # tokens to generate
    },
    "throughput": {
        "requests": 16,
        "max_seqs": 4,
        "block_size": 16,
        "seeds": [0, 1, 2, 3, 4, 5],
        "repeats": 5,
        "prompt": [4, 16],
        "new": [1, 48],
    },
    "attention": {
        "lengths": [64, 128, 256, 512, 1024, 2048],
        "block_size": 16,
        "repeats": 200,
    },
    "speculative": {
        # the char GPT's recipe at context 64; DRAFT's steps: the committed draft
        "draft_steps": [0, 30, 100, 300, 1000, DRAFT.steps],
        "ks": [1, 2, 3, 4, 5, 6],
        "prompts": 3,
        "prompt_length": 16,
        "new_tokens": 48,
        "repeats": 3,
        "seed": 0,
    },
}
QUICK = {
    "memory": {**FULL["memory"], "requests": 8, "max_seqs": 4, "block_sizes": [4]},
    "throughput": {**FULL["throughput"], "requests": 8, "seeds": [0], "repeats": 1, "new": [1, 24]},
    "attention": {"lengths": [64, 512], "block_size": 16, "repeats": 10},
    "speculative": {
        "draft_steps": [DRAFT.steps],  # the committed draft
        "ks": [4],
        "prompts": 1,
        "prompt_length": 16,
        "new_tokens": 24,
        "repeats": 1,
        "seed": 0,
    },
}


def target():
    """The committed target and the guide's character tokenizer."""
    model, char, _ = model_cache.trained_char_gpt(TARGET, "speculative-target")
    return model.eval(), char


def text_ids(char) -> list[int]:
    return char.encode(guide_text())


def span(ids: list[int], length: int, rng: random.Random) -> list[int]:
    """length consecutive tokens of the guide's text, from a random place."""
    start = rng.randrange(len(ids) - length)
    return ids[start : start + length]


# ------------------------------------------------------------------ 1. memory


def memory_workloads(s: dict, ids: list[int]) -> dict[str, tuple[list, list[int]]]:
    """Two workloads of the same lengths: "mixed", each prompt from its own place in
    the text; "shared prefix", each the text's first s["prefix"] tokens (a system
    prompt) and then tokens of its own. name -> (prompts, new tokens)."""
    rng = random.Random(s["seed"])
    rests = [rng.randint(*s["rest"]) for _ in range(s["requests"])]
    news = [rng.randint(*s["new"]) for _ in range(s["requests"])]
    mixed = [span(ids, s["prefix"] + r, rng) for r in rests]
    shared = [ids[: s["prefix"]] + span(ids, r, rng) for r in rests]
    return {"mixed": (mixed, news), "shared prefix": (shared, news)}


@torch.no_grad()
def contiguous_bytes(model, batch: int) -> int:
    """Bytes a contiguous cache holds for `batch` sequences (ModelCache.for_model:
    every layer's keys and values for context_length rows), after one token."""
    cache = ModelCache.for_model(model, batch)
    model(torch.zeros(batch, 1, dtype=torch.long), cache=cache)
    return sum(t.numel() * t.element_size() for t in cache.tensors())


def measure_memory(model, char, s: dict) -> dict:
    per_seq = contiguous_bytes(model, 1)
    rows = model.config.longest
    per_position = per_seq // rows
    out = {
        "bytes_per_position": per_position,  # all layers, keys and values
        "contiguous_bytes": contiguous_bytes(model, s["max_seqs"]),
        "workloads": {},
    }
    for name, (prompts, news) in memory_workloads(s, text_ids(char)).items():
        rows_needed = [len(p) + n - 1 for p, n in zip(prompts, news, strict=True)]
        runs = []
        for bs in s["block_sizes"]:
            stats = {}
            generate_batch(model, prompts, news, block_size=bs, max_seqs=s["max_seqs"], stats=stats)
            runs.append(
                {
                    "block_size": bs,
                    "peak_blocks": stats["peak_blocks"],
                    "paged_bytes": stats["peak_blocks"] * bs * per_position,
                    "shared_positions": stats["shared_positions"],
                    "steps": stats["steps"],
                }
            )
            progress(f"memory, {name}, block size {bs}: {runs[-1]}")
        out["workloads"][name] = {
            "prompt_lengths": [len(p) for p in prompts],
            "new_tokens": news,
            "positions_written": sum(rows_needed),
            "runs": runs,
        }
    return out


# ------------------------------------------------------------------ 2. throughput


def throughput_workload(s: dict, seed: int, ids: list[int]) -> tuple[list, list[int]]:
    """Requests of mixed prompt and output lengths, from seed: (prompts, new tokens)."""
    rng = random.Random(seed)
    prompts = [span(ids, rng.randint(*s["prompt"]), rng) for _ in range(s["requests"])]
    return prompts, [rng.randint(*s["new"]) for _ in range(s["requests"])]


def timed_batch(model, prompts, news, s: dict, static: bool) -> tuple[float, dict, list]:
    stats = {}
    start = time.perf_counter()
    out = generate_batch(
        model, prompts, news, block_size=s["block_size"], max_seqs=s["max_seqs"],
        static=static, stats=stats,
    )  # fmt: skip
    return time.perf_counter() - start, stats, out


def measure_throughput(model, char, s: dict) -> dict:
    ids = text_ids(char)
    seeds = []
    for seed in s["seeds"]:
        prompts, news = throughput_workload(s, seed, ids)
        seconds = {"static": [], "continuous": []}
        steps, outputs = {}, {}
        for r in range(s["repeats"]):  # alternate which goes first
            order = ("static", "continuous") if r % 2 == 0 else ("continuous", "static")
            for mode in order:
                t, stats, out = timed_batch(model, prompts, news, s, mode == "static")
                seconds[mode].append(t)
                steps[mode] = {"steps": stats["steps"], "tokens": stats["tokens"]}
                outputs[mode] = [o.tolist() for o in out]
        new = sum(news)
        pairs = zip(seconds["static"], seconds["continuous"], strict=True)
        row = {
            "seed": seed,
            "new_tokens": new,
            "same_outputs": outputs["static"] == outputs["continuous"],
            # continuous over static tokens per second, run by run: the pair shares
            # the machine's load of its moment
            "speedup": round(statistics.median(a / b for a, b in pairs), 3),
        }
        for mode in ("static", "continuous"):
            median = statistics.median(seconds[mode])
            row[mode] = {
                **steps[mode],
                "seconds": [round(t, 4) for t in seconds[mode]],
                "tokens_per_second": round(new / median, 1),
            }
        progress(
            f"throughput, seed {seed}: static {row['static']['tokens_per_second']} tok/s"
            f" in {row['static']['steps']} steps, continuous"
            f" {row['continuous']['tokens_per_second']} tok/s in"
            f" {row['continuous']['steps']} steps; paired ratio {row['speedup']}"
        )
        seeds.append(row)
    return {"seeds": seeds, **ranges(seeds)}


def ranges(seeds: list[dict]) -> dict:
    """Each mode's tokens per second over the seeds (lowest, highest), and whether
    the two ranges overlap."""
    out = {}
    for mode in ("static", "continuous"):
        values = [row[mode]["tokens_per_second"] for row in seeds]
        out[f"{mode}_range"] = [min(values), max(values)]
    low, high = out["static_range"], out["continuous_range"]
    out["overlap"] = not (low[1] < high[0] or high[1] < low[0])
    ratios = [row["speedup"] for row in seeds]
    out["speedup_range"] = [min(ratios), max(ratios)]
    return out


# ------------------------------------------------------------------ 3. attention


def block_table_slots(length: int, block_size: int, seed: int) -> torch.Tensor:
    """Where positions 0..length-1 sit in a pool of twice the blocks they need, the
    table's blocks drawn at random: (length,), as PagedCache.slots computes them."""
    n_blocks = 2 * -(-length // block_size)
    generator = torch.Generator().manual_seed(seed)
    table = torch.randperm(n_blocks, generator=generator)[: -(-length // block_size)]
    positions = torch.arange(length)
    return table[positions // block_size] * block_size + positions % block_size


def through_table(q, k_pool, v_pool, slots):
    """Attention of q (1, H, 1, D) over the keys and values at slots (T,) of pools
    (H, rows, D): gathered first, as PagedLayer.update reads them."""
    k = k_pool[:, slots].unsqueeze(0)  # (1, H, T, D)
    v = v_pool[:, slots].unsqueeze(0)  # (1, H, T, D)
    return scaled_dot_product_attention(q, k, v)


def from_buffers(q, k, v, T):
    """Attention of q over the first T rows of contiguous buffers (1, H, rows, D)."""
    return scaled_dot_product_attention(q, k[:, :, :T], v[:, :, :T])  # views


@torch.no_grad()
def measure_attention(model, s: dict) -> dict:
    """One decode step's attention in one layer of the target's shape: a query (1, H,
    1, D) against T keys and values read two ways; the median of s["repeats"] each,
    alternating."""
    H = model.config.n_head
    D = model.config.n_embed // H
    rows = []
    for T in s["lengths"]:
        slots = block_table_slots(T, s["block_size"], T)
        pool = 2 * -(-T // s["block_size"]) * s["block_size"]
        generator = torch.Generator().manual_seed(T)
        k_pool, v_pool = torch.randn(2, H, pool, D, generator=generator)  # (H, rows, D)
        k_flat, v_flat = torch.randn(2, 1, H, T, D, generator=generator)  # contiguous
        q = torch.randn(1, H, 1, D, generator=generator)

        runs = {
            "paged": functools.partial(through_table, q, k_pool, v_pool, slots),
            "contiguous": functools.partial(from_buffers, q, k_flat, v_flat, T),
        }
        times = {"paged": [], "contiguous": []}
        for _ in range(3):  # warm up
            runs["paged"](), runs["contiguous"]()
        for r in range(s["repeats"]):
            for name in ("paged", "contiguous") if r % 2 == 0 else ("contiguous", "paged"):
                start = time.perf_counter()
                runs[name]()
                times[name].append(time.perf_counter() - start)
        row = {"length": T}
        for name, values in times.items():
            row[f"{name}_us"] = round(statistics.median(values) * 1e6, 2)
        row["ratio"] = round(row["paged_us"] / row["contiguous_us"], 3)
        progress(f"attention, T = {T}: {row}")
        rows.append(row)
    return {"heads": H, "head_size": D, "rows": rows}


# ------------------------------------------------------------------ 4. speculative


def draft_config(steps: int) -> CharGPTConfig:
    """A draft: the committed char GPT's recipe at the target's context, steps steps."""
    return CharGPTConfig(context_length=TARGET.context_length, steps=steps)


def drafts(s: dict) -> dict:
    """name -> (draft model, its training steps, its final loss or None). The draft of
    SPECULATIVE_DRAFT's steps is the committed one; the others are trained here."""
    out = {}
    for steps in s["draft_steps"]:
        if steps == DRAFT.steps:
            model, _, losses = model_cache.trained_char_gpt(DRAFT, "speculative-draft")
        else:
            model, losses = train_char_gpt(draft_config(steps))
            progress(f"draft of {steps} steps trained")
        out[f"{steps} steps"] = (model.eval(), steps, losses[-1] if losses else None)
    return out


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


@torch.no_grad()
def decode_pass_seconds(model, prompt: list[int], steps: int, paged: bool) -> float:
    """The median time of one decode pass (one new token after prompt) over `steps`
    passes: through a PagedCache as speculative_generate reads (the step planned,
    then run), or through the contiguous ModelCache plain generate uses."""
    times, token = [], prompt[-1]
    if paged:
        cache = PagedCache(model, -(-(len(prompt) + steps) // 16), 16)
        cache.add(0)
        model(cache.plan([(0, prompt)]), cache=cache)
    else:
        cache = ModelCache.for_model(model, 1)
        model(torch.tensor([prompt]), cache=cache)
    for _ in range(steps):
        start = time.perf_counter()
        if paged:
            model(cache.plan([(0, [token])]), cache=cache)
        else:
            model(torch.tensor([[token]]), cache=cache)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def pass_costs(model, draft, prompt: list[int], steps: int, repeats: int) -> dict:
    """Microseconds of one decode pass: the target's through its contiguous cache (plain
    generate) and through a paged one, the draft's through a paged one; alternated."""
    runs = {
        "target_contiguous_us": (model, False),
        "target_paged_us": (model, True),
        "draft_paged_us": (draft, True),
    }
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (m, paged) in runs.items():
            times[name].append(decode_pass_seconds(m, prompt, steps, paged))
    return {name: round(statistics.median(t) * 1e6, 1) for name, t in times.items()}


def measure_speculative(model, char, s: dict) -> dict:
    """Each (draft, k) against plain greedy generate, paired: in each repeat, every
    prompt is run plainly and speculatively back to back (alternating which goes
    first), so that a burst of load slows both; the speed-up is the median over the
    repeats of plain seconds / speculative seconds."""
    ids = text_ids(char)
    rng = random.Random(s["seed"])
    prompts = [span(ids, s["prompt_length"], rng) for _ in range(s["prompts"])]
    n = s["new_tokens"]
    models = drafts(s)
    wanted = [generate(model, torch.tensor([p]), n, greedy=True)[0].tolist() for p in prompts]
    rows = []
    for name, (draft, _, _) in models.items():
        for k in s["ks"]:
            counts = {"rounds": 0, "drafted": 0, "accepted": 0}
            same, plain_seconds, spec_seconds = True, [], []
            for r in range(s["repeats"]):
                plain_total = spec_total = 0.0
                for i, (p, want) in enumerate(zip(prompts, wanted, strict=True)):
                    stats = {}

                    def plain(p=p):
                        return generate(model, torch.tensor([p]), n, greedy=True)

                    def spec(p=p, k=k, stats=stats, draft=draft):
                        return speculative_generate(model, draft, p, n, k, stats=stats)

                    first_plain = (r + i) % 2 == 0
                    for run in (plain, spec) if first_plain else (spec, plain):
                        t, out = timed(run)
                        if run is plain:
                            plain_total += t
                        else:
                            spec_total += t
                            same &= out[0].tolist() == want
                    if r == 0:
                        for key in counts:
                            counts[key] += stats[key]
                plain_seconds.append(plain_total)
                spec_seconds.append(spec_total)
            ratios = [a / b for a, b in zip(plain_seconds, spec_seconds, strict=True)]
            rows.append(
                {
                    "draft": name,
                    "k": k,
                    **counts,
                    "same_as_plain": same,
                    "acceptance": round(counts["accepted"] / counts["drafted"], 4),
                    "target_passes": counts["rounds"],
                    "plain_passes": n * len(prompts),
                    "plain_seconds": [round(t, 4) for t in plain_seconds],
                    "seconds": [round(t, 4) for t in spec_seconds],
                    "speedups": [round(x, 4) for x in ratios],
                    "speedup": round(statistics.median(ratios), 3),
                }
            )
            progress(
                f"speculative, {name}, k = {k}: acceptance {rows[-1]['acceptance']},"
                f" {counts['rounds']} target passes for {n * len(prompts)}, speed-up"
                f" {rows[-1]['speedup']} ({min(ratios):.2f}..{max(ratios):.2f})"
            )
    draft = next(iter(models.values()))[0]  # the cost does not depend on the weights
    costs = pass_costs(model, draft, prompts[0], n - 1, s["repeats"])
    progress(f"one decode pass: {costs}")
    return {
        "drafts": {
            name: {"steps": steps, "final_loss": None if loss is None else round(loss, 4)}
            for name, (_, steps, loss) in models.items()
        },
        "pass_costs": costs,
        "rows": rows,
    }


# ------------------------------------------------------------------ the command


def run(settings: dict, header: dict) -> dict:
    started = time.perf_counter()
    model, char = target()
    data = {
        **header,
        "settings": settings,
        "target": {
            "config": dataclasses.asdict(TARGET),
            "file": model_cache.file_name("speculative-target", TARGET),
        },
        "memory": measure_memory(model, char, settings["memory"]),
        "throughput": measure_throughput(model, char, settings["throughput"]),
        "attention": measure_attention(model, settings["attention"]),
        "speculative": measure_speculative(model, char, settings["speculative"]),
    }
    note_load_after(data)
    data["wall_seconds"] = round(time.perf_counter() - started, 1)
    return data


def main(argv: list[str] | None = None) -> int:
    cmd = Command("lab.serving", __doc__, threads=1)
    args = cmd.parse(argv)
    settings = QUICK if args.quick else FULL
    data = run(settings, cmd.header(SCHEMA))
    cmd.write(RESULT_FILE.name, data)
    cmd.write(FIGURE.name, speculative_figure(data))
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
