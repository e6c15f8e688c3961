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

import statistics
import sys

import torch

from lab import experiment
from lab.common import note_load_after
from lab.experiment import progress
from lab.from_transformers import FAMILIES, load_attention, load_attentions
from lab.paths import RESULTS_DIR
from lab.tiny_models import WINDOW, record_layers, tiny_model
from snippets.measure import time_interleaved

SCHEMA = "attention-guide/todays-models/1"
RESULT_FILE = RESULTS_DIR / "todays-models.json"
T = 3 * WINDOW  # beyond every window and chunk of the tiny models
PREFILL = 2 * WINDOW - 3  # then one token per step, across a window and a chunk


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


@torch.no_grad()
def compare(family: str, seed: int = 0) -> dict:
    """Worst relative differences of a family's layers against transformers."""
    model = tiny_model(family, seed)
    tokens = torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(seed + 1))
    result = {
        "family": family,
        "layers": 0,
        "whole": 0.0,
        "cached": 0.0,
        "sharpness": 1.0,
        "kinds": [],
        "longest_cache": {},
    }
    # Layers loaded together and stepped in turn, as the model runs them: a
    # GLM-5 layer reads the top-k choice the layer before it made on that step.
    pairs = [
        (layer, seen)
        for layer, seen in zip(load_attentions(model), record_layers(model, tokens), strict=True)
        if seen  # a layer without self_attn: Qwen3-Next's linear layers
    ]
    caches = [layer.new_cache() for layer, _ in pairs]
    steps = [[] for _ in pairs]
    for start, end in [(0, PREFILL)] + [(t, t + 1) for t in range(PREFILL, T)]:
        for (layer, seen), cache, out in zip(pairs, caches, steps, strict=True):
            out.append(layer(seen["x"][:, start:end], cache=cache))
    for (layer, seen), cache, out in zip(pairs, caches, steps, strict=True):
        kind = getattr(layer.spec, "kind", "full")
        result["layers"] += 1
        result["whole"] = max(result["whole"], relative(layer(seen["x"]), seen["y"]))
        result["cached"] = max(result["cached"], relative(torch.cat(out, 1), seen["y"]))
        # The mean over rows of the largest weight: 1 / 24 if uniform over 24 keys.
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
