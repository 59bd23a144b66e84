"""Affinity APIs: torch_npu replacements for optimizer steps and aten op sequences the timeline shows, as msprof-analyze advises.

The rules and the way they match are msprof-analyze's schedule advisor's (mstt, Apache-2.0):
`advisor/rules/timeline_fusion_ops.yaml` for the rules, `TimelineFusionOpsAnalyzer` for the
matching. An optimizer rule (`Adam.step`) matches a framework op `Optimizer.step#Adam.step`; an
aten rule matches consecutive first-level aten ops of the timeline (`aten::` stripped, the ops
another aten op encloses dropped) — a plain rule (`add-reciprocal-mul`) as exactly that run, a
rule with groups (`(permute)-(contiguous){0,1}-(reshape)`) as a regular expression over the
names joined `-name--name-`. The rule set is the one the advisor uses by default (CANN 8.0.0,
torch 2.1.0: entries 0 to 3 of the yaml, each inheriting the one before).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ascend_tui.evidence import Finding
from ascend_tui.graph.profile import Codes

SOURCE = "msprof-analyze advisor/rules/timeline_fusion_ops.yaml (CANN 8.0.0 / torch 2.1.0 rule set, unique_id 0-3)"
OPTIMIZER_PREFIX = "Optimizer.step#"
OPTIMIZER_RULES: dict[str, str] = {  # the step's `Optimizer.step#<rule>` name -> the fused optimizer
    "AdamW.step": "torch_npu.optim.NpuFusedAdamW", "SGD.step": "torch_npu.optim.NpuFusedSGD",
    "Adadelta.step": "torch_npu.optim.NpuFusedAdadelta", "Lamb.step": "torch_npu.optim.NpuFusedLamb",
    "AdamP.step": "torch_npu.optim.NpuFusedAdamP", "BertAdam.step": "torch_npu.optim.NpuFusedBertAdam",
    "RMSprop.step": "torch_npu.optim.NpuFusedRMSprop", "RMSpropTF.step": "torch_npu.optim.NpuFusedRMSpropTF",
    "Adam.step": "torch_npu.optim.NpuFusedAdam",
}
ATEN_RULES: dict[str, tuple[str, ...]] = {  # affinity API -> the aten sequences it replaces
    "torch_npu.npu_confusion_transpose": (
        "(permute)-(contiguous){0,1}-(reshape)", "(permute)-(contiguous){0,1}-(view)",
        "(transpose)-(contiguous){0,1}-(reshape)", "(transpose)-(contiguous){0,1}-(view)",
        "(reshape)-(contiguous){0,1}-(permute)", "(reshape)-(contiguous){0,1}-(transpose)",
        "(view)-(contiguous){0,1}-(permute)", "(view)-(contiguous){0,1}-(transpose)"),
    "torch_npu.fast_gelu": ("gelu",),
    "torch_npu.npu_scaled_masked_softmax": ("softmax-(mul){0,1}-(masked_fill_)", "softmax-(mul){0,1}-(add)"),
    "optimizer.clip_grad_norm_fused_": ("add-reciprocal-mul",),
    "torch_npu.npu_fusion_attention": (
        "matmul-(add){0,1}-(mul){0,1}-(masked_fill_){0,1}-softmax-(dropout){0,1}-matmul",
        "matmul-(add){0,1}-(mul){0,1}-(add){0,1}-softmax-(dropout){0,1}-matmul"),
    "torch_npu.npu_rotary_mul": ("(chunk)-neg-cat-(mul){0,2}-add", "(slice)-neg-cat-(mul){0,2}-add"),
    "torch_npu.npu_rms_norm": ("(pow){0,1}-(mean){0,1}-(add){0,1}-rsqrt-mul-(type_as){0,1}",),
    "torch_npu.npu_swiglu": ("(slice)-silu-mul", "(chunk)-silu-mul", "(slice)-mul-silu", "(chunk)-mul-silu",
                             "(slice)-sigmoid-mul-mul", "(chunk)-sigmoid-mul-mul", "(slice)-mul-sigmoid-mul",
                             "(chunk)-mul-sigmoid-mul", "(slice)-mul-mul-sigmoid", "(chunk)-mul-mul-sigmoid"),
    "torch_npu.npu_geglu": ("(slice)-gelu-mul", "(chunk)-gelu-mul", "(slice)-mul-gelu", "(chunk)-mul-gelu"),
    "torch_npu.npu_group_norm_silu": ("group_norm-silu",),
    "torch.addmm": ("mul-mul-add",),
    "torch_npu.npu_add_layer_norm": ("add-layer_norm",),
}


@dataclass(frozen=True, slots=True)
class Match:
    """One affinity API the timeline calls for: what replaces what, and how often the pattern occurs."""

    api: str
    rule: str
    count: int


def pattern(rule: str) -> tuple[str, bool]:
    """The advisor's form of a rule: (regex over `-name-` tokens, True) when it has groups, else (rule, False)."""
    if "(" not in rule and ")" not in rule:
        return rule, False
    out = ""
    for part in rule.split("-"):
        m = re.search(r"\((\w+)\)", part)
        lo, hi = (m.start() + 1, m.end() - 1) if m else (0, len(part))
        names = "|".join(f"-{name.strip()}-" for name in part[lo:hi].split("|"))
        out += f"({names}){part[hi + 1:]}"
    return out, True


def aten_ops(extra: Mapping[str, Any]) -> list[str]:
    """The first-level aten ops a reader stored in a profile's extra (`aten_sequence`), in order."""
    data = extra.get("aten_sequence")
    if not data:
        return []
    codes = Codes.from_json(data)
    return [codes.values[c] for c in codes.codes.tolist()]


def affinity(extra: Mapping[str, Any], framework_ops: Iterable[tuple[str, int]]) -> list[Finding]:
    """The affinity-API findings of a profile: its aten sequence, and the optimizer steps among its framework ops
    (name, calls) and its timeline (`optimizer_steps`)."""
    calls = dict(framework_ops)
    for name, n in (extra.get("optimizer_steps") or {}).items():
        calls[name] = max(calls.get(name, 0), int(n))
    return findings(match_optimizers(calls.items()) + match_aten(aten_ops(extra)))


def match_aten(ops: Sequence[str]) -> list[Match]:
    """The aten rules the op sequence matches, with how many times each pattern occurs."""
    if not ops:
        return []
    joined = "".join(f"-{op}-" for op in ops)
    out = []
    for api, rules in ATEN_RULES.items():
        for rule in rules:
            regex, is_regex = pattern(rule)
            if is_regex:
                count = sum(1 for _ in re.finditer(regex, joined))
            else:
                want = rule.split("-")
                count = sum(1 for i in range(len(ops) - len(want) + 1) if list(ops[i:i + len(want)]) == want)
            if count:
                out.append(Match(api, rule, count))
    return out


def match_optimizers(framework_ops: Iterable[tuple[str, int]]) -> list[Match]:
    """The optimizer rules the framework ops (name, calls) match: `Optimizer.step#Adam.step` -> NpuFusedAdam."""
    out = []
    for name, count in framework_ops:
        if name.startswith(OPTIMIZER_PREFIX):
            api = OPTIMIZER_RULES.get(name[len(OPTIMIZER_PREFIX):])
            if api is not None:
                out.append(Match(api, name[len(OPTIMIZER_PREFIX):], count))
    return out


def findings(matches: Sequence[Match]) -> list[Finding]:
    """One info finding per affinity API, naming the pattern found and the rule's source."""
    by_api: dict[str, list[Match]] = {}
    for m in matches:
        by_api.setdefault(m.api, []).append(m)
    out = []
    for api, ms in by_api.items():
        seen = ", ".join(f"{m.rule} ({m.count}x)" for m in ms)
        optimizer = api.startswith("torch_npu.optim.")
        what = f"the optimizer step {seen}" if optimizer else f"the aten sequence {seen}"
        out.append(Finding("profile", "affinity_api", "info", "", "", "", -1,
                           f"affinity API {api} can replace {what} found in the timeline",
                           metrics={"api": api, "patterns": [m.rule for m in ms], "count": sum(m.count for m in ms),
                                    "source": SOURCE},
                           hint=(f"construct the optimizer as {api}(model.parameters(), ...) instead; it fuses the "
                                 "per-parameter updates into a few kernels") if optimizer else
                           f"call {api} where the code runs that sequence (the timeline's call stacks show where)"))
    return out
