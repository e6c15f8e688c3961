"""Tests for snippets/core/spec.py: a spec class is listed by its name when defined, the
package's class of a name stays, and a layer spec builds its layer and counts its parameters.
Each spec's build() and parameters() against its layer: the tests of its module."""

import dataclasses
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from snippets.core.spec import SPECS, LayerSpec, Spec

ROOT = Path(__file__).resolve().parents[3]


def every_layer_kind():
    """One spec of every layer kind the package has, for a GPT of C = 32, H = 4."""
    from snippets.core.attention import CausalSpec
    from snippets.layers.compressed_attention import CompressedSpec
    from snippets.layers.configurable import AttentionSpec
    from snippets.layers.differential import DiffAttentionSpec
    from snippets.layers.linear_layers import LinearSpec
    from snippets.layers.mla import MLASpec
    from snippets.layers.sparse_mla import DSASpec, IndexerSpec
    from snippets.layers.taming import TamedSpec

    mla = MLASpec(32, 4, 16, 8, 4, 8, q_rank=16)
    return (
        CausalSpec(32, 4, 16),
        TamedSpec(32, 4, 16, qk_norm="head"),
        AttentionSpec(32, 4, 2, 8),
        mla,
        LinearSpec(2, 32, 8, 8),
        DSASpec(mla, IndexerSpec(2, 8, 4, top_k=4)),
        CompressedSpec(32, 4, 8, 4, q_rank=16, window=4, o_groups=2, o_rank=8, ratio=4),
        DiffAttentionSpec(32, 4, 2, 8, depth=0),
    )


def test_a_checkpoint_of_every_layer_kind_reads_back_after_importing_only_the_gpt():
    """A resumed run imports the GPT, not every layer module: the checkpoint's
    config names each spec's module, which reading it imports, in a fresh
    interpreter that imported only the GPT and the checkpoint code."""
    from snippets.core.model import GPTConfig
    from snippets.run.checkpoint import config_data

    layers = every_layer_kind()
    config = GPTConfig(
        n_embed=32, n_head=4, n_layer=len(layers), context_length=16, position="none", layers=layers
    )
    data = config_data(config)
    assert {d["spec"].rpartition(".")[0] for d in data["layers"]} >= {
        "snippets.layers.mla",
        "snippets.layers.differential",
        "snippets.layers.linear_layers",
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.pt"
        torch.save(data, path)
        code = (
            "import sys, torch; import snippets.core.model, snippets.run.checkpoint as c; "
            "before = {m for m in sys.modules if m.startswith('snippets.')}; "
            f"config = c.config_from_data(snippets.core.model.GPTConfig, torch.load({str(path)!r}, "
            "weights_only=True)); print(repr(config)); "
            "print(sorted({m for m in sys.modules if m.startswith('snippets.')} - before))"
        )
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    read, imported = run.stdout.strip().splitlines()
    assert read == repr(config)
    assert "snippets.layers.mla" in imported and "snippets.layers.differential" in imported


def test_a_gpt_takes_a_layer_spec_defined_outside_the_package():
    """A new kind of layer is a new spec class: a GPT builds it with no table to
    add it to; what is not a LayerSpec is refused by name."""
    from snippets.core.attention import CausalSpec
    from snippets.core.model import GPT, GPTConfig

    @dataclasses.dataclass(frozen=True)
    class ScaledCausalSpec(LayerSpec):  # the plain layer, its output halved
        n_embed: int
        n_head: int

        def build(self):
            inner = CausalSpec(self.n_embed, self.n_head, 16).build()

            class Halved(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.inner = inner

                def forward(self, x, cache=None, *, return_weights=False):
                    y = self.inner(x, cache, return_weights=return_weights)
                    return (y[0] / 2, y[1]) if return_weights else y / 2

            return Halved()

        def parameters(self):
            return CausalSpec(self.n_embed, self.n_head, 16).parameters()

    try:
        layers = (ScaledCausalSpec(32, 4),) * 2
        config = GPTConfig(
            n_embed=32, n_head=4, n_layer=2, context_length=16, position="learned", layers=layers
        )
        model = GPT(config)
        logits, _ = model(torch.zeros(1, 5, dtype=torch.long))
        assert logits.shape == (1, 5, config.vocab_size)
        with pytest.raises(ValueError, match=r"layers\[0\]\.n_head \(2\) must be n_head \(4\)"):
            GPTConfig(
                n_embed=32,
                n_head=4,
                n_layer=1,
                context_length=16,
                layers=(ScaledCausalSpec(32, 2),),
            )
        with pytest.raises(TypeError, match=r"layers\[0\] must be a LayerSpec"):
            GPTConfig(n_embed=32, n_head=4, n_layer=1, context_length=16, layers=("causal",))
    finally:
        SPECS.pop("ScaledCausalSpec", None)


def test_a_spec_is_listed_by_name_and_the_packages_class_of_a_name_stays():
    from snippets.layers.configurable import AttentionSpec

    @dataclasses.dataclass(frozen=True)
    class AttentionSpec2(LayerSpec):  # a new kind: listed when defined
        width: int

    def named(name, module):  # a class as if defined in that module
        return type(name, (Spec,), {"__module__": module})

    try:
        assert SPECS["AttentionSpec2"] is AttentionSpec2
        named("AttentionSpec", "docs_page_x")  # a page's copy of a package class
        assert SPECS["AttentionSpec"] is AttentionSpec  # the package's stays
        page = named("TmpSpec", "docs_page_x")  # a page's class first ...
        assert SPECS["TmpSpec"] is page
        package = named("TmpSpec", "snippets.tmp")  # ... the package's wins
        assert SPECS["TmpSpec"] is package
        assert "LayerSpec" not in SPECS and "Spec" not in SPECS  # kinds, not specs
    finally:
        SPECS.pop("AttentionSpec2", None)
        SPECS.pop("TmpSpec", None)


def test_a_layer_spec_without_its_layer_says_so():
    @dataclasses.dataclass(frozen=True)
    class Unbuilt(LayerSpec):
        width: int

    try:
        with pytest.raises(NotImplementedError, match="Unbuilt has no build"):
            Unbuilt(4).build()
        with pytest.raises(NotImplementedError, match="Unbuilt has no parameters"):
            Unbuilt(4).parameters()
    finally:
        del SPECS["Unbuilt"]
