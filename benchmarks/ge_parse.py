"""Benchmark: our GE graph dump reader against protobuf's `text_format` on a generated ~87 MB dump.

Run: `PYTHONPATH=. python benchmarks/ge_parse.py [--mb 87]`. The dump repeats the real excerpt's
operators (fused Conv2D with layouts and origin names, LeakyRelu, Pooling) as one long
partitioned graph. The baseline parses it into a `ge.proto.ModelDef` built from ge_ir.proto's
field numbers; ours parses and builds the whole `OpGraph`. Both are timed in the same run, in
CPU time of this process (what stays put when other jobs share the machine) and in wall time.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from graph_load import machine_speed, timed  # the same calibration and clocks as the ONNX benchmark

ROOT = Path(__file__).resolve().parent.parent
EXCERPT = ROOT.parent / "shared" / "fixtures" / "graphs" / "ge_proto_sample_afterUBMatch_excerpt.txt"


def _op_blocks(text: str) -> list[str]:
    """The `  op { ... }` blocks of a dump, as text."""
    return re.findall(r"^  op \{\n.*?^  \}\n", text, flags=re.M | re.S)


def generate(path: Path, megabytes: float) -> int:
    """Write a one-graph dump of about `megabytes` MB whose ops form a chain with skip joins; returns the op count."""
    blocks = [b for b in _op_blocks(EXCERPT.read_text()) if '"PlaceHolder"' not in b]
    templates = []
    for b in blocks:
        body = re.sub(r'^    (input|input_name|src_name): .*\n', "", b, flags=re.M)
        body = re.sub(r'^    src_index: .*\n|^    is_input_const: .*\n|^    id: .*\n', "", body, flags=re.M)
        templates.append(body)
    target = int(megabytes * 1_000_000)
    written = 0
    n = 0
    with path.open("w") as fh:
        fh.write('graph {\n  name: "bench_graph"\n')
        while written < target:
            t = templates[n % len(templates)]
            name = f"op_{n}"
            ins = ""
            if n:
                ins = f'    input: "op_{n - 1}:0"\n'
                if n % 7 == 0 and n > 8:
                    ins += f'    input: "op_{n - 8}:0"\n'
                if n % 11 == 0 and n > 3:
                    ins += f'    input: "op_{n - 3}:-1"\n'
            op = re.sub(r'^    name: ".*"\n    type: (".*")\n',
                        lambda m: f'    name: "{name}"\n    type: {m.group(1)}\n{ins}', t, count=1, flags=re.M)
            op = op.replace("    has_out_attr: true\n", f"    has_out_attr: true\n    id: {n}\n", 1)
            fh.write(op)
            written += len(op)
            n += 1
        fh.write('}\nattr {\n  key: "memory_size"\n  value {\n    i: 0\n  }\n}\n')
    return n


def model_def_class() -> type:
    """`ge.proto.ModelDef` built from ge_ir.proto's messages and field numbers (no protoc needed)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="ge_ir_bench.proto", package="ge.proto", syntax="proto3")
    enum = fdp.enum_type.add(name="DataType")
    names = ["DT_UNDEFINED", "DT_FLOAT", "DT_FLOAT16", "DT_INT8", "DT_UINT8", "DT_INT16", "DT_UINT16", "DT_INT32",
             "DT_INT64", "DT_UINT32", "DT_UINT64", "DT_BOOL", "DT_DOUBLE", "DT_STRING"]
    for i, nm in enumerate(names):
        enum.value.add(name=nm, number=i)
    enum.value.add(name="DT_BF16", number=27)

    def msg(name: str, fields: list[tuple[str, int, int, int, str]]) -> descriptor_pb2.DescriptorProto:
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, label, tname in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if tname:
                f.type_name = tname
        return m

    O, R = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    S, B, I, FL, BO, MS, EN = F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_INT64, F.TYPE_FLOAT, F.TYPE_BOOL, F.TYPE_MESSAGE, \
        F.TYPE_ENUM

    def attr_map(m: descriptor_pb2.DescriptorProto, number: int) -> None:
        entry = m.nested_type.add(name="AttrEntry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=S, label=O)
        entry.field.add(name="value", number=2, type=MS, label=O, type_name=".ge.proto.AttrDef")
        m.field.add(name="attr", number=number, type=MS, label=R, type_name=f".ge.proto.{m.name}.AttrEntry")

    lv = msg("ListValue", [("s", 2, B, R, ""), ("i", 3, I, R, ""), ("f", 4, FL, R, ""), ("b", 5, BO, R, ""),
                           ("bt", 7, B, R, ""), ("dt", 12, I, R, "")])
    vt = lv.enum_type.add(name="ListValueType")
    for i, nm in enumerate(["VT_LIST_NONE", "VT_LIST_STRING", "VT_LIST_INT", "VT_LIST_FLOAT", "VT_LIST_BOOL",
                            "VT_LIST_BYTES", "VT_LIST_TENSOR_DESC", "VT_LIST_TENSOR", "VT_LIST_GRAPH",
                            "VT_LIST_NAMED_ATTRS", "VT_LIST_DATA_TYPE"]):
        vt.value.add(name=nm, number=i)
    lv.field.add(name="val_type", number=20, type=EN, label=O, type_name=".ge.proto.ListValue.ListValueType")
    msg("ListInt", [("list_i", 1, I, R, "")])
    msg("ListListInt", [("list_list_i", 1, MS, R, ".ge.proto.ListInt")])
    msg("AttrDef", [("list", 1, MS, O, ".ge.proto.ListValue"), ("s", 2, B, O, ""), ("i", 3, I, O, ""),
                    ("f", 4, FL, O, ""), ("b", 5, BO, O, ""), ("bt", 7, B, O, ""),
                    ("g", 13, MS, O, ".ge.proto.GraphDef"), ("list_list_int", 14, MS, O, ".ge.proto.ListListInt"),
                    ("dt", 15, I, O, "")])
    msg("ShapeDef", [("dim", 1, I, R, "")])
    td = msg("TensorDescriptor", [("name", 1, S, O, ""), ("dtype", 2, EN, O, ".ge.proto.DataType"),
                                  ("shape", 3, MS, O, ".ge.proto.ShapeDef"), ("layout", 4, S, O, ""),
                                  ("has_out_attr", 9, BO, O, ""), ("size", 10, I, O, ""),
                                  ("weight_size", 11, I, O, ""), ("device_type", 14, S, O, ""),
                                  ("real_dim_cnt", 16, I, O, ""), ("data_offset", 18, I, O, "")])
    attr_map(td, 5)
    op = msg("OpDef", [("name", 1, S, O, ""), ("type", 2, S, O, ""), ("input", 5, S, R, ""),
                       ("has_out_attr", 20, BO, O, ""), ("id", 21, I, O, ""), ("stream_id", 22, I, O, ""),
                       ("input_name", 23, S, R, ""), ("src_name", 24, S, R, ""), ("src_index", 25, I, R, ""),
                       ("dst_name", 26, S, R, ""), ("dst_index", 27, I, R, ""), ("input_i", 28, I, R, ""),
                       ("output_i", 29, I, R, ""), ("workspace", 30, I, R, ""), ("workspace_bytes", 31, I, R, ""),
                       ("is_input_const", 32, BO, R, ""), ("input_desc", 33, MS, R, ".ge.proto.TensorDescriptor"),
                       ("output_desc", 34, MS, R, ".ge.proto.TensorDescriptor"), ("subgraph_name", 35, S, R, "")])
    attr_map(op, 10)
    gd = msg("GraphDef", [("name", 1, S, O, ""), ("input", 4, S, R, ""), ("output", 5, S, R, ""),
                          ("op", 6, MS, R, ".ge.proto.OpDef")])
    attr_map(gd, 11)
    md = msg("ModelDef", [("name", 1, S, O, ""), ("version", 2, I, O, ""), ("custom_version", 3, S, O, ""),
                          ("graph", 7, MS, R, ".ge.proto.GraphDef")])
    attr_map(md, 11)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("ge.proto.ModelDef"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=87.0, help="size of the generated dump (default 87)")
    ap.add_argument("--skip-baseline", action="store_true", help="time only our reader")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from ascend_tui.readers.graphs import ge_dump
from ascend_tui.readers.parse import pbtext

    print(f"machine: a 1M-iteration Python loop takes {machine_speed():.3f} s (~0.04 s on an idle core)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ge_proto_00000001_graph_1_Build.txt"
        ops = generate(path, args.mb)
        size = path.stat().st_size / 1e6
        print(f"generated {path.name}: {size:.1f} MB, {ops:,} ops")
        text = path.read_text()
        t_parse = timed(lambda: pbtext.parse(text, path))
        del text
        loaded: list[object] = []
        t_load = timed(lambda: loaded.append(ge_dump.load(path)))
        g = loaded[0].graph  # type: ignore[attr-defined]
        print(f"ours: parse {t_parse[0]:.2f} s CPU ({t_parse[1]:.2f} s wall); parse + OpGraph ({len(g):,} nodes, "
              f"{g.edge_count():,} edges) {t_load[0]:.2f} s CPU ({t_load[1]:.2f} s wall)")
        if args.skip_baseline:
            return 0
        from google.protobuf import text_format

        cls = model_def_class()
        text = path.read_text()
        msg = cls()
        t_base = timed(lambda: text_format.Parse(text, msg, allow_unknown_field=True))
        print(f"protobuf text_format.Parse: {t_base[0]:.2f} s CPU ({t_base[1]:.2f} s wall; "
              f"{sum(len(gr.op) for gr in msg.graph):,} ops)")
        print(f"ratio (CPU time, steady under load): text_format / our parse = x{t_base[0] / t_parse[0]:.1f}; "
              f"text_format / our parse + OpGraph = x{t_base[0] / t_load[0]:.1f}")
        print(f"ratio (wall time): text_format / our parse = x{t_base[1] / t_parse[1]:.1f}; "
              f"text_format / our parse + OpGraph = x{t_base[1] / t_load[1]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
