"""Meta-evaluation: how far each metric can be trusted on each track (DESIGN 9, ``xaibench meta``).

- :mod:`~xaibench.metaeval.rankings`: Kendall tau-b, rank stability and agreement under paired resampling;
- :mod:`~xaibench.metaeval.assess`: one card per (track, metric) from the submissions' per-sample values;
- :mod:`~xaibench.metaeval.files`: ``meta.json`` and ``meta.csv``;
- :mod:`~xaibench.metaeval.submissions`: the meta-evaluation of a submissions folder, end to end;
- :mod:`~xaibench.metaeval.pipeline`: the meta-evaluation of a run, end to end (``xaibench meta`` with a suite).
"""
