"""GE graph dumps: the real excerpt, partition and control-flow links, fused-op origins, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_tui.errors import InputError
from ascend_tui.offline.open import kind_of, open_path
from ascend_tui.readers.graphs import ge_dump
from ascend_tui.readers.parse import pbtext
from tests.conftest import FIXTURES

EXCERPT = FIXTURES / "graphs" / "ge_proto_sample_afterUBMatch_excerpt.txt"

TWO_PARTITIONS = '''graph {
  name: "partition0_rank0_new_sub_graph1"
  op {
    name: "data"
    type: "Data"
    output_desc {
      dtype: DT_FLOAT
      shape {
        dim: 2
        dim: 3
      }
      layout: "ND"
    }
  }
  op {
    name: "model/layer1/Reshape"
    type: "Reshape"
    input: "data:0"
    id: 1
    output_desc {
      dtype: DT_BF16
      shape {
        dim: 6
      }
      layout: "ND"
    }
  }
  op {
    name: "end0"
    type: "End"
    input: "model/layer1/Reshape:0"
    attr {
      key: "peerIndex"
      value {
        i: 0
      }
    }
    id: 2
  }
}
graph {
  name: "partition0_rank0_new_sub_graph2"
  op {
    name: "PlaceHolder0"
    type: "PlaceHolder"
    attr {
      key: "anchorIndex"
      value {
        i: 0
      }
    }
    attr {
      key: "parentId"
      value {
        s: "new_sub_graph1:1"
      }
    }
    id: 0
    output_desc {
      dtype: DT_BF16
      shape {
        dim: 6
      }
      layout: "ND"
    }
  }
  op {
    name: "fused_add_relu"
    type: "AddRelu"
    input: "PlaceHolder0:0"
    input: ""
    input: "PlaceHolder0:0"
    input: "if_op:-1"
    attr {
      key: "_datadump_original_op_names"
      value {
        list {
          s: "add_1"
          s: "relu_1"
          val_type: VT_LIST_STRING
        }
      }
    }
    id: 1
    output_desc {
      dtype: DT_NEW_TYPE_FROM_CANN_10
      shape {
        dim: 6
      }
      layout: "NC1HWC0"
      attr {
        key: "_datadump_origin_name"
        value {
          s: "relu_1"
        }
      }
      attr {
        key: "origin_shape"
        value {
          list {
            i: 2
            i: 3
            val_type: VT_LIST_INT
          }
        }
      }
    }
  }
  op {
    name: "if_op"
    type: "If"
    input: "PlaceHolder0:0"
    id: 2
    subgraph_name: "then_branch"
  }
}
graph {
  name: "then_branch"
  op {
    name: "then_data"
    type: "Data"
    attr {
      key: "_parent_node_index"
      value {
        i: 0
      }
    }
    output_desc {
      dtype: 42
      shape {
      }
    }
  }
}
'''


def _write(tmp_path: Path, text: str, name: str = "ge_proto_00000007_graph_1_Build.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_real_excerpt_loads_with_layouts_and_fused_origins() -> None:
    assert EXCERPT.is_file(), f"fixture missing: {EXCERPT}"
    assert kind_of(EXCERPT) == "GE graph dump"
    inv = open_path(EXCERPT)
    g = inv.graph
    assert len(g) == 6 and g.edge_count() == 5
    assert inv.run.source == "ge_dump"
    conv = g.node("Conv2D.0")
    assert conv.attrs["name"] == "conv1"
    assert conv.attrs["origin_names"] == ["scale_conv1", "conv1", "bn_conv1"]
    assert conv.inputs[0].shape == (1, 1, 224, 224, 4) and conv.inputs[0].dtype == "float16"
    assert conv.inputs[3] is None  # the absent offset_w input
    assert conv.attrs["input_layouts"][0]["layout"] == "NC1HWC0_C04"
    assert conv.attrs["input_layouts"][0]["origin_shape"] == [1, 3, 224, 224]
    assert conv.attrs["input_layouts"][1]["layout"] == "FRACTAL_Z_C04"
    assert conv.attrs["output_layouts"][0]["origin_name"] == "scale_conv1"
    assert [e.src for e in g.producers("Conv2D.0")] == ["PlaceHolder.0", "PlaceHolder.1", "PlaceHolder.2"]
    assert g.upstream("Pooling.0") == ["LeakyRelu.0", "Conv2D.0", "PlaceHolder.2", "PlaceHolder.1", "PlaceHolder.0"]
    assert any("not in this file" in n for n in inv.run.extra["notes"])


def test_partitions_control_edges_and_subgraphs_link(tmp_path: Path) -> None:
    inv = ge_dump.load(_write(tmp_path, TWO_PARTITIONS))
    g = inv.graph
    by_name = {n.attrs["name"]: n for n in g}
    reshape, ph = by_name["model/layer1/Reshape"], by_name["PlaceHolder0"]
    assert reshape.module == "model.layer1" and reshape.id == "model.layer1/Reshape.0"
    assert reshape.outputs[0].dtype == "bfloat16"
    assert [e.src for e in g.producers(ph.id)] == [reshape.id]  # across partitions, by parentId
    fused = by_name["fused_add_relu"]
    assert [(e.src, e.in_slot) for e in g.producers(fused.id)] == [(ph.id, 0), (ph.id, 2)]  # add(x, x), slot 1 absent
    assert fused.attrs["control_inputs"] == [by_name["if_op"].id]
    assert inv.run.extra["control_edges"] == 1
    assert fused.outputs[0].dtype == "new_type_from_cann_10"  # unknown enum names are kept
    assert fused.attrs["origin_names"] == ["add_1", "relu_1"]
    assert fused.attrs["output_layouts"][0]["origin_shape"] == [2, 3]
    then = by_name["then_data"]
    assert then.outputs[0].dtype == "dt_42"
    assert [e.src for e in g.producers(then.id)] == [ph.id]  # the If's input 0 reaches its branch's Data
    assert g.upstream(then.id) == [ph.id, reshape.id, by_name["data"].id]


def test_fast_and_general_parsers_agree(tmp_path: Path) -> None:
    for text in (EXCERPT.read_text(), TWO_PARTITIONS):
        assert pbtext._parse_lines(text) is not None
        assert pbtext.parse(text) == pbtext.parse_tokens(text)
    one_line = 'graph { name: "g" op { name: "a: 5" type: "Add" input: "b:0" } }'
    assert pbtext.parse(one_line) == {"graph": {"name": "g", "op": {"name": "a: 5", "type": "Add", "input": "b:0"}}}
    assert pbtext.parse('s: "caf\\303\\251 \\"q\\""') == {"s": 'café "q"'}
    colon_brace = 'graph: {\n  name: "x"\n  op {\n    attr {\n      key: "k"\n    }\n  }\n}\n'
    assert pbtext._parse_lines(colon_brace) == pbtext.parse_tokens(colon_brace) == \
        {"graph": {"name": "x", "op": {"attr": {"key": "k"}}}}


@pytest.mark.parametrize("text, problem", [
    ('graph {\n  name: "g"\n  op {\n    name: "x"\n', "ends inside a message"),
    ('graph {\n  name: "g\n}\n', "unexpected character"),
    ('graph {\n  name "g"\n}\n', "expected a value"),
    ('memory_size: 3\n', "no `graph"),
    ('graph {\n  name: "g"\n}\n', "no `op"),
    ('graph {\n  op {\n    name: "a"\n    input: "b:zero"\n  }\n}\n', "is not \"op:index\""),
])
def test_malformed_dump_is_one_clear_line(tmp_path: Path, text: str, problem: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as info:
        open_path(path)
    line = info.value.line()
    assert problem in line and str(path) in line and "\n" not in line


def test_binary_file_named_like_a_dump_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ge_proto_00001_Build.txt"
    path.write_bytes(b"\x08\x01\x00\x00binary")
    with pytest.raises(InputError, match="binary data"):
        open_path(path)
