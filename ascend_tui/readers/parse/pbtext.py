"""A schema-less reader of protobuf text format (what `DUMP_GE_GRAPH` writes) into dicts of fields.

protobuf's own Python `text_format` takes ~30 s on a 90 MB GE dump; this reader turns the
one-field-per-line layout the C++ printer writes into JSON with a few C-speed regex passes
and lets `json.loads` build the tree, falling back to a general tokenizer (any layout, exact
error positions) when a file does not have that layout. A field seen once holds its value; a
repeated field holds a list of its values, so callers ask for lists through `repeated`. Numbers
and strings come back as Python numbers and strings; enum names, `true`/`false` and `inf`/`nan`
come back as their words (the schema, which the caller knows, says what they mean).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ascend_tui.errors import InputError
from ascend_tui.progress import paused_gc

Message = dict[str, Any]

# One field per line, as protobuf's C++ and Python printers write it (see `_parse_lines`).
_ENUM_VALUE = re.compile(r": (-?[A-Za-z_][\w.]*)(?=\n|\Z)")
_NUMBER_COLON = re.compile(r": (?=[-+\d.])")
_MAX_INDENT = 256
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(['?av])|(.))", re.S)
_ODD_ESCAPE = re.compile(r"\\[0-7xX'?av]")

# The general tokenizer: strings, numbers/identifiers, punctuation, comments, whitespace.
_TOKEN = re.compile(r'''
    (?P<ws>[ \t\r\n,;]+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<word>-?[\w.+\-]+)
  | (?P<punct>[{}<>:\[\]])
''', re.X)
_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b",
              "f": "\f", "v": "\v", "?": "?"}


def repeated(msg: Message, field: str) -> list[Any]:
    """The values of `field` as a list (empty when absent), whether it appeared once or many times."""
    value = msg.get(field)
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def first(msg: Message, field: str, default: Any = None) -> Any:
    """The (first) value of `field`, or `default`."""
    value = msg.get(field, default)
    if isinstance(value, list):
        return value[0] if value else default
    return value


def _group(pairs: list[tuple[str, Any]]) -> Message:
    d = dict(pairs)
    if len(d) == len(pairs):
        return d
    out: Message = {}
    for k, v in pairs:
        have = out.get(k, _GROUP_MISSING)
        if have is _GROUP_MISSING:
            out[k] = v
        elif isinstance(have, _Repeated):
            have.append(v)
        else:
            out[k] = _Repeated((have, v))
    return {k: list(v) if isinstance(v, _Repeated) else v for k, v in out.items()}


class _Repeated(list):  # type: ignore[type-arg]
    """A list made by grouping repeated fields (told apart from a value while grouping)."""


_GROUP_MISSING = object()


def parse(text: str, path: Path | str = "") -> Message:
    """The top-level message of a protobuf text document; malformed text raises `InputError` naming the place."""
    with paused_gc():
        fast = _parse_lines(text)
        return fast if fast is not None else parse_tokens(text, path)


def _parse_lines(text: str) -> Message | None:
    """The fast path for one-field-per-line text, or None when the text has another layout.

    Only plain string replacements (C speed) and two regex passes turn `key: value` lines into
    `"key":value,` JSON: quotes inside strings are escaped, so `: "` and ` {` at a line end only
    occur at field boundaries; a number-like `: 5` inside a string leaves an unbalanced quote,
    which `json.loads` rejects, and the caller falls back to the tokenizer.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    escaped = "\\" in text and _ODD_ESCAPE.search(text) is not None
    if escaped:
        text = _ESCAPE.sub(_json_escape, text)
    body = _strip_indent("\n" + text.strip())
    while "\n\n" in body:  # blank lines
        body = body.replace("\n\n", "\n")
    body = _ENUM_VALUE.sub(r': "\1"', body)
    body = body.replace("\n", '\n"').replace('\n"}', "\n}").replace(': "', '":"')
    body = _NUMBER_COLON.sub('":', body)
    body = body.replace(": {\n", " {\n").replace(" {\n", '":{\n')
    body = body.replace("\n", ",\n").replace("{,\n", "{\n").replace(",\n}", "\n}")
    try:
        value = json.loads("{" + body.strip(",\n ") + "}", object_pairs_hook=_group)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    return _redecode(value) if escaped else value


def _strip_indent(text: str) -> str:
    """`text` with the spaces after every newline removed: one C-speed replace per indentation depth present."""
    depth = 0
    while depth < _MAX_INDENT and "\n" + " " * (depth + 1) in text:
        depth += 1
    for k in range(depth, 0, -1):
        run = "\n" + " " * k
        if run in text:
            text = text.replace(run, "\n")
    return text


def _redecode(value: Any) -> Any:
    """Strings whose octal-escaped bytes came through as U+0080-U+00FF, decoded as the UTF-8 they were."""
    if isinstance(value, str):
        if any("\x80" <= c <= "\xff" for c in value):
            try:
                return value.encode("latin-1").decode("utf-8")
            except (UnicodeEncodeError, UnicodeDecodeError):
                return value
        return value
    if isinstance(value, list):
        return [_redecode(v) for v in value]
    if isinstance(value, dict):
        return {k: _redecode(v) for k, v in value.items()}
    return value


def _json_escape(m: re.Match[str]) -> str:
    """A C escape JSON lacks, as the JSON escape of the same byte (octal and hex bytes become U+0000-U+00FF)."""
    octal, hexa, simple, other = m.groups()
    if octal is not None:
        return f"\\u{int(octal, 8) & 0xFF:04x}"
    if hexa is not None:
        return f"\\u{int(hexa, 16):04x}"
    if simple is not None:
        return {"'": "'", "?": "?", "a": "\\u0007", "v": "\\u000b"}[simple]
    return m.group(0)


def parse_tokens(text: str, path: Path | str = "") -> Message:
    """The general tokenizer: any whitespace layout, `<>` or `{}` messages, `[a, b]` lists, comments."""
    tokens = [(m.lastgroup, m.group(), m.start()) for m in _TOKEN.finditer(text) if m.lastgroup != "ws"]
    covered = sum(len(m.group()) for m in _TOKEN.finditer(text))
    if covered != len(text):
        bad = _first_gap(text)
        raise InputError(path, f"unexpected character {text[bad]!r} in protobuf text", where=_place(text, bad))
    stack: list[list[tuple[str, Any]]] = [[]]
    i, n = 0, len(tokens)

    def fail(pos: int, what: str) -> InputError:
        return InputError(path, what, where=_place(text, pos))

    while i < n:
        kind, tok, pos = tokens[i]
        if kind == "punct" and tok in "}>":
            if len(stack) == 1:
                raise fail(pos, f"unbalanced {tok!r} in protobuf text")
            pairs = stack.pop()
            name = stack[-1].pop()[0]
            stack[-1].append((name, _group(pairs)))
            i += 1
            continue
        if kind != "word":
            raise fail(pos, f"expected a field name, found {tok!r}")
        i += 1
        colon = i < n and tokens[i][1] == ":"
        if colon:
            i += 1
        if i >= n:
            raise fail(pos, f"field {tok!r} has no value (the file ends)")
        vkind, value, vpos = tokens[i]
        if vkind == "punct" and value in "{<":
            stack[-1].append((tok, None))
            stack.append([])
            i += 1
        elif vkind == "punct" and value == "[":
            i += 1
            while i < n and tokens[i][1] != "]":
                stack[-1].append((tok, _scalar(tokens[i][0], tokens[i][1], tokens[i][2], fail)))
                i += 1
            if i >= n:
                raise fail(vpos, "unclosed '[' in protobuf text")
            i += 1
        elif colon and vkind in ("str", "word"):
            parts = [value]
            i += 1
            while vkind == "str" and i < n and tokens[i][0] == "str":  # "a" "b" is one string
                parts.append(tokens[i][1])
                i += 1
            stack[-1].append((tok, _scalar(vkind, parts[0], vpos, fail) if len(parts) == 1
                              else "".join(_unquote(p) for p in parts)))
        else:
            raise fail(vpos, f"expected a value or '{{' after {tok!r}, found {value!r}")
    if len(stack) != 1:
        raise InputError(path, "protobuf text ends inside a message (truncated file?)",
                         where=_place(text, len(text)))
    return _group(stack[0])


def _scalar(kind: str | None, tok: str, pos: int, fail: Any) -> Any:
    if kind == "str":
        return _unquote(tok)
    try:
        return int(tok, 0)
    except ValueError:
        pass
    try:
        return float(tok.rstrip("fF"))
    except ValueError:
        pass
    if re.fullmatch(r"-?[A-Za-z_][\w.]*", tok):
        return tok
    raise fail(pos, f"{tok!r} is not a protobuf value")


def _unquote(tok: str) -> str:
    body = tok[1:-1]
    if "\\" not in body:
        return body
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            j = body.find("\\", i)
            j = len(body) if j < 0 else j
            out += body[i:j].encode("utf-8")
            i = j
            continue
        nxt = body[i + 1:i + 2]
        if nxt and nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            assert m is not None
            out.append(int(m.group(), 8) & 0xFF)
            i += 1 + len(m.group())
        elif nxt in ("x", "X"):
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            out.append(int(m.group(), 16) if m else ord("x"))
            i += 2 + (len(m.group()) if m else 0)
        else:
            out += _C_ESCAPES.get(nxt, nxt).encode("utf-8")
            i += 2
    return out.decode("utf-8", errors="replace")


def _first_gap(text: str) -> int:
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() != pos:
            return pos
        pos = m.end()
    return pos


def _place(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"{line}:{col}"
