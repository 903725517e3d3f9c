"""The public API is exactly what ``farm`` exports (as httpx checks its own): a name added or
dropped by accident fails here."""

import inspect

import farm


def test_farm_exports_exactly_the_public_api():
    assert sorted(farm.__all__) == ["RunResult", "__version__", "rescore", "run", "run_async"]
    for name in farm.__all__:
        assert getattr(farm, name) is not None


def test_the_python_api_takes_what_farm_test_takes():
    run = inspect.signature(farm.run).parameters
    for option in ("agent", "engine", "parallel", "runs", "max_cost", "retries", "resume", "match", "tags", "fail_fast", "dry_run"):
        assert option in run, option
    assert inspect.iscoroutinefunction(farm.run_async)
    assert farm.RunResult.__module__ == "farm._run.result"
