"""Communication findings: exposed collectives, who waits for whom, the slow rank's kernels, slow links, packets.

Thresholds that msprof-analyze's advisor uses are taken from it (msprof-analyze 26.2.0,
`msprof_analyze/advisor/rules/en/*.yaml`) so the two tools agree on the same data:

- small packets (`packet.yaml`): SDMA ops under `min_sdma_size` 16 MB, RDMA ops under
  `min_rdma_size` 1 MB; a problem when more than `min_*_ratio` 0.2 of the ops carrying that
  transport are small. msprof-analyze counts the `Total Op Info` aggregate rows as ops too; here
  only real ops count, so its ratio can differ while the small ops and their time agree.
- byte alignment (`byte_alignment.yaml`, `ByteAlignmentChecker`): SDMA tasks off-chip larger
  than 512 bytes whose size is not a multiple of 512 bytes.
- retransmission (`rdma_analysis.yaml`, `CommunicationRetransmissionChecker`): an op whose every
  rank took at least `min_retransmission_time` 4000 ms and whose RDMA transit exceeds it; the db
  export's COMMUNICATION_OP.retry count is direct evidence.
- bandwidth contention (`bandwidth_contention.yaml`): SDMA baseline 18 GB/s, threshold 0.8.

`PEAK_GBS` is the typical one-direction peak of one link on Atlas A2 (Ascend 910B) servers, as the
vendor's data sheets give it (HCCS 56 GB/s bidirectional per link, 200GE RoCE per NPU, PCIe 4.0
x16); measured transfers of large packets reach 60-90% of it. LOCAL (on-chip copies) is not judged.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from ascend_tui import fmt
from ascend_tui.evidence import Finding
from ascend_tui.graph.communication import TOTAL_OP, CommLink, CommOp, CommTask, Communication
from ascend_tui.graph.profile import StepTime

PEAK_GBS = {"HCCS": 28.0, "SDMA": 28.0, "RDMA": 25.0, "PCIE": 32.0, "SIO": 56.0}
MIN_PACKET_MB = {"SDMA": 16.0, "RDMA": 1.0}  # packet.yaml min_sdma_size / min_rdma_size
SMALL_PACKET_RATIO = 0.2  # packet.yaml min_sdma_ratio / min_rdma_ratio
ALIGN_BYTES = 512  # byte_alignment.yaml min_size, ByteAlignmentChecker._BASE_SIZE
RETRANSMISSION_MS = 4000.0  # rdma_analysis.yaml min_retransmission_time
SDMA_BASELINE_GBS, CONTENTION_RATIO = 18.0, 0.8  # bandwidth_contention.yaml
EXPOSED_SHARE = 0.2  # exposed communication worth a finding, as a share of the step
WAIT_SHARE = 0.5  # a rank whose communication is mostly waiting is waiting for someone else
WAIT_OF_ELAPSE = 0.1  # ... when the waiting is also a tenth of its collectives' time, not a rounding
SLOW_LINK_RATIO = 0.5  # a link under half the median bandwidth of its transport's links
LINK_MIN_MB = 16.0  # links moving less are judged by packet size, not bandwidth
PEAK_SHARE = 0.3  # a busy link under 30% of its transport's typical peak
BUBBLE_SHARE = 0.1  # p2p waiting worth a pipeline finding, as a share of the step
STAGE_IMBALANCE = 0.1  # a pipeline stage computing 10% more than the lightest one
EXCESS_COVER = 0.8  # op types named until they carry this much of the slow rank's excess


@dataclass(frozen=True, slots=True)
class RankComm:
    """One rank's communication per step (ms): elapse, transit, wait, idle, and the share spent waiting."""

    rank: int
    steps: int
    elapse_ms: float
    transit_ms: float
    wait_ms: float
    idle_ms: float
    p2p_wait_ms: float

    @property
    def wait_ratio(self) -> float:
        """msprof-analyze's Wait Time Ratio: wait / (wait + transit)."""
        return self.wait_ms / (self.wait_ms + self.transit_ms) if self.wait_ms + self.transit_ms else 0.0


def real_ops(ops: Iterable[CommOp]) -> list[CommOp]:
    return [o for o in ops if o.name != TOTAL_OP]


def per_rank(comm: Communication) -> list[RankComm]:
    """Each rank's mean communication time per step, from its ops (the aggregate rows left out)."""
    acc: dict[int, list[float]] = defaultdict(lambda: [0.0] * 5)
    steps: dict[int, set[str]] = defaultdict(set)
    for o in real_ops(comm.ops):
        a = acc[o.rank]
        a[0] += o.elapse_ms
        a[1] += o.transit_ms
        a[2] += o.wait_ms
        a[3] += o.idle_ms
        a[4] += o.wait_ms if o.kind == "p2p" else 0.0
        steps[o.rank].add(o.step)
    out = []
    for rank, a in sorted(acc.items()):
        n = max(len(steps[rank]), 1)
        out.append(RankComm(rank, n, *(x / n for x in a)))
    return out


def _f(kind: str, severity: str, message: str, hint: str, **metrics: object) -> Finding:
    return Finding("profile", kind, severity, "", "", "", -1, message, metrics=metrics, hint=hint)


def exposed(steps: Sequence[StepTime]) -> list[Finding]:
    """Exposed communication per rank and step, with the compute not yet overlapped that it could hide behind."""
    out = []
    rows = [s for s in steps if s.total > 0 and s.communication_not_overlapped / s.total >= EXPOSED_SHARE]
    if not rows:
        return out
    worst = max(rows, key=lambda s: s.communication_not_overlapped / s.total)
    hideable = [min(s.communication_not_overlapped, max(s.computing - s.overlapped, 0.0)) for s in rows]
    where = f"rank {worst.rank} " if worst.rank >= 0 else ""
    share = worst.communication_not_overlapped / worst.total
    out.append(_f("exposed_communication", "warning",
                  f"exposed communication takes {fmt.percent(share)} of {where}step {worst.step} "
                  f"({fmt.duration_us(worst.communication_not_overlapped)} of {fmt.duration_us(worst.total)}); "
                  f"{fmt.duration_us(worst.computing - worst.overlapped)} of its compute runs without communication "
                  f"beside it, so up to {fmt.duration_us(hideable[rows.index(worst)])} could hide behind compute "
                  f"({len(rows)} of {len(steps)} rank-steps above {fmt.percent(EXPOSED_SHARE)})",
                  "overlap collectives with compute: bucketed/async gradient allreduce, overlapped p2p in the "
                  "pipeline schedule, prefetching allgathers; if the wait is long, look for the rank it waits for",
                  rank=worst.rank, step=worst.step, share=share, exposed_us=worst.communication_not_overlapped,
                  computing_us=worst.computing, overlapped_us=worst.overlapped, hideable_us=hideable[rows.index(worst)],
                  per_step=[{"rank": s.rank, "step": s.step, "exposed_us": s.communication_not_overlapped,
                             "computing_us": s.computing, "hideable_us": h} for s, h in zip(rows, hideable)][:64]))
    return out


def waits(comm: Communication, slow_rank: int | None = None) -> list[Finding]:
    """Wait versus transit: a rank that mostly waits is held back by another, not slow itself."""
    ranks = per_rank(comm)
    waiting = [r for r in ranks if r.wait_ratio >= WAIT_SHARE and r.wait_ms >= WAIT_OF_ELAPSE * r.elapse_ms > 0]
    if not waiting:
        return []
    if len(ranks) == 1:
        r = ranks[0]
        who = f"rank {r.rank}" if r.rank >= 0 else "this rank"
        return [_f("comm_wait", "warning",
                   f"{who} spends {fmt.percent(r.wait_ratio)} of its communication waiting for peers "
                   f"(wait {fmt.duration_us(r.wait_ms * 1000)}, transit {fmt.duration_us(r.transit_ms * 1000)}, "
                   f"idle {fmt.duration_us(r.idle_ms * 1000)} a step): the links are not what is slow, the peers "
                   f"arrive late",
                   "profile every rank of the job (msprof-analyze cluster / ascend-tui profile on the job folder): "
                   "the rank that waits least is the one the others wait for",
                   rank=r.rank, wait_ms=r.wait_ms, transit_ms=r.transit_ms, idle_ms=r.idle_ms,
                   wait_ratio=r.wait_ratio)]
    least = min(ranks, key=lambda r: (r.wait_ms, r.rank))
    held = slow_rank if slow_rank is not None and slow_rank >= 0 else least.rank
    waiters = [r for r in waiting if r.rank != held]
    if not waiters:
        return []
    mean_wait = float(np.mean([r.wait_ms for r in waiters]))
    names = _ranks_text([r.rank for r in waiters])
    held_row = next((r for r in ranks if r.rank == held), None)
    held_wait = held_row.wait_ms if held_row is not None else 0.0
    if held_row is None:
        against = f"rank {held}, the slow rank by step time, has no communication records here"
    else:
        against = f"against {fmt.duration_us(held_wait * 1000)} on rank {held}" + \
            ("" if held == least.rank else f" (rank {least.rank} waits least)")
    return [_f("comm_wait", "warning",
               f"{names} wait {fmt.duration_us(mean_wait * 1000)} a step in collectives on average "
               f"({fmt.percent(float(np.mean([r.wait_ratio for r in waiters])))} of their communication); "
               f"{against}: they wait for rank {held}, they are not slow themselves",
               f"make rank {held} faster (see its slow-rank finding); the waiting ranks' long collectives follow",
               waiting_ranks=[r.rank for r in waiters], held_by=held, mean_wait_ms=mean_wait,
               held_wait_ms=held_wait)]


def slow_rank_kernels(slow: int, types: Mapping[int, Sequence[tuple[str, int, float]]], steps: Mapping[int, int]
                      ) -> tuple[list[dict[str, object]], float]:
    """The op types carrying the slow rank's excess over the median rank (per step, µs), largest first."""
    per_step = {r: {k: us / max(steps.get(r, 1), 1) for k, _n, us in rows} for r, rows in types.items()}
    if slow not in per_step or len(per_step) < 2:
        return [], 0.0
    keys = set().union(*per_step.values())
    rows = []
    for k in keys:
        med = float(np.median([per_step[r].get(k, 0.0) for r in per_step if r != slow]))
        mine = per_step[slow].get(k, 0.0)
        rows.append({"type": k, "slow_us": mine, "median_us": med, "excess_us": mine - med,
                     "ratio": mine / med if med else None})  # None: the median rank runs none (JSON has no inf)
    rows.sort(key=lambda r: -float(r["excess_us"]))  # type: ignore[arg-type]
    total = sum(float(r["excess_us"]) for r in rows if float(r["excess_us"]) > 0)  # type: ignore[arg-type]
    named, acc = [], 0.0
    for r in rows:
        if float(r["excess_us"]) <= 0 or acc >= EXCESS_COVER * total:  # type: ignore[arg-type]
            break
        named.append(r)
        acc += float(r["excess_us"])  # type: ignore[arg-type]
    return named, total


def slow_rank(summary_rank: int, stage: str, excess_us: float, n_ranks: int, computing_us: float, free_us: float,
              types: Mapping[int, Sequence[tuple[str, int, float]]], steps: Mapping[int, int]) -> Finding:
    """The slow rank, its slow stage, and the kernel types that make it slow against the median rank."""
    named, total = slow_rank_kernels(summary_rank, types, steps)
    kernels = ""
    if named:
        kernels = "; its excess kernel time is in " + ", ".join(
            f"{r['type']} (+{fmt.duration_us(r['excess_us'])}, "
            + (f"{fmt.ratio(r['ratio'])} the median)" if r["ratio"] is not None else "none on the median rank)")
            for r in named[:5])
        if stage == "computing" and total < 0.5 * excess_us:
            kernels += f" (the kernel rows account for {fmt.duration_us(total)} of the excess: they hold part of the step)"
    hint = ("free time: host-side stalls (dataloader, dispatch, synchronisation) on that rank; "
            "computing: uneven work (pipeline stage balance, sequence lengths) or a slow card")
    if named:
        hint = (f"look at rank {summary_rank}'s {named[0]['type']} kernels (their shapes and count against "
                f"another rank): more work means uneven sharding, the same work slower means a slow card; "
                "the other ranks wait for it in communication")
    return _f("slow_rank", "warning",
              f"rank {summary_rank} is the slow rank: {stage} {fmt.duration_us(excess_us)} above the median of "
              f"{n_ranks} ranks (computing {fmt.duration_us(computing_us)}, free {fmt.duration_us(free_us)} a step)"
              f"{kernels}; the other ranks wait for it in communication", hint,
              rank=summary_rank, stage=stage, excess_us=excess_us, kernel_excess_us=total, kernels=named[:10])


def link_table(links: Iterable[CommLink]) -> dict[tuple[int, int, str], tuple[float, float]]:
    """(src, dst, transport) -> (MB, ms) summed over ops; only the `-total` / `Total Op Info` rows when present."""
    links = list(links)
    totals = [k for k in links if k.op == TOTAL_OP or k.op.endswith("-total")]
    use = totals or links
    out: dict[tuple[int, int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for k in use:
        if k.src == k.dst:
            continue
        a = out[(k.src, k.dst, k.transport)]
        a[0] += k.size_mb
        a[1] += k.time_ms
    return {key: (v[0], v[1]) for key, v in out.items()}


def slow_links(comm: Communication) -> list[Finding]:
    """Links far below the median of their transport's links, or far below its typical peak."""
    table = link_table(comm.links)
    bw = {k: mb / 1024 / (ms / 1000) for k, (mb, ms) in table.items() if ms > 0 and mb >= LINK_MIN_MB}
    out = []
    by_transport: dict[str, list[tuple[tuple[int, int, str], float]]] = defaultdict(list)
    for k, v in bw.items():
        by_transport[k[2]].append((k, v))
    for transport, rows in sorted(by_transport.items()):
        peak = PEAK_GBS.get(transport)
        if peak is None:
            continue
        med = float(np.median([v for _, v in rows]))
        slow = sorted((r for r in rows if len(rows) >= 3 and r[1] < SLOW_LINK_RATIO * med), key=lambda r: r[1])
        if slow:
            (src, dst, _), v = slow[0]
            out.append(_f("slow_link", "warning",
                          f"{transport} link {src}->{dst} runs at {v:.1f} GB/s, {fmt.percent(v / med)} of the median "
                          f"{med:.1f} GB/s of {len(rows)} {transport} links and {fmt.percent(v / peak)} of its "
                          f"typical peak {peak:.0f} GB/s" + (f" ({len(slow) - 1} more slow links)" if len(slow) > 1
                                                             else ""),
                          f"check the {transport} link between ranks {src} and {dst} (cabling, switch port, NIC "
                          "errors: hccn_tool -i <dev> -link -g, -stat -g); collectives over it run at its speed",
                          src=src, dst=dst, transport=transport, bandwidth_gbs=v, median_gbs=med, peak_gbs=peak,
                          links=[{"src": a, "dst": b, "bandwidth_gbs": x} for (a, b, _), x in slow[:16]]))
            continue
        low = [r for r in rows if r[1] < PEAK_SHARE * peak]
        if low:
            (src, dst, _), v = min(low, key=lambda r: r[1])
            out.append(_f("slow_link", "info",
                          f"{transport} links run at {med:.1f} GB/s (median of {len(rows)}), the slowest {src}->{dst} "
                          f"at {v:.1f} GB/s: under {fmt.percent(PEAK_SHARE)} of the typical {peak:.0f} GB/s peak",
                          "all links slow alike: contention with compute (msprof-analyze's bandwidth contention), "
                          "small packets, or a topology that routes through fewer links",
                          src=src, dst=dst, transport=transport, bandwidth_gbs=v, median_gbs=med, peak_gbs=peak))
    return out


def small_packets(comm: Communication) -> list[Finding]:
    """msprof-analyze's packet analysis: the share of ops moving less than the transport's minimum size."""
    out = []
    by_rank: dict[int, list[CommOp]] = defaultdict(list)
    for o in real_ops(comm.ops):
        by_rank[o.rank].append(o)
    for transport, min_mb in MIN_PACKET_MB.items():
        worst = None
        for rank, ops in by_rank.items():
            carrying = [(o, t) for o in ops if (t := o.transport(transport)) is not None and t.size_mb > 0]
            small = [(o, t) for o, t in carrying if t.size_mb < min_mb]
            if carrying and len(small) / len(carrying) > SMALL_PACKET_RATIO:
                ratio = len(small) / len(carrying)
                if worst is None or ratio > worst[1]:
                    worst = (rank, ratio, carrying, small)
        if worst is None:
            continue
        rank, ratio, carrying, small = worst
        ms = sum(t.time_ms for _, t in small)
        names = ", ".join(dict.fromkeys(o.name for o, _ in small))
        where = f"rank {rank}: " if rank >= 0 else ""
        out.append(_f("small_packets", "warning",
                      f"{where}{len(small)} of {len(carrying)} {transport} ops ({fmt.percent(ratio)}) move less than "
                      f"{min_mb:g} MB, {ms:.4g} ms of transit in all ({names[:160]})",
                      "small packets are bound by the host's task delivery, not the link: in data parallelism raise "
                      "the batch or gradient accumulation; ZeRO-3 -> ZeRO-2/1 if memory allows; fused or affinity "
                      "optimizers send fewer, larger buckets",
                      rank=rank, transport=transport, min_mb=min_mb, count=len(carrying), small=len(small),
                      ratio=ratio, small_ms=ms, ops=list(dict.fromkeys(o.name for o, _ in small))[:32]))
    return out


def byte_alignment(tasks: Sequence[CommTask]) -> list[Finding]:
    """msprof-analyze's byte alignment: off-chip SDMA tasks over 512 bytes whose size is not a multiple of 512."""
    ops: dict[str, list[CommTask]] = defaultdict(list)
    total_us = 0.0
    for t in tasks:
        if t.transport != "SDMA" or t.link_type == "ON_CHIP" or t.size_bytes <= ALIGN_BYTES:
            continue
        total_us += t.dur_us
        if t.size_bytes % ALIGN_BYTES:
            ops[t.op or t.name].append(t)
    if not ops:
        return []
    bad_us = sum(t.dur_us for ts in ops.values() for t in ts)
    top = sorted(ops.items(), key=lambda kv: -sum(t.dur_us for t in kv[1]))
    return [_f("byte_alignment", "warning",
               f"{fmt.plural(len(ops), 'communication op')} send SDMA data not aligned to {ALIGN_BYTES} bytes "
               f"({fmt.duration_us(bad_us)} of {fmt.duration_us(total_us)} off-chip SDMA task time), e.g. "
               f"{top[0][0]} ({top[0][1][0].size_bytes} bytes)",
               f"pad or reshape the tensors these collectives send to multiples of {ALIGN_BYTES} bytes",
               ops=[{"op": k, "tasks": len(v), "us": sum(t.dur_us for t in v), "size_bytes": v[0].size_bytes}
                    for k, v in top[:10]], unaligned_us=bad_us, sdma_us=total_us)]


def retransmission(comm: Communication) -> list[Finding]:
    """RDMA retransmission: the db's retry counts, or msprof-analyze's rule on op elapse and RDMA transit time."""
    retried = [o for o in comm.ops if o.retries > 0]
    out = []
    if retried:
        out.append(_f("retransmission", "error",
                      f"{fmt.plural(len(retried), 'communication op')} were retried ({sum(o.retries for o in retried)} "
                      f"retries), e.g. {retried[0].name} on rank {retried[0].rank}",
                      "check the RDMA network: switch and NIC configuration, link flaps (hccn_tool -stat)",
                      ops=[{"op": o.name, "rank": o.rank, "retries": o.retries} for o in retried[:16]]))
    by_op: dict[tuple[str, str, str], list[CommOp]] = defaultdict(list)
    for o in real_ops(comm.ops):
        by_op[(o.group, o.name, o.step)].append(o)
    hits = []
    for (group, name, step), ops in by_op.items():
        rdma = [t.time_ms for o in ops if (t := o.transport("RDMA")) is not None]
        if min(o.elapse_ms for o in ops) >= RETRANSMISSION_MS and rdma and max(rdma) > RETRANSMISSION_MS:
            hits.append((group, name, step, max(rdma)))
    if hits:
        g, name, step, ms = max(hits, key=lambda h: h[3])
        out.append(_f("retransmission", "error",
                      f"{fmt.plural(len(hits), 'op')} look retransmitted: {name} ({step}) spends {ms:.0f} ms in RDMA "
                      f"transit on every rank (over msprof-analyze's {RETRANSMISSION_MS:.0f} ms)",
                      "check the RDMA transmission time of these ops and the network configuration of the switches "
                      "and nodes", ops=[{"group": h[0], "op": h[1], "step": h[2], "rdma_ms": h[3]} for h in hits[:16]]))
    return out


def pipeline(comm: Communication, steps: Sequence[StepTime]) -> list[Finding]:
    """Pipeline bubbles and stage imbalance, where the metadata says pipeline parallelism is on."""
    pp = int(comm.parallel.get("pipeline_model_parallel_size") or 0)
    bubble = [s for s in steps if s.bubble > 0]
    if pp <= 1 and not bubble:
        return []
    step_us = float(np.mean([s.total for s in steps])) if steps else 0.0
    ranks = per_rank(comm)
    out = []
    if bubble:
        worst = max(bubble, key=lambda s: s.bubble / s.total if s.total else 0.0)
        share = worst.bubble / worst.total if worst.total else 0.0
        with_bubble = sorted({s.rank for s in bubble})
        others = [s for s in steps if s.bubble <= 0]
        if share >= BUBBLE_SHARE:
            where = f"{_ranks_text(with_bubble)}" if with_bubble != [-1] else "this rank"
            imbalance = ""
            if others:
                a, b = float(np.mean([s.computing for s in bubble])), float(np.mean([s.computing for s in others]))
                imbalance = (f"; the ranks with bubbles compute {fmt.duration_us(a)} a step against "
                             f"{fmt.duration_us(b)} on the others")
            out.append(_f("pipeline_bubble", "warning",
                          f"pipeline bubbles take up to {fmt.percent(share)} of the step on {where} "
                          f"({fmt.duration_us(worst.bubble)} on rank {worst.rank}, step {worst.step}){imbalance}",
                          "more micro-batches per step, an interleaved (virtual pipeline) schedule, or layers moved "
                          "from the stage with more compute to the one that waits",
                          bubble_us=worst.bubble, share=share, ranks=with_bubble, stages=pp))
    for r in ranks:
        share = r.p2p_wait_ms * 1000 / step_us if step_us else 0.0
        if share >= BUBBLE_SHARE and not out:
            who = f"rank {r.rank}" if r.rank >= 0 else "this rank"
            out.append(_f("pipeline_bubble", "warning",
                          f"{who} waits {fmt.duration_us(r.p2p_wait_ms * 1000)} a step in pipeline p2p "
                          f"({fmt.percent(share)} of the step) across {pp or '?'} pipeline stages: a bubble, or a "
                          "neighbouring stage with more work",
                          "compare the stages' computing time (profile one rank per stage); move layers from the "
                          "slower stage, or add micro-batches to shrink the bubble",
                          rank=r.rank, p2p_wait_ms=r.p2p_wait_ms, share=share, stages=pp))
    return out


def stage_imbalance(steps: Sequence[StepTime], stages: Mapping[int, int]) -> list[Finding]:
    """Pipeline stages with unequal compute: the mean computing a step of each stage's ranks, from the metadata's stages."""
    per: dict[int, list[float]] = defaultdict(list)
    for s in steps:
        if s.rank in stages:
            per[stages[s.rank]].append(s.computing)
    if len(per) < 2:
        return []
    mean = {k: float(np.mean(v)) for k, v in sorted(per.items())}
    hi, lo = max(mean, key=lambda k: mean[k]), min(mean, key=lambda k: mean[k])
    if not mean[lo] or mean[hi] / mean[lo] - 1 < STAGE_IMBALANCE:
        return []
    parts = ", ".join(f"stage {k} {fmt.duration_us(v)}" for k, v in mean.items())
    return [_f("stage_imbalance", "warning",
               f"pipeline stage {hi} computes {fmt.percent(mean[hi] / mean[lo] - 1)} more a step than stage {lo} "
               f"({parts}): the other stages wait for it in p2p",
               f"move layers from stage {hi} to stage {lo} (or give the first and last stages fewer layers: "
               "they also hold the embedding and the loss)",
               stages=mean, slow_stage=hi, fast_stage=lo)]


def contention(comm: Communication, matmul_us: np.ndarray) -> list[Finding]:
    """msprof-analyze's bandwidth contention: SDMA ops running beside a MatMul kernel under 0.8 x 18 GB/s.

    `matmul_us` is an (n, 2) array of the MatMul kernels' [start, end) in µs on the same clock as the ops.
    """
    if not len(matmul_us):
        return []
    threshold = CONTENTION_RATIO * SDMA_BASELINE_GBS
    starts, ends = np.sort(matmul_us[:, 0]), np.sort(matmul_us[:, 1])
    slow = []
    for o in real_ops(comm.ops):
        t = o.transport("SDMA")
        if t is None or t.size_mb <= 0 or t.bandwidth_gbs >= threshold:
            continue
        a, b = o.start_us, o.start_us + o.elapse_ms * 1000
        # some MatMul starts before the op ends and ends after it starts
        if np.searchsorted(starts, b, "left") - np.searchsorted(ends, a, "right") > 0:
            slow.append(o)
    if not slow:
        return []
    bw = {id(o): o.transport("SDMA").bandwidth_gbs for o in slow}  # type: ignore[union-attr]
    worst = min(slow, key=lambda o: bw[id(o)])
    return [_f("bandwidth_contention", "warning",
               f"{fmt.plural(len(slow), 'SDMA op')} run beside MatMul kernels at under {threshold:.1f} GB/s "
               f"(msprof-analyze's 0.8 x {SDMA_BASELINE_GBS:g} GB/s), e.g. {worst.name} at {bw[id(worst)]:.1f} GB/s",
               "compare with the overlap turned off: if communication slows more than compute gains, the two "
               "contend for memory bandwidth",
               ops=[{"op": o.name, "rank": o.rank, "bandwidth_gbs": bw[id(o)]} for o in slow[:16]],
               threshold_gbs=threshold)]


def advise(comm: Communication | None, steps: Sequence[StepTime] = (), *, slow: int | None = None,
           matmul_us: np.ndarray | None = None, stages: Mapping[int, int] | None = None) -> list[Finding]:
    """Every communication finding on one rank's or one cluster's evidence."""
    out = exposed(steps)
    if comm is None:
        return out
    if matmul_us is not None:
        out += contention(comm, matmul_us)
    out += waits(comm, slow)
    out += slow_links(comm)
    out += small_packets(comm)
    out += byte_alignment(comm.tasks)
    out += retransmission(comm)
    out += pipeline(comm, steps)
    out += stage_imbalance(steps, stages or {})
    if comm.skipped:
        out.append(_f("communication_skipped", "info",
                      f"{fmt.plural(comm.skipped, 'communication record')} could not be read and were skipped "
                      f"({', '.join(comm.sources)})", "the findings above leave those records out",
                      skipped=comm.skipped))
    return out


def _ranks_text(ranks: Sequence[int]) -> str:
    ranks = sorted(ranks)
    if len(ranks) > 6:
        return f"{len(ranks)} ranks ({', '.join(map(str, ranks[:5]))}, ...)"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
