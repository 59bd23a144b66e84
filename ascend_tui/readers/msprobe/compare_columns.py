"""Every column of msprobe's compare result, as the precision table carries it: one key, msprobe's header, a short label.

The precision table (`run.extra["precision"]`: `columns` and `rows`) starts with the view's ten
columns (`name, node, slot, cosine, max_abs, max_rel, rmse, one_thousandth, result, attribution`)
and, when its source knows them, goes on with `EXTRA_KEYS` in this order: the offline compare and
the compare-result reader both write them; the live check does not. A cell msprobe would leave
empty holds "N/A"; numbers stay numbers (statistics mode's relative errors stay msprobe's `12.5%`).
The stack cell holds the row's record name, a key of the table's `stacks` (record -> msprobe's
NPU_Stack_Info text), so a saved investigation keeps each stack once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CompareColumn:
    """One column: its key in the precision table, msprobe's CSV header, the view's label, and whether it is a number."""

    key: str
    header: str
    label: str
    numeric: bool
    modes: str = "tsm"  # which compare modes have it: t(ensor), s(tatistics), m(d5)


# In msprobe's CSV order; "name" (NPU Name), "cosine", "max_abs", "max_rel", "one_thousandth" and "result"
# are among the view's first ten columns; "rmse", "attribution" and "node" are ours.
COLUMNS: tuple[CompareColumn, ...] = (
    CompareColumn("name", "NPU Name", "tensor", False),
    CompareColumn("bench_name", "Bench Name", "bench name", False),
    CompareColumn("npu_dtype", "NPU Dtype", "npu dtype", False),
    CompareColumn("bench_dtype", "Bench Dtype", "bench dtype", False),
    CompareColumn("npu_shape", "NPU Tensor Shape", "npu shape", False),
    CompareColumn("bench_shape", "Bench Tensor Shape", "bench shape", False),
    CompareColumn("npu_requires_grad", "NPU Requires_grad", "npu grad", False),
    CompareColumn("bench_requires_grad", "Bench Requires_grad", "bench grad", False),
    CompareColumn("cosine", "Cosine", "cosine", True, "t"),
    CompareColumn("euc_dist", "EucDist", "eucdist", True, "t"),
    CompareColumn("max_abs", "MaxAbsErr", "max abs err", True, "ts"),
    CompareColumn("max_rel", "MaxRelativeErr", "max rel err", True, "ts"),
    CompareColumn("one_thousandth", "One Thousandth Err Ratio", "1‰ ratio", True, "t"),
    CompareColumn("five_thousandths", "Five Thousandths Err Ratio", "5‰ ratio", True, "t"),
    CompareColumn("rmse", "RMSE (ours)", "rmse", True, "t"),
    CompareColumn("max_diff", "Max diff", "max diff", True, "s"),
    CompareColumn("min_diff", "Min diff", "min diff", True, "s"),
    CompareColumn("mean_diff", "Mean diff", "mean diff", True, "s"),
    CompareColumn("norm_diff", "L2norm diff", "l2norm diff", True, "s"),
    CompareColumn("max_rel_diff", "MaxRelativeErr (of max)", "max rel", True, "s"),
    CompareColumn("min_rel_diff", "MinRelativeErr", "min rel", True, "s"),
    CompareColumn("mean_rel_diff", "MeanRelativeErr", "mean rel", True, "s"),
    CompareColumn("norm_rel_diff", "NormRelativeErr", "norm rel", True, "s"),
    CompareColumn("npu_md5", "NPU MD5", "npu md5", False, "m"),
    CompareColumn("bench_md5", "BENCH MD5", "bench md5", False, "m"),
    CompareColumn("npu_max", "NPU max", "npu max", True, "ts"),
    CompareColumn("npu_min", "NPU min", "npu min", True, "ts"),
    CompareColumn("npu_mean", "NPU mean", "npu mean", True, "ts"),
    CompareColumn("npu_norm", "NPU l2norm", "npu l2norm", True, "ts"),
    CompareColumn("bench_max", "Bench max", "bench max", True, "ts"),
    CompareColumn("bench_min", "Bench min", "bench min", True, "ts"),
    CompareColumn("bench_mean", "Bench mean", "bench mean", True, "ts"),
    CompareColumn("bench_norm", "Bench l2norm", "bench l2norm", True, "ts"),
    CompareColumn("requires_grad_consistent", "Requires_grad Consistent", "grad same", False),
    CompareColumn("result", "Result", "result", False),
    CompareColumn("accuracy", "Accuracy Reached or Not", "accuracy", False),
    CompareColumn("err_message", "Err_message", "err message", False),
    CompareColumn("stack", "NPU_Stack_Info", "stack", False),
    CompareColumn("data_name", "Data_name", "data name", False, "t"),
    CompareColumn("attribution", "Attribution (ours)", "attribution", False),
    CompareColumn("node", "operator (ours)", "operator", False),
)
BY_KEY: dict[str, CompareColumn] = {c.key: c for c in COLUMNS}

# The keys after the view's first ten columns, in the order the rows hold them. "data_name" is two cells.
EXTRA_KEYS: tuple[str, ...] = (
    "bench_name", "npu_dtype", "bench_dtype", "npu_shape", "bench_shape", "npu_requires_grad", "bench_requires_grad",
    "euc_dist", "five_thousandths", "max_diff", "min_diff", "mean_diff", "norm_diff", "max_rel_diff",
    "min_rel_diff", "mean_rel_diff", "norm_rel_diff", "npu_md5", "bench_md5", "npu_max", "npu_min", "npu_mean",
    "npu_norm", "bench_max", "bench_min", "bench_mean", "bench_norm", "requires_grad_consistent", "accuracy",
    "err_message", "stack", "npu_data_name", "bench_data_name",
)

# msprobe header -> key, for reading a compare result CSV (tensor-mode names; statistics mode's
# MaxRelativeErr is the relative error of the max, so the reader maps it by mode).
FROM_HEADER: dict[str, str] = {c.header: c.key for c in COLUMNS if c.header and "(" not in c.header}
STATISTICS_HEADER: dict[str, str] = {"MaxRelativeErr": "max_rel_diff"}
