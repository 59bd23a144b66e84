"""Make the LLM precision-compare dumps: a random-weight 2-layer Llama training step under real msprobe.

usage: /work/venv-msprobe/bin/python tests/data/llm_dumps/make_dumps.py OUT_DIR [CASE ...]
(with no CASE: the checked-in ones, written compact into OUT_DIR/CASE, then msprobe's own compare of bf16
against fp32 as msprobe_compare_bf16_vs_fp32.csv; `OUT_DIR --msprobe-compare` redoes only that.)
Cases: fp32, bf16, fp16 (the same weights cast); bf16_scaled (one weight x1.05 in the bf16 run);
bf16_noise (a hook adds noise to layer 0's MLP down_proj output, after msprobe dumped the module, so
the MLP's output is the first noisy record); fp32_backward / bf16_backward (data_mode backward);
fp32_steps / bf16_steps_late (two steps; the bf16 run scales the weight before step 1 only, so step 0
is clean and step 1 diverges); imprecise_tensor (task tensor, a small MLP whose gelu computes in
float16 inside a float32 op, for the reference-free check); fp32_tensor / bf16_tensor (task tensor
of the Llama, ~8 MB: made on request, not checked in).
LLM_DUMP_LAYERS / LLM_DUMP_HIDDEN make a bigger model (the benchmark's). Each case runs in its own
process (msprobe's hooks are process-global). No downloads: the model is built from a `LlamaConfig`
with seed 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

CASES = ("fp32", "bf16", "fp16", "bf16_scaled", "bf16_noise", "fp32_steps", "bf16_steps_late", "fp32_backward",
         "bf16_backward", "imprecise_tensor")  # the checked-in ones; fp32_tensor / bf16_tensor (~8 MB) on request
KEEP_STACKS = ("fp32", "bf16")  # stack.json is 40% of a dump: the other cases go without (the reader allows it)
SCALED = "model.layers.1.self_attn.o_proj"  # the weight the scaled case multiplies by 1.05
NOISY = "model.layers.0.mlp.down_proj"  # the module whose output the noise case perturbs


def _config(out: Path, case: str) -> Path:
    task = "tensor" if case.endswith("_tensor") else "statistics"
    mode = ["backward"] if case.endswith("_backward") else ["all"]
    cfg = {"task": task, "dump_path": str(out / case), "rank": [], "step": [], "level": "mix",
           "async_dump": False, task: {"scope": [], "list": [], "data_mode": mode}}
    if task == "statistics":
        cfg[task]["summary_mode"] = "statistics"
    path = out / f"cfg_{case}.json"
    path.write_text(json.dumps(cfg, indent=1))
    return path


def run_case(out: Path, case: str) -> None:
    """One training step (or two for *_steps) of the case under PrecisionDebugger."""
    import torch
    from msprobe.pytorch import PrecisionDebugger, seed_all
    from transformers import LlamaConfig, LlamaForCausalLM

    seed_all(seed=1234, mode=True)
    debugger = PrecisionDebugger(config_path=str(_config(out, case)))
    torch.manual_seed(0)
    layers, hidden = int(os.environ.get("LLM_DUMP_LAYERS", 2)), int(os.environ.get("LLM_DUMP_HIDDEN", 64))
    cfg = LlamaConfig(vocab_size=128, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      attn_implementation="eager")
    model = LlamaForCausalLM(cfg)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(case.split("_")[0], torch.float32)
    model = model.to(dtype)
    if case == "bf16_scaled":
        with torch.no_grad():
            model.get_submodule(SCALED).weight.mul_(1.05)
    if case == "bf16_noise":
        # registered before the debugger's own hooks, so the module's dumped output is already the noisy one;
        # aten ops are not hooked at level mix, so the call sequence (and every name) stays that of the clean run
        noise = torch.randn(2, 16, cfg.hidden_size, generator=torch.Generator().manual_seed(7)).to(dtype)
        aten = torch.ops.aten

        def add_noise(_mod, _inp, output):
            rms = aten.sqrt.default(aten.mean.default(aten.mul.Tensor(output, output)))
            return aten.add.Tensor(output, aten.mul.Tensor(noise, aten.mul.Tensor(rms, 0.5)))

        model.get_submodule(NOISY).register_forward_hook(add_noise)
    torch.manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(2 if "_steps" in case else 1):
        if case == "bf16_steps_late" and step == 1:
            with torch.no_grad():
                model.get_submodule(SCALED).weight.mul_(1.05)
        debugger.start(model=model)
        out_ = model(input_ids=ids, labels=ids)
        out_.loss.backward()
        debugger.stop()
        debugger.step()
        opt.step()  # outside the dump window: the optimizer's add_ records would triple the files
        opt.zero_grad()
    print(case, "loss", float(out_.loss.detach()))


def run_imprecise(out: Path) -> None:
    """A tensor dump of a small MLP whose gelu is a deliberately imprecise custom op (float16 inside)."""
    import torch
    import torch.nn.functional as F
    from msprobe.pytorch import PrecisionDebugger, seed_all

    exact_gelu = F.gelu

    def imprecise_gelu(x, approximate="none"):
        return exact_gelu(x.half(), approximate=approximate).to(x.dtype)

    F.gelu = imprecise_gelu  # before the debugger wraps the API, so the dump records it as Functional.gelu
    seed_all(seed=1234, mode=True)
    debugger = PrecisionDebugger(config_path=str(_config(out, "imprecise_tensor")))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16),
                                torch.nn.LayerNorm(16))
    x = torch.randn(4, 32)
    debugger.start(model=model)
    model(x).sum().backward()
    debugger.stop()
    debugger.step()
    print("imprecise_tensor done")


def main(argv: list[str]) -> None:
    out = Path(argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if len(argv) > 3 and argv[2] == "--one":
        shutil.rmtree(out / argv[3], ignore_errors=True)
        (run_imprecise(out) if argv[3] == "imprecise_tensor" else run_case(out, argv[3]))
        return
    if argv[2:] == ["--msprobe-compare"]:
        msprobe_compare(out)
        return
    for case in argv[2:] or CASES:
        subprocess.run([sys.executable, __file__, str(out), "--one", case], check=True)
        pack(out / case, keep_stack=case in KEEP_STACKS)
    if not argv[2:]:
        msprobe_compare(out)


def msprobe_compare(out: Path) -> None:
    """msprobe's own `compare` of bf16 against fp32, kept as the truth our CSV must equal (its stack column dropped)."""
    import csv
    import glob
    import tempfile

    rank = {c: Path(glob.glob(str(out / c / "step0" / "*"))[0]) for c in ("bf16", "fp32")}
    with tempfile.TemporaryDirectory() as tmp:
        msprobe = Path(sys.executable).parent / "msprobe"
        subprocess.run([str(msprobe), "compare", "-tp", str(rank["bf16"] / "dump.json"), "-gp",
                        str(rank["fp32"] / "dump.json"), "-o", tmp], check=True, capture_output=True)
        with open(sorted(glob.glob(f"{tmp}/compare_result*.csv"))[-1], newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    cols = [c for c in rows[0] if c != "NPU_Stack_Info"]
    with open(out / "msprobe_compare_bf16_vs_fp32.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)

def pack(case_dir: Path, keep_stack: bool) -> None:
    """Check-in form: JSON written compact (same content), stack.json only where kept, the config beside it."""
    for path in case_dir.rglob("*.json"):
        if path.name == "stack.json" and not keep_stack:
            path.unlink()
            continue
        path.write_text(json.dumps(json.loads(path.read_text()), separators=(",", ":")))


if __name__ == "__main__":
    main(sys.argv)
