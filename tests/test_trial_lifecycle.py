"""The one trial lifecycle both trial-based doors use (`tauopt.engine._lifecycle`):
numbers in order, a claim won once, requeue, final states, expiry, the live index."""

from __future__ import annotations

from tauopt.engine._lifecycle import TrialRecord, TrialSet


def test_numbers_claims_ends_and_expiry_follow_one_set_of_rules() -> None:
    trials = TrialSet()
    a, b, c = (TrialRecord(tid, None, {}, "waiting") for tid in ("a", "b", "c"))
    for t in (a, b, c):
        trials.add(t)
    assert [t.number for t in trials.numbered] == [0, 1, 2]
    assert trials.claim(a, "w1", 10.0) and a.state == "running" and a.runs == 1
    assert [trials.claim(a, w, 11.0) for w in ("w2", "w3")] == [False, False]  # won once
    assert a.worker == "w1" and a.runs == 1
    trials.requeue(a)  # another run: claimable again, counted
    assert trials.claim(a, "w2", 12.0) and a.runs == 2 and a.worker == "w2"
    assert trials.claim(b, None, 0.0)
    assert trials.expired(now=100.0, ttl_s=50.0) == [a, b] and trials.expired(now=100.0, ttl_s=99.5) == [b]
    trials.finish(a, "completed")
    trials.finish(b, "pruned")
    assert trials.completed == 1 and not trials.claim(a, "w3", 13.0) and not trials.claim(b, "w3", 13.0)
    assert trials.live() == [c] and trials.states() == {"completed": 1, "pruned": 1, "waiting": 1}
