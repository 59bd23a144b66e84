"""NaN across ranks: a real 4-rank msprobe dump (gloo on CPU, tests/data/msprobe_ranks/make_dump.py) where rank 2
makes the NaN and an all_reduce hands it to the others."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ascend_tui.checks.nan_ranks import OpState, findings, trace
from ascend_tui.offline.open import kind_of, open_path

DUMP = Path(__file__).parent / "data" / "msprobe_ranks"


def test_rank2_makes_the_nan_and_the_others_receive_it() -> None:
    assert kind_of(DUMP) == "msprobe multi-rank dump" and kind_of(DUMP / "step0" / "rank1") == "msprobe dump"
    inv = open_path(DUMP)
    f = next(f for f in inv.findings if f.kind == "nan_across_ranks")
    assert f.severity == "error" and f.metrics["origin_ranks"] == [2]
    assert f.metrics["origin_ops"] == ["Torch.sqrt.0.forward"] and f.node == "sqrt.0"
    assert f.metrics["received"] == [{"rank": r, "via": "Distributed.all_reduce.0.forward", "from": [2]}
                                     for r in (0, 1, 3)]
    assert "born on rank 2 at Torch.sqrt.0.forward" in f.message and "ranks 0, 1, 3 only received it" in f.message
    assert inv.run.extra["rank"] == "rank2" and "showing rank2 (where the NaN/Inf is born)" in inv.run.extra["notes"][0]
    assert any(g.kind == "nan" and g.node == "sqrt.0" for g in inv.findings)  # rank 2's own overflow walk agrees


def test_a_step_folder_and_a_malformed_record(tmp_path: Path) -> None:
    step = tmp_path / "step0"
    shutil.copytree(DUMP / "step0", step)
    dump = step / "rank1" / "dump.json"
    data = json.loads(dump.read_text())
    data["data"]["Torch.relu.0.forward"] = 5
    dump.write_text(json.dumps(data))
    inv = open_path(step)
    f = next(f for f in inv.findings if f.kind == "nan_across_ranks")
    assert f.metrics["origin_ranks"] == [2] and "1 malformed records skipped across ranks" in inv.run.extra["notes"]
    (step / "rank3" / "dump.json").write_text("{broken")
    inv = open_path(step)
    f = next(f for f in inv.findings if f.kind == "nan_across_ranks")
    assert f.metrics["ranks"] == 3 and f.metrics["origin_ranks"] == [2]
    assert any(n.startswith("rank left out: ") and "rank3" in n for n in inv.run.extra["notes"])


def _ops(*spec: str) -> list[OpState]:
    """'name:io' records: i marks a non-finite input, o a non-finite output."""
    out = []
    for s in spec:
        name, _, flags = s.partition(":")
        out.append(OpState(name, "i" in flags, "o" in flags))
    return out


def test_the_rank_that_made_it_before_fewer_collectives_is_the_origin() -> None:
    ar0, ar1 = "Distributed.all_reduce.0.forward", "Distributed.all_reduce.1.forward"
    ranks = {0: _ops("Torch.mul.0.forward", ar0, "Torch.exp.0.forward:o", f"{ar1}:io"),
             1: _ops("Torch.div.0.forward:o", f"{ar0}:io", f"{ar1}:io"),
             2: _ops("Torch.mul.0.forward", f"{ar0}:o", f"{ar1}:io"),
             3: _ops("Torch.mul.0.forward", "Torch.add.0.forward")}
    got = trace(ranks)
    assert [s.rank for s in got.origins] == [1] and got.clean == (3,)
    by = {s.rank: s for s in got.ranks}
    assert by[2].how == "received" and by[2].from_ranks == (1,)
    assert by[0].how == "born" and by[0].collectives_before == 1
    f = findings(got, 4)[0]
    assert f.metrics["born_later"] == [{"rank": 0, "op": "Torch.exp.0.forward"}]
    assert "rank 0 made one later" in f.message


def test_no_rank_made_it() -> None:
    got = trace({0: _ops("Distributed.all_reduce.0.forward:o"), 1: _ops("Distributed.all_reduce.0.forward:o")})
    f = findings(got, 2)[0]
    assert not got.origins and "none made it" in f.message
    assert findings(trace({0: _ops("Torch.mul.0.forward")}), 1) == []
