"""The words of a sanitizer's report: one line per `MemoryEvent` a person can act on."""

from __future__ import annotations

from ascend_tui.evidence import MemoryEvent, user_frame
from ascend_tui.fmt import count as _n


def describe(e: MemoryEvent) -> str:
    """One line a person can act on, in the words of the tool's report."""
    x = e.extra
    at = f" at {hex(e.address)}" if e.address is not None else ""
    on = f" on {e.memory_space}" if e.memory_space else ""
    kernel = f" in {e.kernel}" if e.kernel else ""
    where = [p for p in (f"thread {e.thread}" if e.thread else "", f"block {e.block}" if e.block else "",
                         user_frame(e.frames) or "") if p]
    tail = f" ({', '.join(where)})" if where else ""
    size = f" of {_n(e.size)} bytes" if e.size is not None else ""
    k = e.kind
    if k == "out_of_bounds" and x.get("stomping"):
        other = "thread" if e.thread else "core"
        return f"write{size}{at}{on}{kernel} overlaps memory another {other} already wrote{tail}"
    if k == "out_of_bounds":
        alloc = x.get("allocation")
        near = (f": {_n(alloc['distance'])} bytes {alloc['relation']} the allocation at {alloc['address']} "
                f"of {_n(alloc['size'])} bytes") if alloc else ""
        return f"out-of-bounds {x.get('access', 'access')}{size}{at}{on}{kernel}{near}{tail}"
    if k in ("illegal_access", "misaligned", "uninitialized_read"):
        what = {"illegal_access": f"illegal {x.get('access', 'access')}", "misaligned": "misaligned access",
                "uninitialized_read": "read of uninitialized memory"}[k]
        return f"{what}{size}{at}{on}{kernel}{tail}"
    if k == "illegal_free":
        return f"{str(x.get('problem', 'illegal free')).lower()}{at}{on}{tail}"
    if k == "leak":
        return f"{_n(e.size)} bytes leaked{at}{on}" + (f", allocated at {e.frames[0]}" if e.frames else "")
    if k == "unused_memory":
        return f"{_n(e.size)} bytes allocated{at}{on} were never used{tail}"
    if k == "race":
        parts = [f"{a['pipe'] + ' ' if a.get('pipe') else ''}{a['access']}"
                 f"{' by thread ' + a['thread'] if a.get('thread') else ''}"
                 f"{' at ' + f if (f := user_frame(a['frames'])) else ''}" for a in x.get("accesses", [])]
        count = f" ({_n(x['hazards'])} hazards)" if x.get("hazards") else ""
        return f"{x['hazard'] + ' hazard' if x.get('hazard') else 'data race'}{on}{kernel}: {' vs '.join(parts)}{count}"
    if k == "sync" and x.get("src_pipe"):
        return f"{x.get('problem')} {x.get('instruction')} from {x['src_pipe']} to {x.get('dst_pipe')}{kernel}{tail}"
    if k == "sync":
        return f"barrier error{kernel}: {x.get('problem', '')}{tail}"
    if k == "api_error" and x.get("api"):
        why = f', "{x["reason"]}"' if x.get("reason") else ""
        return f"{x['error']} (error {x['code']}{why}) on CUDA API call {x['api']}"
    if k == "api_error":
        return f"CUDA API {x.get('severity', 'error')}: {x.get('reason', '')}"
    if k == "internal_error":
        return f"msSanitizer internal error (serialNo:{x.get('serial_no')}); its results for this run may be incomplete"
    if k == "register_not_reset":
        return f"register {x.get('register')} was not reset to its default{kernel} (block {e.block}) {x.get('detail', '')}".strip()
    return f"{k.replace('_', ' ')}{size}{at}{on}{kernel}{tail}"
