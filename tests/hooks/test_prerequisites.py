"""The reading order (hooks/prerequisites.py): on the real mkdocs.yml and pages, read by
mkdocs' own config, nav and front-matter parsing, and on planted pages, both there and through
a real build of a tiny site that uses the hook."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mkdocs.config import load_config
from mkdocs.structure.files import get_files
from mkdocs.structure.nav import get_navigation

from hooks.prerequisites import page_problems, reading_order
from lab.shared.common import ROOT


@pytest.fixture(scope="module")
def site():
    """The real nav's order and every Markdown page's text and front matter, as mkdocs reads
    them for a build."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    nav = get_navigation(get_files(config), config)
    order, reference = reading_order(nav.items)
    pages = {}
    for page in nav.pages:
        if page.file.src_uri.endswith(".md"):
            page.read_source(config)
            pages[page.file.src_uri] = (page.markdown, dict(page.meta))
    return order, reference, pages, nav


def problems(site, name, markdown=None, meta=None):
    order, reference, pages, _ = site
    text, front = pages[name]
    return page_problems(
        name,
        text if markdown is None else markdown,
        front if meta is None else meta,
        order,
        reference,
    )


def test_the_nav_is_a_core_path_then_deep_dives_with_the_api_reference_last(site):
    order, reference, _, nav = site
    titles = [item.title for item in nav.items]
    assert titles == ["Home", "Core path", "Deep dives (optional)", "API reference"], titles
    core = nav.items[1]
    assert all(item.is_section for item in core.children), "the core path is in sections"
    assert len(core.children) >= 6, [item.title for item in core.children]
    assert all(item.is_page for item in nav.items[2].children), "deep dives are pages"
    assert order[-len(reference) :] == [p for p in order if p in reference]
    assert "contributing.md" not in order, "Writing a page is linked from the footer"


def test_every_real_page_keeps_the_reading_order(site):
    order, reference, pages, _ = site
    found = {name: problems(site, name) for name in pages}
    assert not any(found.values()), {k: v for k, v in found.items() if v}
    declared = [n for n in pages if n not in reference and n != "index.md"]
    assert declared and all("requires" in pages[n][1] for n in declared)
    # Not vacuous: most pages build on several earlier ones.
    assert sum(len(pages[n][1]["requires"]) for n in declared) > 2 * len(declared)


def test_a_planted_forward_prerequisite_is_caught_on_a_real_page(site):
    _, _, pages, _ = site
    text, meta = pages["tokenization.md"]
    planted = dict(meta, requires=[*meta["requires"], "attention.md"])
    found = problems(site, "tokenization.md", meta=planted)
    assert any("requires attention.md, which comes after it in the nav" in p for p in found)


def test_a_prerequisite_the_page_never_links_and_one_not_in_the_nav_are_caught(site):
    _, _, pages, _ = site
    meta = pages["masks.md"][1]
    found = problems(site, "masks.md", meta=dict(meta, requires=["conventions.md", "nope.md"]))
    assert "requires conventions.md but never links to it" in found
    assert "requires nope.md, which is not in the nav" in found
    found = problems(site, "masks.md", meta={})
    assert any("no 'requires' in its front matter" in p for p in found)


def test_a_next_link_that_skips_a_page_is_caught(site):
    text = site[2]["positions.md"][0]
    planted = text.replace("## Next\n", "## Next\n\nOn to [the model](transformer.md).\n", 1)
    found = problems(site, "positions.md", markdown=planted)
    assert any("must be the next page of the nav, fused-attention.md" in p for p in found)


def test_next_after_further_reading_is_caught(site):
    text = site[2]["positions.md"][0]
    start, end = text.index("## Next\n"), text.index("## Further reading\n")
    planted = text[:start] + text[end:] + "\n" + text[start:end]  # Next moved to the end
    found = problems(site, "positions.md", markdown=planted)
    assert "its '## Next' must come before '## Further reading', as on every page" in found
    assert not problems(site, "positions.md", markdown=text)


def test_a_learning_path_that_leaves_out_a_page_is_caught(site):
    text = site[2]["index.md"][0]
    planted = "\n".join(line for line in text.splitlines() if "(taming-softmax.md)" not in line)
    found = problems(site, "index.md", markdown=planted)
    assert any("missing: taming-softmax.md" in p for p in found), found


CONFIG = f"""site_name: order
theme: mkdocs
hooks:
  - {ROOT / "hooks" / "prerequisites.py"}
nav:
  - Home: index.md
  - First:
      - A: a.md
  - Second:
      - B: b.md
"""
HOME = "# Home\n\n## Learning path\n\n1. [A](a.md)\n2. [B](b.md)\n"
A = "---\nrequires: []\n---\n\n# A\n\n## Next\n\n[B](b.md).\n"
B = "---\nrequires: [a.md]\n---\n\n# B\n\nBuilt on [A](a.md).\n"


def build(tmp_path, a=A, b=B) -> subprocess.CompletedProcess:
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "mkdocs.yml").write_text(CONFIG)
    for name, text in {"index.md": HOME, "a.md": a, "b.md": b}.items():
        (docs / name).write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_site_in_reading_order_builds(tmp_path):
    done = build(tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_planted_page_that_requires_a_later_one_fails_the_build(tmp_path):
    planted = A.replace("requires: []", "requires: [b.md]").replace(
        "# A\n", "# A\n\nSee [B](b.md).\n"
    )
    done = build(tmp_path, a=planted)
    assert done.returncode != 0
    assert "a.md: out of reading order" in done.stderr, done.stderr
    assert "requires b.md, which comes after it in the nav (page 3 against 2)" in done.stderr
