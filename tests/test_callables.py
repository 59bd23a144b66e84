"""Models as users write them: plain functions, (model, args, kwargs), torch.compile'd modules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn  # noqa: E402

import ascend_tui  # noqa: E402
from ascend_tui import cli  # noqa: E402
from ascend_tui.report import build_report  # noqa: E402

pytestmark = pytest.mark.live


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.fc(x)
        return h if mask is None else h + mask


def test_a_compiled_model_is_captured_eagerly_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(0)
    net = Net()
    inv = ascend_tui.investigate(torch.compile(net), (torch.randn(4, 8),), checks=("overflow",), device="cpu",
                                 detail="full")  # every operator: the eager graph is the point
    assert {n.id for n in inv.graph if n.kind == "param"} == {"param:fc.weight", "param:fc.bias"}
    assert "fc/addmm.0" in inv.graph, "ids are the original module's, not `_orig_mod/...`"
    (note,) = inv.run.extra["notes"]
    assert "torch.compile" in note and "compiled kernels were not what ran" in note
    assert build_report(inv)["run"]["notes"] == [note]
    model = tmp_path / "compiled.py"
    model.write_text("import torch\n"
                     "def build():\n"
                     "    return torch.compile(torch.nn.Linear(8, 8)), (torch.randn(2, 8),)\n")
    out = tmp_path / "r.json"
    assert cli.main(["check", str(model), "--json", str(out), "-q"]) == 0
    assert "note: the model is torch.compile'd" in capsys.readouterr().out
    assert json.loads(out.read_text())["run"]["notes"][0].startswith("the model is torch.compile'd")


async def test_the_app_header_says_a_compiled_model_ran_eagerly() -> None:
    from ascend_tui.app.app import InvestigatorApp

    inv = ascend_tui.investigate(torch.compile(Net()), (torch.randn(4, 8),), checks=(), device="cpu")
    app = InvestigatorApp(inv, theme="textual-dark")
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        assert "compiled model captured eagerly" in app.sub_title


def test_plain_functions_and_args_with_kwargs(tmp_path: Path) -> None:
    model = tmp_path / "fn.py"
    model.write_text("import torch\n"
                     "def attend(q, k, *, scale):\n"
                     "    return torch.softmax(q @ k.T * scale, dim=-1)\n"
                     "def build():\n"
                     "    g = torch.Generator().manual_seed(0)\n"
                     "    q, k = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)\n"
                     "    return attend, (q, k), {'scale': torch.tensor(3e4)}\n")
    out = tmp_path / "r.json"
    assert cli.main(["check", str(model), "--dtype", "float16", "--json", str(out), "-q"]) == 1
    report = json.loads(out.read_text())
    first = next(f for f in report["findings"] if f["severity"] == "error")
    assert first["node"] == "mul.0" and first["kind"] == "inf"
    assert any("plain function" in n for n in report["run"]["notes"])
    # a module with positional and keyword inputs: placeholders by position and by name
    from ascend_tui.live.tensors import Inputs

    torch.manual_seed(0)
    inv = ascend_tui.investigate(Net(), Inputs((torch.randn(4, 8),), {"mask": torch.zeros(4, 8)}),
                                 checks=("overflow",), device="cpu", detail="full")
    assert {"input:0", "input:mask"} <= {n.id for n in inv.graph if n.kind == "input"}
    assert "add.0" in inv.graph and not inv.run.extra.get("notes")


def test_bad_factory_results_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "bad.py"
    model.write_text("import torch\ndef build():\n    return torch.nn.Linear(2, 2), [torch.ones(2)], 'x'\n")
    assert cli.main(["check", str(model), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a tuple and a dict" in err[0]
