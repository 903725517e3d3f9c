"""A scripted OpenAI-compatible agent for integration tests, served on 127.0.0.1.

The last user message picks the behaviour; anything else is the demo expense agent:

- ``slow <seconds>``: answers "done" after that many seconds
- ``which model``: names the model it was asked for
- ``always 500``: an internal server error, every time
- ``429 once <tag>``: the first request with this tag gets 429 + ``Retry-After: 1``
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from farm.demo.agent import handle as demo_handle
from farm.demo.agent import scripted_user
from farm.demo.server import Response, chat_completion


class ScriptedAgent:
    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        messages = (body or {}).get("messages") or []
        last_user = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "") or ""
        text = last_user if isinstance(last_user, str) else ""
        if text.startswith("slow "):
            return Response(chat_completion("done"), delay=float(text.split()[1]))
        if (body or {}).get("model") == "broken":  # an agent that never gets past its first question
            return Response(chat_completion("Sure. What type of expense would you like to submit?"))
        if text == "which model":
            return Response(chat_completion(f"model is {(body or {}).get('model')}"))
        if text == "always 500":
            return Response({"error": {"message": "boom"}}, status=500)
        if text.startswith("429 once"):
            with self._lock:
                self.seen[text] += 1
                first = self.seen[text] == 1
            if first:
                return Response({"error": {"message": "rate limited"}}, status=429, headers={"Retry-After": "1"})
            return Response(chat_completion("recovered after the rate limit"))
        return demo_handle(path, body, headers)


class Counting:
    """A server handler that counts the requests it answers (to show that none came)."""

    def __init__(self, handler: Any):
        self.handler = handler
        self.requests = 0
        self._lock = threading.Lock()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        with self._lock:
            self.requests += 1
        return self.handler(path, body, headers)


def farm_toml(url: str, engine: str | None = None, **connector: Any) -> str:
    """A farm.toml with agent ``target`` on the server at ``url`` (and ``[farm].engine``, if given)."""
    extra = "".join(f"{k} = {v!r}\n" if not isinstance(v, str) else f'{k} = "{v}"\n' for k, v in connector.items())
    engine_line = f'engine = "{engine}"\n' if engine else ""
    return f"""
[farm]
default_agent = "target"
results_dir = "results"
{engine_line}
[connectors.local]
base_url = "{url}/v1"
model = "scripted"
max_retries = 2
{extra}
[connectors.other]
base_url = "{url}/v1"
model = "other-model"

[agents.target]
kind = "openai"
connector = "local"
tool_mocks = {{ create_expense = {{ expense = {{ id = "EXP-1", status = "draft" }} }}, submit_expense = {{ expense = {{ id = "EXP-1", status = "submitted" }} }} }}
"""


class RoleModels:
    """Scripted LLMs for the roles, picked by the request's ``model``:

    - ``sim``: a user filing a travel expense, reading the transcript it is sent
    - ``sim-fenced``: the same, answering in a fenced block with ``message`` for ``input``
    - ``sim-broken``: never answers JSON
    - ``sim-repeat``: says its opening line again whatever the agent asks
    - ``sim-assistant``: speaks as the assistant ("How can I help you ...?")
    - ``sim-early``: says the goal is achieved when the agent asks it to confirm
    - ``val``: passes when the agent's last reply contains the first word of the criteria
    - ``val-slow``: the same, after 3 seconds
    - ``attr``: an attributor: the simulator's fault when the user talked of lunch, else the agent's
    - ``attr-broken``: an attributor that answers prose
    - ``gen``: writes as many cases as the prompt asks for
    - ``rep``: a Markdown report naming the failed cases
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        import json
        import re

        model = body.get("model", "")
        with self._lock:
            self.calls[model] += 1
        system = body["messages"][0]["content"]
        transcript = body["messages"][-1]["content"] if len(body["messages"]) > 1 else ""
        last = [line for line in transcript.splitlines() if line.startswith("ASSISTANT:")]
        said = last[-1].lower() if last else ""
        if model.startswith("sim"):
            if model == "sim-broken":
                return Response(chat_completion("I would rather chat about the weather."))
            if model == "sim-repeat":
                return Response(chat_completion(json.dumps({"input": "I want to submit an expense", "goal_achieved": False})))
            if model == "sim-assistant" and said:
                return Response(chat_completion(json.dumps({"input": "How can I help you with your expense today?", "goal_achieved": False})))
            replies = [("submitted", None), ("type", "Business travel, $3500"), ("confirm", None if model == "sim-early" else "Yes, confirm")]
            answer = scripted_user(said, replies, "I want to submit an expense")
            answer["reasoning"] = "scripted"
            if model == "sim-fenced":
                answer["message"] = answer.pop("input")
                return Response(chat_completion("Sure!\n```json\n" + json.dumps(answer) + "\n```"))
            return Response(chat_completion(json.dumps(answer)))
        if model == "attr-broken":
            return Response(chat_completion("It is hard to say."))
        if model == "attr":
            assert "Goal of the simulated user: file a $3500 travel expense" in system, system
            off_goal = "lunch" in transcript.lower()
            answer = {"blame": "simulator" if off_goal else "agent", "reason": "the user talked of lunch" if off_goal else "the agent never drafted the expense"}
            return Response(chat_completion(json.dumps(answer)))
        if model.startswith("val"):
            criteria = re.search(r"Criteria: (\S+)", system)
            word = criteria.group(1).lower() if criteria else ""
            passed = bool(word) and word in said
            verdict = {"passed": passed, "score": 1.0 if passed else 0.2, "reason": f"looked for '{word}'", "suggestions": [] if passed else [f"say {word}"]}
            return Response(chat_completion("My verdict: " + json.dumps(verdict)), delay=3.0 if model == "val-slow" else 0.0)
        if model == "rep":
            summary = json.loads(system[system.index("{"): system.rindex("}") + 1])
            failing = ", ".join(p["id"] for p in summary["problems"])
            return Response(chat_completion(f"# Run report\n\n{summary['counts']['failed']} failed: {failing}"))
        if model == "gen":
            count = int(re.search(r"Generate (\d+) test cases", system).group(1))
            cases = [{"id": f"gen-{i}", "input": f"Hello {i}", "assertions": [{"type": "contains", "value": "expense"}]} for i in range(count)]
            return Response(chat_completion(json.dumps({"cases": cases})))
        return Response({"error": {"message": f"unknown model {model}"}}, status=400)


def roles_toml(url: str) -> str:
    """Role agents on the RoleModels server, one connector per scripted model."""
    out = []
    for model in ("sim", "sim-fenced", "sim-broken", "sim-repeat", "sim-assistant", "sim-early", "attr", "attr-broken", "val", "val-slow", "gen", "rep"):
        kind = {"sim": "simulator", "val": "validator", "attr": "validator", "gen": "generator", "rep": "reporter"}[model.split("-")[0]]
        out.append(f'[connectors.{model}]\nbase_url = "{url}/v1"\nmodel = "{model}"\nmax_retries = 0\n')
        out.append(f'[agents."{model}"]\nkind = "{kind}"\nconnector = "{model}"\n')
    return "\n".join(out)
