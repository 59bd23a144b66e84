"""A strict reader for the block-style YAML subset msprobe's mapping files use (no PyYAML needed).

msprobe's `-dm`, `-cm`, `-am` and `-lm` files are plain `key: value` maps, a map of maps, or a
list of maps whose values are scalars or lists of scalars. This reads exactly that: nested block
mappings and sequences, plain, single- and double-quoted scalars (ints, floats, booleans, null
as YAML 1.1 reads them), one-line flow lists of scalars, `#` comments, `{}` as an empty map.
Anything else (flow maps, nested flow lists, anchors, tags, multi-line scalars) is refused with
the line number, never guessed. All 28 YAML files msprobe 26.2 ships read equal to PyYAML's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ascend_tui.errors import InputError

_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(?:\d[\d_]*)?\.\d*(?:[eE][-+]?\d+)?$|^[-+]?\d+[eE][-+]?\d+$")
_KEY = re.compile(r"^(?P<k>[^\s#].*?):(?:[ \t]+(?P<v>.*))?$")
_UNSUPPORTED = "&*!|>%@`{["


def read_yaml(path: Path) -> Any:
    """The value of a YAML file in msprobe's mapping subset; an InputError names the line that is not."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(path, f"cannot read the mapping file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(path, "the mapping file is not UTF-8 text") from None
    return parse_yaml(text, path)


def parse_yaml(text: str, path: Path | str = "<yaml>") -> Any:
    """Parse `text` (see the module docstring for the subset)."""
    return _Parser(text, path).parse()


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"" and (i == 0 or line[i - 1] in " \t:-"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


class _Parser:
    def __init__(self, text: str, path: Path | str) -> None:
        self.path = path
        self.lines: list[tuple[int, int, str]] = []
        for n, raw in enumerate(text.splitlines(), 1):
            body = _strip_comment(raw).rstrip()
            stripped = body.lstrip(" ")
            if not stripped or (not self.lines and stripped == "---"):
                continue
            if stripped.startswith("\t"):
                self.fail(n, "tabs are not allowed for indentation")
            if stripped in ("---", "..."):
                self.fail(n, "only one YAML document is read")
            self.lines.append((n, len(body) - len(stripped), stripped))
        self.i = 0

    def fail(self, line: int, message: str) -> None:
        raise InputError(self.path, f"line {line}: {message}")

    def parse(self) -> Any:
        if not self.lines:
            return None
        value = self.block(self.lines[0][1])
        if self.i < len(self.lines):
            self.fail(self.lines[self.i][0], "unexpected indentation")
        return value

    def block(self, indent: int) -> Any:
        return self.seq(indent) if _is_item(self.lines[self.i][2]) else self.mapping(indent)

    def child(self, indent: int) -> Any:
        """The value under a `key:` or `-` line: a deeper block, or null when nothing is nested."""
        if self.i < len(self.lines) and self.lines[self.i][1] > indent:
            return self.block(self.lines[self.i][1])
        return None

    def seq(self, indent: int) -> list[Any]:
        out: list[Any] = []
        while self.i < len(self.lines):
            n, ind, text = self.lines[self.i]
            if ind < indent or (ind == indent and not _is_item(text)):
                break
            if ind > indent:
                self.fail(n, "unexpected indentation")
            rest = text[1:].lstrip(" ")
            if not rest:
                self.i += 1
                out.append(self.child(indent))
            elif _KEY.match(rest) and rest[0] not in "'\"":
                col = ind + len(text) - len(rest)
                self.lines[self.i] = (n, col, rest)
                out.append(self.mapping(col))
            else:
                out.append(self.scalar(rest, n))
                self.i += 1
        return out

    def mapping(self, indent: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while self.i < len(self.lines):
            n, ind, text = self.lines[self.i]
            if ind < indent:
                break
            if ind > indent:
                self.fail(n, "unexpected indentation")
            if _is_item(text):
                self.fail(n, "a list item where a 'key: value' line was expected")
            key, rest = self.key(text, n)
            self.i += 1
            if rest:
                out[key] = self.scalar(rest, n)
            elif self.i < len(self.lines) and self.lines[self.i][1] == indent and _is_item(self.lines[self.i][2]):
                out[key] = self.seq(indent)
            else:
                out[key] = self.child(indent)
        return out

    def key(self, text: str, n: int) -> tuple[str, str]:
        if text[0] in "'\"":
            end = self.quoted_end(text, n)
            after = text[end:].lstrip(" ")
            if not after.startswith(":") or (len(after) > 1 and after[1] not in " \t"):
                self.fail(n, f"expected 'key: value', got {text!r}")
            return str(self.scalar(text[:end], n)), after[1:].strip()
        m = _KEY.match(text)
        if m is None:
            self.fail(n, f"expected 'key: value', got {text!r}")
        assert m is not None
        key = m["k"].rstrip()
        if key[0] in _UNSUPPORTED or key.startswith("? "):
            self.fail(n, f"unsupported YAML key {key!r} (only plain or quoted keys)")
        return key, (m["v"] or "").strip()

    def quoted_end(self, text: str, n: int) -> int:
        q, i = text[0], 1
        while i < len(text):
            if text[i] == "\\" and q == '"':
                i += 2
                continue
            if text[i] == q:
                if q == "'" and text[i + 1:i + 2] == "'":
                    i += 2
                    continue
                return i + 1
            i += 1
        self.fail(n, "unterminated quoted string")
        return len(text)

    def split_flow(self, body: str, n: int) -> list[str]:
        """The items of a one-line flow sequence of scalars (`[0, 2, "x"]`), commas inside quotes kept."""
        items, quote, start = [], "", 0
        for i, ch in enumerate(body):
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch == ",":
                items.append(body[start:i])
                start = i + 1
        items.append(body[start:])
        if any(not item.strip() for item in items):
            self.fail(n, f"an empty item in [{body}]")
        return items

    def scalar(self, text: str, n: int) -> Any:
        if text[0] in "'\"":
            end = self.quoted_end(text, n)
            if text[end:].strip():
                self.fail(n, f"unexpected text after a quoted string: {text[end:].strip()!r}")
            body = text[1:end - 1]
            if text[0] == "'":
                return body.replace("''", "'")
            try:
                return json.loads(f'"{body}"')
            except ValueError:
                self.fail(n, f"bad escape in {text!r}")
        if text in ("[]", "{}"):
            return [] if text == "[]" else {}
        if text[0] == "[" and text.endswith("]") and not any(c in text[1:-1] for c in "[]{}"):
            return [self.scalar(item.strip(), n) for item in self.split_flow(text[1:-1], n)]
        if text[0] in _UNSUPPORTED:
            self.fail(n, f"unsupported YAML ({text!r}: flow collections, anchors, tags and block scalars are not "
                         "read; write one 'key: value' per line)")
        if text in ("null", "Null", "NULL", "~"):
            return None
        if text in ("true", "True", "TRUE", "false", "False", "FALSE"):
            return text.lower() == "true"
        if _INT.match(text):
            return int(text)
        if _FLOAT.match(text) and text not in (".", "-.", "+."):
            return float(text.replace("_", ""))
        if text.lower() in (".inf", "+.inf", "-.inf", ".nan"):
            return float(text.lower().replace(".", ""))
        return text
