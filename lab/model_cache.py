"""The trained-model cache: models the pages look at, trained once per version of the code.

    python -m lab.model_cache --commit-trained   # this code's models into data/trained/

Small models are trained (each in seconds to two minutes on a CPU): the attention-only
model of snippets/induction.py on repeated tokens, the GPT of snippets/char_gpt.py on
the guide's text, and lab/mqar.py's GPTs on MQAR: the seed-0 MHA and MQA ones (for
the kv-heads page's sign check) and the softmax-only, linear-only and hybrid ones (a
file per variant and seed; seed 0 of each committed, for the beyond-softmax page's).
A trained model is kept in .cache/trained/, under a key made from its configuration
and from every file its training reads (the project's modules this one imports, and
data/), so the site build, the notebook and the tests share one training per version
of the code, and an edit to any of that code trains anew.
The same files, committed in data/trained/, spare a fresh clone (CI) the training.
Shape letters: B batch, T sequence length, L layers, H heads.
"""

import hashlib
import sys
from pathlib import Path

import torch

from lab.common import atomic_write
from lab.fingerprint import code_fingerprint
from lab.mqar import BLOCKS_CACHED, CACHED, MqarRun, blocks_run, build, run_of, train_mqar
from lab.paths import CACHE, ROOT
from snippets.char_gpt import CharGPTConfig, train_char_gpt
from snippets.corpus import guide_text
from snippets.induction import AttentionOnly, InductionConfig, train_induction
from snippets.model import GPT
from snippets.tokenizer import CharTokenizer

TRAINED = CACHE / "trained"
# Read only: a file whose key no longer matches the code is ignored (and replaced by
# --commit-trained).
COMMITTED = ROOT / "data" / "trained"


def fingerprint() -> str:
    """A hash of everything a trained model depends on: this module and those it
    imports from the project, the data they read, and the torch version."""
    versions = f"torch {torch.__version__}"
    return code_fingerprint([Path(__file__).resolve()], versions, ROOT)


def file_name(name: str, config) -> str:
    """The file of model `name` trained with `config` by this version of the code."""
    key = hashlib.sha256(f"{fingerprint()}\n{config!r}".encode()).hexdigest()[:20]
    return f"{name}-{key}.pt"


def _cached(name: str, config, build, train):
    """(model, losses): loaded from TRAINED or COMMITTED if this config and code were
    trained before, else trained now and saved in TRAINED. Stale files of `name` there
    are removed."""
    path = TRAINED / file_name(name, config)
    for saved_at in (path, COMMITTED / path.name):
        if saved_at.is_file():
            saved = torch.load(saved_at, weights_only=True)
            model = build(config)
            model.load_state_dict(saved["state"])
            return model.eval(), saved["losses"]
    model, losses = train(config)
    state = {"state": model.state_dict(), "losses": losses}
    atomic_write(path, lambda f: torch.save(state, f), mode="wb")
    for old in TRAINED.glob(f"{name}-*.pt"):
        if old != path:
            old.unlink(missing_ok=True)
    return model, losses


def trained_induction(
    config: InductionConfig | None = None,
) -> tuple[AttentionOnly, list[float]]:
    """train_induction(config), trained once per version of the code."""
    config = InductionConfig() if config is None else config
    return _cached("induction", config, AttentionOnly, train_induction)


def trained_char_gpt(
    config: CharGPTConfig | None = None,
) -> tuple[GPT, CharTokenizer, list[float]]:
    """train_char_gpt(config) and its tokenizer, trained once per version."""
    config = CharGPTConfig() if config is None else config
    char = CharTokenizer.from_text(guide_text())

    def build(c):
        return GPT(c.gpt_config(char.vocab_size))

    model, losses = _cached("char-gpt", config, build, train_char_gpt)
    return model, char, losses


def mqar_name(run: MqarRun) -> str:
    """The cache's name of an MQAR model: one per attention, blocks and seed. The
    blocks by their first letters (linear, softmax): "llls" is the hybrid."""
    label = "-".join(f"{k}-{v}" for k, v in run.attention) or "mha"
    if run.layer_types is not None:
        label += "-" + "".join(kind[0] for kind in run.layer_types)
    return f"mqar-{label}-seed{run.seed}".replace("_", "-")


def trained_mqar(run: MqarRun) -> tuple[GPT, list[float]]:
    """lab.mqar.train_mqar(run), trained once per version of the code."""
    return _cached(mqar_name(run), run, build, train_mqar)


def committed_runs() -> dict[str, object]:
    """The models data/trained/ holds: each one's name in the cache -> its configuration."""
    runs = {"induction": InductionConfig(), "char-gpt": CharGPTConfig()}
    for variant in CACHED:
        runs[mqar_name(run_of(variant))] = run_of(variant)
    for variant in BLOCKS_CACHED:
        runs[mqar_name(blocks_run(variant))] = blocks_run(variant)
    return runs


def commit_trained() -> list[Path]:
    """Copy this code's trained models (the default configurations) into COMMITTED,
    replacing older ones of the same model."""
    trained_induction()
    trained_char_gpt()
    runs = committed_runs()
    for name, run in runs.items():
        if name.startswith("mqar-"):
            trained_mqar(run)
    COMMITTED.mkdir(parents=True, exist_ok=True)
    written = []
    for name, config in runs.items():
        current = COMMITTED / file_name(name, config)
        for old in COMMITTED.glob(f"{name}-*.pt"):
            if old != current:
                old.unlink()
        if not current.is_file():
            current.write_bytes((TRAINED / current.name).read_bytes())
        written.append(current)
    return written


if __name__ == "__main__":
    if sys.argv[1:] != ["--commit-trained"]:
        raise SystemExit("usage: python -m lab.model_cache --commit-trained")
    for written in commit_trained():
        print(written.relative_to(ROOT))
