"""Steps of ``bench/gpu_check.py``: one module per step, each with ``run(cfg) -> dict``."""
