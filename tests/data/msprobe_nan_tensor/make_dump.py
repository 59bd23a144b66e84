"""A real msprobe 26.2.0 `task: tensor` dump pair where NaN appears on one side only, for the tensor-pair drill-down.

usage (writes ./target and ./golden next to this file):
    /work/venv-msprobe/bin/python tests/data/msprobe_nan_tensor/make_dump.py
A Linear(8, 6) then sqrt: the golden run takes sqrt(|y|), the target sqrt(y - 0.05) in bfloat16, so the
target's output holds NaN where y < 0.05 (positions the golden side has finite values) and its finite
elements differ by bfloat16 rounding. Both runs dump with PrecisionDebugger, level L1, in one process each.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

RUN = r'''
import sys, torch
from msprobe.pytorch import PrecisionDebugger, seed_all
variant, cfg = sys.argv[1], sys.argv[2]
seed_all(seed=1234, mode=True)
debugger = PrecisionDebugger(config_path=cfg)
torch.manual_seed(0)
layer = torch.nn.Linear(8, 6)
x = torch.randn(4, 8)
if variant == "target":
    layer, x = layer.to(torch.bfloat16), x.to(torch.bfloat16)
debugger.start()
y = layer(x)
z = torch.sqrt(y - 0.05) if variant == "target" else torch.sqrt(torch.abs(y))
debugger.stop()
debugger.step()
'''


def main() -> None:
    for variant in ("target", "golden"):
        out = HERE / variant
        shutil.rmtree(out, ignore_errors=True)
        cfg = HERE / f"cfg_{variant}.json"
        cfg.write_text(json.dumps({"task": "tensor", "dump_path": str(out), "rank": [], "step": [], "level": "L1",
                                   "async_dump": False, "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}))
        subprocess.run([sys.executable, "-c", RUN, variant, str(cfg)], check=True, cwd=HERE)
        cfg.unlink()


if __name__ == "__main__":
    main()
