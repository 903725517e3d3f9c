"""The one error hierarchy: what each error is a kind of, and that the modules raising them share the classes."""

import importlib
import pickle
from pathlib import Path

import pytest

import farm
from farm import errors
from farm._run.execution import RunInterrupted, RunStopped
from farm.agents import base, transport
from farm.assertions import patterns
from farm.conversation.replay import RecordingEnds
from farm.engines import EngineLost
from farm.ratelimit import client
from farm.roles.types import RoleError

CORE = Path(farm.__file__).parent


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (errors.UsageError, errors.FarmError),
        (errors.InputError, errors.FarmError),
        (errors.AgentHTTPError, errors.AgentError),
        (errors.AgentTimeoutError, errors.AgentConnectionError),
        (errors.LimiterUnavailable, errors.AgentConnectionError),
        (errors.AgentReplyTooLargeError, errors.AgentResponseError),
        (errors.RecordingEnds, errors.AgentError),
        (errors.AgentError, errors.CaseError),
        (errors.RoleError, errors.CaseError),
        (errors.EngineLost, errors.RunError),
        (RunInterrupted, errors.RunError),
        (RunStopped, RunInterrupted),
    ],
)
def test_each_error_is_the_kind_the_hierarchy_draws(error, kind):
    assert issubclass(error, kind)


def test_a_case_error_is_not_a_users_mistake_and_a_run_error_is_neither():
    # a case's failure must never be reported as a usage error (exit 2), nor stop the run
    for error in (errors.AgentError, errors.RoleError, errors.EngineLost, errors.TransportError):
        assert not issubclass(error, errors.FarmError)
    assert not issubclass(errors.CaseError, errors.RunError)


def test_the_modules_that_raise_them_share_the_classes():
    assert base.AgentError is errors.AgentError and base.AgentTimeoutError is errors.AgentTimeoutError
    assert transport.TransportError is errors.TransportError and transport.ReplyTooLarge is errors.ReplyTooLarge
    assert client.LimiterUnavailable is errors.LimiterUnavailable and client.LimiterRestarting is errors.LimiterRestarting
    assert RecordingEnds is errors.RecordingEnds and RoleError is errors.RoleError and EngineLost is errors.EngineLost


def test_errors_that_cross_ray_survive_pickling_with_their_fields():
    http = pickle.loads(pickle.dumps(errors.AgentHTTPError("429 Too Many Requests", 429, 1.5)))
    assert (str(http), http.status_code, http.retry_after) == ("429 Too Many Requests", 429, 1.5)
    lost = pickle.loads(pickle.dumps(errors.TransportError("connection refused", retryable=True, timed_out=True)))
    assert (lost.reason, lost.retryable, lost.maybe_served, lost.timed_out) == ("connection refused", True, False, True)


def test_error_classes_defined_beside_their_use_are_in_the_tree():
    from farm.cases import CaseRuleError
    from farm.view.folders import NotFound
    from farm.view.server import BadRequest

    assert issubclass(CaseRuleError, errors.FarmError) and issubclass(CaseRuleError, ValueError)
    assert issubclass(NotFound, errors.FarmError) and issubclass(NotFound, LookupError)
    assert issubclass(BadRequest, errors.FarmError) and issubclass(BadRequest, ValueError)
    assert patterns.PatternTimeout is errors.PatternTimeout


def test_every_public_exception_under_farm_is_in_the_tree():
    roots = tuple(cls for name in errors.__all__ if (cls := getattr(errors, name)).__bases__ == (Exception,))
    outside = []
    for path in sorted(CORE.rglob("*.py")):
        module = importlib.import_module(".".join(path.with_suffix("").relative_to(CORE.parent).parts).removesuffix(".__init__"))
        for name, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                if not name.startswith("_") and not issubclass(value, roots):
                    outside.append(f"{module.__name__}.{name}")
    assert errors.FarmError in roots and errors.PatternTimeout in roots
    assert outside == []
