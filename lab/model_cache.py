"""The trained-model cache: models the pages look at, trained once per version of the code.

    OMP_NUM_THREADS=1 python -m lab.model_cache --commit-trained  # into data/trained/
    python -m lab.model_cache --commit-trained --dry-run  # what that would write: no training

Small models are trained (each in seconds to two minutes on a CPU): the attention-only
model of snippets/pages/induction.py on repeated tokens, the GPT of snippets/pages/char_gpt.py on
the guide's text, and GPTs on MQAR by lab/recipes/mqar.py's recipe: the seed-0 MHA and MQA
ones of lab/recipes/kv_heads_models.py (for the kv-heads page's check) and the softmax-only,
linear-only and hybrid ones (a file per variant and seed; seed 0 of each committed,
for the beyond-softmax page's).
A trained model is kept in .cache/trained/, under a key made from its configuration
and from what trains it: its recipe's modules (RECIPES) and the project's modules they
import, read without comments and docstrings, the data it reads and torch's version.
So the site build, the notebook and the tests share one training per version of that
code, an edit to it trains anew, and an edit to another experiment's module does not.
The same files, committed in data/trained/, spare a fresh clone (CI) the training.
Shape letters: B batch, T sequence length, L layers, H heads.
"""

import dataclasses
import hashlib
import sys
from pathlib import Path

import torch

from lab.recipes import kv_heads_models
from lab.recipes.mqar import BLOCKS_CACHED, MqarRun, blocks_run, build, train_mqar
from lab.shared.common import atomic_write
from lab.shared.fingerprint import recipe_fingerprint
from lab.shared.paths import CACHE, ROOT
from snippets.core.model import GPT
from snippets.pages.char_gpt import CharGPTConfig, train_char_gpt
from snippets.pages.induction import AttentionOnly, InductionConfig, train_induction
from snippets.run.corpus import guide_text
from snippets.run.tokenizer import CharTokenizer

TRAINED = CACHE / "trained"
# Read only: a file whose key no longer matches the code is ignored (and replaced by
# --commit-trained).
COMMITTED = ROOT / "data" / "trained"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What trains a model: the modules its training is written in (with the project's
    modules they import) and the data files it reads, paths relative to the root."""

    modules: tuple[str, ...]
    data: tuple[str, ...] = ()

    def fingerprint(self) -> str:
        """A hash of this recipe's code (without comments and docstrings), its data and
        the torch version. The cache's own modules are no part of any recipe."""
        return recipe_fingerprint(
            [ROOT / m for m in self.modules], f"torch {torch.__version__}", self.data, ROOT,
            leave_out=[ROOT / m for m in NOT_A_RECIPE],
        )  # fmt: skip


# Loading and saving models, and the keys: a change here re-keys no model.
NOT_A_RECIPE = ("lab/model_cache.py", "lab/shared/fingerprint.py")
RECIPES = {  # the name of a committed model, or its prefix ("mqar-"), -> its recipe
    "induction": Recipe(("snippets/pages/induction.py",)),
    "char-gpt": Recipe(("snippets/pages/char_gpt.py",), data=("data/guide-snapshot.txt",)),
    # lab/serving.py's speculative target: char-gpt's recipe, a larger model
    "speculative-target": Recipe(
        ("snippets/pages/char_gpt.py",), data=("data/guide-snapshot.txt",)
    ),
    "speculative-draft": Recipe(("snippets/pages/char_gpt.py",), data=("data/guide-snapshot.txt",)),
    "mqar-": Recipe(("lab/recipes/mqar.py",)),
    "kv-heads-": Recipe(("lab/recipes/kv_heads_models.py",)),  # it imports lab/recipes/mqar.py
    "streaming-": Recipe(("lab/recipes/sink_models.py",)),
}


def recipe_of(name: str) -> Recipe:
    """The recipe of model `name` (RECIPES, by name or by prefix)."""
    for key, recipe in RECIPES.items():
        if name == key or (key.endswith("-") and name.startswith(key)):
            return recipe
    raise KeyError(f"model name {name!r} has no recipe: RECIPES knows {sorted(RECIPES)}")


def file_name(name: str, config) -> str:
    """The file of model `name` trained with `config` by this version of its recipe."""
    code = recipe_of(name).fingerprint()
    key = hashlib.sha256(f"{code}\n{config!r}".encode()).hexdigest()[:20]
    return f"{name}-{key}.pt"


def _cached(name: str, config, build, train):
    """(model, losses): loaded from TRAINED or COMMITTED if this config and recipe were
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


# The target of lab/serving.py's speculative decoding: the char GPT made larger (four
# layers of width 128, twice the context) and trained longer, on the same text and
# tokenizer, so that the committed char-gpt and its kind can draft for it.
SPECULATIVE_TARGET = CharGPTConfig(
    context_length=64, n_embed=128, n_layer=4, batch_size=32, steps=1500
)
# Its best draft there: the char GPT's own sizes at the target's context, trained long
# enough to agree with the target on most tokens (the quick run's draft).
SPECULATIVE_DRAFT = CharGPTConfig(context_length=64, steps=3000)


def trained_char_gpt(
    config: CharGPTConfig | None = None, name: str = "char-gpt"
) -> tuple[GPT, CharTokenizer, list[float]]:
    """train_char_gpt(config) and its tokenizer, trained once per version; name: the
    cache's name of the model ("speculative-target", "speculative-draft": those of
    SPECULATIVE_TARGET and SPECULATIVE_DRAFT)."""
    config = CharGPTConfig() if config is None else config
    char = CharTokenizer.from_text(guide_text())

    def build(c):
        return GPT(c.gpt_config(char.vocab_size))

    model, losses = _cached(name, config, build, train_char_gpt)
    return model, char, losses


def mqar_name(run: MqarRun) -> str:
    """The cache's name of an MQAR model: one per attention, blocks and seed. The
    blocks by their first letters (linear, softmax): "llls" is the hybrid."""
    label = "-".join(f"{k}-{v}" for k, v in run.attention) or "mha"
    if run.layer_types is not None:
        label += "-" + "".join(kind[0] for kind in run.layer_types)
    return f"mqar-{label}-seed{run.seed}".replace("_", "-")


def trained_mqar(run: MqarRun) -> tuple[GPT, list[float]]:
    """lab.recipes.mqar.train_mqar(run), trained once per version of the code."""
    return _cached(mqar_name(run), run, build, train_mqar)


def kv_heads_name(run: MqarRun) -> str:
    """The cache's name of a kv-heads model (lab/recipes/kv_heads_models.py):
    "kv-heads-mqar-..."."""
    return f"kv-heads-{mqar_name(run)}"


def trained_kv_heads(run: MqarRun) -> tuple[GPT, list[float]]:
    """A kv-heads model trained by lab.recipes.mqar's recipe, once per version of the code."""
    return _cached(kv_heads_name(run), run, build, train_mqar)


def committed_runs() -> dict[str, object]:
    """The models data/trained/ holds: each one's name in the cache -> its configuration."""
    runs = {
        "induction": InductionConfig(),
        "char-gpt": CharGPTConfig(),
        "speculative-target": SPECULATIVE_TARGET,
        "speculative-draft": SPECULATIVE_DRAFT,
    }
    for variant in kv_heads_models.CACHED:
        run = kv_heads_models.run_of(variant)
        runs[kv_heads_name(run)] = run
    for variant in BLOCKS_CACHED:
        runs[mqar_name(blocks_run(variant))] = blocks_run(variant)
    return runs


def commit_plan(runs: dict[str, object]) -> list[tuple[Path, list[Path]]]:
    """For each model of `runs` (name -> configuration): the file COMMITTED should hold
    under this code's key, and the files of that model there now that it replaces."""
    plan = []
    for name, config in runs.items():
        current = COMMITTED / file_name(name, config)
        plan.append((current, sorted(p for p in COMMITTED.glob(f"{name}-*.pt") if p != current)))
    return plan


def shown(path: Path) -> str:
    """A path as a command prints it: relative to the root when it is under it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def describe_plan(plan: list[tuple[Path, list[Path]]]) -> str:
    """One line per model: kept as it is, or written (trained if .cache/trained/ lacks
    it), and what it replaces."""
    lines = []
    for current, old in plan:
        if current.is_file():
            lines.append(f"{shown(current)}: up to date")
            continue
        how = "copied from .cache/trained/" if (TRAINED / current.name).is_file() else "trained"
        replaces = ", ".join(p.name for p in old) or "nothing"
        lines.append(f"{shown(current)}: would be written ({how}), replacing {replaces}")
    return "\n".join(lines)


def write_plan(plan: list[tuple[Path, list[Path]]]) -> list[Path]:
    """Carry out commit_plan's plan, once the models are in TRAINED."""
    COMMITTED.mkdir(parents=True, exist_ok=True)
    for current, old in plan:
        for path in old:
            path.unlink()
        if not current.is_file():
            current.write_bytes((TRAINED / current.name).read_bytes())
    return [current for current, _ in plan]


def commit_trained() -> list[Path]:
    """Copy this code's trained models (the default configurations) into COMMITTED,
    replacing older ones of the same model."""
    trained_induction()
    trained_char_gpt()
    trained_char_gpt(SPECULATIVE_TARGET, "speculative-target")
    trained_char_gpt(SPECULATIVE_DRAFT, "speculative-draft")
    runs = committed_runs()
    for name, run in runs.items():
        if name.startswith("mqar-"):
            trained_mqar(run)
        elif name.startswith("kv-heads-"):
            trained_kv_heads(run)
    return write_plan(commit_plan(runs))


def main(argv: list[str], commit, runs, module: str) -> int:
    """`python -m <module> --commit-trained [--dry-run]`: commit() refreshes the
    committed models; --dry-run prints what it would write, training nothing."""
    if argv not in (["--commit-trained"], ["--commit-trained", "--dry-run"]):
        raise SystemExit(f"usage: python -m {module} --commit-trained [--dry-run]")
    if "--dry-run" in argv:
        print(describe_plan(commit_plan(runs())))
        return 0
    for written in commit():
        print(shown(written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], commit_trained, committed_runs, "lab.model_cache"))
