"""What a strict read decodes while a block is at hand, and what it leaves to be read again: the block-dim rule's
mix block dims (MIX_AIC rows only), the bound-ness and host-bound rules' shared per-table work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ascend_tui.checks.profile import boundness, pmu_max, start_order, stream_order
from ascend_tui.checks.profile_advice import advise
from ascend_tui.graph.profile import Profile
from ascend_tui.readers.parse import fast_csv
from ascend_tui.readers.parse.skipped import Skipped
from ascend_tui.readers.profiler.csv_tables import read_kernels

HEADER = "Name,Type,Accelerator Core,Start Time(us),Duration(us),Block Dim,Mix Block Dim,aic_mac_ratio\r\n"


def _kernels(tmp_path: Path) -> Path:
    """MIX_AIC kernels, half with vector blocks that divide by 48, among AI_CORE and AI_CPU ones, in many blocks."""
    rows = []
    for i in range(3000):
        core, mix = [("AI_CORE", 0), ("MIX_AIC", 48 if i % 2 else 30), ("AI_CPU", 0)][i % 3]
        name, typ = ("fa_grad", "FlashAttentionGrad") if core == "MIX_AIC" else (f"op{i % 7}", f"Op{i % 7}")
        start = 1736408883704643 + (i * 37) % 2999  # not in time order
        block = 24 if core == "AI_CORE" else 20  # MIX_AIC: not a multiple of the 24 cube cores
        rows.append(f"{name},{typ},{core},{start}.{i % 1000:03d}\t,{100 + i % 9},{block},{mix},0.{i % 10}\r\n")
    path = tmp_path / "kernel_details.csv"
    path.write_text(HEADER + "".join(rows), newline="")
    return path


def test_mix_block_dims_of_mix_kernels_are_read_with_the_block_and_the_others_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _kernels(tmp_path)
    want = read_kernels(path)  # a plain read keeps the bytes: every column as written
    rereads: list[int] = []
    real = fast_csv.Split._reread

    def counted(self: fast_csv.Split) -> object:
        if self.released:
            rereads.append(self.n)
        return real(self)

    monkeypatch.setattr(fast_csv.Split, "_reread", counted)
    got = read_kernels(path, skipped=Skipped(str(path)), block=4096)  # a strict read lets the blocks go
    mix = np.flatnonzero(got.text["core"].codes == got.text["core"].code("MIX_AIC"))
    assert len(mix) == 1000
    assert got.ints.rows("mix_block_dim", mix).tolist() == want.ints["mix_block_dim"][mix].tolist()
    found = [f for f in advise(Profile("kernel_csv", got)) if f.kind == "block_dim"]
    assert [(f.op_type, f.metrics["count"]) for f in found] == [("FlashAttentionGrad", 500)]
    assert rereads == []  # the rule read the MIX_AIC rows decoded with their blocks
    assert got.ints["mix_block_dim"].tolist() == want.ints["mix_block_dim"].tolist()  # the rest: read again
    assert rereads


def test_one_pmu_max_and_one_start_order_a_table(tmp_path: Path) -> None:
    t = read_kernels(_kernels(tmp_path))
    best, which, have = pmu_max(t)
    assert pmu_max(t)[0] is best  # made once
    v = t.metrics["aic_mac_ratio"]
    assert np.array_equal(have, np.isfinite(v) & (v > 0)) and np.array_equal(best[have], v[have])
    assert set(which[have].tolist()) == {0} and (which[~have] == -1).all()
    bound = boundness(t)
    labels = np.array(bound.values, dtype=object)[bound.codes]
    assert set(labels[v > 0.8]) == {"cube"} and set(labels[(v > 0) & (v <= 0.8)]) == {"unbound"}
    order = start_order(t)
    assert np.array_equal(order, np.argsort(t.start_ns, kind="stable")) and start_order(t) is order
    assert np.array_equal(stream_order(t), np.lexsort((t.start_ns, t.ints["stream"])))
