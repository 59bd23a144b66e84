"""Reader of `msprobe graph_visualize` output (`*.vis.db`, SQLite) into an `Investigation`.

The database holds msprobe's module tree (`tb_nodes`: up_node/sub_nodes), every API's and
module's tensor statistics, and, for a compare run, the NPU side's compare metrics, precision
index and overflow level next to the Bench side's statistics. The rows become dump.json-style
records for the msprobe graph builder (so the dataflow is inferred exactly as for a dump),
the Bench side becomes the reference statistics, and the levels become findings.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ascend_tui.errors import InputError
from ascend_tui.evidence import Finding, SourceLocation, StatsTable
from ascend_tui.readers.msprobe.dump import build, dominant_dtype, parse_leaves, source_from_lines
from ascend_tui.readers.msprobe.graph import Leaf, stats_rows
from ascend_tui.readers.base import FunctionReader
from ascend_tui.readers.parse import sqlite_ro
from ascend_tui.readers.parse.compressed import head as compressed_head, open_text
from ascend_tui.readers.parse.skipped import Skipped, report as report_skips
from ascend_tui.investigation import Investigation, RunInfo
from ascend_tui.progress import Progress, check_cancel

_METRICS = ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
            "Five Thousandths Err Ratio", "KLD", "Max diff", "Min diff", "Mean diff", "L2norm diff",
            "MaxRelativeErr", "Requires_grad Consistent", "Result")
_OVERFLOW_SEVERITY = {"critical": "error", "high": "warning", "medium": "info"}
_ROOT = "DefaultModel"
_GROUP = "Apis_Between_Modules."


def sniff(path: Path) -> bool:
    """A `*.vis.db` file that starts with the SQLite header, or an older `*.vis` JSON graph."""
    if path.name.endswith(".vis") and path.is_file():
        return compressed_head(path, 64).lstrip().startswith(b"{")
    if not path.name.endswith(".vis.db") or not path.is_file():
        return False
    return sqlite_ro.is_sqlite(path)


def _read_vis_json(path: Path) -> tuple[Any, list[Any], list[Any], dict[Any, Any]]:
    """What `_read` gives for a database, from the JSON graph_visualize wrote before `.vis.db`:
    `{"node": {...}, "root": ...}` for one graph, `{"NPU": {...}, "Bench": {...}}` for a compare."""
    try:
        with open_text(path, encoding="utf-8", newline=None) as fh:
            data = json.load(fh)
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not a text file (byte {exc.start} is not UTF-8)") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc.msg}", where=f"{exc.lineno}:{exc.colno}") from None
    except (OSError, EOFError) as exc:
        raise InputError(path, str(exc) or "unreadable file") from None
    if not isinstance(data, dict):
        raise InputError(path, "not a graph_visualize .vis file (expected a JSON object with 'node' or 'NPU')")
    sides = [("NPU", data["NPU"]), ("Bench", data.get("Bench"))] if isinstance(data.get("NPU"), dict) else \
        [("NPU", data)]
    rows: list[Any] = []
    stacks: dict[Any, Any] = {}
    skipped = Skipped(str(path))
    for source, graph in sides:
        nodes = graph.get("node") if isinstance(graph, dict) else None
        if not isinstance(nodes, dict):
            if source == "NPU":
                raise InputError(path, "not a graph_visualize .vis file: no 'node' table")
            continue
        for k, (name, node) in enumerate(nodes.items(), start=1):
            if not isinstance(node, dict):
                skipped.record(k, f"{source} node {name!r} is {type(node).__name__}, not an object")
                continue
            info = node.get("data") if isinstance(node.get("data"), dict) else {}
            stack = node.get("stack_info")
            if stack and source == "NPU":
                stacks[name] = source_from_lines(stack if isinstance(stack, list) else [str(stack)])
            up = node.get("upnode")
            rows.append((str(node.get("id") or name), node.get("node_type"), None if up in ("None", "") else up,
                         info.get("precision_index"), info.get("overflow_level"), name if stack else None,
                         node.get("input_data") or {}, node.get("output_data") or {}, source))
    skipped.refuse_if_empty(len(rows))
    graph_type = "compare" if len(sides) == 2 and sides[1][1] else "build"
    return (graph_type, str(data.get("task", "")), 0, skipped), [(0, 0)], rows, stacks


def _check_tables(path: Path, conn: sqlite3.Connection) -> None:
    if "tb_nodes" not in sqlite_ro.tables(conn):
        raise InputError(path, "SQLite database without tb_nodes (not msprobe graph_visualize output)")


def _json(text: Any, default: Any) -> Any:
    if not text:
        return default
    if isinstance(text, (dict, list)):  # the older .vis JSON holds the values themselves
        return text
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def _tensor_records(data: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """tb_nodes input_data/output_data (per-tensor name -> record) as dump.json arguments and parameters, in order."""
    args: list[Any] = []
    params: dict[str, Any] = {}
    for name, record in data.items():
        if not isinstance(record, dict):
            continue
        if "Tensor" in str(record.get("type", "")) and "dtype" in record and "shape" in record:
            shape = _json(record["shape"], None) if isinstance(record["shape"], str) else record["shape"]
            if not isinstance(shape, list):
                shape = []
            item: Any = {"type": record.get("type", "torch.Tensor"), "dtype": str(record["dtype"]),
                         "shape": [int(d) for d in shape if isinstance(d, (int, float))],
                         **{k: _stat(record.get(k)) for k in ("Max", "Min", "Mean", "Norm")}}
        else:
            value = record.get("value")
            item = {"type": str(record.get("type", "None")), "value": None if value in ("null", None) else value}
        head, sep, pname = str(name).rpartition(".parameters.")
        if sep and head:
            params[pname] = item
        else:
            args.append(item)
    return args, params


def _stat(value: Any) -> float | None:
    if value is None or value in ("null", "None", "", "N/A", "unsupported"):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _metrics(data: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(tensor name, compare metrics) of the worst-cosine output tensor carrying metrics."""
    best: tuple[float, str, dict[str, Any]] | None = None
    for name, record in data.items():
        if not isinstance(record, dict) or "Cosine" not in record and "Result" not in record:
            continue
        metrics: dict[str, Any] = {}
        for key in _METRICS:
            if key in record:
                number = _stat(record[key])
                metrics[key] = number if number is not None else record[key]
        if record.get("Err_message"):
            messages = _json(record["Err_message"], [record["Err_message"]])
            metrics["Err_message"] = "; ".join(str(m) for m in messages) if isinstance(messages, list) else messages
        cosine = metrics.get("Cosine")
        rank = cosine if isinstance(cosine, float) else 2.0
        if best is None or rank < best[0]:
            best = (rank, name, metrics)
    return None if best is None else (best[1], best[2])


def load(path: Path, progress: Progress | None = None, cancel: threading.Event | None = None) -> Investigation:
    """Read a graph_visualize database (first step and rank) with its statistics, compare results and levels."""
    path = Path(path)
    if progress is not None:
        progress("reading graph_visualize database", 0, None)
    if path.name.endswith(".vis"):
        config, runs, rows, stacks = _read_vis_json(path)
    else:
        with sqlite_ro.connect(path) as conn:  # opened so that no -shm/-wal is left beside the input
            _check_tables(path, conn)
            config, runs, rows, stacks = _read(path, conn)
    check_cancel(cancel, "loading the graph_visualize database was cancelled")
    step, rank = runs[0]
    return _investigation(path, config, runs, rows, stacks, step, rank, progress, cancel)


def _read(path: Path, conn: sqlite3.Connection) -> tuple[Any, list[Any], list[Any], dict[Any, Any]]:
    """(tb_config row, (step, rank) pairs, the first pair's tb_nodes rows, stacks by id)."""
    try:
        config = conn.execute("select graph_type, task, overflow_check from tb_config").fetchone() or ("", "", 0)
        runs = conn.execute("select distinct step, rank from tb_nodes order by step, rank").fetchall()
        if not runs:
            raise InputError(path, "tb_nodes is empty: graph_visualize wrote no nodes")
        step, rank = runs[0]
        rows = conn.execute(
            "select node_name, node_type, up_node, precision_index, overflow_level, stack_id, input_data, "
            "output_data, data_source from tb_nodes where step = ? and rank = ? order by data_source, node_order",
            (step, rank)).fetchall()
        stacks = {sid: source_from_lines(_json(info, [])) for sid, info in
                  conn.execute("select id, stack_info from tb_stack")} if _has_table(conn, "tb_stack") else {}
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"tb_nodes is not in graph_visualize's layout ({exc})") from None
    return config, runs, rows, stacks


def _investigation(path: Path, config: Any, runs: list[Any], rows: list[Any], stacks: dict[Any, Any], step: Any,
                   rank: Any, progress: Progress | None, cancel: threading.Event | None) -> Investigation:
    """The investigation of one step and rank's tb_nodes rows."""
    npu = [r for r in rows if r[8] != "Bench"]
    bench = [r for r in rows if r[8] == "Bench"]
    up = {r[0]: r[2] for r in npu}
    construct: dict[str, str | None] = {}
    data: dict[str, Any] = {}
    sources: dict[str, SourceLocation] = {}
    for name, node_type, up_node, *_rest in npu:
        if str(node_type) == "9" or name == _ROOT:
            continue  # "Apis_Between_Modules.N" groups and the root are display-only
        parent = up_node
        while parent and (parent.startswith(_GROUP) or parent == _ROOT):
            parent = None if parent == _ROOT else up.get(parent)
        construct[name] = parent or None
    for name, node_type, _up, _pi, _ol, stack_id, input_data, output_data, _src in npu:
        if name not in construct:
            continue
        ins, params = _tensor_records(_json(input_data, {}))
        outs, _ = _tensor_records(_json(output_data, {}))
        key = "input" if ".backward" in name else "input_args"
        data[name] = {key: ins, "output": outs, **({"parameters": params} if params else {})}
        src = stacks.get(stack_id)
        if src is not None:
            sources[name] = src
    if not data:
        raise InputError(path, f"no API or module nodes for step {step}, rank {rank}")
    built = build(data, construct, sources, path, progress, cancel)
    graph = built.graph
    if not len(graph) and npu:
        graph = _tree_graph(npu, construct, sources, graph)  # names msprobe's builder does not parse
    by_record = {str((n.attrs or {}).get("msprobe")): n for n in graph if n.attrs and "msprobe" in n.attrs}
    findings: list[Finding] = []
    for name, _type, _up, precision, overflow, _sid, _in, output_data, _src in npu:
        node = by_record.get(name)
        if node is None:
            continue
        if precision is not None and float(precision) > 0:
            found = _metrics(_json(output_data, {}))
            tensor, metrics = found if found else ("", {})
            severity = "error" if float(precision) >= 1 else "warning"
            cos = metrics.get("Cosine")
            what = f"cosine {cos:.6g}" if isinstance(cos, float) else "compare result"
            findings.append(Finding("precision", "compare", severity, node.id, node.op_type, node.module, node.index,
                                    f"msprobe compare marks {name} {severity} ({what} on {tensor or 'its outputs'})",
                                    metrics={"precision_index": float(precision), **metrics}))
        if overflow:
            level = str(overflow)
            findings.append(Finding("overflow", "overflow_level", _OVERFLOW_SEVERITY.get(level, "warning"), node.id,
                                    node.op_type, node.module, node.index,
                                    f"msprobe graph_visualize marks overflow level {level} on {name}",
                                    metrics={"overflow_level": level}))
    reference = _bench_stats(bench, by_record, path) if bench else None
    nonfinite = any(not s.finite for _, s in built.stats.items())
    run = RunInfo(target=str(path), source="msprobe_vis", dtype=dominant_dtype(graph),
                  reference="Bench" if bench else None,
                  checks=tuple(dict.fromkeys(f.check for f in findings)),
                  device={"backend": "offline", "name": f"msprobe graph_visualize ({config[0]})",
                          "inf_nan_mode": True if nonfinite else None},
                  extra={"graph_type": config[0], "task": config[1], "step": step, "rank": rank,
                         "runs": [list(r) for r in runs], "edges": dict(built.match_counts),
                         "notes": [f"{len(runs)} step/rank graphs in the database; showing step {step}, rank {rank}"]
                         if len(runs) > 1 else []})
    if len(config) > 3:  # the JSON form: its nodes that were not objects
        report_skips(run.extra, [config[3]])
    graph.name = f"graph_visualize {path.name}"
    return Investigation(graph, stats=built.stats, reference=reference, findings=findings, run=run)


def _tree_graph(npu: list[Any], construct: dict[str, str | None], sources: dict[str, SourceLocation],
                graph: Any) -> Any:
    """The node tree as it is when its names are not msprobe dump names: every leaf an operator, its module the
    path of the nodes above it (no dataflow: such files carry none)."""
    from ascend_tui.graph.node import OpNode

    parents = {name for name in construct.values() if name}
    for name, node_type, *_rest in npu:
        if name not in construct or name in parents:
            continue
        chain: list[str] = []
        up = construct.get(name)
        while up and up not in chain:
            chain.append(up)
            up = construct.get(up)
        graph.add_node(OpNode(id=name, op_type=re.sub(r"[._]\d+$", "", name) or name, module=".".join(reversed(chain)),
                              index=len(graph), source=sources.get(name), attrs={"msprobe": name}))
    return graph


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("select 1 from sqlite_master where type='table' and name=?", (name,)).fetchone() is not None


def _bench_stats(bench: list[Any], by_record: dict[str, Any], path: Path) -> StatsTable:
    """The Bench side's output statistics, keyed like the NPU graph's nodes (matched by record name)."""
    keys: list[tuple[str, int]] = []
    leaves: list[Leaf] = []
    for name, *_mid, output_data, _src in bench:
        node = by_record.get(name)
        if node is None:
            continue
        found: list[Leaf] = []
        parse_leaves(_tensor_records(_json(output_data, {}))[0], f"{name}.output", path, found, {})
        for slot, leaf in enumerate(found):
            if leaf.stats is not None:
                keys.append((node.id, slot))
                leaves.append(leaf)
    table = StatsTable()
    if keys:
        table.add_many(keys, np.asarray(stats_rows(leaves)))
    return table


READER = FunctionReader("msprobe graph_visualize", sniff, load)
