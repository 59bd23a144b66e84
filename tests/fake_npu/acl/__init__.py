"""Fake CANN pyACL (`acl`): the two calls the device layer makes."""

from __future__ import annotations

from . import rt  # noqa: F401


def get_soc_name() -> str:
    return "Ascend910B3"
