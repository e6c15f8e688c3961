"""The project's tooling: command lines, benchmarks, result files, plots, caches.

Pages show snippets/; lab/ runs them. The modules at the top of lab/ are the
commands, about one per page: `python -m lab.<module> --help`. What they share is
in shared/ (paths, result files, the command skeleton, the plotting style),
recipes/ (models trained for several pages or the model cache), oracle/
(transformers as the reference) and parts/ (pieces of one command).
"""
