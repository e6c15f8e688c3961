"""Tests for hooks/search_math.py: the search index holds formulas as text, not TeX."""

import json
import re

import pytest

from hooks import search_math


@pytest.mark.parametrize(
    ("mathml", "text"),
    [
        ("<math><msqrt><mi>D</mi></msqrt></math>", "√D"),
        ("<math><mi>T</mi><mo>×</mo><mi>T</mi></math>", "T×T"),
        ("<math><mfrac><mn>1</mn><msqrt><mi>D</mi></msqrt></mfrac></math>", "1/(√D)"),
        ("<math><msup><mi>x</mi><mn>2</mn></msup></math>", "x^2"),
        ("<math><msub><mi>W</mi><mi>V</mi></msub></math>", "W_V"),
        ("<math><mn>0</mn><mo>,</mo><mo>…</mo><mo>,</mo><mi>i</mi></math>", "0,…,i"),
    ],
)
def test_mathml_becomes_readable_text(mathml, text):
    assert search_math.mathml_text(mathml) == text


def test_the_built_index_has_no_tex_outside_code(built_site):
    docs = json.loads((built_site / "search" / "search_index.json").read_text("utf-8"))["docs"]
    raw = []
    for doc in docs:
        prose = re.sub(r"<code>.*?</code>|<pre>.*?</pre>", "", doc["text"], flags=re.S)
        raw += [(doc["location"], m.group(0)) for m in re.finditer(r"\\[(\[]", prose)]
    assert not raw, raw[:5]
    attention = " ".join(d["text"] for d in docs if d["location"].startswith("attention/"))
    assert "T×T" in attention and "√D" in attention
    assert "from the blocks above" not in attention  # the notes are kept out of search
