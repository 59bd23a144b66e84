"""Checks: pure functions from graph + evidence to findings (no torch, no Textual, no file I/O)."""
