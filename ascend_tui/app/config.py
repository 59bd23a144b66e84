"""User-facing configuration: theme files turned into Textual themes, and the keymap.

Themes are TOML data (the bundled ones in the top-level `themes/` folder, the user's in
`<config dir>/themes/`); a broken user file becomes a warning, never a crash at start-up.
"""

from __future__ import annotations

import logging
import os
import tomllib
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from ascend_tui.errors import InputError

DEFAULT_THEME = "ascend-dark"
KEYMAP_FILE = "keymap.toml"

# The theme variables our widgets use beyond Textual's own, and the built-in colour each falls
# back to when a theme (Textual's ansi themes, a user's file) does not set it.
APP_VARIABLES: dict[str, str] = {
    "metric-bad": "error",
    "metric-good": "success",
    "badge-error": "error",
    "badge-warning": "warning",
    "badge-info": "primary",
}

_COLOUR_FIELDS = ("primary", "secondary", "warning", "error", "success", "accent",
                  "foreground", "background", "surface", "panel", "boost")
_NUMBER_FIELDS = ("luminosity_spread", "text_alpha")
_ALLOWED = frozenset({"name", "dark", "variables", *_COLOUR_FIELDS, *_NUMBER_FIELDS})

_log = logging.getLogger(__name__)


def config_dir() -> Path:
    """`$XDG_CONFIG_HOME/ascend-tui`, or `~/.config/ascend-tui` when the variable is unset."""
    base = os.environ.get("XDG_CONFIG_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "ascend-tui"


def bundled_themes_dir() -> Path | None:
    """The themes shipped with ascend-tui: `ascend_tui/_themes` in a wheel, `themes/` in a checkout."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_themes", package.parent / "themes"):
        if candidate.is_dir():
            return candidate
    return None


def read_theme(path: Path) -> Theme:
    """One theme file as a Textual `Theme`; any problem is an `InputError` naming the file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not a text file (byte {exc.start} is not UTF-8)") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"invalid TOML: {exc}") from None
    return theme_from_dict(data, path)


def theme_from_dict(data: dict[str, Any], path: Path | str = "") -> Theme:
    """Validate theme data (name, colours, dark flag, variables) and build the `Theme`."""
    unknown = sorted(set(data) - _ALLOWED)
    if unknown:
        raise InputError(path, f"unknown key {unknown[0]!r} (expected one of {', '.join(sorted(_ALLOWED))})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(path, "missing `name` (a non-empty string)")
    if "primary" not in data:
        raise InputError(path, "missing `primary` (a colour such as \"#4C9BE8\")")
    kwargs: dict[str, Any] = {"name": name.strip()}
    for key in _COLOUR_FIELDS:
        if key in data:
            kwargs[key] = _colour(data[key], path, key)
    for key in _NUMBER_FIELDS:
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise InputError(path, f"`{key}` must be a number between 0 and 1")
            kwargs[key] = float(value)
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise InputError(path, "`dark` must be true or false")
    kwargs["dark"] = dark
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise InputError(path, "`variables` must be a table of name = \"value\"")
    kwargs["variables"] = {str(k): _variable(v, path, str(k)) for k, v in variables.items()}
    return Theme(**kwargs)


def _colour(value: Any, path: Path | str, key: str) -> str:
    if not isinstance(value, str):
        raise InputError(path, f"`{key}` must be a colour string, not {type(value).__name__}")
    try:
        Color.parse(value)
    except ColorParseError:
        raise InputError(path, f"`{key}` = {value!r} is not a colour") from None
    return value


def _variable(value: Any, path: Path | str, key: str) -> str:
    """A variable is a colour, optionally followed by an alpha percentage (`#ff0000 50%`)."""
    if not isinstance(value, str) or not value.split():
        raise InputError(path, f"variable `{key}` must be a colour string")
    colour, *rest = value.split()
    ok = colour == "auto" or _parses(colour)
    if not ok or len(rest) > 1 or (rest and not _is_percent(rest[0])):
        raise InputError(path, f"variable `{key}` = {value!r} is not a colour (optionally with an alpha %)")
    return value


def _parses(text: str) -> bool:
    try:
        Color.parse(text)
    except ColorParseError:
        return False
    return True


def _is_percent(text: str) -> bool:
    try:
        return text.endswith("%") and 0 <= float(text[:-1]) <= 100
    except ValueError:
        return False


def load_themes(warnings: list[str] | None = None, *, user_dir: Path | None = None) -> list[Theme]:
    """Bundled themes then the user's (`<config dir>/themes/*.toml`); a later name replaces an earlier one.

    A user file that cannot be read becomes one line in `warnings` (logged when no list is given).
    """
    themes: dict[str, Theme] = {}
    bundled = bundled_themes_dir()
    if bundled is not None:
        for path in sorted(bundled.glob("*.toml")):
            theme = read_theme(path)
            themes[theme.name] = theme
    folder = user_dir if user_dir is not None else config_dir() / "themes"
    try:
        user_files = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    except OSError as exc:
        _warn(warnings, f"{folder}: {exc.strerror or exc}")
        user_files = []
    for path in user_files:
        try:
            theme = read_theme(path)
        except InputError as exc:
            _warn(warnings, f"theme skipped: {exc}")
            continue
        themes[theme.name] = theme
    return list(themes.values())


THEME_ALIASES: dict[str, str] = {"dark": "ascend-dark", "light": "ascend-light", "high-contrast": "ascend-high-contrast"}


def theme_names(warnings: list[str] | None = None) -> list[str]:
    """Every theme `--theme` accepts: bundled and user themes, then Textual's own (ansi-dark, ...)."""
    from textual.theme import BUILTIN_THEMES

    names = [t.name for t in load_themes(warnings)]
    return names + [n for n in BUILTIN_THEMES if n not in names]


def resolve_theme(name: str | None, warnings: list[str] | None = None) -> str | None:
    """The theme `name` means (`light` and `dark` are aliases of ours); unknown names raise `InputError` listing them."""
    if name is None:
        return None
    names = theme_names(warnings)
    wanted = THEME_ALIASES.get(name.strip().lower(), name.strip())
    if wanted in names:
        return wanted
    raise InputError("--theme", f"unknown theme {name!r} (available: {', '.join(['light', 'dark', *names])})")


def load_keymap(warnings: list[str] | None = None, *, path: Path | None = None) -> dict[str, str]:
    """`<config dir>/keymap.toml` as binding id -> keys (`"j,down"`); entries that make no sense are warned about."""
    path = path if path is not None else config_dir() / KEYMAP_FILE
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        _warn(warnings, f"keymap ignored: {InputError(path, _reason(exc))}")
        return {}
    keymap: dict[str, str] = {}
    for binding_id, keys in data.items():
        if isinstance(keys, str):
            keys = [k.strip() for k in keys.split(",")]
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k.strip() for k in keys):
            problem = InputError(path, f"{binding_id!r} must be a key string or a list of them")
            _warn(warnings, f"keymap entry skipped: {problem}")
            continue
        keymap[str(binding_id)] = ",".join(k.strip() for k in keys)
    return keymap


def _reason(exc: Exception) -> str:
    if isinstance(exc, tomllib.TOMLDecodeError):
        return f"invalid TOML: {exc}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not a text file (byte {exc.start} is not UTF-8)"
    return getattr(exc, "strerror", None) or str(exc)


def _warn(warnings: list[str] | None, text: str) -> None:
    if warnings is None:
        _log.warning(text)
    else:
        warnings.append(text)


def variable_defaults(theme: Theme) -> dict[str, str]:
    """Our variables for a theme that does not set them, taken from its own colours.

    An app returns this from `get_theme_variable_defaults` so that CSS using `$metric-bad`
    keeps working under Textual's ansi themes and under partial user themes.
    """
    colours = theme.to_color_system().generate()
    out = {name: colours[base] for name, base in APP_VARIABLES.items()}
    # The cursor of a list without focus: ansi themes blur it to the terminal's default background,
    # which hides it, so they get the terminal's grey; other themes keep Textual's blurred cursor.
    out["cursor-blurred"] = "ansi_bright_black" if theme.ansi else colours["block-cursor-blurred-background"]
    return out


# -- per-view choices (the precision view's columns), kept in `<config dir>/views.toml` ---------------------------

VIEWS_FILE = "views.toml"
_BARE_KEY = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def load_view_choice(view: str, name: str, *, path: Path | None = None) -> list[str] | None:
    """The list of strings saved under `[view] name` in views.toml, or None when none is saved (or it is unreadable)."""
    path = path if path is not None else config_dir() / VIEWS_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        _log.warning("%s", InputError(path, _reason(exc)))
        return None
    value = data.get(view, {}).get(name) if isinstance(data.get(view), dict) else None
    return [str(v) for v in value] if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def save_view_choice(view: str, name: str, values: list[str], *, path: Path | None = None) -> None:
    """Save a list of strings under `[view] name` in views.toml, keeping the file's other entries; OSError on failure."""
    path = path if path is not None else config_dir() / VIEWS_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        data = {}  # a broken file is replaced rather than kept broken
    table = data.get(view) if isinstance(data.get(view), dict) else {}
    table[name] = list(values)
    data[view] = table
    lines = ["# ascend-tui's remembered view choices (written by the app)"]
    for section, entries in data.items():
        if not isinstance(entries, dict):
            continue
        lines.append(f"\n[{_toml_key(str(section))}]")
        for key, value in entries.items():
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                lines.append(f"{_toml_key(str(key))} = [{', '.join(_toml_string(v) for v in value)}]")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


def _toml_key(key: str) -> str:
    return key if key and set(key) <= _BARE_KEY else _toml_string(key)


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, apart from `\\/`, which json.dumps never writes)."""
    import json

    return json.dumps(text, ensure_ascii=False)
