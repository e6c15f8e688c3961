"""tests/browser/tiers.py's choice of the API pages that get every check, on made-up built
sites (no browser): the largest, the one with the most formulas, one by the commit's rotation;
and where the rotation's number comes from."""

import os
import subprocess
import sys

import pytest

from lab.shared.common import ROOT
from tests.browser import tiers

API = '<article><div class="doc doc-object doc-module">{body}</div></article>'


def site(tmp_path, pages: dict[str, str]):
    """A built site of ``pages`` (path -> the HTML of its file)."""
    for page, html in pages.items():
        path = tiers.page_file(tmp_path, page)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    return tmp_path, list(pages)


def api(n_chars: int, formulas: int = 0) -> str:
    return API.format(body="x" * n_chars + '<span class="arithmatex">m</span>' * formulas)


def made_up(tmp_path, with_math: bool):
    return site(
        tmp_path,
        {
            "/": "<article>home</article>",
            "/attention/": "<article>" + "y" * 9000 + "</article>",  # larger, but no API page
            "/reference/": "<article>the index's table</article>",
            "/reference/prose/": "<article>" + "z" * 5000 + "</article>",  # no mkdocstrings
            "/reference/a/": api(100),
            "/reference/b/": api(900),  # the largest
            "/reference/c/": api(200, formulas=3 if with_math else 0),
            "/reference/d/": api(300, formulas=1 if with_math else 0),
            "/reference/e/": api(150),
            "/404.html": "<article>404</article>",
        },
    )


def test_the_largest_the_most_math_and_the_commits_rotation(tmp_path):
    root, pages = made_up(tmp_path, with_math=True)
    for number in range(6):
        plan = tiers.plan(root, pages, (number, f"HEAD {number:x}"))
        assert plan.api == tuple(f"/reference/{x}/" for x in "abcde")
        rest = ["/reference/a/", "/reference/d/", "/reference/e/"]  # sorted, b and c taken
        assert list(plan.full) == ["/reference/b/", "/reference/c/", rest[number % 3]]
        assert plan.full["/reference/b/"].startswith("the largest")
        assert plan.full["/reference/c/"] == "the most formulas, 3"
        assert plan.full[rest[number % 3]] == f"the rotation: HEAD {number:x} % 3 = {number % 3}"
        cheap = [p for p in plan.api if p not in plan.full]
        assert all(plan.checks(p) == "cheap checks (API page)" for p in cheap)
        assert not any(plan.every_check(p) for p in cheap)
        for page in ("/", "/attention/", "/reference/", "/reference/prose/", "/404.html"):
            assert plan.every_check(page) and plan.checks(page) == "every check"


def test_without_math_the_rotation_takes_two_pages_and_covers_all_over_commits(tmp_path):
    root, pages = made_up(tmp_path, with_math=False)
    seen = set()
    for number in range(4):
        plan = tiers.plan(root, pages, (number, "HEAD"))
        rest = ["/reference/a/", "/reference/c/", "/reference/d/", "/reference/e/"]
        picked = [rest[number % 4], rest[(number + 1) % 4]]
        assert list(plan.full) == ["/reference/b/", *picked]
        seen |= set(plan.full)
    assert seen == set(plan.api)  # every API page got every check at some commit
    assert "2 got the cheap checks only" in plan.lines()[0]


def test_without_git_or_variable_the_first_pages(tmp_path, monkeypatch):
    monkeypatch.delenv(tiers.ROTATION_ENV, raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above
    number, source = tiers.rotation_key(tmp_path)
    assert number is None and source.startswith("no git commit here")
    assert tiers.history(tmp_path).changed is None
    root, pages = made_up(tmp_path / "site", with_math=True)
    plan = tiers.plan(root, pages, (number, source))
    assert list(plan.full)[2] == "/reference/a/"  # the first of the rest, sorted
    assert plan.full["/reference/a/"] == source


def git(*args: str) -> str | None:
    """git's output in the checkout; None in a copy of the files without .git (a source
    archive's), or without git: the suite runs there too, and these tests check its
    fallback there."""
    try:
        proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    except FileNotFoundError:
        return None
    if proc.returncode != 0 and "not a git repository" in proc.stderr:
        return None
    proc.check_returncode()  # any other error of git's is one
    return proc.stdout.strip()


def test_the_rotation_number_is_the_commit_count_unless_the_variable_says(monkeypatch):
    monkeypatch.delenv(tiers.ROTATION_ENV, raising=False)
    head = git("rev-parse", "HEAD")
    if head is None:  # no .git: the first pages, said so
        assert tiers.rotation_key(ROOT) == (
            None,
            f"no git commit here and no {tiers.ROTATION_ENV}: the first pages",
        )
    elif git("rev-parse", "--is-shallow-repository") == "true":
        assert tiers.rotation_key(ROOT).number == int(head, 16)
    else:
        count = int(git("rev-list", "--count", "--first-parent", "HEAD"))
        assert tiers.rotation_key(ROOT) == (count, f"commit {count} (HEAD {head[:12]})")
    monkeypatch.setenv(tiers.ROTATION_ENV, "31")
    assert tiers.rotation_key(ROOT) == (31, f"{tiers.ROTATION_ENV}=31")
    monkeypatch.setenv(tiers.ROTATION_ENV, "main")
    with pytest.raises(ValueError, match=r"GUIDE_ROTATION='main' is not a whole number"):
        tiers.rotation_key(ROOT)


def test_the_history_is_the_last_ten_first_parent_commits():
    log = git("log", "--first-parent", "-m", "-n10", "--name-only", "--format=")
    changed = tiers.history(ROOT).changed
    if log is None:  # no .git: no page counts as changed
        assert changed is None
        return
    assert changed == {line for line in log.splitlines() if line}
    assert changed, "ten commits changed nothing?"


CONTENT = ["/", "/a/", "/b/", "/c/", "/d/", "/e/", "/f/", "/404.html"]


def docs_of(tmp_path):
    """A docs/ with a page for each content page but 404, /c/ including snippets/x.py."""
    docs = tmp_path / "repo" / "docs"
    docs.mkdir(parents=True)
    for page in CONTENT[:-1]:
        (docs / f"{page.strip('/') or 'index'}.md").write_text("# T\n", encoding="utf-8")
    (docs / "c.md").write_text('```python\n--8<-- "snippets/x.py:imports"\n```\n')
    return docs


def test_content_pages_changed_lately_or_in_the_rotation_get_every_check(tmp_path):
    """A page whose source or included file changed gets every check, with the files named;
    over any five consecutive commit counts every content page gets every check."""
    root, pages = made_up(tmp_path / "site", with_math=False)
    pages = [p for p in pages if p.startswith("/reference/") and len(p) == len("/reference/a/")]
    site_pages = pages + CONTENT
    for page in CONTENT:
        tiers.page_file(root, page).parent.mkdir(parents=True, exist_ok=True)
    docs = docs_of(tmp_path)
    changes = tiers.History(frozenset({"snippets/x.py", "docs/e.md", "lab/y.py"}), "3 files")
    seen_by_rotation: dict[int, set[str]] = {}
    for number in range(20):
        plan = tiers.plan(root, site_pages, (number, f"commit {number}"), changes, docs)
        assert plan.content == tuple(sorted(CONTENT))
        assert plan.checks("/c/") == "every check (changed in the last 10 commits: snippets/x.py)"
        assert plan.every_check("/e/") and "docs/e.md" in plan.checks("/e/")
        rotated = {p for p, why in plan.content_full.items() if why.startswith("the rotation")}
        assert rotated == {p for i, p in enumerate(sorted(CONTENT)) if i % 5 == number % 5} - {
            "/c/",
            "/e/",
        }
        seen_by_rotation[number] = rotated | {"/c/", "/e/"}
        for page in set(CONTENT) - set(plan.content_full):
            assert not plan.every_check(page)
            assert plan.checks(page).startswith("cheap checks (unchanged")
        lines = "\n".join(plan.lines())
        assert "/c/ (changed in the last 10 commits: snippets/x.py)" in lines
        assert "content pages with the cheap checks only" in lines
    for first in range(16):  # any five consecutive commits: every content page
        window = set().union(*(seen_by_rotation[n] for n in range(first, first + 5)))
        assert window == set(CONTENT), (first, set(CONTENT) - window)


def test_the_git_dependent_parts_in_a_copy_without_git(tmp_path):
    """The suite's git-dependent parts (tiers.rotation_key, tiers.history and the plan they
    feed), run in a copy of the tracked files with no .git, as a source archive gives them:
    no error, the first pages, no page counted as changed, and the report says so."""
    copy = tmp_path / "copy"
    # tests/__init__.py too: else `tests` would be a namespace package in the copy, and the
    # checkout's own (on the venv's path) would be imported instead of the copy's
    folders = ("docs", "snippets", "tests/__init__.py", "tests/browser", "lab/__init__.py")
    folders += ("lab/shared",)
    tracked = git("ls-files", *folders)
    if tracked is None:  # this checkout is such a copy already: its files
        found = [ROOT / f for f in folders if (ROOT / f).is_file()]
        found += [p for f in folders for p in (ROOT / f).rglob("*") if p.is_file()]
        tracked = "\n".join(
            p.relative_to(ROOT).as_posix() for p in found if "__pycache__" not in p.parts
        )
    for name in tracked.splitlines():
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tests.browser import tiers\n"
        "root = Path(sys.argv[1])\n"
        "assert Path(tiers.__file__).is_relative_to(root), tiers.__file__\n"
        "key, history = tiers.rotation_key(root), tiers.history(root)\n"
        "print(key.number, history.changed)\n"
        "pages = sorted({'/' + p.relative_to(root / 'docs').with_suffix('').as_posix() + '/'\n"
        "    for p in (root / 'docs').glob('*.md')})\n"
        "plan = tiers.plan(root, pages, key, history, root / 'docs')\n"
        "print('\\n'.join(plan.lines()))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_CEILING_DIRECTORIES": str(tmp_path), "PYTHONPATH": str(copy)}
    env.pop(tiers.ROTATION_ENV, None)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(copy)],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("None None\n"), proc.stdout
    assert "changed files: no git history here" in proc.stdout, proc.stdout
    assert "rotation: no git commit here" in proc.stdout, proc.stdout
    assert "the rotation: no git commit here" in proc.stdout, proc.stdout  # slot 0 taken
