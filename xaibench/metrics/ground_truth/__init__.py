"""The ``ground_truth`` family (DESIGN 11, faithfulness with a known answer): signed maps scored
against an attribution built into the model (A*, and exact per-region contributions).

``formulas.py``: the pure numpy definitions; ``batch.py``: the resized signed maps and known
answers of one batch, shared through its memo; ``metrics.py``: the four registered metrics."""
