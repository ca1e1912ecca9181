"""The codec of every journal (a run's and `ttc batch`'s): frozen dataclasses to JSON objects and
back, by a plan made once per class when it is registered.

An event class is a frozen dataclass with a `KIND` class variable (its `ev` key), registered with
`@event(...)`. Its line is `ev` then its fields, by name, in field order (or in `order`); a field
whose key, conversion or omission differs from the plain rule says so once, on the field, with
`field(metadata=spec(...))`:

    key       the JSON key (default: the field's name)
    enc, dec  the conversions to and from JSON (default: none, and the field's type: int, str,
              float or bool, None kept for an optional one; any other type needs a `dec`)
    omit      "none": the key is left out when the value is None; "empty": when it is falsy
    missing   the value of a line without the key (default: the field's default; for an
              optional field, None; a field with neither is required: KeyError); `required`
              makes a field with a default required all the same
    flag      (key, test, apply): `key: true` ends the line when test(value), and a line read
              back with it has apply(value) (a usage bought through a Batch API: `batch: true`)

A line's `ok` is the class's to declare: `ok=True` or `ok=False` writes that constant (two classes
of one kind, told apart by it on decode), and `ok="error"` makes it `error is None`: a failed
event writes only its required fields and `error`, and one read with no true `ok` is failed (its
error "error" when the line has none).

`Codec(*classes)` reads lines back: a registry by kind, one per journal (a run's `start` and a
`ttc batch` session's `start` are different events). Decoding raises UnknownEvent for a kind it
does not hold, KeyError for a required key that is absent, and TypeError or ValueError for a
value of the wrong kind; `read` makes those one DataError naming the file and line.

The plan is made once per class, at registration: what each field's key, conversion, omission
and default are; its encoder is compiled from that plan into one function per class, so that
writing a line (two per sample, tens of thousands a second at full speed) walks no list. The
tests read every kind back and compare its bytes with the lines the hand-written codecs wrote.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Literal, NamedTuple, Protocol, TypeVar

from ttc.engine.contract._errors import DataError
from ttc.engine.contract._fastinit import fast_init

__all__ = ["Codec", "Eventlike", "Fields", "UnknownEvent", "encode", "event", "spec"]

# A decoded line: the JSON object of one journal line.
Fields = dict[str, Any]
Omit = Literal["none", "empty"]
Flag = tuple[str, Callable[[Any], bool], Callable[[Any], Any]]


class Eventlike(Protocol):
    """A registered event class's instance: what a journal line holds."""

    KIND: ClassVar[str]


class UnknownEvent(LookupError):
    """A line of a kind (`ev`) the codec does not hold."""


T = TypeVar("T")
_MISSING: Any = object()  # no `missing` given
_REQUIRED: Any = object()  # a line must hold the key
_FRESH: Any = object()  # a default made afresh for each event (a `default_factory`)


def spec(
    *,
    key: str | None = None,
    enc: Callable[[Any], Any] | None = None,
    dec: Callable[[Any], Any] | None = None,
    omit: Omit | None = None,
    missing: Any = _MISSING,
    required: bool = False,
    flag: Flag | None = None,
) -> dict[str, Any]:
    """A field's journal metadata (see the module's docstring), for `field(metadata=...)`."""
    found = {"key": key, "enc": enc, "dec": dec, "omit": omit, "flag": flag}
    found["missing"] = _REQUIRED if required else missing
    return {"journal": found}


class _Field(NamedTuple):
    """One field as its metadata and type declare it."""

    name: str
    key: str | None  # None: not read (a failed event's line does not carry it)
    enc: Callable[[Any], Any] | None
    omit: Omit | None
    dec: Callable[[Any], Any] | None  # None: kept as the line holds it
    optional: type | None  # a scalar type whose None is kept (`dec` is None then)
    default: Any  # _REQUIRED, _FRESH or a value (one the conversion keeps as it is)
    factory: Callable[[], Any] | None
    flag: Flag | None


class _Plan(NamedTuple):
    """A class's compiled codec: its encoder, and its decoders (for a true and a false `ok`)."""

    kind: str
    ok: bool | str | None
    encode: Callable[[Any], Fields]
    decode: Callable[[Fields], Any]
    decode_failed: Callable[[Fields], Any] | None


_PLANS: dict[type[Any], _Plan] = {}
_SCALARS = (int, str, float, bool)


def event(
    *, ok: bool | Literal["error"] | None = None, order: Iterable[str] | None = None
) -> Callable[[type[T]], type[T]]:
    """Registers an event class: compiles its plan (see the module's docstring), and a slotted
    one's `__init__` as `fast_init` does (two events are made per sample)."""

    def register(cls: type[T]) -> type[T]:
        plan = _plan(cls, ok, None if order is None else tuple(order))
        if "__slots__" in cls.__dict__:
            fast_init(cls)
        _PLANS[cls] = plan
        return cls

    return register


def _field(cls: type[Any], f: dataclasses.Field[Any], hint: Any) -> _Field:
    meta = f.metadata.get("journal", {})
    dec, optional = meta.get("dec"), None
    if dec is None and hint in _SCALARS:
        dec = hint
    elif dec is None and typing.get_origin(hint) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and args[0] in _SCALARS:
            optional = args[0]
    if dec is None and optional is None and hint is not Any:
        raise TypeError(f"{cls.__name__}.{f.name}: a {hint} field needs a `dec`")
    default, factory = meta.get("missing", _MISSING), None
    if default is _MISSING:
        default, factory = _default(f)
        if default is _REQUIRED and optional is not None:
            default = None
    key = meta.get("key") or f.name
    flag = meta.get("flag")
    return _Field(
        f.name, key, meta.get("enc"), meta.get("omit"), dec, optional, default, factory, flag
    )


def _default(f: dataclasses.Field[Any]) -> tuple[Any, Callable[[], Any] | None]:
    if f.default is not dataclasses.MISSING:
        return f.default, None
    if f.default_factory is not dataclasses.MISSING:
        return _FRESH, f.default_factory
    return _REQUIRED, None


def _plan(cls: type[Any], ok: bool | str | None, order: tuple[str, ...] | None) -> _Plan:
    hints = typing.get_type_hints(cls)
    found = [_field(cls, f, hints[f.name]) for f in dataclasses.fields(cls)]
    fields = {f.name: f for f in found}
    ordered = [*(order or fields), *(n for n in fields if order is not None and n not in order)]
    if ok is not None and "ok" not in ordered:
        ordered.append("ok")
    if ok != "error":
        encode = _encoder(cls, ordered, fields, ok is not False)
        return _Plan(cls.KIND, ok, encode, _decoder(cls, found), None)
    # A failed event: only its required fields, `ok: false` and the error; read back the same
    # way, every other field its default.
    assert not any(f.flag for f in found), "a flag of an event that can fail"
    kept = {f.name for f in dataclasses.fields(cls) if _default(f)[0] is _REQUIRED}
    kept |= {"ok", "error"}
    failed = _encoder(cls, [n for n in ordered if n in kept], fields, False)
    encode = _encoder(cls, [n for n in ordered if n != "error"], fields, True, failed)
    unread = [f if f.name in kept else _unread(cls, f) for f in found]
    # A failed call's error as every journal so far has read it: an empty or absent one is "error".
    unread = [_error_field(f) if f.name == "error" else f for f in unread]
    return _Plan(cls.KIND, ok, encode, _decoder(cls, found), _decoder(cls, unread))


def _unread(cls: type[Any], f: _Field) -> _Field:
    """A field a failed event's line does not carry: the dataclass's default."""
    default, factory = _default(next(d for d in dataclasses.fields(cls) if d.name == f.name))
    return f._replace(key=None, dec=None, optional=None, default=default, factory=factory)


def _error_field(f: _Field) -> _Field:
    return f._replace(dec=_error, optional=None, default="error")


def _error(raw: Any) -> str:
    return str(raw or "error")


# One key of a line: (key, attribute, conversion, omission); the attribute None is `ok`'s constant.
_Step = tuple[str, str | None, Callable[[Any], Any] | None, Omit | None]


def _steps(ordered: list[str], fields: dict[str, _Field]) -> list[_Step]:
    """The keys of a line, in order."""
    steps: list[_Step] = []
    for name in ordered:
        if name == "ok":
            steps.append(("ok", None, None, None))
        else:  # a name of `order` that is no field fails here, at registration
            f = fields[name]
            steps.append((f.key or name, name, f.enc, f.omit))
    return steps


def _encoder(
    cls: type[Any],
    ordered: list[str],
    fields: dict[str, _Field],
    ok: bool,
    failed: Callable[[Any], Fields] | None = None,
) -> Callable[[Any], Fields]:
    """`encode(e)`: `ev`, then each key in order (`ok` a constant, a key left out as its field
    says), then the flags that hold (`true`, or nothing).

    Compiled once per class, as `dataclasses` makes an `__init__`: one function whose body reads
    each attribute by name, converts it and tests its omission inline. A loop over the steps
    (an attribute read by name, a conversion and an omission looked up for every key) cost
    nearly three times as much, and two lines are written per sample."""
    names: dict[str, Any] = {"_failed": failed}
    body = ["def encode(e):"]
    if failed is not None:
        body.append("    if e.error is not None: return _failed(e)")
    body.append(f"    line = {{'ev': {cls.KIND!r}}}")
    for i, (key, name, enc, omit) in enumerate(_steps(ordered, fields)):
        if name is None:
            body.append(f"    line['ok'] = {ok!r}")
            continue
        value = f"e.{name}"
        if enc is not None:
            names[f"_enc{i}"] = enc
            value = f"_enc{i}({value})"
        if omit is None:
            body.append(f"    line[{key!r}] = {value}")
            continue
        body.append(f"    v = {value}")
        test = "v is not None" if omit == "none" else "v"
        body.append(f"    if {test}: line[{key!r}] = v")
    for i, f in enumerate(f for f in fields.values() if f.flag is not None):
        assert f.flag is not None
        names[f"_flag{i}"] = f.flag[1]
        body.append(f"    if _flag{i}(e.{f.name}): line[{f.flag[0]!r}] = True")
    body.append("    return line")
    exec(compile("\n".join(body), f"<encode {cls.__name__}>", "exec"), names)
    encode: Callable[[Any], Fields] = names["encode"]
    return encode


def _decoder(cls: type[Any], fields: list[_Field]) -> Callable[[Fields], Any]:
    """`decode(d)`: one call of the class, each field as `d` holds it, converted."""
    plan = [(f.key, f.dec, f.optional, f.default, f.factory, f.flag) for f in fields]

    def decode(d: Fields) -> Any:
        args: list[Any] = []
        for key, dec, optional, default, factory, flag in plan:
            if key is None:  # not read: its default
                args.append(default if factory is None else factory())
                continue
            raw = d[key] if default is _REQUIRED else d.get(key, default)
            if factory is not None:  # absent: made afresh, not converted
                value = factory() if raw is default else dec(raw)  # type: ignore[misc]
            elif optional is not None:
                value = None if raw is None else optional(raw)
            else:
                value = raw if dec is None else dec(raw)
            if flag is not None and d.get(flag[0]):
                value = flag[2](value)
            args.append(value)
        return cls(*args)

    return decode


def encode(event: Eventlike) -> Fields:
    """An event's journal line, as a JSON object (without its `at`)."""
    return _PLANS[type(event)].encode(event)


class Codec:
    """The events of one journal, by kind: `decode` reads a line back as its typed event."""

    def __init__(self, *classes: type[Any]) -> None:
        # By kind: how `ok` chooses (None: it does not; "ok": by `ok`, which a line must hold;
        # "failed": no true `ok` is a failure), and the decoders for a true and a false `ok`.
        self._kinds: dict[str, tuple[str | None, Callable[..., Any], Callable[..., Any]]] = {}
        for cls in classes:
            plan = _PLANS[cls]
            if isinstance(plan.ok, bool):  # two classes of one kind, told apart by `ok`
                other = self._kinds.get(plan.kind, (None, plan.decode, plan.decode))
                pair = (plan.decode, other[2]) if plan.ok else (other[1], plan.decode)
                self._kinds[plan.kind] = ("ok", *pair)
            elif plan.decode_failed is not None:
                self._kinds[plan.kind] = ("failed", plan.decode, plan.decode_failed)
            else:
                assert plan.kind not in self._kinds, plan.kind
                self._kinds[plan.kind] = (None, plan.decode, plan.decode)

    def decode(self, fields: Fields) -> Any:
        """The typed event of one line (see the module's docstring for its errors)."""
        found = self._kinds.get(fields.get("ev"))  # type: ignore[arg-type]
        if found is None:
            raise UnknownEvent(fields.get("ev"))
        by, decode, failed = found
        if by is not None and not (fields["ok"] if by == "ok" else fields.get("ok")):
            return failed(fields)
        return decode(fields)

    def read(self, fields: Fields, where: str) -> Any:
        """`decode`, its errors one DataError naming `where` (file:line) and what is wrong."""
        try:
            return self.decode(fields)
        except UnknownEvent:
            raise DataError(f"{where}: unknown journal event {fields.get('ev')!r}") from None
        except KeyError as exc:
            raise DataError(f"{where}: {fields['ev']} event lacks a valid {exc}") from None
        except (TypeError, ValueError, IndexError, AttributeError) as exc:
            kind = fields["ev"]
            raise DataError(
                f"{where}: {kind} event has a field of the wrong kind ({exc})"
            ) from None
