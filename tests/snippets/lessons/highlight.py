"""A lesson shown as a change of an earlier lesson: the fence that includes its
section highlights (hl_lines) exactly the lines that differ from the earlier
section, so that the highlight cannot drift from the code.

Used by the lessons' tests of the pages that show such a change (generation,
positions, kv heads): `assert_highlights_are_the_changes(page, {section: earlier section})`.
"""

import difflib
import re
from pathlib import Path

from hooks.page_parser import load_site

ROOT = Path(__file__).resolve().parents[3]
_FENCE = re.compile(r"^```python\b(?P<info>.*)$")
_INCLUDE = re.compile(r'^--8<-- "(?P<section>[^"]+)"$')


def hl_lines(info: str) -> set[int]:
    """The line numbers of pymdownx.highlight's hl_lines="1 3-5" option."""
    found = re.search(r'hl_lines="(?P<spec>[^"]*)"', info)
    lines: set[int] = set()
    for part in (found["spec"] if found else "").split():
        first, _, last = part.partition("-")
        lines.update(range(int(first), int(last or first) + 1))
    return lines


def highlighted_fences(page: Path) -> dict[str, set[int]]:
    """Each fence with hl_lines that includes one section: section -> its lines."""
    lines, fences = page.read_text(encoding="utf-8").splitlines(), {}
    for i, line in enumerate(lines):
        opening = _FENCE.match(line)
        if opening and "hl_lines=" in opening["info"]:
            include = _INCLUDE.match(lines[i + 1])
            assert include and lines[i + 2] == "```", (
                f"{page.name}:{i + 1}: a highlighted fence includes one section "
                "and nothing else, so that its line numbers are the section's"
            )
            fences[include["section"]] = hl_lines(opening["info"])
    return fences


def changed_lines(before: list[str], after: list[str]) -> set[int]:
    """1-based numbers of the lines of `after` that are not lines of `before`."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return {
        j + 1
        for tag, _, _, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
        for j in range(j1, j2)
    }


def assert_highlights_are_the_changes(page: Path, earlier: dict[str, str]) -> None:
    """The page's highlighted fences are exactly the sections of `earlier`'s keys,
    and each highlights the lines that differ from the section it changes."""
    expand = load_site(ROOT / "mkdocs.yml").expand
    fences = highlighted_fences(page)
    assert set(fences) == set(earlier)  # every changed class is shown as a change
    for name, before_name in earlier.items():
        before = expand([f'--8<-- "{before_name}"'])
        after = expand([f'--8<-- "{name}"'])
        changed = changed_lines(before, after)
        assert changed, f"{name} is the same as {before_name}"
        shown = "\n".join(f"{n:3} {after[n - 1]}" for n in sorted(changed))
        assert fences[name] == changed, f"{name}: the lines that differ are\n{shown}"
