"""The command line: the parser and one module per subcommand."""

from ascend_tui.cli.main import main

__all__ = ["main"]
