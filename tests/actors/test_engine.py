"""The ray engine's refusals, made before it touches Ray."""

import pytest
from farm.actors.engine import RayEngine

from farm.config import FarmConfig
from farm.conversation.replay import Replay
from farm.conversation.settings import RunSettings
from farm.engines import RunPlan
from farm.errors import UsageError


def test_the_ray_engine_refuses_to_rescore_rather_than_call_the_agent():
    plan = RunPlan(config=FarmConfig(), cases=[], settings=RunSettings(run_id="r2"), parallel=1, replay=Replay({}, "r1"))
    engine, results = RayEngine(), []
    with pytest.raises(UsageError, match="^rescoring runs on the local engine"):
        engine.run(plan, results.append)
    assert results == [] and engine.cluster is None
