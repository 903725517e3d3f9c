"""choose_engine: what ``--engine auto`` picks, and what an explicit engine refuses."""

from __future__ import annotations

import pytest

from farm.engines import AUTO_RAY_FROM, choose_engine
from farm.errors import UsageError


@pytest.fixture(autouse=True)
def no_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def test_auto_is_local_for_a_small_run_and_ray_with_an_address_or_a_large_run_on_many_cpus():
    assert choose_engine("auto", address=None, conversations=10, cpus=2) == "local"
    assert choose_engine("auto", address="auto", conversations=10, cpus=2) == "ray"
    assert choose_engine("auto", address=None, conversations=AUTO_RAY_FROM, cpus=8) == "ray"
    assert choose_engine("auto", address=None, conversations=AUTO_RAY_FROM, cpus=2) == "local"


def test_auto_is_ray_for_an_agent_that_declares_resources():
    assert choose_engine("auto", address=None, conversations=10, cpus=2, resources=True) == "ray"
    assert choose_engine("local", address=None, conversations=10, cpus=2, resources=True) == "local"


def test_an_unknown_engine_or_local_with_an_address_is_one_sentence():
    with pytest.raises(UsageError, match="--engine: 'fast' is not one of"):
        choose_engine("fast", address=None, conversations=1)
    with pytest.raises(UsageError, match="--address joins a Ray cluster"):
        choose_engine("local", address="auto", conversations=1)
