"""The family catalogue's measurements: the oracle's differences and the speed.

    python -m lab.todays_models           # compare every family, time the layer
    python -m lab.todays_models --quick   # fewer timing rounds

compare(family): a tiny random model of the family (lab/oracle/tiny_models.py), one full
forward with hooks recording what each attention layer got and returned, then the
guide's layer loaded with that layer's weights (lab/oracle/from_transformers.py) on the
same input, whole and in cached decode steps: the worst relative difference.

speed(): the guide's layer against transformers' LlamaAttention with
attn_implementation="sdpa" on the same config and weights, forward only, timed in
turns (snippets.pages.measure.time_interleaved); each side includes its RoPE tables.
"""

import itertools
import statistics
import sys

import torch

from lab.oracle.from_transformers import FAMILIES, load_attention, load_attentions
from lab.oracle.tiny_models import WINDOW, record_layers, tiny_model
from lab.shared import experiment
from lab.shared.common import note_load_after
from lab.shared.experiment import progress
from lab.shared.paths import RESULTS_DIR
from snippets.core.cache import LinearState, ModelCache
from snippets.layers.compressed_attention import CompressedCache
from snippets.pages.measure import time_interleaved

SCHEMA = "attention-guide/todays-models/1"
RESULT_FILE = RESULTS_DIR / "todays-models.json"
T = 3 * WINDOW  # beyond every window and chunk of the tiny models
BATCH = 2  # sequences per comparison
PREFILL = 2 * WINDOW - 3  # then one token per step, across a window and a chunk


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def label(row: dict) -> str:
    """A compared row's name: its family, and the part of a parallel layer if not the default."""
    return row["family"] + (f" ({row['part']})" if row.get("part") else "")


def kind_of(layer, cache) -> str:
    """A layer's kind for the report: its spec's (a borrower's own), else its cache's."""
    if kind := getattr(getattr(layer, "spec", None), "kind", None):
        return kind
    if isinstance(cache, LinearState):
        return "linear"
    return "compressed" if isinstance(cache, CompressedCache) else cache.kind


def run_layers(layers: list, xs: list, cuts: list[int]) -> tuple[list, list]:
    """Every layer on what its transformers layer got (xs), through its cache, one
    piece of positions (cuts[j] .. cuts[j + 1]) at a time, the layers in turn as the
    model runs them: a layer may read what an earlier one did in this step (a Gemma 4
    borrower its source's keys and values, a GLM-5 layer the top-k choice before it).
    Returns each layer's outputs over all positions, and the caches."""
    caches = ModelCache.for_layers(layers, BATCH, T).layers  # a borrower's: its source's
    steps = [[] for _ in layers]
    for a, b in itertools.pairwise(cuts):
        for layer, x, cache, out in zip(layers, xs, caches, steps, strict=True):
            out.append(layer(x[:, a:b], cache=cache))
    return [torch.cat(out, 1) for out in steps], caches


def run_all(layers: list, xs: list) -> tuple[list, list, list]:
    """Each layer's outputs on all T positions: whole (at once, without a cache, the
    layers in order; a borrower, which has no keys and values of its own, in one step of
    T positions through the caches) and cached (a prefill, then one token at a time);
    and the caches of the cached run."""
    cached, caches = run_layers(layers, xs, [0, PREFILL, *range(PREFILL + 1, T + 1)])
    borrowed = None
    if any(getattr(layer, "kv_source", None) is not None for layer in layers):
        borrowed, _ = run_layers(layers, xs, [0, T])
    whole = [
        layer(x) if getattr(layer, "kv_source", None) is None else borrowed[i]
        for i, (layer, x) in enumerate(zip(layers, xs, strict=True))
    ]
    return whole, cached, caches


# Families whose layers hold two mixers side by side (Falcon-H1's): compared once per part.
PARTS_COMPARED = {"falcon_h1": (None, "self_attn")}  # None: the Mamba2 half, the default


@torch.no_grad()
def compare(family: str, seed: int = 0, part: str | None = None) -> dict:
    """Worst relative differences of a family's layers against transformers (the
    mixer `part` of a parallel hybrid layer: lab.oracle.from_transformers.PARTS)."""
    model = tiny_model(family, seed)
    tokens = torch.randint(0, 64, (BATCH, T), generator=torch.Generator().manual_seed(seed + 1))
    result = {
        "family": family,
        "part": part,
        "layers": 0,
        "whole": 0.0,
        "cached": 0.0,
        "sharpness": 1.0,
        "kinds": [],
        "longest_cache": {},
    }
    records = record_layers(model, tokens, part)
    if empty := [i for i, seen in enumerate(records) if not seen]:
        raise ValueError(f"{family}: layers {empty} recorded no attention to compare")
    layers, xs = load_attentions(model, part), [seen["x"] for seen in records]
    whole, cached, caches = run_all(layers, xs)
    for i, (layer, seen, cache) in enumerate(zip(layers, records, caches, strict=True)):
        kind = kind_of(layer, cache)
        result["layers"] += 1
        result["whole"] = max(result["whole"], relative(whole[i], seen["y"]))
        result["cached"] = max(result["cached"], relative(cached[i], seen["y"]))
        if kind != "linear":  # the mean over rows of the largest weight: 1 / 24 if uniform
            sharp = seen["weights"].max(-1).values.mean().item()
            result["sharpness"] = min(result["sharpness"], sharp)
        result["kinds"].append(kind)
        result["longest_cache"][kind] = max(result["longest_cache"].get(kind, 0), len(cache))
    return result


def speed(repetitions: int, C=512, H=8, G=2, D=64, B=2, T_len=512) -> dict:
    """Forward seconds of the guide's layer and of transformers' sdpa layer."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=C,
        num_attention_heads=H,
        num_key_value_heads=G,
        head_dim=D,
        num_hidden_layers=1,
        intermediate_size=64,
        vocab_size=64,
        max_position_embeddings=T_len,
        attn_implementation="sdpa",
    )
    model = transformers.LlamaForCausalLM(config).eval()
    theirs = model.model.layers[0].self_attn
    rotary = model.model.rotary_emb
    ours = load_attention(model, 0)
    x = torch.randn(B, T_len, C)
    positions = torch.arange(T_len).unsqueeze(0)

    def transformers_layer():
        with torch.no_grad():
            cos_sin = rotary(x, positions)
            return theirs(hidden_states=x, position_embeddings=cos_sin, attention_mask=None)[0]

    def guide_layer():
        with torch.no_grad():
            return ours(x)

    assert relative(guide_layer(), transformers_layer()) < 1e-5
    times = time_interleaved(
        {"guide": guide_layer, "transformers": transformers_layer},
        repetitions=repetitions,
        warmup=3,
        retries=2,
    )
    median = {name: statistics.median(t["seconds"]) for name, t in times.items()}
    cpu = {name: statistics.median(t["cpu_seconds"]) for name, t in times.items()}
    return {
        "config": {"C": C, "H": H, "G": G, "D": D, "B": B, "T": T_len},
        "median_seconds": {k: round(v, 6) for k, v in median.items()},
        "ratio": round(median["guide"] / median["transformers"], 3),
        # CPU seconds of this process: what the forward cost, without the waits
        # for a core that a loaded machine adds to the wall clock.
        "median_cpu_seconds": {k: round(v, 6) for k, v in cpu.items()},
        "cpu_ratio": round(cpu["guide"] / cpu["transformers"], 3),
        "seconds": {k: [round(s, 6) for s in t["seconds"]] for k, t in times.items()},
        "cpu_seconds": {k: [round(s, 6) for s in t["cpu_seconds"]] for k, t in times.items()},
    }


def main(argv: list[str] | None = None) -> int:
    cmd = experiment.Command("lab.todays_models", __doc__)
    args = cmd.parse(argv)
    header = cmd.header(SCHEMA)
    rows = []
    for family in FAMILIES:
        for part in PARTS_COMPARED.get(family, (None,)):
            progress(f"comparing {family}" + (f" ({part})" if part else ""))
            rows.append(compare(family, part=part))
    progress("timing the guide's layer against transformers' (sdpa)")
    reps = 5 if args.quick else 30
    # A Llama 3 8B-like layer (32 query heads, 8 key/value heads of 128 on 4096) at a
    # quarter of its width, and a smaller one where the per-call overheads weigh more.
    timing = [speed(reps, C=1024, H=8, G=2, D=128, B=4), speed(reps)]
    result = {**note_load_after(header), "compared": rows, "speed": timing}
    cmd.write(RESULT_FILE.name, result)
    for row in rows:
        print(
            f"{label(row):12} layers {row['layers']}  whole {row['whole']:.1e}  "
            f"cached {row['cached']:.1e}"
        )
    for t in timing:
        print(
            f"speed {t['config']}: guide / transformers = {t['ratio']} (wall), "
            f"{t['cpu_ratio']} (CPU)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the page's results
# Rendered into docs/families.md by the build (hooks/results.py) from the result file.


def compared_result() -> str:
    """Each family's worst relative difference, whole and cached, and its sharpness."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load("todays-models.json")
    rows = [
        [label(r), str(r["layers"]), f"{r['whole']:.0e}", f"{r['cached']:.0e}",
         f"{r['sharpness']:.2f}"]
        for r in data["compared"]
    ]  # fmt: skip
    table = markdown_table(["family", "layers", "whole", "cached", "sharpness"], rows)
    ok = all(max(r["whole"], r["cached"]) < 1e-5 for r in data["compared"])
    return f"{table}\n\nEvery family within 1e-5: {'yes' if ok else 'no'}.\n\n" + measured_note(
        data, ["the worst relative difference over a family's layers"]
    )


def speed_result() -> str:
    """The guide's layer against transformers' LlamaAttention, per size."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load("todays-models.json")
    rows = []
    for s in data["speed"]:
        c = s["config"]
        rows.append(
            [", ".join(f"{k}={v}" for k, v in c.items()), str(len(s["seconds"]["guide"])),
             f"{s['median_seconds']['guide'] * 1e3:.1f}",
             f"{s['median_seconds']['transformers'] * 1e3:.1f}", f"{s['ratio']:.2f}",
             f"{s['cpu_ratio']:.2f}"]
        )  # fmt: skip
    header = ["size", "rounds", "guide, ms", "transformers, ms", "ratio", "CPU s ratio"]
    note = measured_note(data, ["medians of rounds taken in turns, forward only"])
    return f"{markdown_table(header, rows)}\n\n{note}"


def speed_values() -> dict[str, str]:
    """How much longer the guide's layer takes, per size, as the page's prose says it."""
    from lab.shared.result_pages import load, value_table

    speed = load("todays-models.json")["speed"]
    return value_table(
        {f"extra_{i}": f"{(s['ratio'] - 1) * 100:.0f}%" for i, s in enumerate(speed)}
    )
