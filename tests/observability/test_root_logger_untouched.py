"""Building the app leaves the root logger alone: the MCP SDK's server calls
`logging.basicConfig` (a Rich console handler) when built, which used to sit next to the
service's own handler and write every record, the access line of each request included, twice."""

from __future__ import annotations

import logging

from service.config import Settings
from service.main import create_app


def test_building_the_app_adds_no_handler_to_an_unconfigured_root_logger(
    settings: Settings,
) -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    # As in a fresh server process: nothing configured yet, so basicConfig would act.
    root.handlers.clear()
    try:
        create_app(settings)
        handlers, level = list(root.handlers), root.level
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
    assert handlers == []
    assert level == saved_level
