"""The custom suite's configuration: a `GenericConfig`, read from Python, JSON or TOML.

The keys are listed in `ttc.adapters.suites._generic`'s docstring. Checked here: every key's type
and value, unknown and missing keys (ConfigError naming the file and the key), the template files
(relative to the config file) and a `module:function` verifier's import.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttc.engine import ConfigError, DataError
from ttc.engine._util import parse_json, read_bytes

__all__ = ["EXTRACTS", "VERIFIERS", "GenericConfig", "import_callable", "read_template"]

VERIFIERS = ("exact", "numeric", "math", "choice")
"""The built-in verifiers; any other verifier names a Python callable as `module:function`."""
EXTRACTS = ("boxed", "last_line", "full")
"""How the answer is read out of a response."""

_CALLABLE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_NAME = re.compile(r"[A-Za-z0-9][\w.-]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericConfig:
    """How to read and judge a custom test set (see the module docstring for every key)."""

    question_field: str
    answer_field: str
    verifier: str
    name: str = "custom"
    id_field: str | None = None
    extract: str = "boxed"
    casefold: bool = False
    tolerance: float = 1e-6
    tolerance_mode: str = "relative"
    warmup_template: str | None = None
    adaptive_template: str | None = None
    example_template: str | None = None
    example_separator: str = "\n\n"
    config_dir: str | None = None
    """The config file's folder (set by `from_file`, not a key of the file): a `module:function`
    verifier is imported with it on sys.path."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _check_type(f, getattr(self, f.name))
        for key in ("question_field", "answer_field", "id_field"):
            if getattr(self, key) == "":
                raise ConfigError(f"{key}: must name a field, got an empty string")
        if not _NAME.fullmatch(self.name):
            raise ConfigError(f"name: {self.name!r} is not a simple name (letters, digits, _.-)")
        if self.verifier not in VERIFIERS and not _CALLABLE.fullmatch(self.verifier):
            raise ConfigError(
                f"verifier: {self.verifier!r}; expected one of {', '.join(VERIFIERS)} "
                "or a Python callable as 'module:function'"
            )
        if self.extract not in EXTRACTS:
            raise ConfigError(f"extract: {self.extract!r}; expected one of {', '.join(EXTRACTS)}")
        if not math.isfinite(self.tolerance) or self.tolerance < 0:
            raise ConfigError(f"tolerance: must be a finite number >= 0, got {self.tolerance}")
        if self.tolerance_mode not in ("absolute", "relative"):
            raise ConfigError(
                f"tolerance_mode: {self.tolerance_mode!r}; expected 'absolute' or 'relative'"
            )

    @classmethod
    def from_file(cls, path: str | Path) -> GenericConfig:
        """Reads a JSON (.json) or TOML (.toml) file; template files are relative to it."""
        path = Path(path)
        values = _keys(path, _read_table(path))
        for key, placeholder in _TEMPLATE_KEYS.items():
            value = values.get(key)
            if isinstance(value, str) and placeholder not in value:
                values[key] = str((path.parent / value).resolve())
        try:
            return cls(**values, config_dir=str(path.parent.resolve()))
        except ConfigError as exc:
            raise ConfigError(f"{path}: key {exc}") from None


def _check_type(f: dataclasses.Field[Any], value: object) -> None:
    """ConfigError unless `value` has the type of the config field `f`."""
    if f.name == "casefold":
        ok, want = isinstance(value, bool), "true or false"
    elif f.name == "tolerance":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        want = "a number"
    else:
        ok = isinstance(value, str) or (value is None and f.default is None)
        want = "a string"
    if not ok:
        raise ConfigError(f"{f.name}: expected {want}, got {type(value).__name__}")


def _read_table(path: Path) -> dict[str, Any]:
    """The top-level table of a JSON or TOML config file, else a one-line ConfigError naming the
    file (and the line, where the parser gives one)."""
    if path.suffix not in (".json", ".toml"):
        raise ConfigError(f"{path}: a suite config is a .json or .toml file")
    try:
        raw = read_bytes(path)
        data = parse_json(raw, str(path), document=True) if path.suffix == ".json" else None
    except DataError as exc:  # the engine's reader: missing, a directory, bad UTF-8 or JSON
        raise ConfigError(str(exc)) from None
    if data is None:
        data = _toml(path, raw)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table of keys at the top level")
    return data


_TOML_AT = re.compile(r"(.*) \(at line (\d+), column (\d+)\)$")


def _toml(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deep") from None
    except tomllib.TOMLDecodeError as exc:
        at = _TOML_AT.match(str(exc))
        if at is None:
            raise ConfigError(f"{path}: not valid TOML ({exc})") from None
        what, lineno, column = at.groups()
        raise ConfigError(f"{path}:{lineno}: not valid TOML ({what}, column {column})") from None
    except ValueError:  # Python's int limit, past which a long run of digits is refused
        limit = sys.get_int_max_str_digits()
        raise ConfigError(f"{path}: a number of more than {limit} digits") from None


def _keys(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The keys of a config file that are set (JSON null is unset): all known, none missing."""
    known = {f.name: f for f in dataclasses.fields(GenericConfig) if f.name != "config_dir"}
    for key in data:
        if key not in known:
            raise ConfigError(f"{path}: unknown key {key!r}; expected some of {', '.join(known)}")
    values = {key: value for key, value in data.items() if value is not None}
    for key, f in known.items():
        if f.default is dataclasses.MISSING and key not in values:
            raise ConfigError(f"{path}: missing required key {key!r}")
    return values


# The placeholder every template must contain; a value without it names a file.
_TEMPLATE_KEYS = {
    "warmup_template": "{question}",
    "adaptive_template": "{examples}",
    "example_template": "{question}",
}
_REQUIRED = {
    "warmup_template": ("{question}",),
    "adaptive_template": ("{examples}", "{question}"),
    "example_template": ("{question}", "{response}"),
}


def read_template(key: str, value: str | None, default: str) -> str:
    """The template of config key `key`: `value` itself, the file it names, or `default`."""
    if value is None:
        return default
    text = value
    if _TEMPLATE_KEYS[key] not in value:
        try:
            text = Path(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{key}: cannot read template file {value!r} ({exc})") from None
        text = text.removesuffix("\n")  # editors end files with a newline; prompts do not
    for placeholder in _REQUIRED[key]:
        if placeholder not in text:
            raise ConfigError(f"{key}: the template has no {placeholder} placeholder")
    return text


def import_callable(spec: str, folder: str | None = None) -> Callable[[str, str], object]:
    """The callable `module:attr`, the module imported with `folder` (if any) on sys.path.

    `folder` goes at the end of sys.path, once: the `ttc` console script does not put the
    current directory on sys.path, and a verifier next to its config must import all the same.
    """
    if folder is not None and folder not in sys.path:
        sys.path.append(folder)
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise ConfigError(
            f"verifier: cannot import {spec!r} ({type(exc).__name__}: {exc})"
        ) from None
    if not callable(target):
        raise ConfigError(f"verifier: {spec!r} is not callable")
    fn: Callable[[str, str], object] = target
    return fn
