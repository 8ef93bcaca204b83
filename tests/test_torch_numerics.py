"""Every process of a run computes in full float32 with deterministic cuDNN (xaibench.torch_numerics).

Measured on an H200 (docs/gpu.md, 2026-11-30): with torch's default TF32 convolutions the default
suite on CUDA differed from the CPU run in 194 values; without, in 13 (pixel orders of gradient maps
whose near-ties the two devices' reduction orders break differently).
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import torch
from xaibench.runner.run import prepare_process
prepare_process(2)
print(torch.get_num_threads(), torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
      torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
"""


def test_a_run_process_turns_tf32_off_and_cudnn_deterministic() -> None:
    # a fresh interpreter: torch's defaults there are TF32 convolutions on and cuDNN autotuning allowed
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "True", "False", "False", "False"]


def test_torch_defaults_are_what_the_settings_change() -> None:
    # without the call, cuDNN may use TF32: the setting above is not a no-op
    done = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.backends.cudnn.allow_tf32)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "True"
