"""Every prediction a page takes from a source says where in the source it is.

A page that sets a measured result beside what a paper predicts must let the reader check
the prediction: the paragraph, list item or table row that states it names the place in the
source (a section, figure, table, appendix, equation, theorem or the abstract). This test reads
every page's Markdown source (code blocks left out) and fails, naming page and line, where a
prediction of a source carries no such locator.

What counts as a prediction of a source, so that the next-token sense of "predict" in the
lessons ("the model must predict the next token") does not trip it:

- a paragraph or list item with "predicts", "predicted", "what ... predict", "the
  prediction(s)" or "lead(s) one to expect" that also names a source: an "et al.", a year in
  parentheses, "the paper(s)", "the literature", "the sources", a model card, or a paper's
  short name from the page's Further reading (the word before a title's colon, or the name in
  parentheses after an entry, such as Zoology or StreamingLLM);
- a paragraph or list item naming a source under a heading that speaks of predictions
  ("What the literature predicts");
- every body row of a table whose header has a "predicted" column (the locator may be in any
  cell, usually the "from" column); a row whose cells say "this page's reasoning" is the page's
  own prediction and is exempt.

A page exempts one paragraph, list item or table whose prediction is its own reasoning (and
says so in its prose) with `<!-- prediction: why -->` on the line directly above it.
"""

import re
from pathlib import Path

import pytest

from lab.shared.common import ROOT

DOCS = ROOT / "docs"

PREDICTS = re.compile(
    r"\bpredict(?:s|ed)\b|\bwhat\b[^.]{0,60}\bpredict\b"
    r"|(?:\b(?:papers?|literature|sources?|authors|they)|et al\.|\)"
    r"|(?-i:\b[A-Z][\w-]*))\s+predict\b"
    r"|\bpredictions?\s+(?:come|comes|came|tested|from)\b|\bthe\s+prediction\s+(?:tested|rests)\b"
    r"|\bleads?\s+one\s+to\s+expect\b",
    re.I,
)
GENERIC_SOURCE = re.compile(
    r"\bet al\.|\((?:[^()]*\D)?(?:19|20)\d\d[a-z]?\)|\b(?:19|20)\d\d\)"
    r"|\bthe\s+(?:papers?|literature|sources?)\b|\bmodel card\b",
    re.I,
)
LOCATOR = re.compile(
    r"§\s*\d|\bsections?\s+\d|\bsec\.\s*\d|\bFigures?\s*\d|\bFigs?\.\s*\d|\bTables?\s+\d"
    r"|\bAppendi(?:x|ces)\s+[A-Z\d]|\beqs?\.\s*\(?\d|\bequations?\s+\(?\d|\bTheorem\s+\d"
    r"|\babstract\b"
)
EXEMPT = re.compile(r"^\s*<!--\s*prediction:\s*\S.*-->\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
HEADING = re.compile(r"^(#{1,6})\s+(.*)")


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def source_names(text: str) -> set[str]:
    """Short names of the papers under the page's Further reading heading."""
    match = re.search(r"^## Further reading\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not match:
        return set()
    names = set()
    for entry in re.split(r"^\s*[-*]\s+", match.group(1), flags=re.M):
        for title in re.findall(r"\[([^\]]+)\]\(|\*([^*]+)\*", entry):
            head = (title[0] or title[1]).split(":")[0].strip()
            if ":" in (title[0] or title[1]) and 1 <= len(head.split()) <= 3:
                names.add(head)
        names.update(re.findall(r"\b(?:19|20)\d\d[^()\n]{0,20}\(([A-Z][\w.\- ]{1,30})\)", entry))
    return {n for n in names if len(n) > 2}


def blocks(text: str):
    """(first line number, lines, kind, exempt, heading) for prose blocks outside code.

    kind is "prose" for a paragraph or list item and "table" for a table; code fences and
    their contents are skipped, a list item starts a new block.
    """
    out, current, start, kind, fence = [], [], 0, None, None
    heading, exempt_next, exempt = "", False, False

    def close():
        nonlocal current, kind, exempt
        if current:
            out.append((start, current, kind, exempt, heading))
        current, kind, exempt = [], None, False

    for number, line in enumerate(text.splitlines(), 1):
        opener = FENCE.match(line)
        if fence:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = None
            continue
        if opener:
            close()
            fence = opener.group(1)
            exempt_next = False
            continue
        if EXEMPT.match(line):
            close()
            exempt_next = True
            continue
        if not line.strip():
            close()
            continue
        head = HEADING.match(line)
        if head:
            close()
            heading, exempt_next = head.group(2), False
            continue
        is_row = line.lstrip().startswith("|")
        new_kind = "table" if is_row else "prose"
        if current and (new_kind != kind or (new_kind == "prose" and LIST_ITEM.match(line))):
            close()
        if not current:
            start, kind, exempt, exempt_next = number, new_kind, exempt_next, False
        current.append(line)
    close()
    return out


def unlocated(text: str) -> list[tuple[int, str]]:
    """(line, reason) for each prediction of a source on the page without a locator."""
    names = source_names(text)
    named = re.compile(
        GENERIC_SOURCE.pattern
        + "".join(rf"|\b{re.escape(n)}\b" for n in sorted(names, key=len, reverse=True)),
        re.I,
    )
    problems, found, intro = [], blocks(text), False
    for index, (start, lines, kind, exempt, heading) in enumerate(found):
        previous_heading = found[index - 1][4] if index else None
        follows_intro, intro = intro and heading == previous_heading, False
        if exempt or heading == "Further reading":
            continue
        if kind == "table":
            cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in lines]
            if not any(re.search(r"predict", c, re.I) for c in cells[0]):
                continue
            for offset, row in enumerate(lines[2:], 2):
                if "this page's reasoning" in row or LOCATOR.search(row):
                    continue
                problems.append((start + offset, "a row of a 'predicted' table has no locator"))
            continue
        paragraph = " ".join(line.strip() for line in lines)
        is_item = bool(LIST_ITEM.match(lines[0]))
        predicts = bool(PREDICTS.search(paragraph))
        following = found[index + 1] if index + 1 < len(found) else None
        introduces = (
            following is not None
            and len(lines) == 1
            and following[0] == start + 2  # the next block, with no code block between
            and (following[2] == "table" or LIST_ITEM.match(following[1][0]))
        )
        if predicts and paragraph.endswith(":") and introduces:
            # "What the papers predict, reader by reader:" introduces the table or list
            # after it, which carries the locators; a list after it is a list of predictions
            intro = following[2] == "prose"
            continue
        if is_item and follows_intro:
            intro = True  # the rest of the list
        if not named.search(paragraph):
            continue
        in_context = re.search(r"predict", heading, re.I) or (is_item and follows_intro)
        if (predicts or in_context) and not LOCATOR.search(paragraph):
            problems.append((start, "a source's prediction has no locator"))
    return problems


def report(problems: dict[str, list[tuple[int, str]]]) -> str:
    return "\n".join(
        f"docs/{page}:{line}: {reason} (section, Figure, Table, Appendix, eq. or abstract)"
        for page, found in problems.items()
        for line, reason in found
    )


FAILING_PAGE = """# A planted page

## What the literature predicts

- **Press et al. (2022)**: ALiBi does not degrade past the training length.

## The lesson

Every model here is trained to predict the next token (Vaswani et al., 2017).

As the papers predict, interpolation is worse still without training.

| reader | predicted | from |
| --- | --- | --- |
| rolling cache of W | the loss rises once BOS is dropped | Xiao et al. 2023 |

Zoology predicts that attention keeps recall.

What the papers predict:

- Xiao et al. 2023: the loss rises once BOS is dropped.

## Further reading

- Arora et al., [Zoology: Measuring and Improving Recall](https://arxiv.org/abs/2312.04927), 2023.
"""

PASSING_PAGE = """# A planted page

## What the literature predicts

- **Press et al. (2022), Figure 1**: ALiBi does not degrade past the training length.

## The lesson

Every model here is trained to predict the next token (Vaswani et al., 2017); the last
prediction of a one-layer model changes.

As the papers predict (Chen et al., their section 2.3), interpolation is more stable.

| reader | predicted | from |
| --- | --- | --- |
| rolling cache of W | the loss rises once BOS is dropped | Xiao et al. 2023, Figure 1 |
| learned sinks | less lost | this page's reasoning |

<!-- prediction: the page's own reasoning, not Zoology's -->
Zoology predicts nothing of the kind; this page predicts it.

```python
# Zoology predicts, in a code block: not prose
```

## Further reading

- Arora et al., [Zoology: Measuring and Improving Recall](https://arxiv.org/abs/2312.04927), 2023.
"""


def test_a_planted_page_without_locators_fails():
    found = unlocated(FAILING_PAGE)
    lines = FAILING_PAGE.splitlines()
    flagged = [lines[n - 1] for n, _ in found]
    assert len(found) == 5, found
    assert flagged[0].startswith("- **Press et al.")
    assert flagged[1].startswith("As the papers predict")
    assert flagged[2].startswith("| rolling cache")
    assert flagged[3].startswith("Zoology predicts")  # a paper named from Further reading
    assert flagged[4].startswith("- Xiao et al.")  # a list introduced as predictions
    # the next-token sense, with a source named, is not a prediction of that source
    assert not any(line.startswith("Every model") for line in flagged)


def test_a_planted_page_with_locators_passes():
    assert unlocated(PASSING_PAGE) == []


def test_the_exemption_covers_only_the_next_block():
    page = PASSING_PAGE.replace(
        "Zoology predicts nothing of the kind; this page predicts it.",
        "Zoology predicts nothing of the kind.\n\nZoology predicts this too.",
    )
    found = unlocated(page)
    assert [page.splitlines()[n - 1] for n, _ in found] == ["Zoology predicts this too."]


def test_source_names_come_from_further_reading():
    text = (
        "## Further reading\n\n- Xiao et al., [Efficient Streaming Language Models with "
        "Attention Sinks](https://arxiv.org/abs/2309.17453), 2023 (StreamingLLM): sinks.\n"
        "- Arora et al., [Zoology: Measuring Recall](https://arxiv.org/abs/2312.04927), 2023.\n"
    )
    assert source_names(text) == {"StreamingLLM", "Zoology"}


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_prediction_on_the_page_has_a_locator(page):
    problems = unlocated(page.read_text())
    assert not problems, report({page.name: problems})
