"""tests/browser/tiers.py's choice of the API pages that get every check, on made-up built
sites (no browser): the largest, the one with the most formulas, one by the commit's rotation;
and where the rotation's number comes from."""

import subprocess

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
    root, pages = made_up(tmp_path / "site", with_math=True)
    plan = tiers.plan(root, pages, (number, source))
    assert list(plan.full)[2] == "/reference/a/"  # the first of the rest, sorted
    assert plan.full["/reference/a/"] == source


def test_the_rotation_number_is_the_commit_unless_the_variable_says(monkeypatch):
    monkeypatch.delenv(tiers.ROTATION_ENV, raising=False)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert tiers.rotation_key(ROOT) == (int(head, 16), f"HEAD {head[:12]}")
    monkeypatch.setenv(tiers.ROTATION_ENV, "1f")
    assert tiers.rotation_key(ROOT) == (31, f"{tiers.ROTATION_ENV}=1f")
    monkeypatch.setenv(tiers.ROTATION_ENV, "main")
    with pytest.raises(ValueError, match=r"GUIDE_API_ROTATION='main' is not a hexadecimal"):
        tiers.rotation_key(ROOT)
