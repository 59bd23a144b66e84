"""Load a user's model file: `path/to/model.py[:factory]` whose factory returns `(model, inputs)` or
`(model, args, kwargs)`; the model may be any callable (an `nn.Module`, a function, a compiled module)."""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ascend_tui.errors import InputError, TargetError


@dataclass(slots=True)
class Target:
    """A loaded model file: the module, its factory's result and the optional `loss` function."""

    spec: str
    path: Path
    factory: str
    module: ModuleType
    model: Any
    inputs: Any

    @property
    def loss(self) -> Any | None:
        """The file's `loss(outputs)`, used for backward runs when present."""
        fn = getattr(self.module, "loss", None)
        return fn if callable(fn) else None


def split_spec(spec: str) -> tuple[Path, str]:
    """`model.py:make` -> (Path('model.py'), 'make'); the factory defaults to `build`."""
    path, sep, factory = spec.rpartition(":")
    if not sep or not factory.isidentifier() or not path:
        return Path(spec), "build"
    return Path(path), factory


def user_traceback(exc: BaseException, path: Path) -> str:
    """The traceback of `exc` restricted to frames in the user's file (ours and torch's are noise)."""
    want = os.path.realpath(path)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == want]
    lines = traceback.format_list(frames) if frames else []
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


def _first_user_line(exc: BaseException, path: Path) -> str:
    want = os.path.realpath(path)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == want]
    return f"line {frames[-1].lineno}: " if frames else ""


def load_module(path: Path) -> ModuleType:
    """Import a Python file by path as a fresh module; its own errors become `TargetError`."""
    if not path.exists():
        raise InputError(path, "no such file")
    if path.is_dir():
        raise InputError(path, "is a folder, expected a Python file that defines build()")
    if path.suffix != ".py":
        raise InputError(path, "expected a Python file (.py) that defines build()")
    name = f"ascend_tui_target_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InputError(path, "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise TargetError(path, f"line {exc.lineno}: SyntaxError: {exc.msg}",
                          user_traceback="".join(traceback.format_exception_only(type(exc), exc))) from None
    except BaseException as exc:  # noqa: BLE001 - anything the user's file raises is their error
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise TargetError(path, f"{_first_user_line(exc, path)}import failed: {type(exc).__name__}: {exc}",
                          user_traceback=user_traceback(exc, path)) from None
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return module


def load_target(spec: str) -> Target:
    """Import the file and call its factory; every failure is one line naming the file."""
    path, factory = split_spec(spec)
    module = load_module(path)
    fn = getattr(module, factory, None)
    if fn is None:
        raise InputError(path, f"defines no {factory}() — it must return (model, inputs) or (model, args, kwargs)")
    if not callable(fn):
        raise InputError(path, f"{factory} is not a function — it must return (model, inputs)")
    try:
        result = fn()
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise TargetError(path, f"{_first_user_line(exc, path)}{factory}() raised {type(exc).__name__}: {exc}",
                          user_traceback=user_traceback(exc, path)) from None
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise InputError(path, f"{factory}() must return (model, inputs) or (model, args, kwargs), "
                               f"got {type(result).__name__}")
    model = result[0]
    if not callable(model):
        raise InputError(path, f"{factory}() returned a model that is not callable ({type(model).__name__})")
    if len(result) == 3:
        args, kwargs = result[1], result[2]
        if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
            raise InputError(path, f"{factory}() returned (model, args, kwargs) with args a "
                                   f"{type(args).__name__} and kwargs a {type(kwargs).__name__}: expected a tuple "
                                   f"and a dict")
        from ascend_tui.live.tensors import Inputs

        return Target(spec, path, factory, module, model, Inputs(tuple(args), dict(kwargs)))
    inputs = result[1]
    if not isinstance(inputs, (tuple, list, dict)):
        inputs = (inputs,)
    return Target(spec, path, factory, module, model, tuple(inputs) if isinstance(inputs, list) else inputs)


def model_error(exc: BaseException, target: str, during: str) -> TargetError:
    """Turn an exception raised inside the user's model into a `TargetError` with only their frames."""
    from ascend_tui.live.frames import is_user_file

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if is_user_file(f.filename)]
    path = split_spec(target)[0] if target else "model"
    where = ""
    if frames:  # a line number is only ever shown with its own file
        last = frames[-1]
        own = target and os.path.realpath(last.filename) == os.path.realpath(path)
        where = f"line {last.lineno}: " if own else f"{last.filename}:{last.lineno}: "
    text = "".join(traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)).rstrip()
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    lowered = message.lower()
    memory = isinstance(exc, IndexError) or any(s in lowered for s in _MEMORY_SYMPTOMS)
    if memory:
        message += " — run with --checks memory to find the op that produced the bad index or address"
    return TargetError(path, f"{where}{during} raised {type(exc).__name__}: {message}", user_traceback=text,
                       memory_symptom=memory)


_MEMORY_SYMPTOMS = ("out of range", "out of bounds", "illegal memory access", "illegal address",
                    "device-side assert", "aicore exception", "memory access fault")
