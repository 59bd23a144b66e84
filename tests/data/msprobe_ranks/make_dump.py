# A real 4-rank msprobe dump on CPU: torch.distributed (gloo) and msprobe's PrecisionDebugger in every rank.
# Rank 2's input holds a -1 where the others hold ones, so sqrt() gives NaN on rank 2 only;
# the all_reduce then hands the NaN to every rank. usage: python make_dump.py <out dir>
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank: int, world: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from msprobe.pytorch import PrecisionDebugger, seed_all

    import json
    cfg = os.path.join(out, "config.json")
    if rank == 0:
        with open(cfg, "w") as fh:
            json.dump({"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "mix",
                       "async_dump": False, "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                           "summary_mode": "statistics"}}, fh)
    dist.barrier()
    seed_all(seed=1234, mode=False)
    debugger = PrecisionDebugger(config_path=cfg)
    layer = torch.nn.Linear(8, 8)
    torch.manual_seed(0)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(8, 8))
    x = torch.ones(4, 8)
    if rank == 2:
        x[1, 3] = -1.0
    debugger.start(model=layer)
    h = layer(x)
    g = torch.sqrt(x) * h  # NaN on rank 2 only
    dist.all_reduce(g)
    y = torch.relu(g).sum()
    dist.all_reduce(y)  # a second collective: its NaN input is received on every rank, born on none
    debugger.stop()
    debugger.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    mp.spawn(run, args=(4, out), nprocs=4)
