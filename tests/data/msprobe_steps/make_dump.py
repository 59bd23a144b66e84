# A real 3-step msprobe statistics dump of a tiny training loop on CPU (msprobe's PrecisionDebugger, one rank).
# Steps 0 and 1 train normally; at step 2 one weight of fc2 is set to NaN before the forward, so fc2's output,
# the loss and every gradient behind it are NaN there. usage: python make_dump.py <out dir>
import json
import os
import sys

import torch


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def main(out: str) -> None:
    from msprobe.pytorch import PrecisionDebugger, seed_all

    cfg = os.path.join(out, "config.json")
    with open(cfg, "w") as fh:
        json.dump({"task": "statistics", "dump_path": out, "rank": [], "step": [0, 1, 2], "level": "mix",
                   "async_dump": False, "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                       "summary_mode": "statistics"}}, fh)
    seed_all(seed=1234, mode=False)
    debugger = PrecisionDebugger(config_path=cfg)
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(0)
    for step in range(3):
        x, y = torch.randn(4, 8), torch.randn(4, 4)
        if step == 2:
            with torch.no_grad():
                model.fc2.weight[1, 3] = float("nan")
        debugger.start(model=model)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        debugger.stop()
        debugger.step()
        opt.step()
        opt.zero_grad()
    os.remove(cfg)


if __name__ == "__main__":
    target = os.path.abspath(sys.argv[1])
    os.makedirs(target, exist_ok=True)
    main(target)
