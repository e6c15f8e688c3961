"""snippets.core: see the layering in snippets/__init__.py."""
