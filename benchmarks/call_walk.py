"""Walk one CLI run through the calls: how often control enters each ascend_tui module from another one.

    PYTHONPATH=. python benchmarks/call_walk.py compare DUMP_A DUMP_B --workers 1 -q

A module "entered" N times means N calls from code in another module into it (calls within a
module, and calls into the standard library or third-party code, are not counted); a walk where a
module is entered many times bounces between layers. Output: module, entries, distinct callers.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections import Counter, defaultdict


def walk(argv: list[str]) -> tuple[int, Counter[str], dict[str, set[str]], dict[str, Counter[str]]]:
    from ascend_tui.cli.main import main

    entries: Counter[str] = Counter()
    callers: dict[str, set[str]] = defaultdict(set)
    functions: dict[str, Counter[str]] = defaultdict(Counter)

    def module_of(frame: object) -> str:
        return getattr(frame, "f_globals", {}).get("__name__", "")

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event != "call":
            return
        callee = module_of(frame)
        code = frame.f_code
        if code.co_qualname.startswith("__create_fn__") or code.co_name == "__getattr__":
            return  # a dataclass being made at import time, `from ascend_tui import x`: no step of the walk
        if not callee.startswith("ascend_tui") or code.co_name in ("<module>", "<genexpr>", "<listcomp>",
                                                                          "<dictcomp>", "<setcomp>", "<lambda>"):
            return
        back = frame.f_back
        while back is not None and not module_of(back).startswith("ascend_tui"):
            back = back.f_back  # through the standard library (argparse, importlib, functools) to our caller
        caller = module_of(back) if back is not None else "<top>"
        if caller != callee:
            entries[callee] += 1
            callers[callee].add(caller)
            functions[callee][code.co_qualname] += 1

    out = io.StringIO()
    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(out):
            code = main(argv)
    finally:
        sys.setprofile(None)
    return code, entries, callers, functions


if __name__ == "__main__":
    code, entries, callers, functions = walk(sys.argv[1:])
    print(f"exit {code}; {len(entries)} modules entered, {sum(entries.values())} entries in all")
    for module, n in entries.most_common():
        what = ", ".join(f"{f} x{c}" if c > 1 else f for f, c in functions[module].most_common(4))
        more = len(functions[module]) - 4
        print(f"{n:6}  {module}  <- {', '.join(sorted(c.removeprefix('ascend_tui.') for c in callers[module]))}"
              f"\n        {what}{f', +{more} more functions' if more > 0 else ''}")
