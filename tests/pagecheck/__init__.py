"""Run every code block of every page in ``docs/``, as the reader sees it.

The pytest plugin is ``tests.pagecheck.plugin`` (enabled by the repository's ``conftest.py``);
``hooks.page_parser`` reads a page (the build's hooks read pages with it too), ``runner`` runs
its blocks. For each Markdown page
it finds the fenced code blocks, expands ``--8<--`` includes with the very pymdownx snippet
preprocessor and settings that ``mkdocs.yml`` gives the site, and then:

* runs the page's ``python`` blocks in order in one namespace, like a notebook;
* runs ``bash`` blocks with bash from the repository root;
* refuses a fence it would not run but a reader would take for runnable code (``py``,
  ``pycon``, ``console``, ...): it must be written as ``python`` or ``bash``;
* compares what a block printed with the block titled ``Output`` that follows it, if any;
* skips a block only when the comment just above it says ``<!-- check: skip REASON -->``.

pytest-codeblocks, the usual tool, reads raw Markdown: it would run an include line as Python
and it gives every block a fresh namespace. Why we replaced it is in ``docs/contributing.md``.

The Markdown conventions are documented for contributors on that page too.
"""
