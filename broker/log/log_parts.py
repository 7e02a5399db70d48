"""LogParts: what ``Log``'s mixins (``LogRetention``, ``TransactionalLog``) may use of the Log
they are mixed into, declared once for the type checker.

Invariant: nothing here exists at run time beyond an empty base class; ``Log``
(``broker/log/log.py``) provides every attribute and method declared.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .producer_state import ProducerStateManager
from .segment import LogSegment


class LogParts:
    segments: list[LogSegment]
    producer_state: ProducerStateManager

    if TYPE_CHECKING:
        @property
        def high_watermark(self) -> int: ...
        @property
        def log_end_offset(self) -> int: ...
        @property
        def active_segment(self) -> LogSegment: ...
        def _now_ms(self) -> int: ...
