"""`fast_init`: the same objects as a frozen dataclass's own `__init__` makes, as frozen, with the
same errors for wrong arguments; classes it cannot copy exactly are refused when decorated."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import InitVar, dataclass, field

import pytest

from ttc.engine.contract import Completion, Request, Sampling, Usage, Verdict
from ttc.engine.contract._fastinit import fast_init
from ttc.engine.contract._state import Pick, Scored
from ttc.engine.journal._events import Judged, SampleFailed, SampleLanded
from ttc.engine.send._sender import Job, Outcome

made: list[str] = []


def _twin(fast: bool) -> type:
    @dataclass(frozen=True, slots=True)
    class Thing:
        a: int
        b: str = "b"
        c: tuple[int, ...] = field(default_factory=lambda: (1, 2))
        d: float | None = None

        def __post_init__(self) -> None:
            made.append(f"{self.a}{self.b}")

    return fast_init(Thing) if fast else Thing


CALLS = [
    ((1,), {}),
    ((1, "x"), {}),
    ((1, "x", (3,), 0.5), {}),
    ((), {"a": 2, "d": 1.5}),
    ((3,), {"c": ()}),
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_it_makes_what_the_dataclass_makes(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    plain, fast = _twin(False), _twin(True)
    made.clear()
    want, got = plain(*args, **kwargs), fast(*args, **kwargs)
    assert repr(got) == repr(want)
    assert dataclasses.astuple(got) == dataclasses.astuple(want)
    assert made == [made[0]] * 2  # __post_init__ ran for each, once
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.a = 9
    assert hash(got) == hash(fast(*args, **kwargs))


def test_a_factory_makes_a_fresh_value_for_each_object() -> None:
    @fast_init
    @dataclass(frozen=True, slots=True)
    class Bag:
        items: list[int] = field(default_factory=list)

    one, two = Bag(), Bag()
    one.items.append(1)
    assert two.items == []


@pytest.mark.parametrize(
    ("args", "kwargs", "said"),
    [
        ((), {}, "missing 1 required positional argument: 'a'"),
        ((1, "x", (), None, 5), {}, "takes from 2 to 5 positional arguments but 6 were given"),
        ((1,), {"zz": 1}, "got an unexpected keyword argument 'zz'"),
        ((1,), {"a": 1}, "got multiple values for argument 'a'"),
    ],
)
def test_wrong_arguments_fail_as_they_did(
    args: tuple[object, ...], kwargs: dict[str, object], said: str
) -> None:
    with pytest.raises(TypeError, match=said):
        _twin(True)(*args, **kwargs)


def test_classes_it_cannot_copy_are_refused_at_once() -> None:
    @dataclass(frozen=True)
    class Unslotted:
        a: int

    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        scale: InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class NotInit:
        a: int
        b: int = field(init=False, default=0)

    for cls in (Unslotted, Mutable, KeywordOnly, WithInitVar, NotInit):
        with pytest.raises(TypeError, match=f"fast_init: {cls.__name__}"):
            fast_init(cls)


@pytest.mark.parametrize(
    "cls",
    [Sampling, Request, Usage, Completion, Verdict, Job, Outcome, Scored, SampleLanded, Judged],
)
def test_the_engines_values_keep_their_signature(cls: type[object]) -> None:
    """Each class made per sample takes its fields as parameters, in order, with the defaults
    its fields declare (a factory's shows as a marker: the value is made per call)."""
    init = vars(cls)["__init__"]
    params = list(inspect.signature(init).parameters.values())[1:]
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        if f.default is not dataclasses.MISSING:
            assert p.default == f.default
        elif f.default_factory is dataclasses.MISSING:
            assert p.default is inspect.Parameter.empty
    assert "fast_init" in init.__code__.co_filename


def test_the_values_a_sample_makes_are_equal_to_their_fields() -> None:
    usage = Usage(10, 5)
    assert (usage.input_tokens, usage.output_tokens, usage.thinking_tokens) == (10, 5, 0)
    assert usage + Usage(1, 1, 1, 1) == Usage(11, 6, 1, 1)
    landed = SampleLanded(0, "q1", 2, "text", usage)
    assert (landed.attempts, landed.demos, landed.cached) == (1, (), False)
    failed = SampleFailed(0, "q1", 2, "timeout", "slow")
    assert failed == SampleFailed(round=0, item="q1", k=2, error="timeout", message="slow")
    pick = Pick(1, 2, "answer text", "4", True)
    assert (pick.round, pick.k, pick.text) == (1, 2, "answer text")
    assert (pick.answer, pick.correct, pick.reward) == ("4", True, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pick.k = 3  # type: ignore[misc]
