"""A study that asks for tauopt's points (`tauopt:serve_suggestions`) is kept WAITING
trials whose `fixed_params` are the strategy's: as many as trials run, claimed once,
refreshed when nobody claims them within the TTL. In process, on the engine."""

from __future__ import annotations

import json

import anyio
import pytest

from tauopt.engine import Engine, NewTrial, ReadTrials, SetParam, SetState, SetStudyAttr
from tauopt.engine._served import SERVED_TTL_S
from tauopt.errors import ApiError

FLOAT = json.dumps({"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "log": False, "step": None}})


def _waiting(trials: list) -> list:
    return [t for t in trials if t.state == "WAITING"]


def test_a_served_study_keeps_waiting_trials_of_tauopts_points_and_refreshes_stale_ones() -> None:
    async def main() -> None:
        now = [1000.0]
        async with Engine(pool=None, clock=lambda: now[0]) as engine:
            sid = await engine.create_study("served", ["MINIMIZE"])
            plain = await engine.create_study("plain", ["MINIMIZE"])
            await engine.study_call(sid, SetStudyAttr(False, "tauopt:serve_suggestions", json.dumps("sobol")))
            for study in (sid, plain):
                tid = await engine.study_call(study, NewTrial())
                assert await engine.study_call(study, ReadTrials()) != []  # no space known yet: nothing served
                await engine.trial_call(tid, SetParam(tid, "x", 0.5, FLOAT))
                await engine.trial_call(tid, SetState(tid, "COMPLETE", (1.0,)))
            assert _waiting(await engine.study_call(plain, ReadTrials())) == []  # only when asked for
            (served,) = _waiting(await engine.study_call(sid, ReadTrials()))
            point = json.loads(served.system_attrs["fixed_params"])
            assert set(point) == {"x"} and 0.0 <= point["x"] <= 1.0
            assert await engine.trial_call(served.trial_id, SetState(served.trial_id, "RUNNING")) is True
            assert await engine.trial_call(served.trial_id, SetState(served.trial_id, "RUNNING")) is False  # claimed once
            (next_one,) = _waiting(await engine.study_call(sid, ReadTrials()))  # one runs: one waits
            assert next_one.number == served.number + 1
            assert json.loads(next_one.system_attrs["fixed_params"]) != point
            now[0] += SERVED_TTL_S + 1  # unclaimed past the TTL: a fresh point, same trial
            (again,) = _waiting(await engine.study_call(sid, ReadTrials()))
            assert again.number == next_one.number
            assert again.system_attrs["fixed_params"] != next_one.system_attrs["fixed_params"]
            (exp,) = [e for e in await engine.experiments() if e.name == "served"]
            open_points = {s.id: s.assignments for s in await engine.suggestions(exp.id, state="open")}
            assert open_points[again.suggestion_id] == json.loads(again.system_attrs["fixed_params"])  # pending for the strategy
            with pytest.raises(ApiError) as err:
                await engine.study_call(sid, SetStudyAttr(False, "tauopt:serve_suggestions", json.dumps("no-such-strategy")))
            assert err.value.error_type == "invalid_request"

    anyio.run(main)


def test_a_served_point_drawn_before_more_results_than_workers_is_drawn_again() -> None:
    async def main() -> None:
        async with Engine(pool=None) as engine:
            sid = await engine.create_study("stale", ["MINIMIZE"])
            await engine.study_call(sid, SetStudyAttr(False, "tauopt:serve_suggestions", json.dumps("sobol")))

            async def finish_one(x: float) -> None:
                tid = await engine.study_call(sid, NewTrial())
                await engine.trial_call(tid, SetParam(tid, "x", x, FLOAT))
                await engine.trial_call(tid, SetState(tid, "COMPLETE", (x,)))

            await finish_one(0.5)
            (first,) = _waiting(await engine.study_call(sid, ReadTrials()))
            assert json.loads(first.system_attrs["tauopt:served"])["seen"] == 1
            await finish_one(0.25)
            await finish_one(0.75)  # two results since it was drawn: one worker, so still fresh enough
            (same,) = _waiting(await engine.study_call(sid, ReadTrials()))
            assert same.system_attrs == first.system_attrs
            await finish_one(0.125)  # three: drawn again, from what is known now
            (again,) = _waiting(await engine.study_call(sid, ReadTrials()))
            assert again.number == first.number and json.loads(again.system_attrs["tauopt:served"])["seen"] == 4
            assert again.system_attrs["fixed_params"] != first.system_attrs["fixed_params"]

    anyio.run(main)
