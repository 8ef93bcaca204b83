"""What keeping freed memory in the heap (``xaibench/allocator.py``) buys on CPU forwards.

Runs no-grad forwards of EfficientNet-Lite0 on 224 px images (144 images, as a 16-step curve on
9 photos) in fresh subprocesses, with glibc's default malloc and with ``tune_allocator()``, at
16 and 64 images per forward, one torch thread. Prints wall and system seconds and the ratio
default / tuned, measured in this one run. Run: ``.venv/bin/python bench/bench_allocator.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, resource, sys, time
import torch
if sys.argv[1] == "tuned":
    from xaibench.allocator import tune_allocator
    assert tune_allocator()
from xaibench.models.efficientnet_lite import EfficientNetLite0
torch.set_num_threads(1)
model = EfficientNetLite0()
batch, total = int(sys.argv[2]), 144
x = torch.randn(total, 3, 224, 224)
with torch.no_grad():
    model.module(x[:2])
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for i in range(0, total, batch):
        model.module(x[i : i + batch])
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
print(json.dumps({"wall": t1 - t0, "sys": r1.ru_stime - r0.ru_stime}))
"""


def measure(mode: str, batch: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(batch)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    print(f"{'batch':>5} {'malloc':>8} {'wall s':>8} {'sys s':>7}")
    for batch in (16, 64):
        got = {mode: measure(mode, batch) for mode in ("default", "tuned")}
        for mode, r in got.items():
            print(f"{batch:>5} {mode:>8} {r['wall']:8.2f} {r['sys']:7.2f}")
        print(f"{batch:>5} ratio default/tuned wall {got['default']['wall'] / got['tuned']['wall']:.2f}")


if __name__ == "__main__":
    main()
