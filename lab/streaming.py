"""Sinks and streaming: the StreamingLLM experiment on the guide's own small model.

    python -m lab.streaming                   # docs/assets/results/streaming.json
    python -m lab.streaming --quick --out DIR # seconds: the suite's run

Trains the positions page's RoPE model (lab.positions.train_one: same setup,
same trainer) on the Markov language, then reads held-out streams 16 times
longer than its training length W four ways (snippets/streaming.py): one cache
of everything, recompute over the last W tokens, a rolling cache of W tokens,
and a rolling cache that keeps the first tokens as sinks. Reports the loss per
band of positions as excess nats over the language's entropy rate, and the
attention each layer puts on the first token.
"""

import dataclasses
import sys
import time

import torch
import torch.nn.functional as F

from lab.common import RESULTS_DIR, note_load_after
from lab.experiment import Command, progress
from lab.model_cache import trained_char_gpt
from lab.positions import FULL, QUICK, train_one
from snippets.char_gpt import CharGPTConfig, train_char_gpt
from snippets.corpus import guide_text
from snippets.streaming import first_token_attention, recompute_logits, stream_logits
from snippets.tokenizer import CharTokenizer
from snippets.train_data import MARKOV, load_corpus

RESULT_FILE = RESULTS_DIR / "streaming.json"
SCHEMA = "attention-guide/streaming/1"
STREAM_FACTOR = 16  # each held-out stream is this many times the window long
METHODS = {  # name -> what the page calls it
    "full": "one cache, nothing dropped",
    "recompute": "recompute the last W",
    "rolling": "rolling cache of W",
    "sinks": "rolling cache of W, 4 sinks",
}


@dataclasses.dataclass(frozen=True)
class Run:
    """What the evaluation reads, besides the model's own setup."""

    streams: int = 8  # B held-out streams read side by side
    sinks: int = 4  # StreamingLLM keeps 4
    seed: int = 0


def bands(window: int, length: int) -> list[tuple[int, int]]:
    """Position bands [0, W), [W, 2W), [2W, 4W), ... up to the stream's length."""
    edges = [0, window]
    while edges[-1] < length:
        edges.append(min(2 * edges[-1], length))
    return list(zip(edges[:-1], edges[1:], strict=True))


def banded(losses: torch.Tensor, spans: list[tuple[int, int]]) -> list[float]:
    """Mean of losses (B, T) over each band of positions."""
    return [losses[:, a:b].mean().item() for a, b in spans]


def token_losses(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each position, (B, T, V) and (B, T) -> (B, T)."""
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")


def first_token_share(model, ids: torch.Tensor, window: int, n_windows: int) -> dict:
    """first_token_attention over consecutive windows of ids, for the queries in
    the second half of each window, with the share an even spread would give."""
    n = min(n_windows, ids.numel() // window)
    shares = first_token_attention(model, ids[: n * window].view(n, window), window // 2)
    start = window // 2
    uniform = sum(1 / (t + 1) for t in range(start, window)) / (window - start)
    return {
        "window": window,
        "query_start": start,
        "windows": n,
        "uniform": round(uniform, 4),
        "per_layer_head": [[round(v, 4) for v in layer] for layer in shares.tolist()],
    }


def guide_gpt_first_token(quick: bool) -> dict:
    """The same measurement on the guide's GPT of the see-attention page: learned
    positions, trained on the guide's text (lab.model_cache keeps it; --quick trains
    a few steps instead, without touching that cache)."""
    text = guide_text()
    if quick:
        model, _ = train_char_gpt(CharGPTConfig(steps=5))
        char = CharTokenizer.from_text(text)
    else:
        model, char, _ = trained_char_gpt()
    ids = torch.tensor(char.encode(text), dtype=torch.long)
    # The text it was trained on: this measures where attention goes, not a loss.
    return first_token_share(model.eval(), ids, model.config.context_length, 64)


def run(setup, run_: Run, header: dict, quick: bool = False) -> dict:
    """Train, read the streams four ways, measure first-token attention (after header)."""
    corpus = load_corpus("markov", setup.corpus_chars)
    started = time.process_time()
    progress(f"training the RoPE model ({setup.steps} steps, T={setup.context_length})")
    model, row = train_one(setup, "rope", corpus)
    model.eval()
    train_seconds = time.process_time() - started
    W = setup.context_length
    length = STREAM_FACTOR * W
    B = run_.streams
    # B consecutive held-out streams, each with its next-token targets.
    val = corpus.val[: B * length + 1]
    if val.numel() < B * length + 1:
        raise ValueError(f"the held-out text ({corpus.val.numel()}) is too short")
    x = val[:-1].view(B, length)  # (B, N)
    y = torch.stack([val[i * length + 1 : (i + 1) * length + 1] for i in range(B)])
    spans = bands(W, length)
    best = corpus.best_loss
    chain = -torch.tensor(MARKOV.transitions)[x, y].log()  # (B, N): the chain's own loss
    rows = [{"method": "chain", "excess": [round(v - best, 4) for v in banded(chain, spans)]}]
    readers = {
        "full": lambda: stream_logits(model, x, window=length),
        "recompute": lambda: recompute_logits(model, x, window=W),
        "rolling": lambda: stream_logits(model, x, window=W),
        "sinks": lambda: stream_logits(model, x, window=W, sinks=run_.sinks),
    }
    for name, read in readers.items():
        cpu = time.process_time()
        losses = token_losses(read(), y)  # (B, N)
        seconds = time.process_time() - cpu
        excess = [round(v - best, 4) for v in banded(losses, spans)]
        rows.append({"method": name, "excess": excess, "cpu_seconds": round(seconds, 2)})
        progress(f"{name}: excess per band {excess} ({seconds:.1f} s CPU)")
    # Attention on token 0, over training-length windows of the held-out text,
    # for the queries in the second half of each window.
    first = first_token_share(model, corpus.val, W, 64)
    guide_gpt = guide_gpt_first_token(quick)
    note_load_after(header)
    return {
        **header,
        "setup": dataclasses.asdict(setup),
        "run": dataclasses.asdict(run_),
        "model_row": row,
        "train_cpu_seconds": round(train_seconds, 1),
        "entropy_rate": round(best, 6),
        "window": W,
        "stream_length": length,
        "bands": [list(s) for s in spans],
        "methods": METHODS,
        "rows": rows,
        "first_token": first,
        "first_token_guide_gpt": guide_gpt,
    }


# ------------------------------------------------------------------ tables


def loss_table(data: dict) -> str:
    """Excess nats over the entropy rate, a row per method, a column per band."""
    W = data["window"]
    names = {"chain": "the chain itself", **data["methods"]}
    names["sinks"] = f"rolling cache of W, {data['run']['sinks']} sinks"
    heads = [f"{a}-{b - 1}" for a, b in data["bands"]]
    width = max(len(n) for n in names.values())
    lines = [f"{'positions (W=' + str(W) + ')':<{width}}  " + "  ".join(f"{h:>9}" for h in heads)]
    for row in data["rows"]:
        cells = "  ".join(f"{v:>9.3f}" for v in row["excess"])
        lines.append(f"{names[row['method']]:<{width}}  {cells}")
    return "\n".join(lines)


def attention_table(data: dict, key: str = "first_token") -> str:
    """Attention on the first token per layer: the mean over heads and the most.

    key: "first_token" (the RoPE model) or "first_token_guide_gpt".
    """
    first = data[key]
    lines = [f"{'layer':>5}  {'mean over heads':>15}  {'most, one head':>14}"]
    for layer, heads in enumerate(first["per_layer_head"]):
        mean = sum(heads) / len(heads)
        lines.append(f"{layer:>5}  {mean:>15.3f}  {max(heads):>14.3f}")
    lines.append(f"uniform over the keys a query sees: {first['uniform']:.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the experiment, write the result file, print both tables."""
    # One thread by default: the same sums in the same order on every machine.
    cmd = Command("lab.streaming", __doc__, threads=1)
    args = cmd.parse(argv)
    setup = QUICK if args.quick else FULL
    run_ = Run(streams=2, sinks=2) if args.quick else Run()
    data = run(setup, run_, cmd.header(SCHEMA), quick=args.quick)
    cmd.write(RESULT_FILE.name, data)
    print(loss_table(data))
    print()
    print(attention_table(data))
    print()
    print(attention_table(data, "first_token_guide_gpt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
