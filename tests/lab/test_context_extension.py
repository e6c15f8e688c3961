"""The context-extension experiment, --quick: the sign of each effect the page reports.

A RoPE model trained at T on induction, run at 2T where the copies sit further back than in
training: unscaled RoPE loses much of what it learned; YaRN and Llama 3's rule, which keep the
fast pairs and interpolate the slow ones, lose less without any training; a short fine-tune at
2T lowers every rule's loss."""

import json

import pytest

from lab import context_extension


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("context-extension")
    assert context_extension.main(["--quick", "--out", str(out)]) == 0
    assert (out / context_extension.FIGURE).read_text().startswith("<?xml")
    return json.loads((out / context_extension.RESULT_FILE.name).read_text())


def test_the_quick_run_shows_the_papers_signs(result):
    rows = {row["rule"]: row for row in result["rows"] if row["factor"] == 2}
    trained = result["rows"][0]["scaled"]
    assert trained < 0.6 < rows["unscaled"]["scaled"]  # it learned, and 2T breaks it
    for rule in ("yarn", "llama3"):  # by parts: better than unscaled, untrained
        assert rows[rule]["scaled"] < rows["unscaled"]["scaled"] - 0.3
    for rule, row in rows.items():  # a short fine-tune at 2T helps every rule
        assert row["finetuned"] < row["scaled"], rule
    assert "machine" in result and "--quick" in result["command"]
