"""Capture reports only what the model computed, where the user's code computed it.

Unwritten memory (`empty_like` before `bernoulli_` fills it) is never measured, so it cannot
make findings; source locations list only the user's frames, each line with its own file.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import torch  # in the test command (.[live,test]): a missing torch fails, never skips
from torch import nn  # noqa: E402

from ascend_tui import investigate  # noqa: E402
from ascend_tui.live.recording import capture  # noqa: E402
from ascend_tui.live.frames import is_user_file  # noqa: E402


class DropoutNet(nn.Module):
    """Linear -> train-mode dropout -> linear: dropout allocates its mask with `empty_like` and fills it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def test_train_mode_dropout_in_float16_makes_no_finding_from_unwritten_memory() -> None:
    torch.manual_seed(0)
    model = DropoutNet().train()
    x = torch.randn(16, 32)
    for _ in range(10):
        inv = investigate(model, (x,), checks=("overflow",), dtype="float16", detail="full")  # the ops themselves
        empties = [n.id for n in inv.graph if n.op_type in ("aten.empty_like", "aten.empty")]
        assert empties, "dropout allocates its mask with empty_like on the CPU"
        assert all(inv.stats.get(n) is None for n in empties), "allocator garbage is never measured"
        assert inv.reference is not None and all(inv.reference.get(n) is None for n in empties)
        blamed = [f for f in inv.findings if "empty" in f.node or "empty" in f.message]
        assert blamed == [], [f.message for f in blamed]


def test_the_op_that_writes_unwritten_memory_carries_the_statistics() -> None:
    torch.manual_seed(0)
    r = capture(DropoutNet().train(), (torch.randn(16, 32),))
    filled = next(n for n in r.graph if n.op_type == "aten.bernoulli_")
    s = r.stats.get(filled.id)
    assert s is not None and s.numel == 16 * 64 and s.nan_count == 0 and s.inf_count == 0
    assert s.min == 0.0 and s.max == 1.0, "the mask holds only zeros and ones once bernoulli_ wrote it"


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).exp()  # the line every location must name


def _frames(stack: tuple[str, ...]) -> list[tuple[str, int]]:
    out = []
    for line in stack:
        where, _, _ = line.partition(" in ")
        file, _, number = where.rpartition(":")
        out.append((file, int(number)))
    return out


def test_source_of_a_run_in_a_thread_pool_lists_only_user_frames() -> None:
    model = Plain()
    with ThreadPoolExecutor(max_workers=1) as pool:
        r = pool.submit(capture, model, (torch.randn(2, 4),)).result()
    src = r.graph.node("exp.0").source
    assert src is not None and src.file == __file__ and src.function == "forward"
    assert "the line every location must name" in open(src.file).read().splitlines()[src.line - 1]
    for file, number in _frames(src.stack):
        base = os.path.basename(file)
        assert base not in ("threading.py", "thread.py", "worker.py", "ascend-tui"), src.stack
        assert "concurrent" not in file and os.sep + "torch" + os.sep not in file, src.stack
        assert is_user_file(file)
        assert 1 <= number <= len(open(file).read().splitlines()), "each line number belongs to its own file"
    assert _frames(src.stack)[0] == (src.file, src.line)


def test_library_and_launcher_files_are_not_the_users() -> None:
    assert not is_user_file(threading.__file__)
    assert not is_user_file(torch.nn.modules.module.__file__)
    assert not is_user_file("<frozen runpy>")
    assert is_user_file(__file__)


def test_a_model_error_pairs_the_line_number_with_its_own_file(tmp_path) -> None:
    from ascend_tui.live.targets import model_error

    def forward() -> None:
        threading.Thread().join()  # raises inside the standard library

    model = tmp_path / "model.py"
    model.write_text("# the user's model file\n")
    try:
        forward()
    except RuntimeError as exc:
        err = model_error(exc, str(model), "the model's forward")
    line = forward.__code__.co_firstlineno + 1
    assert f"{__file__}:{line}: the model's forward raised RuntimeError" in str(err)
    assert "threading" not in str(err) and 'threading.py", line' not in err.user_traceback
