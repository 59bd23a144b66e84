"""Record what every file-reading subcommand prints and writes on the shared fixtures, as golden files.

`python tests/golden/make_golden.py` (with PYTHONPATH at the checkout) rewrites tests/golden/cases/;
tests/test_golden_outputs.py re-runs the same cases in-process and asserts the same stdout, exit
code and written files. Paths (fixtures, output folder, checkout) are replaced by `$FIXTURES`,
`$OUT` and `$ROOT`, and the few fields that change run to run (timestamps, durations) are blanked.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures"
CASES_DIR = Path(__file__).resolve().parent / "cases"
HINT = "regenerate with python tests/golden/make_golden.py if the change is intended"

F = "$FIXTURES"
M = f"{F}/msprobe"
P = f"{F}/profiler"
S = f"{F}/sanitizer"
G = f"{F}/graphs"
DATA = "$ROOT/tests/data"
X = f"{F}/peer/Ascend__msprobe/test/msprobe_test/mindspore_ut/compare/dump_file"  # msprobe's MindSpore/PyTorch pair

# name -> argv; `$OUT/x` names an output file the case writes and the golden file records.
CASES: dict[str, list[str]] = {
    # check: offline artifacts
    "check_dump_ovf": ["check", f"{M}/dump_ovf", "-q", "--json", "$OUT/r.json", "--junit", "$OUT/r.xml"],
    "check_dump_ovf_markdown": ["check", f"{M}/dump_ovf", "-q", "--markdown", "$OUT/r.md", "--fail-on", "warning"],
    "check_dump_fp32": ["check", f"{M}/dump_fp32", "-q", "--json", "$OUT/r.json"],
    "check_dump_bf16": ["check", f"{M}/dump_bf16", "-q", "--json", "$OUT/r.json"],
    "check_dump_statistics": ["check", f"{M}/dump_statistics_fp32", "-q", "--json", "$OUT/r.json"],
    "check_dump_md5": ["check", f"{M}/dump_md5_fp32", "-q", "--json", "$OUT/r.json"],
    "check_dump_json_file": ["check", f"{M}/dump_ovf/step0/proc16198/dump.json", "-q", "--json", "$OUT/r.json"],
    "check_overflow_result": ["check", f"{M}/msprobe_output/overflow_check", "-q", "--json", "$OUT/r.json"],
    "check_vis_db": ["check", f"{M}/msprobe_output/vis/compare_20261130002202.vis.db", "-q", "--json", "$OUT/r.json"],
    "check_sanitizer_log": ["check", f"{S}/compute_sanitizer_memcheck_leakcheck_real.log", "-q", "--json",
                            "$OUT/r.json", "--junit", "$OUT/r.xml"],
    "check_mssanitizer_log": ["check", f"{S}/mssanitizer_memcheck_doc_examples.log", "-q", "--json", "$OUT/r.json"],
    "check_profile_level2": ["check", f"{P}/level2_2025-11", "-q", "--json", "$OUT/r.json"],
    "check_onnx": ["check", f"{DATA}/block_dynamo_export.onnx", "-q", "--json", "$OUT/r.json"],
    "check_missing": ["check", f"{F}/no_such_dump", "-q"],
    "check_output_inside_input": ["check", f"{M}/dump_ovf", "-q", "--json", f"{M}/dump_ovf/r.json"],
    # compare
    "compare_bf16_fp32": ["compare", f"{M}/dump_bf16", f"{M}/dump_fp32", "-q", "--json", "$OUT/r.json",
                          "--csv", "$OUT/c.csv", "--workers", "1"],
    "compare_no_replay": ["compare", f"{M}/dump_bf16", f"{M}/dump_fp32", "-q", "--no-replay", "--workers", "1"],
    "compare_clean": ["compare", f"{M}/dump_fp32", f"{M}/dump_fp32", "-q", "--json", "$OUT/r.json",
                      "--workers", "1"],
    "compare_statistics": ["compare", f"{M}/dump_statistics_fp32", f"{M}/dump_fp32", "-q", "--no-replay",
                           "--workers", "1", "--json", "$OUT/r.json"],
    "compare_bad_threshold": ["compare", f"{M}/dump_bf16", f"{M}/dump_fp32", "-q", "--threshold", "cosine"],
    "compare_ms_vs_pt": ["compare", f"{X}/mindspore_data", f"{X}/pytorch_data", "-q", "--no-replay", "--json",
                         "$OUT/r.json", "--fail-on", "warning"],
    "compare_ms_vs_pt_layer_mapping": ["compare", f"{X}/mindspore_data", f"{X}/pytorch_data", "-q", "--no-replay",
                                       "--layer-mapping", f"{X}/layer_mapping.yaml", "--csv", "$OUT/c.csv"],
    "check_msprobe_compare_csv": ["check", f"{M}/msprobe_output/compare_tensor_bf16_vs_fp32.csv", "-q", "--json",
                                  "$OUT/r.json"],
    # profile
    "profile_level0": ["profile", f"{P}/level0_2025-01", "-q", "--json", "$OUT/r.json"],
    "profile_level1": ["profile", f"{P}/level1_2025-01", "-q", "--json", "$OUT/r.json"],
    "profile_level2": ["profile", f"{P}/level2_2025-11", "-q", "--json", "$OUT/r.json", "--top", "5"],
    "profile_baseline": ["profile", f"{P}/level1_2025-01", "--baseline", f"{P}/level0_2025-01", "-q",
                         "--json", "$OUT/r.json"],
    "profile_msprof": ["profile", f"{P}/msprof", "-q", "--json", "$OUT/r.json"],
    "profile_msprof_op": ["profile", f"{P}/msprof_op/OPPROF_example", "-q", "--json", "$OUT/r.json"],
    "profile_msprof_op_vector": ["profile", f"{P}/msprof_op/OPPROF_vector_only", "-q", "--json", "$OUT/r.json"],
    "profile_kernel_csv": ["profile", f"{P}/older_2023-2024/kernel_details_2023-11_ArithmeticUtilization.csv", "-q",
                           "--json", "$OUT/r.json"],
    "profile_trace_view": ["profile", f"{P}/older_2023-2024/trace_view_2024-01.json", "-q", "--json", "$OUT/r.json"],
    "profile_torch_trace": ["profile", f"{P}/torch/kineto_cupti_h100_after_fix_trace.json", "-q", "--json",
                            "$OUT/r.json"],
    "profile_cluster": ["profile", f"{P}/msprof_analyze", "-q", "--json", "$OUT/r.json"],
    "profile_no_timing": ["profile", f"{M}/dump_ovf", "-q"],
    # sanitize --log
    "sanitize_memcheck": ["sanitize", "--log", f"{S}/compute_sanitizer_memcheck_real.log", "--json", "$OUT/r.json"],
    "sanitize_racecheck": ["sanitize", "--log", f"{S}/compute_sanitizer_racecheck_real.log", "--json", "$OUT/r.json"],
    "sanitize_initcheck": ["sanitize", "--log", f"{S}/compute_sanitizer_initcheck_real.log", "--json", "$OUT/r.json"],
    "sanitize_mssanitizer": ["sanitize", "--log", f"{S}/mssanitizer_quickstart_real_paths.log", "--json",
                             "$OUT/r.json"],
    "sanitize_triton": ["sanitize", "--log", f"{S}/mssanitizer_triton_session.log", "--json", "$OUT/r.json"],
    "sanitize_leak": ["sanitize", "--log", f"{S}/mssanitizer_leakcheck_doc_example.log", "--json", "$OUT/r.json",
                      "--save", "$OUT/r.atui.json"],
    "sanitize_nothing": ["sanitize"],
    # graph
    "graph_onnx": ["graph", f"{DATA}/block_dynamo_export.onnx", "-q", "--json", "$OUT/g.json"],
    "graph_mindspore": ["graph", f"{G}/mindspore_ir_sample_validate.ir", "-q", "--json", "$OUT/g.json"],
    "graph_ge": ["graph", f"{G}/ge_proto_sample_afterUBMatch_excerpt.txt", "-q", "--json", "$OUT/g.json"],
    "graph_pt2_json": ["graph", f"{G}/torch_export_pt2_model_json_excerpt.json", "-q"],
    "graph_msprobe_dump": ["graph", f"{M}/dump_fp32", "-q", "--json", "$OUT/g.json"],
    "graph_vis_db": ["graph", f"{M}/msprobe_output/vis/build_20261130002230.vis.db", "-q"],
    "graph_with_evidence": ["graph", f"{M}/dump_fp32", f"{M}/dump_ovf", f"{P}/level1_2025-01", "-q"],
}

# Keys whose values change run to run; their values are blanked wherever they appear in written JSON.
VOLATILE_KEYS = frozenset({"elapsed_s", "duration_s", "wall_s", "created", "timestamp", "started", "finished",
                           "time", "seconds"})
_BIG = 200_000  # a written file longer than this is recorded by digest and size, not in full


def _subst_paths(text: str, out: Path) -> str:
    return text.replace(str(out), "$OUT").replace(str(FIXTURES.resolve()), F).replace(str(FIXTURES), F) \
        .replace(str(ROOT), "$ROOT")


# Source paths recorded inside checked-in artifacts (the checkout that made them) read as the checkout's own.
_MADE_IN = re.compile(r"(?<![\w$])/[\w./-]*?/(?=(?:tests|samples)/[\w./-]*\.py)")


def _subst(text: str, out: Path) -> str:
    return _MADE_IN.sub("$ROOT/", _subst_paths(text, out))


def _normalise(value: Any, out: Path) -> Any:
    if isinstance(value, dict):
        return {k: ("<volatile>" if k in VOLATILE_KEYS else _normalise(v, out)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v, out) for v in value]
    if isinstance(value, str):
        return _subst(value, out)
    return value


def _record_file(path: Path, out: Path) -> Any:
    raw = path.read_bytes()
    if path.suffix == ".json":
        data: Any = _normalise(json.loads(raw), out)
        text = json.dumps(data, indent=1, sort_keys=True)
        if len(text) <= _BIG:
            return data
    else:
        text = _subst(raw.decode("utf-8", errors="replace"), out)
        text = re.sub(r'time="[0-9.]+"', 'time="<volatile>"', text)
        if len(text) <= _BIG:
            return text
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "chars": len(text)}


def _argv(argv: list[str], out: Path) -> list[str]:
    return [a.replace("$OUT", str(out)).replace(F, str(FIXTURES)).replace("$ROOT", str(ROOT)) for a in argv]


def run_case(name: str) -> dict[str, Any]:
    """Run one case in-process: its argv, exit code, stdout, error lines and written files, normalised."""
    from ascend_tui.cli import main

    argv = CASES[name]
    out = Path(tempfile.mkdtemp(prefix=f"golden_{name}_"))
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(_argv(argv, out))
        files = {p.name: _record_file(p, out) for p in sorted(out.iterdir()) if p.is_file()}
    finally:
        shutil.rmtree(out, ignore_errors=True)
    errors = [_subst(line, out) for line in stderr.getvalue().splitlines() if line.startswith("ascend-tui:")]
    return {"argv": argv, "exit": code, "stdout": _subst(stdout.getvalue(), out).splitlines(),
            "errors": errors, "files": files}


def golden_path(name: str) -> Path:
    return CASES_DIR / f"{name}.json"


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(names: list[str]) -> int:
    if not FIXTURES.is_dir():
        print(f"fixtures not found at {FIXTURES}", file=sys.stderr)
        return 2
    CASES_DIR.mkdir(exist_ok=True)
    chosen = names or list(CASES)
    if not names:
        for stale in CASES_DIR.glob("*.json"):
            if stale.stem not in CASES:
                stale.unlink()
    for name in chosen:
        record = run_case(name)
        golden_path(name).write_text(dumps(record), encoding="utf-8")
        print(f"{name}: exit {record['exit']}, {len(record['stdout'])} lines, {len(record['files'])} files")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
