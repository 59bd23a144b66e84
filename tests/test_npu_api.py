"""The NPU path as torch-npu 2.14.0 really is: the names ascend-tui calls are on the list made from the real wheel
(`tests/data/make_torch_npu_api.py`), and a fake `torch_npu` built to that list runs device selection, saturation mode with the
overflow flag, the two-pass capture and the live profiler hand-off on the CPU.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips

import ascend_tui
from ascend_tui.live import device as device_module
from ascend_tui.live.device import Device, probe, select

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "fake_npu"
API = json.loads((ROOT / "tests" / "data" / "torch_npu_api.json").read_text())
nn = torch.nn


def tool() -> Any:
    spec = importlib.util.spec_from_file_location("npu_api_tool", ROOT / "tests" / "data" / "make_torch_npu_api.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_package_calls_only_names_on_the_list_from_the_real_wheel() -> None:
    used = tool().used_names(ROOT / "ascend_tui")
    assert {"torch_npu.npu.utils.get_npu_overflow_flag", "torch_npu.npu.utils.clear_npu_overflow_flag",
            "torch_npu.npu.utils.is_support_inf_nan", "torch_npu.profiler._ExperimentalConfig",
            "acl.get_soc_name"} <= set(used), "the scan sees the calls the device layer and profiler make"
    unlisted = sorted(set(used) - set(API["names"]))
    assert not unlisted, f"not on tests/data/torch_npu_api.json (run tests/data/make_torch_npu_api.py --download): {unlisted}"
    assert API["torch_npu"] == "2.14.0" and API["wheel"].startswith("torch_npu-2.14.0-")
    missing = [n for n, e in API["names"].items() if e["kind"] in ("missing", "unknown")]
    assert not missing, f"called but not defined by torch-npu 2.14.0: {missing}"


def test_the_scan_follows_aliases() -> None:
    code = ("import importlib\nclass D:\n    def __init__(self):\n"
            "        self._npu = importlib.import_module('torch_npu')\n"
            "    def f(self):\n        npu = self._npu.npu\n        return npu.utils.get_npu_overflow_flag()\n")
    assert tool().file_names(ast.parse(code)) >= {"torch_npu.npu", "torch_npu.npu.utils.get_npu_overflow_flag"}


def _params(signature: str) -> list[str]:
    args = ast.parse(f"def f{signature}: pass").body[0].args  # type: ignore[attr-defined]
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return [n for n in names if n != "self"]


@pytest.fixture
def fake_npu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The fake torch_npu and acl importable, the device layer's "not installed" memo cleared, NPU tensors on the
    CPU (CPU torch has no npu device type)."""
    monkeypatch.syspath_prepend(str(FAKE))
    monkeypatch.setattr(device_module, "_NO_TORCH_NPU", [])
    monkeypatch.setattr(Device, "torch_device", property(lambda self: torch.device("cpu")))
    import torch_npu

    state = torch_npu._fake_state
    state.inf_nan, state.flag, state.flag_reads, state.trace_source = True, False, 0, None
    yield torch_npu
    for name in [m for m in sys.modules if m.split(".")[0] in ("torch_npu", "acl")]:
        del sys.modules[name]


def test_the_fake_is_built_to_the_list(fake_npu: Any) -> None:
    import acl

    roots = {"torch_npu": fake_npu, "acl": acl}
    for name, entry in API["names"].items():
        parts = name.split(".")
        obj = roots[parts[0]]
        for p in parts[1:]:
            obj = getattr(obj, p)
        if entry.get("signature") and entry["kind"] in ("function", "class"):
            target = obj.__init__ if inspect.isclass(obj) else obj
            got = [n for n in inspect.signature(target).parameters if n != "self"]
            assert got == _params(entry["signature"]), name
    listed = set(API["names"])
    for mod in [m for n, m in sys.modules.items() if n.split(".")[0] in ("torch_npu", "acl")]:
        for attr, value in vars(mod).items():
            if attr.startswith("__") or attr.startswith("_fake") or not callable(value):
                continue
            if getattr(value, "__module__", "").split(".")[0] in ("torch_npu", "acl"):
                dotted = f"{mod.__name__}.{attr}"
                assert dotted in listed or any(n.startswith(dotted + ".") for n in listed) or attr == "_state", \
                    f"the fake has {mod.__name__}.{attr}, which the package does not call"


def test_device_selection_finds_the_npu_and_names_it(fake_npu: Any) -> None:
    assert probe("npu") is None
    dev = select("auto")
    assert (dev.backend, dev.inf_nan_mode) == ("npu", True)
    info = dev.info()
    assert info.soc == "Ascend910B3" and info.memory_total == 64 << 30 and "torch_npu 2.14.0-fake" in info.notes
    fake_npu._fake_state.inf_nan = False
    assert dev.inf_nan_mode is False and dev.read_overflow_flag() is False
    fake_npu._fake_state.flag = True
    assert dev.read_overflow_flag() is True
    dev.clear_overflow_flag()
    assert dev.read_overflow_flag() is False
    state = dev.rng_state()
    a = torch.rand(3)
    dev.set_rng_state(state)
    assert torch.equal(a, torch.rand(3))


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Sequential(*(nn.Linear(8, 8) for _ in range(12)))
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.fc(self.pre(x)) * 3e6))


def test_saturation_mode_two_pass_capture_reads_the_flag_once_per_pass(fake_npu: Any) -> None:
    fake_npu._fake_state.inf_nan = False
    found = {}
    for detail in ("full", "module"):
        torch.manual_seed(0)
        model, x = Scaled(), torch.randn(4, 8) * 10
        fake_npu._fake_state.flag_reads = 0
        with fake_npu._fake_saturation():
            inv = ascend_tui.investigate(model, (x,), device="npu", dtype="float16", checks=("overflow",),
                                         detail=detail)
        (err,) = [f for f in inv.findings if f.severity == "error"]
        found[detail] = (err.node, err.kind, fake_npu._fake_state.flag_reads, inv.run.extra.get("capture"),
                         sum(1 for n in inv.graph.nodes if n.kind == "op"))
        assert inv.run.device["backend"] == "npu" and inv.run.device["inf_nan_mode"] is False
    assert found["full"][:2] == found["module"][:2] == ("mul.0", "saturation")
    ops = found["full"][2]
    assert ops >= found["full"][4] >= 30, "the full capture reads the flag after every operator"
    assert found["module"][2] < ops, "coarse-to-fine reads it per pass, and per operator only in the window"
    assert found["module"][3]["passes"] == 2 and found["module"][3]["window"]["suspect"] == "out"


def test_live_profiler_hand_off_reads_what_torch_npu_profiler_wrote(fake_npu: Any, fixtures: Path) -> None:
    fake_npu._fake_state.trace_source = fixtures / "profiler" / "level1_2025-01"
    torch.manual_seed(0)
    inv = ascend_tui.investigate(Scaled(), (torch.randn(4, 8),), device="npu", checks=("profile",),
                                 settings={"profile_steps": 1, "profile_warmup": 0})
    assert inv.profile is not None and inv.profile.kind == "live npu"
    assert len(inv.profile.kernels) > 0


def test_full_capture_with_backward_reads_the_flag_after_gradient_ops_too(fake_npu: Any) -> None:
    fake_npu._fake_state.inf_nan = False
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(4, 8)
    with fake_npu._fake_saturation():  # forward values are small; the gradient (1e6 per output) saturates float16
        inv = ascend_tui.investigate(model, (x,), device="npu", dtype="float16", checks=("overflow",),
                                     detail="full", backward=True, reference=None,
                                     loss=lambda out: out.float().sum() * 1e6)
    ops = [n for n in inv.graph.nodes if n.kind == "op"]
    assert any(n.phase == "backward" for n in ops)
    assert fake_npu._fake_state.flag_reads >= len(ops), "the flag is read after every operator, backward ones too"
    errors = [f for f in inv.findings if f.severity == "error"]
    assert errors and all(inv.graph.node(f.node).phase == "backward" for f in errors)
    assert any(f.kind == "saturation" and "the NPU overflow flag is set after `backward:" in f.message for f in errors)
