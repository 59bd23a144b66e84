"""Themes and keymap: bundled and user theme files, broken files as warnings, our variables under every theme."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.color import Color
from textual.theme import BUILTIN_THEMES
from textual.widgets import Static

from ascend_tui.app.config import (
    APP_VARIABLES,
    DEFAULT_THEME,
    bundled_themes_dir,
    config_dir,
    load_keymap,
    load_themes,
    read_theme,
    variable_defaults,
)
from ascend_tui.errors import InputError

BUNDLED = {"ascend-dark": True, "ascend-light": False, "ascend-high-contrast": True}


@pytest.fixture
def no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty config folder, so the user's real one never leaks into a test."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    return tmp_path / "cfg" / "ascend-tui"


def test_bundled_themes_come_from_the_top_level_themes_folder(no_user_config: Path) -> None:
    folder = bundled_themes_dir()
    assert folder is not None and folder.name == "themes" and (folder / "dark.toml").is_file()
    warnings: list[str] = []
    themes = {t.name: t for t in load_themes(warnings)}
    assert warnings == []
    assert {name: themes[name].dark for name in BUNDLED} == BUNDLED
    assert DEFAULT_THEME in themes
    for theme in themes.values():
        assert set(APP_VARIABLES) <= set(theme.variables), f"{theme.name} misses a widget variable"
        for value in theme.variables.values():
            Color.parse(value)


def test_config_dir_follows_xdg_and_falls_back_to_dot_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_dir() == tmp_path / "xdg" / "ascend-tui"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config_dir() == tmp_path / "home" / ".config" / "ascend-tui"


def test_a_user_theme_is_added_and_can_replace_a_bundled_one(no_user_config: Path) -> None:
    themes_dir = no_user_config / "themes"
    themes_dir.mkdir(parents=True)
    (themes_dir / "mine.toml").write_text('name = "solar-night"\nprimary = "#268bd2"\ndark = true\n'
                                          '[variables]\nmetric-bad = "#dc322f 80%"\n')
    (themes_dir / "dark.toml").write_text('name = "ascend-dark"\nprimary = "#ff00ff"\n')
    warnings: list[str] = []
    themes = {t.name: t for t in load_themes(warnings)}
    assert warnings == []
    assert themes["solar-night"].variables == {"metric-bad": "#dc322f 80%"}
    assert themes["ascend-dark"].primary == "#ff00ff"
    assert "ascend-light" in themes


@pytest.mark.parametrize(("text", "problem"), [
    ('name = "x"\nprimary = "#123456"\nprimery = "#000"\n', "unknown key 'primery'"),
    ('name = "x"\nprimary = "not-a-colour"\n', "`primary` = 'not-a-colour' is not a colour"),
    ('primary = "#123456"\n', "missing `name`"),
    ('name = "x"\n', "missing `primary`"),
    ('name = "x"\nprimary = "#123456"\ndark = "yes"\n', "`dark` must be true or false"),
    ('name = "x"\nprimary = "#123456"\n[variables]\nmetric-bad = "#12 50"\n', "variable `metric-bad`"),
    ('name = "x\nprimary = 1\n', "invalid TOML"),
])
def test_a_broken_user_theme_becomes_a_warning_naming_the_file(no_user_config: Path, text: str, problem: str) -> None:
    themes_dir = no_user_config / "themes"
    themes_dir.mkdir(parents=True)
    (themes_dir / "broken.toml").write_text(text)
    warnings: list[str] = []
    names = {t.name for t in load_themes(warnings)}
    assert set(BUNDLED) <= names and "x" not in names
    assert len(warnings) == 1
    assert "broken.toml" in warnings[0] and problem in warnings[0]
    assert "\n" not in warnings[0]


def test_read_theme_raises_one_line_input_error(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="t.toml: not a text file"):
        read_theme(path)


def test_keymap_maps_binding_ids_to_keys(tmp_path: Path) -> None:
    path = tmp_path / "keymap.toml"
    path.write_text('"graph.producer" = "u"\n"list.down" = ["j", "ctrl+n"]\n"app.help" = 3\n')
    warnings: list[str] = []
    assert load_keymap(warnings, path=path) == {"graph.producer": "u", "list.down": "j,ctrl+n"}
    assert len(warnings) == 1 and "'app.help'" in warnings[0] and "keymap.toml" in warnings[0]


def test_missing_or_unreadable_keymap_is_empty(tmp_path: Path, no_user_config: Path) -> None:
    assert load_keymap([]) == {}
    bad = tmp_path / "keymap.toml"
    bad.write_text("graph.producer = \n")
    warnings: list[str] = []
    assert load_keymap(warnings, path=bad) == {}
    assert "invalid TOML" in warnings[0]


class _VariableApp(App[None]):
    """CSS that uses every variable our widgets use, under whatever theme the test picks."""

    CSS = "\n".join(f"#{name} {{ color: ${name}; }}" for name in APP_VARIABLES)

    def __init__(self, theme: str) -> None:
        super().__init__()
        self._wanted = theme

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def compose(self) -> ComposeResult:
        for name in APP_VARIABLES:
            yield Static(name, id=name)

    def on_mount(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = self._wanted


@pytest.mark.parametrize("theme", ["ansi-dark", "ansi-light", "textual-light", *BUNDLED])
async def test_our_variables_resolve_under_every_theme(theme: str, no_user_config: Path) -> None:
    app = _VariableApp(theme)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.theme == theme
        current = app.current_theme
        colours = current.to_color_system().generate()
        for name, base in APP_VARIABLES.items():
            expected = current.variables.get(name, colours[base])
            assert app.query_one(f"#{name}", Static).styles.color == Color.parse(expected), name


def test_ansi_themes_fall_back_to_their_own_palette() -> None:
    defaults = variable_defaults(BUILTIN_THEMES["ansi-dark"])
    assert defaults["metric-bad"] == "ansi_red"
    assert defaults["badge-warning"] == "ansi_yellow"
    assert variable_defaults(BUILTIN_THEMES["ansi-light"])["metric-good"] == "ansi_green"
