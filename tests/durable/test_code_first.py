"""Code-first workflows: ``@durable.step`` is the engine's durable call, ``@durable.workflow``
a ``Workflow`` of one step, both typed from the function's annotations."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import durable_steps as ds
from durable_steps import durable


class Doc(BaseModel):
    title: str
    score: float


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


LOG: list[str] = []
"""Side effects of the steps below: what ran, in order."""


@durable.step
def search(query: str, k: int = 2) -> list[Doc]:
    LOG.append(f"search {query} {k}")
    return [Doc(title=query, score=i) for i in range(k)]


@durable.step(name="measure", retries=2)
async def measure(query: str) -> Point:
    LOG.append(f"measure {query}")
    return Point(len(query))


CRASH: dict[str, int] = {}
"""Run id -> how many more times the workflow below crashes after its calls."""


@durable.workflow
def research(question: str, where: Point) -> Doc:
    docs = search(question)
    again = search(question)  # the same arguments: a second call, not a replay of the first
    more = search(question, k=3)
    if CRASH.get(question, 0) > 0:
        CRASH[question] -= 1
        raise RuntimeError("crash after the calls")
    return Doc(title=f"{docs[0].title}:{len(again) + len(more)}:{where.x}", score=docs[1].score)


@durable.workflow(name="fan-out", version="1")
async def fan_out(queries: list[str]) -> list[Point]:
    return list(await asyncio.gather(*(measure(q) for q in queries)))


@pytest.fixture(autouse=True)
def _clean() -> None:
    LOG.clear()
    CRASH.clear()


def rid() -> str:
    return f"cf-{uuid.uuid4().hex[:12]}"


def test_outside_a_run_a_step_is_just_the_function() -> None:
    """Called outside any run, a decorated step runs its function and records nothing."""
    assert search("x", k=1) == [Doc(title="x", score=0)]
    assert asyncio.run(measure("abc")) == Point(3)
    assert LOG == ["search x 1", "measure abc"]
    assert research("q", Point(1)).title == "q:5:1"  # the workflow's function, too
    assert search.__name__ == "search" and search.durable_name == "search"  # type: ignore[attr-defined]


def test_a_resumed_workflow_replays_its_calls_typed(tmp_path: Path) -> None:
    """A workflow that fails after its calls resumes without running them again; repeated
    identical calls are distinct calls; the results come back as their types."""
    run_id = rid()
    CRASH["why"] = 1
    with ds.FileStore(tmp_path) as store:
        with pytest.raises(RuntimeError, match="crash after the calls"):
            research.run(run_id, store, "why", Point(7))
        assert LOG == ["search why 2", "search why 2", "search why 3"]
        done = research.run(run_id, store, "why", Point(7))
        assert LOG == ["search why 2", "search why 2", "search why 3"]  # nothing ran twice
        assert isinstance(done, Doc) and done == Doc(title="why:5:7", score=1.0)
        assert research.handle(run_id, store).result(timeout=5) == done
        # the run's state is plain JSON: its arguments and its result
        assert ds.handle_for(store, run_id).result() == {
            "args": {"question": "why", "where": {"x": 7, "y": 0}},
            "result": {"title": "why:5:7", "score": 1.0},
        }


def test_inputs_are_validated_before_the_run_is_created() -> None:
    """A value that is not of a parameter's type fails at once, naming the workflow, the
    parameter, the field and the type; nothing is stored."""
    store = ds.MemoryStore()
    run_id = rid()
    with pytest.raises(ds.InvalidStateError) as caught:
        research.start(run_id, store, "q", {"x": "not a number"})  # type: ignore[arg-type]
    message = str(caught.value)
    assert "workflow 'research'" in message and "parameter 'where'" in message
    assert "field 'x'" in message and "Point" in message
    with pytest.raises(TypeError, match="workflow 'research': missing a required argument"):
        research.start(run_id, store, "q")  # type: ignore[call-arg]
    assert store.load(run_id) is None
    # a dict of the right shape is validated into the dataclass
    assert research.run(run_id, store, "q", {"x": 2}).title == "q:5:2"  # type: ignore[arg-type]


def test_async_steps_gathered_replay_their_own_results() -> None:
    """Decorated async steps gathered in an async workflow each return their own result,
    and a resumed run runs none of them again."""
    store = ds.AsyncMemoryStore()
    run_id = rid()

    async def go() -> list[Point]:
        return await fan_out.run_async(run_id, store, ["a", "bbb", "cc"])

    assert asyncio.run(go()) == [Point(1), Point(3), Point(2)]
    assert sorted(LOG) == ["measure a", "measure bbb", "measure cc"]
    assert asyncio.run(go()) == [Point(1), Point(3), Point(2)]  # completed: nothing runs
    assert len(LOG) == 3
    with pytest.raises(TypeError, match="is async"):
        fan_out.run(run_id, ds.MemoryStore(), ["a"])


def test_started_runs_are_served_by_workers_and_reached_by_handle() -> None:
    """``start`` creates the run for the workers; ``recover`` (what a worker does) runs
    it; the handle's ``result()`` is typed, ``status()`` and ``history()`` tell."""
    store = ds.MemoryStore()
    run_id = rid()
    handle = research.start(run_id, store, "w", Point(1))
    assert isinstance(handle, ds.RunHandle) and handle.status() == "running"
    assert research.start(run_id, store, "w", Point(1)).run_id == run_id  # not twice
    [recovered] = ds.recover(store, [research])
    assert recovered.outcome == "completed"
    assert handle.result(timeout=5) == Doc(title="w:5:1", score=1.0)
    assert handle.status() == "completed"
    assert [r.name for r in handle.history()] == ["research"]


def test_retries_timeout_and_key_options() -> None:
    """``retries=`` retries a failing call in place; ``timeout=`` fails a slow one with
    ``TimeoutError``; ``key=`` names a call by what the function says."""
    tries: list[int] = []

    @durable.step(retries=ds.Retry(attempts=3, backoff=0))
    def flaky(n: int) -> int:
        tries.append(n)
        if len(tries) < 3:
            raise ConnectionError("try again")
        return n * 2

    @durable.step(timeout=0.05)
    async def slow() -> None:
        await asyncio.sleep(30)

    seen: list[str] = []

    @durable.step(key=lambda tool_call: tool_call["id"])
    def tool(tool_call: dict[str, Any]) -> str:
        seen.append(tool_call["id"])
        return f"did {tool_call['id']}"

    @durable.workflow(name=f"options-{uuid.uuid4().hex[:6]}")
    async def options() -> list[Any]:
        out: list[Any] = [await asyncio.to_thread(lambda: None)]
        try:
            await slow()
        except TimeoutError as exc:
            out.append(type(exc).__name__)
        return out

    @durable.workflow(name=f"sync-options-{uuid.uuid4().hex[:6]}")
    def sync_options() -> list[Any]:
        return [flaky(4), tool({"id": "call_1", "args": object.__name__})]

    store = ds.MemoryStore()
    assert sync_options.run(rid(), store) == [8, "did call_1"]
    assert tries == [4, 4, 4] and seen == ["call_1"]
    assert asyncio.run(options.run_async(rid(), ds.AsyncMemoryStore())) == [None, "TimeoutError"]
    with pytest.raises(TypeError, match="retries="):
        durable.step(retries=-1)(lambda: None)
    with pytest.raises(ValueError, match="timeout="):
        durable.step(timeout=0)(lambda: None)


def test_an_argument_without_json_form_asks_for_a_key() -> None:
    """A step's argument that has no JSON form cannot be part of its identity: a
    ``TypeError`` says to give ``key=``."""

    @durable.step
    def uses(lock: object) -> int:
        return 1

    @durable.workflow(name=f"nojson-{uuid.uuid4().hex[:6]}")
    def flow() -> int:
        return uses(object())

    with pytest.raises(TypeError, match="key="):
        flow.run(rid(), ds.MemoryStore())


def test_a_child_workflow_is_started_and_awaited_typed() -> None:
    """``flow.start_child`` inside a workflow starts a run of it as a child; the parent
    waits for it without a worker, and gets its typed result."""

    @durable.workflow(name=f"parent-{uuid.uuid4().hex[:6]}")
    def parent(question: str) -> str:
        child = research.start_child(f"{current_run()}-child", question, Point(9))
        doc = child.result()
        return f"{type(doc).__name__} {doc.title}"

    store = ds.MemoryStore()
    run_id = rid()
    with pytest.raises(ds.RunWaiting):
        parent.run(run_id, store, "c")
    ds.recover(store, [research])  # the child, then the parent its end woke
    assert parent.handle(run_id, store).status() in ("running", "waiting")
    ds.recover(store, [parent])
    assert parent.handle(run_id, store).result(timeout=5) == "Doc c:5:9"


def current_run() -> str:
    return ds.current_step().run_id


def test_a_flow_is_a_workflow_with_its_options() -> None:
    """A decorated workflow is a ``Workflow``: its queue, version and timeout are the
    decorator's, and the worker command loads it as it loads step lists."""
    from durable_steps.workers.loop import load_workflows

    queue = ds.Queue("cf-queue", concurrency=2)

    @durable.workflow(name="queued", queue=queue, version="2", timeout=60)
    def queued(n: int) -> int:
        return n + 1

    assert isinstance(queued, ds.Workflow)
    assert (queued.queue, queued.version, queued.timeout) == (queue, "2", 60)
    store = ds.MemoryStore()
    run_id = rid()
    queued.start(run_id, store, 1)
    cp = store.load(run_id)
    assert cp is not None and cp.queue == "cf-queue"
    assert load_workflows("tests.durable.test_code_first:research") == [research]
    with pytest.raises(TypeError, match=r"\*args"):
        durable.workflow(lambda *args: None)


def test_the_typed_example_runs() -> None:
    """examples/typed/handles.py (what mypy strict infers) also runs as it claims."""
    import importlib.util

    path = Path(__file__).parents[2] / "examples" / "typed" / "handles.py"
    spec = importlib.util.spec_from_file_location("typed_handles", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["typed_handles"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    assert module.check(ds.MemoryStore()) == module.Answer(
        "why not?-0", ["why not?-0", "why not?-1", "why not?-2"]
    )
    assert asyncio.run(module.check_async(ds.AsyncMemoryStore())) == module.Answer(
        "why?-0 / why?-1", ["why?-0", "why?-1"]
    )


def test_a_call_is_known_by_its_bound_arguments() -> None:
    """``f(1)``, ``f(a=1)`` and ``f(1, 2)`` (2 the default) are one call's arguments; other
    values are another call's, and a wrong call fails as the function would."""
    from durable_steps.durable._types import Signature

    def f(a: int, b: int = 2, *, c: Point | None = None) -> None: ...

    sig = Signature(f, "f")
    assert sig.key((1,), {}) == sig.key((), {"a": 1}) == sig.key((1, 2), {"c": None})
    assert sig.key((1,), {}) != sig.key((2,), {})
    assert sig.key((1,), {"c": Point(1)}) == sig.key((1,), {"c": Point(1, 0)})
    assert sig.key((1,), {"c": Point(1)}) != sig.key((1,), {"c": Point(2)})
    with pytest.raises(TypeError, match="multiple values"):
        sig.key((1,), {"a": 2})
    with pytest.raises(TypeError, match="missing a required argument"):
        sig.key((), {})


def test_where_call_takes_a_key_the_identity_is_passed_as_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With an engine whose ``call`` takes ``key=``, a decorated step passes its identity
    there: named by the step (two steps with the same arguments stay apart), counted for
    repeats; the call's name is the step's alone."""
    from durable_steps.durable import _step

    seen: list[tuple[str, str]] = []

    def keyed_call(name: str, fn: Any, /, *args: Any, key: str, **options: Any) -> Any:
        seen.append((name, key))
        return ds.call(f"{name}/{len(seen)}", fn, *args, **options)

    monkeypatch.setattr(_step, "_KEYED", True)
    monkeypatch.setattr(_step, "call", keyed_call)

    @durable.step(name="a")
    def a(n: int) -> int:
        return n

    @durable.step(name="b", key=lambda n: f"n{n}")
    def b(n: int) -> int:
        return -n

    @durable.workflow(name=f"keyed-{uuid.uuid4().hex[:6]}")
    def flow() -> list[int]:
        return [a(1), a(1), b(1), a(2)]

    assert flow.run(rid(), ds.MemoryStore()) == [1, 1, -1, 2]
    digest = _step.Signature(a, "a").key((1,), {})
    assert seen[:3] == [("a", f"a:{digest}"), ("a", f"a:{digest}#1"), ("b", "b:n1")]
    assert seen[3][1] not in {k for _, k in seen[:3]}


def test_a_run_started_by_name_takes_its_arguments_from_its_input() -> None:
    """A run a Schedule or ``runs start`` creates by the workflow's name has no stored
    arguments: its parameters come from its input (a schedule's ``scheduled_at``),
    validated as their types."""
    from durable_steps.runner.requests import execute
    from durable_steps.runner.store_io import blocking_io
    from durable_steps.runner.workflow import start_program

    @durable.workflow(name=f"nightly-{uuid.uuid4().hex[:6]}")
    def nightly(scheduled_at: float, where: Point | None = None) -> str:
        return f"{scheduled_at:.0f} at {where.x if where else '-'}"

    store = ds.MemoryStore()
    run_id = rid()
    given = {"scheduled_at": 1700000000, "where": {"x": 4}}
    assert execute(start_program(nightly.name, run_id, given), blocking_io(store))
    ds.recover(store, [nightly])
    assert nightly.handle(run_id, store).result(timeout=5) == "1700000000 at 4"


CODE_FIRST_FLOWS = """
from durable_steps import durable

@durable.step
def double(n: int) -> int:
    return 2 * n

@durable.step
async def adouble(n: int) -> int:
    return 2 * n

@durable.workflow(name="doubler")
async def doubler(n: int) -> dict[str, int]:
    return {"n": n, "twice": await adouble(n)}

@durable.workflow(name="adder")
def adder(a: int, b: int) -> int:
    return double(a) + b
"""


def test_the_worker_command_serves_decorated_workflows(tmp_path: Path) -> None:
    """``durable-steps worker mod:flow`` (and a list of flows) runs code-first runs as
    it runs step lists; ``runs start`` starts one by name with its input."""
    from ..helpers.clitools import Cli

    (tmp_path / "flows.py").write_text(CODE_FIRST_FLOWS)
    env = {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path / "s")}
    cli = Cli(env, cwd=tmp_path)
    with ds.FileStore(tmp_path / "s") as store:
        sys.path.insert(0, str(tmp_path))
        try:
            import flows  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(tmp_path))
        handle = flows.adder.start("add-1", store, 2, 3)
        started = cli(
            "runs", "start", "dbl-1", "--workflow", "doubler", "--workflow-from", "flows:doubler",
            "--input", '{"n": 21}',
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        done = cli("worker", "flows:adder", "--once")
        assert done.returncode == 0, done.stderr
        assert handle.result(timeout=10) == 7
        done = cli("worker", "flows:doubler", "--once")
        assert done.returncode == 0, done.stderr
        assert flows.doubler.handle("dbl-1", store).result(timeout=10) == {"n": 21, "twice": 42}
        sys.modules.pop("flows", None)


class Agent:
    """Decorated methods: the instance is not part of a call's identity."""

    def __init__(self) -> None:
        self.lock = object()  # no JSON form: it must not be needed

    @durable.step
    def greet(self, who: str) -> str:
        LOG.append(f"greet {who}")
        return f"hi {who}"


def test_a_decorated_method_is_known_by_its_arguments() -> None:
    """A decorated method is a durable step named ``Class.method``, its ``self`` left out
    of its key."""

    @durable.workflow(name=f"methods-{uuid.uuid4().hex[:6]}")
    def flow() -> list[str]:
        agent = Agent()
        return [agent.greet("a"), Agent().greet("a"), agent.greet("b")]

    store = ds.MemoryStore()
    assert flow.run(rid(), store) == ["hi a", "hi a", "hi b"]
    assert LOG == ["greet a", "greet a", "greet b"]
    assert Agent.greet.durable_name == "Agent.greet"  # type: ignore[attr-defined]
