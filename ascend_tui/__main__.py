"""`python -m ascend_tui` runs the command line."""

from ascend_tui.cli.main import entry

entry()
