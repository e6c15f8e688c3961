"""The page "Attention in today's models": the oracle's differences and the speed.

    python -m lab.todays_models           # compare every family, time the layer
    python -m lab.todays_models --quick   # fewer timing rounds

compare(family): a tiny random model of the family (lab/tiny_models.py), one full
forward with hooks recording what each attention layer got and returned, then the
guide's layer loaded with that layer's weights (lab/from_transformers.py) on the
same input, whole and in cached decode steps: the worst relative difference.

speed(): the guide's layer against transformers' LlamaAttention with
attn_implementation="sdpa" on the same config and weights, forward only, timed in
turns (snippets.measure.time_interleaved); each side includes its RoPE tables.
"""

import itertools
import statistics
import sys

import torch

from lab import experiment
from lab.common import note_load_after
from lab.experiment import progress
from lab.from_transformers import FAMILIES, load_attention
from lab.paths import RESULTS_DIR
from lab.tiny_models import WINDOW, record_layers, tiny_model
from snippets.cache import LinearState
from snippets.measure import time_interleaved

SCHEMA = "attention-guide/todays-models/1"
RESULT_FILE = RESULTS_DIR / "todays-models.json"
T = 3 * WINDOW  # beyond every window and chunk of the tiny models
BATCH = 2  # sequences per comparison
PREFILL = 2 * WINDOW - 3  # then one token per step, across a window and a chunk


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def run_layer(model, records: list[dict], i: int, layer) -> tuple:
    """Layer i on what its transformers layer got: (whole sequence, cached
    steps: a prefill, then one token at a time, the layer's cache).

    A layer that reads another layer's keys and values (Gemma 4's shared
    layers, spec.kv_source) reads them through a SharedCache on that layer's
    cache, so its source runs beside it, on what the source got, step by step.
    """
    x = records[i]["x"]
    cuts = [0, PREFILL, *range(PREFILL + 1, T + 1)]
    source = getattr(getattr(layer, "spec", None), "kv_source", None)
    if source is None:
        linear = not hasattr(layer, "new_cache")  # a LinearState: a fixed-size state
        cache = LinearState(layer, BATCH) if linear else layer.new_cache()
        steps = [layer(x[:, a:b], cache=cache) for a, b in itertools.pairwise(cuts)]
        return layer(x), torch.cat(steps, 1), cache
    feeder, x_source = load_attention(model, source), records[source]["x"]
    outputs = []
    for pieces in ([0, T], cuts):  # whole: one step of all T positions
        source_cache = feeder.new_cache()
        cache = layer.new_cache(source_cache)
        steps = []
        for a, b in itertools.pairwise(pieces):
            feeder(x_source[:, a:b], cache=source_cache)
            steps.append(layer(x[:, a:b], cache=cache))
        outputs.append(torch.cat(steps, 1))
    return outputs[0], outputs[1], cache


@torch.no_grad()
def compare(family: str, seed: int = 0) -> dict:
    """Worst relative differences of a family's layers against transformers."""
    model = tiny_model(family, seed)
    tokens = torch.randint(0, 64, (BATCH, T), generator=torch.Generator().manual_seed(seed + 1))
    result = {
        "family": family,
        "layers": 0,
        "whole": 0.0,
        "cached": 0.0,
        "sharpness": 1.0,
        "kinds": [],
        "longest_cache": {},
    }
    records = record_layers(model, tokens)
    for i, seen in enumerate(records):
        if not seen:
            continue  # a decoder layer without attention of either kind
        layer = load_attention(model, i)
        whole, steps, cache = run_layer(model, records, i, layer)
        kind = getattr(getattr(layer, "spec", None), "kind", cache.kind)  # a borrower's own
        result["layers"] += 1
        result["whole"] = max(result["whole"], relative(whole, seen["y"]))
        result["cached"] = max(result["cached"], relative(steps, seen["y"]))
        if cache.kind != "linear":  # the mean over rows of the largest weight: 1 / 24 if uniform
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
        progress(f"comparing {family}")
        rows.append(compare(family))
    progress("timing the guide's layer against transformers' (sdpa)")
    reps = 5 if args.quick else 30
    # A Llama 3 8B-like layer (32 query heads, 8 key/value heads of 128 on 4096) at a
    # quarter of its width, and a smaller one where the per-call overheads weigh more.
    timing = [speed(reps, C=1024, H=8, G=2, D=128, B=4), speed(reps)]
    result = {**note_load_after(header), "compared": rows, "speed": timing}
    cmd.write(RESULT_FILE.name, result)
    for row in rows:
        print(
            f"{row['family']:12} layers {row['layers']}  whole {row['whole']:.1e}  "
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
