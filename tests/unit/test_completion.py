"""Completion, the one asynchronous result below the broker's request handlers, and
``respond_when``, where one becomes a response: synchronous when already complete."""
from __future__ import annotations

import pytest
from twisted.python.failure import Failure

from odradek.broker.apis.context import respond_when
from odradek.broker.completion import Completion


def test_completes_once_and_runs_callbacks_in_order_late_ones_at_once():
    c: Completion[int] = Completion()
    seen: list[tuple[str, int]] = []
    c.add_callback(lambda v: seen.append(("a", v))).add_callback(lambda v: seen.append(("b", v)))
    assert not c.done and seen == []
    with pytest.raises(RuntimeError):
        c.result
    c.complete(7)
    c.add_callback(lambda v: seen.append(("late", v)))
    assert seen == [("a", 7), ("b", 7), ("late", 7)] and c.result == 7
    with pytest.raises(RuntimeError, match="twice"):
        c.complete(8)


def test_map_and_all_of():
    a: Completion[int] = Completion()
    b: Completion[int] = Completion()
    doubled = a.map(lambda v: v * 2)
    both = Completion.all_of([a, b])
    a.complete(3)
    assert doubled.result == 6 and not both.done
    b.complete(4)
    assert both.done
    assert Completion.all_of([]).done


def test_respond_when_is_synchronous_on_the_fast_path_and_a_completion_otherwise():
    assert respond_when(Completion.completed(2), lambda v: {"x": v}) == {"x": 2}
    pending: Completion[int] = Completion()
    later = respond_when(pending, lambda v: {"x": v})
    assert isinstance(later, Completion) and not later.done
    pending.complete(5)
    assert later.result == {"x": 5}


def test_an_error_while_building_the_response_is_the_answer_s_failure():
    pending: Completion[int] = Completion()

    def build(v: int) -> dict:
        raise ValueError("bad")
    later = respond_when(pending, build)
    seen: list = []
    pending.add_callback(lambda v: seen.append(("after", v)))
    pending.complete(1)   # the purgatory completing it is not hurt, nor its other callbacks
    assert seen == [("after", 1)]
    assert isinstance(later.result, Failure) and later.result.check(ValueError)
