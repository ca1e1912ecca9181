"""`fast_init`: a frozen, slotted dataclass's `__init__`, made again to set its slots directly.

A frozen dataclass's own `__init__` sets each field through `object.__setattr__` (its class's
`__setattr__` refuses): some 85 ns a field more than a plain slot's assignment here, against 40
through the slot's descriptor. The engine makes a dozen such objects per sample (the request, the
completion and its usage, the verdict, the journal's events), some 90 fields in all, so the frozen
check alone was several microseconds a sample. `fast_init` compiles an `__init__` of the same
signature that sets each field through its slot's descriptor: the object stays as frozen as before
(assignment still raises `FrozenInstanceError`), is equal to what the dataclass's `__init__` makes,
and is made in about 60% of the time.

It takes only what it can copy exactly: a frozen, slotted dataclass whose fields are all set by
`__init__`, none keyword-only and no `InitVar` (a class with any of these raises TypeError when it
is decorated, never later). Defaults and default factories are kept; `__post_init__` is called
as the dataclass's `__init__` calls it. Put it above `@dataclass`:

    @fast_init
    @dataclass(frozen=True, slots=True)
    class Usage: ...
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any, TypeVar, cast

__all__ = ["fast_init"]

T = TypeVar("T")

# A parameter left out: its default factory makes the value.
_FACTORY = object()


def fast_init(cls: type[T]) -> type[T]:
    """Replaces `cls.__init__` with one that sets its slots directly (see the module)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen, slotted dataclass")
    if not params.init:
        raise TypeError(f"fast_init: {cls.__name__} writes its own __init__")
    fields = dataclasses.fields(cast(Any, cls))
    # The dataclass's own parameters, to the letter: an InitVar is one but no field, and an
    # init=False field is a field but no parameter.
    own = list(inspect.signature(cls.__init__).parameters)[1:]
    if own != [f.name for f in fields]:
        raise TypeError(f"fast_init: {cls.__name__}.__init__ does not take just its fields")
    names: dict[str, Any] = {"_FACTORY": _FACTORY}
    args, body = [], []
    for i, f in enumerate(fields):
        if f.kw_only:
            raise TypeError(f"fast_init: {cls.__name__}.{f.name} is keyword-only")
        names[f"_set{i}"] = _slot(cls, f.name).__set__
        if f.default is not dataclasses.MISSING:
            names[f"_default{i}"] = f.default
            args.append(f"{f.name}=_default{i}")
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory{i}"] = f.default_factory
            args.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY: {f.name} = _factory{i}()")
        else:
            args.append(f.name)
        body.append(f"    _set{i}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body or ["    pass"])
    exec(compile(source, f"<fast_init {cls.__qualname__}>", "exec"), names)
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _slot(cls: type[Any], name: str) -> Any:
    """The descriptor of slot `name` (the class's own, or a base's)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if isinstance(found, types.MemberDescriptorType):
            return found
    raise TypeError(f"fast_init: {cls.__name__}.{name} is not a slot")
