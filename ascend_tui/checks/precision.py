"""Precision metrics of a target tensor against its golden (reference) tensor, as msprobe defines them.

One pass over the data in chunks (`Accumulator`) gives cosine similarity, Euclidean distance,
max absolute and relative error, RMSE and the one-thousandth / five-thousandths error ratios
with msprobe 26.2.0's exact rules, so our numbers and its CSV agree; `classify` turns them into
a verdict under configurable `Thresholds`. numpy only: readers feed it arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

import numpy as np

METRIC_NAMES = ("cosine", "euc_dist", "max_abs", "max_rel", "one_thousandth", "five_thousandths", "rmse")
UNSUPPORTED, NAN, N_A, SHAPE_UNMATCH = "unsupported", "Nan", "N/A", "shape unmatched"
ERR_SCALAR = "This is type of 0-d tensor, can not calculate"
COSINE_ROUND_ABOVE = 0.9999
_FLOAT_KINDS = "f"


def _fmt12(x: Any) -> float:
    """msprobe's `format_value`: the value rounded through 12 decimals."""
    return float(f"{float(x):.12f}")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a compared tensor is a warning or an error; defaults from practice, every field configurable.

    Max absolute error is judged relative to the golden tensor's scale (its largest magnitude,
    at least 1), since 1e-2 means nothing for values of 1e4 and everything for values of 1e-4.
    `amplification`: how many times worse than its inputs an output must be to have introduced
    the error (and how much of it an isolated replay must reproduce).
    """

    cosine_warning: float = 0.999
    cosine_error: float = 0.99
    max_abs_warning: float = 1e-2
    max_abs_error: float = 1e-1
    amplification: float = 2.0
    norm_rel_warning: float = 0.1
    norm_rel_error: float = 0.5
    op_band: float = 8.0  # mixed dtypes: roundings of the run's dtype an op may add (`precision_growth`)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> Thresholds:
        """Defaults overridden by `values` (unknown names are a ValueError, so typos do not pass silently)."""
        if not values:
            return cls()
        known = {f.name for f in fields(cls)}
        bad = sorted(set(values) - known)
        if bad:
            raise ValueError(f"unknown precision threshold(s) {', '.join(bad)} (known: {', '.join(sorted(known))})")
        return replace(cls(), **{k: float(v) for k, v in values.items()})


@dataclass(frozen=True, slots=True)
class TensorMetrics:
    """msprobe's tensor-mode metrics of one pair plus RMSE; a metric is a float, or a msprobe marker string."""

    cosine: float | str
    euc_dist: float | str
    max_abs: float | str
    max_rel: float | str
    one_thousandth: float | str
    five_thousandths: float | str
    rmse: float | str
    numel: int = 0
    message: str = ""

    def value(self, name: str) -> float:
        """The metric as a float (NaN for markers such as 'unsupported')."""
        v = getattr(self, name)
        return float(v) if isinstance(v, (int, float)) else math.nan

    def to_json(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in METRIC_NAMES}, "numel": self.numel, "message": self.message}

    @classmethod
    def marker(cls, text: str, message: str, numel: int = 0) -> TensorMetrics:
        """Every metric set to one marker (`unsupported`, `N/A`, `shape unmatched`)."""
        return cls(*([text] * len(METRIC_NAMES)), numel=numel, message=message)


def _rel_dtype(n: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype msprobe computes relative error in: float32 at least, float64 once an int or float64 is involved."""
    n = n if n.kind in _FLOAT_KINDS else np.dtype(np.float64)
    b = b if b.kind in _FLOAT_KINDS else np.dtype(np.float64)
    return np.result_type(n, b, np.float32)


class Accumulator:
    """Metrics of a tensor pair fed in chunks of the flattened data (each chunk seen once).

    `feed` takes equal-length 1-D chunks of the target and golden data in the dtypes msprobe
    compares (bfloat16 already widened to float32). Where both sides hold Inf/NaN at the same
    positions those are zeroed, as msprobe does; different positions make every metric N/A.
    """

    __slots__ = ("numel", "rel_dtype", "eps", "dot", "nn", "bb", "dd", "max_abs", "max_rel", "c1", "c5",
                 "seen", "mismatch", "scalar", "_buf")

    def __init__(self, n_dtype: Any, b_dtype: Any, numel: int) -> None:
        self.numel = int(numel)
        self.rel_dtype = _rel_dtype(np.dtype(n_dtype), np.dtype(b_dtype))
        self.eps = np.finfo(self.rel_dtype).eps
        self.dot = self.nn = self.bb = self.dd = 0.0
        self.max_abs = self.max_rel = -math.inf
        self.c1 = self.c5 = self.seen = 0
        self.mismatch = False
        self.scalar: tuple[Any, Any] | None = None
        self._buf: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def _buffers(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Work arrays reused chunk after chunk: fresh multi-megabyte arrays cost more in page faults than the math."""
        if self._buf is None or self._buf[0].size < k:
            self._buf = (np.empty(k, np.float64), np.empty(k, np.float64), np.empty(k, self.rel_dtype),
                         np.empty(k, bool))
        return self._buf[0][:k], self._buf[1][:k], self._buf[2][:k], self._buf[3][:k]

    def feed(self, n: np.ndarray, b: np.ndarray) -> None:
        """Add one chunk (1-D arrays of the same length)."""
        if self.mismatch or n.size == 0:
            return
        if self.numel == 1:
            self.scalar = (n.reshape(-1)[0], b.reshape(-1)[0])
            self.seen += 1
            return
        n64, b64, re, mask = self._buffers(n.size)
        np.copyto(n64, n, casting="unsafe")
        np.copyto(b64, b, casting="unsafe")
        nn, bb = _dot(n64, n64), _dot(b64, b64)
        if not (math.isfinite(nn) and math.isfinite(bb)):  # Inf/NaN somewhere in this chunk
            n_nan, b_nan = np.isnan(n64), np.isnan(b64)
            n_inf, b_inf = np.isinf(n64), np.isinf(b64)
            if not (np.array_equal(n_nan, b_nan) and np.array_equal(n_inf, b_inf)):
                self.mismatch = True
                return
            bad = n_nan | n_inf
            n, b = n.copy(), b.copy()
            n[bad] = 0
            b[bad] = 0
            n64[bad] = 0.0
            b64[bad] = 0.0
            nn, bb = _dot(n64, n64), _dot(b64, b64)
        d = np.subtract(n64, b64, out=n64)
        dd = _dot(d, d)
        self.nn += nn
        self.bb += bb
        self.dd += dd
        self.dot += 0.5 * (nn + bb - dd)  # n.b without another pass; exact to ~eps * (|n|^2 + |b|^2)
        self.max_abs = max(self.max_abs, float(d.max()), -float(d.min()))
        nr = n.astype(self.rel_dtype, copy=False)
        br = b.astype(self.rel_dtype, copy=False)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.subtract(nr, br, out=re)
            np.divide(re, br, out=re)
            np.abs(re, out=re)
            top = float(re.max())
            if not math.isfinite(top):  # golden zeros: msprobe adds eps to both sides there, in this dtype
                at = np.flatnonzero(np.equal(br, 0, out=mask))
                eps = self.rel_dtype.type(self.eps)
                re[at] = np.abs(((nr[at] + eps) - (br[at] + eps)) / (br[at] + eps))
                top = float(re.max())
        self.max_rel = max(self.max_rel, top)
        self.c1 += int(np.count_nonzero(np.less(re, 0.001, out=mask)))
        self.c5 += int(np.count_nonzero(np.less(re, 0.005, out=mask)))
        self.seen += n.size

    def result(self) -> TensorMetrics:
        """The metrics, formatted and marked as msprobe writes them."""
        if self.numel == 0:
            return TensorMetrics.marker(UNSUPPORTED, "This is empty data, can not compare.")
        if self.mismatch:
            return TensorMetrics.marker(N_A, "The position of inf or nan in NPU and bench Tensor do not match.",
                                        self.numel)
        if self.numel == 1:
            return self._scalar_result()
        msgs: list[str] = []
        a, b = math.sqrt(self.nn), math.sqrt(self.bb)
        eps = float(np.finfo(float).eps)
        cosine: float | str
        if a <= eps and b <= eps:
            cosine = 1.0
        elif a <= eps:
            cosine = NAN
            msgs.append("Cannot compare by Cosine Similarity, All the data is Zero in npu dump data.")
        elif b <= eps:
            cosine = NAN
            msgs.append("Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data.")
        else:
            c = self.dot / (a * b)
            if math.isnan(c):
                cosine = NAN
            else:
                cosine = _fmt12(c)
                cosine = round(cosine, 6) if cosine > COSINE_ROUND_ABOVE else cosine
        max_abs: float | str = NAN if math.isnan(self.max_abs) else _fmt12(self.max_abs)
        max_rel: float | str = NAN if math.isnan(self.max_rel) else _fmt12(self.max_rel)
        return TensorMetrics(cosine, math.sqrt(self.dd), max_abs, max_rel, _fmt12(self.c1 / self.numel),
                             _fmt12(self.c5 / self.numel), math.sqrt(self.dd / self.numel), self.numel,
                             " ".join(msgs))

    def _scalar_result(self) -> TensorMetrics:
        """A one-element tensor: msprobe squeezes it to 0-d and computes only the absolute and relative error."""
        assert self.scalar is not None
        n, b = (np.asarray(v) for v in self.scalar)
        if n.dtype == bool:
            n, b = n.astype(float), b.astype(float)
        diff = np.abs(n - b)
        max_abs: float | str = NAN if np.isnan(diff) else _fmt12(diff)
        nr = n.astype(self.rel_dtype)
        br = b.astype(self.rel_dtype)
        if br == 0:
            nr, br = nr + self.eps, br + self.eps
        with np.errstate(divide="ignore", invalid="ignore"):
            re = np.abs((nr - br) / br)
        max_rel: float | str = NAN if np.isnan(re) else _fmt12(re)
        return TensorMetrics(UNSUPPORTED, UNSUPPORTED, max_abs, max_rel, UNSUPPORTED, UNSUPPORTED,
                             float(diff) if not np.isnan(diff) else NAN, 1, ERR_SCALAR)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """a . b without BLAS: BLAS threads spin against each other on a loaded machine, einsum does not."""
    return float(np.einsum("i,i->", a, b))


def tensor_metrics(target: np.ndarray, golden: np.ndarray, chunk: int = 1 << 16) -> TensorMetrics:
    """Metrics of two whole arrays (any shape; msprobe squeezes and flattens them)."""
    n, b = np.asarray(target), np.asarray(golden)
    if np.squeeze(n).shape != np.squeeze(b).shape:
        return TensorMetrics.marker(SHAPE_UNMATCH, "Shape of NPU and bench tensor do not match. Skipped.", n.size)
    acc = Accumulator(n.dtype, b.dtype, n.size)
    fn, fb = n.reshape(-1), b.reshape(-1)
    for start in range(0, fn.size, chunk):
        acc.feed(fn[start:start + chunk], fb[start:start + chunk])
    return acc.result()


@dataclass(frozen=True, slots=True)
class StatsMetrics:
    """msprobe's statistics-mode differences of one pair (target minus golden) and relative errors in percent."""

    max_diff: float | str
    min_diff: float | str
    mean_diff: float | str
    norm_diff: float | str
    max_rel: str
    min_rel: str
    mean_rel: str
    norm_rel: str

    @property
    def norm_rel_value(self) -> float:
        """The L2-norm relative error as a fraction (NaN when unknown)."""
        if self.norm_rel == "0":
            return 0.0
        try:
            return float(self.norm_rel.rstrip("%")) / 100.0 if self.norm_rel.endswith("%") else \
                math.inf if self.norm_rel == "inf" else math.nan
        except ValueError:
            return math.nan


def _kind(v: Any) -> str:
    """msprobe's class of a statistics cell: nan, inf, -inf, num, device, na or other ('None', text)."""
    text = str(v).strip().lower()
    if v is None:
        return "other"
    if text == "nan" or (isinstance(v, float) and math.isnan(v)):
        return "nan"
    if text == "inf" or v == math.inf:
        return "inf"
    if text == "-inf" or v == -math.inf:
        return "-inf"
    if isinstance(v, bool) or text in ("true", "false"):
        return "other"
    try:
        float(text)
        return "num"
    except ValueError:
        pass
    if any(d in text for d in ("npu", "cpu", "cuda")):
        return "device"
    return "na" if str(v) == N_A else "other"


_INF_RULES = {("inf", "num"): "inf", ("inf", "-inf"): "inf", ("-inf", "num"): "-inf", ("-inf", "inf"): "-inf",
              ("num", "inf"): "-inf", ("num", "-inf"): "inf"}


def _stat_diff(n: Any, b: Any) -> tuple[float | str, str]:
    """(difference, relative error) of one statistic by msprobe 26.2.0's `calc_summary_diff` rules."""
    if type(n) is float and type(b) is float and math.isfinite(n) and math.isfinite(b):  # the common case, fast
        if n == b and math.copysign(1.0, n) == math.copysign(1.0, b):
            return "0", "0"
        d = n - b
        return d, "inf" if b == 0 else f"{abs(d / b * 100)!r}%"
    if str(n) == str(b):
        return "0", "0"
    kn, kb = _kind(n), _kind(b)
    if kn == kb == "num":
        d = float(n) - float(b)
        return d, "inf" if float(b) == 0 else f"{abs(d / float(b) * 100)!r}%"
    if "na" in (kn, kb):
        return N_A, N_A
    if "nan" in (kn, kb) and {kn, kb} <= {"num", "nan", "inf", "-inf"}:
        return NAN, NAN
    if (kn, kb) in _INF_RULES:
        return _INF_RULES[(kn, kb)], _INF_RULES[(kn, kb)]
    if kn == kb == "device":
        return N_A, N_A
    return "Diff", "Diff"


def stats_metrics(target: tuple[Any, ...], golden: tuple[Any, ...]) -> StatsMetrics:
    """Differences of (max, min, mean, norm) statistics as msprobe writes them: '0' when equal, |N-B|/|B| in percent.

    Give the values as dump.json holds them (an int stays an int, a missing one is None): msprobe compares
    their text, so 127 and 127 are '0' and None against None is '0' too.
    """
    diffs: list[float | str] = []
    rels: list[str] = []
    for n, b in zip(target, golden):
        d, r = _stat_diff(n, b)
        diffs.append(d)
        rels.append(r)
    return StatsMetrics(*diffs, *rels)  # type: ignore[arg-type]


# -- verdicts ------------------------------------------------------------------------------------


def error_measure(m: TensorMetrics | None) -> float:
    """One number for "how wrong": 1 - cosine where defined, else the max relative error capped at 1 (NaN: none)."""
    if m is None:
        return math.nan
    cos = m.value("cosine")
    if not math.isnan(cos):
        return max(0.0, 1.0 - cos)
    if isinstance(m.cosine, str) and m.cosine in (NAN, N_A):
        return 1.0
    rel = m.value("max_rel")
    return min(1.0, rel) if not math.isnan(rel) else math.nan


STATS_ONLY = "compared by statistics only"


def from_norm_rel(rel: float) -> TensorMetrics:
    """Metrics of a pair known only by the relative error of its L2 norms (statistics-mode dumps)."""
    return TensorMetrics(UNSUPPORTED, UNSUPPORTED, UNSUPPORTED, rel, UNSUPPORTED, UNSUPPORTED, UNSUPPORTED,
                         message=STATS_ONLY)


def classify(m: TensorMetrics, scale: float, t: Thresholds) -> tuple[str | None, str]:
    """(severity or None, reason) of one compared tensor; `scale` is the golden tensor's largest magnitude."""
    if m.message == STATS_ONLY:
        rel = m.value("max_rel")
        if rel > t.norm_rel_error:
            return "error", f"L2 norm differs by {rel:.1%} > {t.norm_rel_error:.0%}"
        if rel > t.norm_rel_warning:
            return "warning", f"L2 norm differs by {rel:.1%} > {t.norm_rel_warning:.0%}"
        return None, ""
    if m.cosine == N_A:
        return "error", "Inf/NaN at different positions than in the golden tensor"
    if m.cosine == NAN and m.message:
        return "error", m.message
    cos = m.value("cosine")
    abs_err = m.value("max_abs")
    rel_abs = abs_err / max(1.0, abs(scale)) if math.isfinite(scale) else abs_err
    if not math.isnan(cos) and cos < t.cosine_error:
        return "error", f"cosine {cos:.6f} < {t.cosine_error}"
    if not math.isnan(rel_abs) and rel_abs > t.max_abs_error:
        return "error", f"max abs error {abs_err:.4g} > {t.max_abs_error} of scale {max(1.0, abs(scale)):.4g}"
    if not math.isnan(cos) and cos < t.cosine_warning:
        return "warning", f"cosine {cos:.6f} < {t.cosine_warning}"
    if not math.isnan(rel_abs) and rel_abs > t.max_abs_warning:
        return "warning", f"max abs error {abs_err:.4g} > {t.max_abs_warning} of scale {max(1.0, abs(scale)):.4g}"
    return None, ""
