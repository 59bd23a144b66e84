"""Communication evidence: the real exports read, msprof-analyze's rules reproduced, slow rank and slow link found."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ascend_tui.checks import communication as checks
from ascend_tui.cli.main import main
from ascend_tui.graph.communication import TOTAL_OP, CommOp, CommTask, Communication, Transport
from ascend_tui.offline.open import open_path
from ascend_tui.offline.profile_cluster import load_cluster
from ascend_tui.readers.profiler import communication as reader
from tests.conftest import FIXTURES
from tests.synthetic_cluster import make_cluster

PROF = FIXTURES / "profiler"
LEVEL2 = PROF / "level2_2025-11"
INSIGHT = FIXTURES / "peer" / "Ascend__msinsight" / "test" / "data" / "pytorch"


def _kinds(findings: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in findings:
        out.setdefault(f.kind, []).append(f)
    return out


def test_level2_communication_json_and_matrix() -> None:
    comm = reader.read_folder(LEVEL2 / "ASCEND_PROFILER_OUTPUT", 0)
    assert comm.skipped == 0 and len(comm.ops) == 17 and len(checks.real_ops(comm.ops)) == 15
    op = next(o for o in comm.ops if o.name == "hcom_batchSendRecv__128_4_1")
    assert (op.step, op.kind, op.group) == ("step13", "p2p", "3985310405473756128")
    assert op.elapse_ms == pytest.approx(158.55328) and op.wait_ms == pytest.approx(158.10198)
    hccs = op.transport("HCCS")
    assert hccs is not None and hccs.size_mb == pytest.approx(8.388608) and hccs.packets == ((8.388608, 1, 0.40168),)
    assert any(k.transport == "HCCS" and (k.src, k.dst) == (0, 1) for k in comm.links)
    assert comm.parallel["pipeline_model_parallel_size"] == 2 and comm.groups["pp"] == [0, 2]


def test_level2_small_packets_and_waits_as_msprof_analyze_counts_them() -> None:
    """msprof-analyze's advisor on this folder: 'SDMA: 30.00% of the ops under 16.0 MB, 0.8065 ms' (it counts the
    two Total Op Info rows as ops: 3 of 10); the same three ops and time here, of the 8 real SDMA ops."""
    inv = open_path(LEVEL2)
    found = _kinds(inv.findings)
    small = found["small_packets"][0]
    assert (small.metrics["transport"], small.metrics["small"], small.metrics["count"]) == ("SDMA", 3, 8)
    assert small.metrics["small_ms"] == pytest.approx(0.8065, abs=1e-4)
    assert set(small.metrics["ops"]) == {"hcom_batchSendRecv__128_4_1", "hcom_batchSendRecv__128_5_1",
                                         "hcom_allGather__612_7_1"}
    wait = found["comm_wait"][0]
    assert wait.metrics["wait_ratio"] == pytest.approx(1.0) and "waiting for peers" in wait.message
    exposed = found["exposed_communication"][0]
    assert exposed.metrics["share"] == pytest.approx(420174.26 / 809638.0, rel=1e-3)
    assert exposed.metrics["hideable_us"] == pytest.approx(231290.1, rel=1e-6)
    assert "communication" not in found  # the old one-line finding is replaced, not repeated
    assert found["pipeline_bubble"][0].metrics["stages"] == 2


def test_msprof_analyze_cluster_json_reads_each_rank() -> None:
    comm = reader.read_folder(PROF / "msprof_analyze")
    assert comm.skipped == 0 and {o.rank for o in comm.ops} == {0, 1}
    send = next(o for o in comm.ops if o.name == "hcom_send__822_0" and o.rank == 0)
    assert send.kind == "p2p" and send.transport("RDMA").bandwidth_gbs == pytest.approx(24.2778)
    assert any(k.transport == "RDMA" and (k.src, k.dst) == (0, 8) for k in comm.links)
    assert [0, 8] in comm.groups.values()


def test_db_export_analysis_tables_agree_with_its_communication_op_table(tmp_path: Path) -> None:
    """analysis.db (CommAnalyzer*, what communication.json holds) and COMMUNICATION_OP of the same run agree on
    every op's elapse; the folder read takes the wait/transit split from the first and tasks from the second."""
    out = INSIGHT / "db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
    db = reader.read_folder(out, 0)
    assert len(db.ops) == 4 and db.skipped == 0 and len(db.links) == 48
    raw = {o.name: o for o in reader.read_profiler_db(out / "ascend_pytorch_profiler_0.db").ops}
    for o in db.ops:
        assert o.step == "step50" and o.elapse_ms == pytest.approx(raw[o.name].elapse_ms, abs=0.05)
        assert o.wait_ms + o.transit_ms + o.idle_ms == pytest.approx(o.elapse_ms, rel=1e-3)
    assert {t.transport for t in db.tasks} >= {"SDMA", "LOCAL"} and len(db.tasks) == 296
    assert all(t.op.startswith("hcom_allReduce__210_") for t in db.tasks)


def test_profiler_db_alone(tmp_path: Path) -> None:
    src = INSIGHT / "db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
    shutil.copy(src, tmp_path / src.name)
    comm = reader.read_folder(tmp_path)
    assert len(comm.ops) == 4 and all(o.step == "step50" for o in comm.ops) and {o.rank for o in comm.ops} == {0}
    assert comm.ops[0].elapse_ms == pytest.approx((1736410576520382799 - 1736410576431631806) / 1e6)


def test_trace_hccl_tracks_give_tasks() -> None:
    from ascend_tui.readers.profiler.trace import read_events

    out = PROF / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT"
    comm = reader.tasks_of_trace(read_events(out / "trace_view.json"), 0)
    memcpy = [t for t in comm.tasks if t.name == "Memcpy"]
    assert memcpy and memcpy[0].op == "hcom_allReduce__586_0_1" and memcpy[0].size_bytes > 0
    assert comm.skipped == 0


def test_bad_records_are_skipped_and_counted(tmp_path: Path) -> None:
    out = tmp_path / "run" / "ASCEND_PROFILER_OUTPUT"
    shutil.copytree(LEVEL2 / "ASCEND_PROFILER_OUTPUT", out)
    data = json.loads((out / "communication.json").read_text())
    ops = data["step13"]["collective"]
    ops["hcom_allReduce__170_1_1@3985310491373102170"]["Communication Time Info"]["Elapse Time(ms)"] = "n/a"
    ops["broken@1"] = 7
    (out / "communication.json").chmod(0o644)
    (out / "communication.json").write_text(json.dumps(data))
    comm = reader.read_folder(out, 0)
    assert comm.skipped == 2 and len(comm.ops) == 16
    inv = open_path(tmp_path / "run")
    assert any(f.kind == "communication_skipped" and f.metrics["skipped"] == 2 for f in inv.findings)
    (out / "communication_matrix.json").chmod(0o644)
    (out / "communication_matrix.json").write_text("{not json")
    comm = reader.read_folder(out, 0)
    assert comm.links == [] and any("communication_matrix.json (unreadable" in s for s in comm.sources)


def test_planted_slow_rank_names_its_kernels_and_not_the_waiting_ranks(tmp_path: Path) -> None:
    root = make_cluster(tmp_path / "job", 8, slow_rank=3, factor=2.5)
    inv = load_cluster(root, workers=2)
    found = _kinds(inv.findings)
    assert len(found["slow_rank"]) == 1
    slow = found["slow_rank"][0]
    assert slow.metrics["rank"] == 3 and slow.metrics["stage"] == "computing"
    named = [k["type"] for k in slow.metrics["kernels"]]
    assert named[0] == "FlashAttentionScore" and "FlashAttentionScore" in slow.message
    assert slow.metrics["kernels"][0]["ratio"] == pytest.approx(2.5)
    assert not {"RmsNormGrad", "ZerosLike", "hcom_batchSendRecv_"} & set(named)
    wait = found["comm_wait"][0]
    assert wait.metrics["held_by"] == 3 and sorted(wait.metrics["waiting_ranks"]) == [0, 1, 2, 4, 5, 6, 7]
    assert "slow_link" not in found
    from ascend_tui.checks.story import finding_ids, tell

    causes = tell(inv.graph, inv.findings)
    cause = next(c for c in causes if c.kind == "slow_rank")
    assert cause.title == "time: rank 3 is the slow rank (FlashAttentionScore)"
    assert "waiting-follows-slow-rank" in cause.rules
    ids = dict(zip(finding_ids(inv.findings), inv.findings))
    assert {ids[i].kind for i in cause.explains} >= {"slow_rank", "comm_wait", "exposed_communication"}
    assert not any(c.kind == "comm_wait" for c in causes)  # the waiting ranks are not a cause of their own


def test_planted_slow_link(tmp_path: Path) -> None:
    root = make_cluster(tmp_path / "job", 6, slow_rank=None, slow_link=(4, 5))
    inv = load_cluster(root, workers=1)
    links = [f for f in inv.findings if f.kind == "slow_link" and f.severity == "warning"]
    assert len(links) == 1 and (links[0].metrics["src"], links[0].metrics["dst"]) == (4, 5)
    assert links[0].metrics["bandwidth_gbs"] == pytest.approx(19.0 / 4, rel=1e-3)
    assert links[0].metrics["peak_gbs"] == checks.PEAK_GBS["HCCS"]


def test_cluster_cli_json_has_the_communication_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_cluster(tmp_path / "job", 4, slow_rank=2, slow_link=(0, 1))
    report = tmp_path / "r.json"
    assert main(["profile", str(root), "--json", str(report), "-q"]) in (0, 1)
    kinds = {f["kind"] for f in json.loads(report.read_text())["findings"]}
    assert {"slow_rank", "slow_link", "comm_wait", "small_packets", "exposed_communication"} <= kinds


def _op(rank: int, name: str, elapse: float, rdma_ms: float = 0.0, retries: int = 0) -> CommOp:
    return CommOp(rank, "step1", "collective", name, "g", 0.0, elapse, rdma_ms, 0.0, 0.0, 0.0,
                  (Transport("RDMA", 100.0, rdma_ms, 1.0),), retries)


def test_retransmission_rules() -> None:
    comm = Communication([_op(0, "hcom_allReduce_1", 4500, 4200), _op(1, "hcom_allReduce_1", 4400, 4100),
                          _op(0, "hcom_allReduce_2", 4500, 10), _op(1, "hcom_allReduce_2", 10, 4100),
                          _op(0, TOTAL_OP, 9000, 9000)])
    hit = checks.retransmission(comm)
    assert len(hit) == 1 and [o["op"] for o in hit[0].metrics["ops"]] == ["hcom_allReduce_1"]
    comm.ops.append(_op(2, "hcom_allGather_3", 1.0, 0.5, retries=2))
    assert any("retried (2 retries)" in f.message for f in checks.retransmission(comm))


def test_byte_alignment_rule() -> None:
    def task(op: str, size: int, link: str = "HCCS") -> CommTask:
        return CommTask(0, op, "Memcpy", "SDMA", link, size, 10.0, 0, 1)

    tasks = [task("a", 1024 * 1024), task("b", 1000 * 1000 + 7), task("c", 513, "ON_CHIP"), task("d", 100)]
    found = checks.byte_alignment(tasks)
    assert len(found) == 1 and [o["op"] for o in found[0].metrics["ops"]] == ["b"]
    assert not checks.byte_alignment(tasks[:1] + tasks[2:])


def test_a_fresh_worker_process_can_run_the_per_rank_task(tmp_path: Path) -> None:
    """What a dask worker does: import the task's module first and run it, nothing else imported before."""
    import subprocess
    import sys

    root = make_cluster(tmp_path / "job", 2, slow_rank=1)
    code = ("import sys; from ascend_tui.offline.profile_cluster import summarize_rank; "
            "from ascend_tui.offline.nan_ranks import rank_states; "
            "r = summarize_rank(sys.argv[1]); print(r['rank'], len(r['communication'].ops)); "
            "print(rank_states(sys.argv[2])[0])")
    done = subprocess.run([sys.executable, "-c", code, str(root / "rank1_ascend_pt"),
                           str(Path(__file__).parent / "data" / "msprobe_ranks" / "step0" / "rank2")],
                          capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "17", "2"]


def test_group_local_ranks_become_global() -> None:
    """A rank's matrix numbers its group's ranks 0..n-1; the cluster maps them back through the group's ranks."""
    from ascend_tui.graph.communication import CommLink

    ops = [CommOp(r, "step1", "p2p", "hcom_send_0", "g", 0.0, 1.0, 1.0, 0.0, 0.0, 0.0) for r in (4, 6)]
    comm = Communication(ops, [CommLink("step1", "g", "send-total", 0, 1, "HCCS", 100.0, 5.0, 19.5),
                               CommLink("step1", "other", "x", 0, 1, "HCCS", 1.0, 1.0, 1.0)])
    got = reader.globalise(comm).links
    assert [(k.src, k.dst) for k in got] == [(4, 6), (0, 1)]


def test_a_trace_alone_gives_op_elapse_and_tasks(tmp_path: Path) -> None:
    shutil.copy(PROF / "level1_2025-01" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", tmp_path)
    comm = reader.read_folder(tmp_path, 0, trace=tmp_path / "trace_view.json")
    assert [o.name for o in comm.ops] == ["hcom_allReduce__586_0_1"] and comm.ops[0].elapse_ms == pytest.approx(79.0895)
    assert len(comm.tasks) == 16 and comm.sources == ["trace_view.json"]


def test_bandwidth_contention_rule() -> None:
    import numpy as np

    def op(name: str, start: float, bw: float) -> CommOp:
        return CommOp(0, "s", "collective", name, "g", start, 1.0, 1.0, 0.0, 0.0, 0.0,
                      (Transport("SDMA", 100.0, 5.0, bw),))

    comm = Communication([op("beside", 1000.0, 10.0), op("alone", 5000.0, 10.0), op("fast", 1000.0, 17.0)])
    found = checks.contention(comm, np.array([[1500.0, 1700.0]]))
    assert len(found) == 1 and [o["op"] for o in found[0].metrics["ops"]] == ["beside"]
    assert found[0].metrics["threshold_gbs"] == pytest.approx(14.4)
    assert checks.contention(comm, np.zeros((0, 2))) == []


def test_msprof_analyze_cluster_analysis_db() -> None:
    """msprof-analyze's db output (tests/data/msprof_analyze_db, made from the peer two-rank db export)."""
    folder = Path(__file__).parent / "data" / "msprof_analyze_db"
    from ascend_tui.offline.open import kind_of

    assert kind_of(folder) == "cluster profile" and kind_of(folder / "cluster_analysis.db") == "cluster profile"
    comm = reader.read_analysis_db(folder / "cluster_analysis.db")
    assert comm.skipped == 0 and {o.rank for o in comm.ops} == {0, 1} and len(comm.ops) == 10
    first = next(o for o in comm.ops if o.rank == 0 and o.name == "hcom_allReduce__210_0_1")
    assert first.elapse_ms == pytest.approx(88.75099321875) and first.transport("HCCS").packets[0][1] == 12
    assert comm.groups == {"17148521525495523210": [0, 1]} and len(comm.links) == 28
    from ascend_tui.offline.profile_cluster import read_cluster_db

    steps = read_cluster_db(folder / "cluster_analysis.db")
    assert sorted(s.rank for s in steps) == [0, 1] and steps[0].step == 50
    inv = open_path(folder)
    kinds = {f.kind for f in inv.findings}
    assert inv.profile.communication is not None and "exposed_communication" in kinds
    assert "slow_rank" not in kinds  # the two ranks' own time is within 1% of a step


def test_msprof_analyze_output_of_the_planted_cluster_names_the_same_rank_and_link() -> None:
    inv = open_path(Path(__file__).parent / "data" / "msprof_analyze_planted")
    found = _kinds([f for f in inv.findings if f.severity != "info"])
    assert found["slow_rank"][0].metrics["rank"] == 3
    assert (found["slow_link"][0].metrics["src"], found["slow_link"][0].metrics["dst"]) == (5, 6)
    wait = found["comm_wait"][0].metrics
    assert wait["held_by"] == 3 and 3 not in wait["waiting_ranks"] and len(wait["waiting_ranks"]) == 7


def test_stage_imbalance_from_the_metadata_stages() -> None:
    from ascend_tui.graph.profile import StepTime

    def step(rank: int, computing: float) -> StepTime:
        return StepTime(1, computing, 100.0, 0.0, 100.0, 10.0, 0.0, 0.0, rank=rank)

    steps = [step(0, 1000.0), step(1, 1010.0), step(2, 1300.0), step(3, 1290.0)]
    found = checks.stage_imbalance(steps, {0: 0, 1: 0, 2: 1, 3: 1})
    assert len(found) == 1 and found[0].metrics["slow_stage"] == 1 and "stage 1 computes 28.9% more" in \
        found[0].message
    assert checks.stage_imbalance(steps, {0: 0, 1: 1, 2: 0, 3: 1}) == []  # balanced once the stages are these
    assert reader.read_folder(LEVEL2 / "ASCEND_PROFILER_OUTPUT", 0).parallel["pp_stage"] == 0


def test_communication_survives_a_saved_investigation() -> None:
    import json as _json

    from ascend_tui.graph.profile import Profile

    profile = open_path(LEVEL2).profile
    back = Profile.from_json(_json.loads(_json.dumps(profile.to_json())))
    assert back.communication is not None and back.communication.ops == profile.communication.ops
    assert back.communication.links == profile.communication.links
    assert back.communication.parallel == profile.communication.parallel
