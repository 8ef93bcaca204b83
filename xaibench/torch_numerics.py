"""The process-wide numerical settings of torch every process of a run takes (the runner, each worker).

- intra-op threads: a fixed count (one by default) keeps float reductions, hence numbers, the
  same between runs;
- cuDNN deterministic and without autotuning: the same numbers on the same machine (DESIGN 6);
- **no TF32**: torch lets cuDNN run float32 convolutions in TensorFloat-32 (10-bit mantissa) by
  default on Ampere and later GPUs. Measured on an H200 (``bench/gpu_check.sh --only
  default-suite``, 2026-11-30), the default suite on CUDA with TF32 differed from the CPU run in
  194 values by more than 1e-3 (``deletion`` of ``gradient`` on photos 0.105 against 0.095): the
  rounding moves gradients, hence pixel orders. Full float32 keeps a GPU's numbers those of the
  CPU's up to reduction order. No effect on the CPU.
"""

from __future__ import annotations


def fix_torch_numerics(threads: int) -> None:
    """Set torch's threads (``threads``, at least 1), deterministic cuDNN and full-float32 matmul and
    convolution (no TF32), for this process and the processes it forks."""
    import torch

    torch.set_num_threads(max(1, int(threads)))
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
