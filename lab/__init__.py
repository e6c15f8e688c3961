"""The project's tooling: command lines, benchmarks, result files, plots, caches.

Pages show snippets/; lab/ runs them: `python -m lab.<module> --help`.
"""
