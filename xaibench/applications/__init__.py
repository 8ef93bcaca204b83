"""Applications of a benchmark run (the PASTA paper's appendix E), built on the runner.

:mod:`~xaibench.applications.settings` runs explainer settings (an explainer with parameters) on
one track through :class:`~xaibench.runner.run.Runner` and reads their per-sample objective
values; :mod:`~xaibench.applications.tune` picks the setting of a parameter grid with the best
mean objective (``xaibench tune``); :mod:`~xaibench.applications.select` picks, per image, the
setting with the best objective (``xaibench select``). Explanations and records go through the
runner's cache and workers, so a repeated search recomputes nothing. docs/applications.md.
"""
