"""Tests for snippets/spec.py: a spec class is listed by its name when defined, the
package's class of a name stays, and a layer spec builds its layer and counts its parameters.
Each spec's build() and parameters() against its layer: the tests of its module."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from snippets.spec import SPECS, LayerSpec, Spec

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_gpt_lists_every_spec_its_config_can_hold():
    """A resumed run imports the GPT, not every layer module: each spec class a
    GPTConfig can hold must be in SPECS by then, in a fresh interpreter."""
    code = "import snippets.model; from snippets.spec import SPECS; print(sorted(SPECS))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    expected = [
        "AttentionSpec",
        "BlockSpec",
        "CausalSpec",
        "CompressedSpec",
        "DSASpec",
        "DiffAttentionSpec",
        "IndexerSpec",
        "LinearSpec",
        "MLASpec",
        "RopeSpec",
        "TamedSpec",
    ]
    assert run.stdout.strip() == str(expected)


def test_a_spec_is_listed_by_name_and_the_packages_class_of_a_name_stays():
    from snippets.configurable import AttentionSpec

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
