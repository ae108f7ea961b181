"""The actor's long-poll and lease collaborators on their own: SlotWaiters (asks
waiting for a slot: arrival order, callers that left, timers) and leases.release
(a dead holder's suggestion queued again, used up, or already released)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tauopt import ApiError
from tauopt.actors import ActorRef, Reply, Request, mailbox
from tauopt.engine._leases import release
from tauopt.engine._ledger import Ledger
from tauopt.engine._messages import SlotWaitOver, Suggest
from tauopt.engine._slots import SlotWaiters, wait_over_error
from tauopt.models import Experiment, Metric
from tauopt.space import Space
from tauopt.store import Snapshot

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]


def _ledger() -> Ledger:
    space = Space.parse(X)
    exp = Experiment(id="e", name="e", parameters=space.parameters, metric=Metric("loss"))
    return Ledger(Snapshot(exp), space)


def _request(tag: str, wait_s: float = 60.0) -> tuple[Request[Any], Reply]:
    answer = Reply()
    return Request(Suggest(tag=tag, wait_s=wait_s), answer), answer


async def _leave(answer: Reply) -> None:
    """The caller stops waiting for its answer (cancelled), as a client that hung up."""
    with anyio.move_on_after(0):
        await answer.wait()
    assert answer.abandoned


async def test_slot_waiters_are_retried_oldest_first_while_there_is_room() -> None:
    waiters = SlotWaiters()
    my_send, my_receive = mailbox(8)
    (r1, rx1), (r2, rx2), (r3, rx3) = _request("a"), _request("b"), _request("c")
    async with anyio.create_task_group() as tg:
        for r in (r1, r2, r3):
            waiters.park(r, r.message, tg, ActorRef(my_send))
        assert len(waiters) == 3
        await _leave(rx2)  # the caller of "b" went away: it must take no slot
        room = [True, True, True, False]  # checked before each: a, b (dropped), c, then full
        got = [msg.tag for _, msg in waiters.ready(lambda: room.pop(0))]
        assert got == ["a", "c"] and len(waiters) == 0
        assert [msg.tag for _, msg in waiters.ready(lambda: True)] == []
        tg.cancel_scope.cancel()  # the 60 s timers need not run
    for stream in (r1.reply_to, r3.reply_to, rx1, rx2, rx3, my_receive):
        stream.close()
    my_send.close()


async def test_slot_waiters_stop_when_full_and_keep_the_rest_in_order() -> None:
    waiters = SlotWaiters()
    my_send, my_receive = mailbox(8)
    (r1, rx1), (r2, rx2) = _request("a"), _request("b")
    async with anyio.create_task_group() as tg:
        waiters.park(r1, r1.message, tg, ActorRef(my_send))
        waiters.park(r2, r2.message, tg, ActorRef(my_send))
        assert list(waiters.ready(lambda: False)) == []
        assert [m.tag for _, m in waiters] == ["a", "b"]
        tg.cancel_scope.cancel()
    for stream in (r1.reply_to, r2.reply_to, rx1, rx2, my_receive):
        stream.close()
    my_send.close()


async def test_a_parked_asks_timer_tells_the_actor_and_timed_out_unparks_it_once() -> None:
    waiters = SlotWaiters()
    my_send, my_receive = mailbox(8)
    r1, rx1 = _request("a", wait_s=0.0)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            waiters.park(r1, r1.message, tg, ActorRef(my_send))
            wake = await my_receive.receive()  # the timer's message arrives at the actor's mailbox
            assert isinstance(wake.message, SlotWaitOver) and wake.message.request is r1
            wake.reply_to.give(None)
            wake.reply_to.close()
    ask = waiters.timed_out(r1)
    assert ask is not None and ask.tag == "a" and len(waiters) == 0
    assert waiters.timed_out(r1) is None  # already answered: nothing to refuse twice
    err = wait_over_error(2, 2, 1.5)
    assert err.error_type == "bandwidth_full" and "1.5 s" in str(err) and "observe or close" in str(err)
    for stream in (r1.reply_to, rx1, my_receive):
        stream.close()
    my_send.close()


def test_release_queues_once_then_closes_when_attempts_are_used_up() -> None:
    ledger = _ledger()
    s = ledger.open_suggestion({"x": 0.5}, "w1", now=1.0)
    first = release(ledger, s.id, max_attempts=2, now=3.0)
    assert first.changed and first.suggestion.released and list(ledger.released) == [s.id]
    again = release(ledger, s.id, max_attempts=2, now=3.0)
    assert not again.changed and again.suggestion.released  # idempotent: nothing to write
    handed = ledger.rehand("w2", now=2.0)
    assert handed is not None and handed.attempts == 2 and handed.tag == "w2"
    used_up = release(ledger, s.id, max_attempts=2, now=3.0)
    assert used_up.changed and used_up.suggestion.state == "closed" and s.id not in ledger.open
    assert not ledger.is_used({"x": 0.5})  # its place goes back


def test_release_of_a_suggestion_that_is_not_open_says_why() -> None:
    ledger = _ledger()
    s = ledger.open_suggestion({"x": 0.5}, None, now=1.0)
    ledger.observe({"x": 0.5}, s.id, 1.0, False, 2.0, {})
    ledger.leave_open(s, "observed", 2.0)
    with pytest.raises(ApiError) as e:
        release(ledger, s.id, max_attempts=None, now=3.0)
    assert e.value.error_type == "suggestion_observed"
    with pytest.raises(ApiError) as e:
        release(ledger, "99", max_attempts=None, now=3.0)
    assert e.value.error_type == "not_found"
