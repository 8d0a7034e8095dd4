"""Hyperparameter objects: defaults live as data in configs/, overrides come from JSON.

Every phase (model sizes, pre-training, fine-tuning) keeps its hyperparameters in one
dataclass. Overrides are applied by name, like the original's `config.update(kwargs)`,
and an unknown name is an error that suggests the closest valid one. Each field's type is
its annotation; its allowed values and help are declared beside it with `field(...)`.
`check_fields` enforces type and values whenever a config is built, so a JSON "false" or
a negative learning rate fails at once, in one line, instead of training.
"""

import dataclasses
import difflib
import functools
import json
import math
import os
import typing
from typing import Any, Callable, Dict, Optional, Sequence

CONFIGS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "configs")


class HParamsError(ValueError):
  """A hyperparameter name or value that cannot be used."""


def unknown_name_message(name: str, valid, what: str = "hyperparameter",
                         list_valid: bool = False) -> str:
  """"unknown <what> 'name'", with the closest valid name, and (`list_valid`, for a
  short list) every valid one."""
  close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.5)
  hint = f"; did you mean {close[0]!r}?" if close else ""
  listed = f" (expected one of {', '.join(sorted(valid))})" if list_valid else ""
  return f"unknown {what} {name!r}{hint}{listed}"


@dataclasses.dataclass(frozen=True)
class Allowed:
  """The values a numeric or string field admits beyond its type."""
  at_least: Optional[float] = None
  above: Optional[float] = None
  at_most: Optional[float] = None
  below: Optional[float] = None
  choices: Optional[tuple] = None

  def admits(self, value) -> bool:
    if self.choices is not None:
      return value in self.choices
    return ((self.at_least is None or value >= self.at_least) and
            (self.above is None or value > self.above) and
            (self.at_most is None or value <= self.at_most) and
            (self.below is None or value < self.below))

  def __str__(self) -> str:
    if self.choices is not None:
      return "one of " + ", ".join(json.dumps(c) for c in self.choices)
    shown = lambda bound: f"{bound:g}" if isinstance(bound, float) else str(bound)
    low = (f"[{shown(self.at_least)}" if self.at_least is not None else
           f"({shown(self.above)}" if self.above is not None else None)
    high = (f"{shown(self.at_most)}]" if self.at_most is not None else
            f"{shown(self.below)})" if self.below is not None else None)
    if low and high:
      return f"in {low}, {high}"
    if low:
      return (">= " if low[0] == "[" else "> ") + low[1:]
    return ("<= " if high[-1] == "]" else "< ") + high[:-1]


# Every seed's range, of fields and flags alike: Keras' set_random_seed seeds NumPy's
# legacy generator, which takes no more; TensorFlow's int64 seeds hold it too.
SEED = {"at_least": 0, "at_most": 2**32 - 1}


def field(default=dataclasses.MISSING, *, default_factory=dataclasses.MISSING,
          at_least=None, above=None, at_most=None, below=None, choices=None,
          resumable: bool = False, meaning: bool = False, help: str = "",
          group: str = ""):  # pylint: disable=redefined-builtin
  """A dataclass field with its allowed values (the type is the annotation) and its part
  in a run's record (runs/record.py): `resumable`, a re-run on the same model dir
  may change it (it does not change the trained weights: paths, logging, hardware);
  `meaning`, it gives trained weights their meaning (an evaluation compares it).
  `help`, what it does, and `group`, the heading of the fields from it on, are
  docs/hparams.md's (tools/hparams_reference.py)."""
  allowed = Allowed(at_least, above, at_most, below,
                    tuple(choices) if choices is not None else None)
  if allowed == Allowed():
    allowed = None  # the type alone decides
  return dataclasses.field(default=default, default_factory=default_factory,
                           metadata={"allowed": allowed, "resumable": resumable,
                                     "meaning": meaning, "help": help, "group": group})


def marked_fields(cls, mark: str) -> tuple:
  """The fields of dataclass `cls` (or its instance) declared with `mark`, "resumable"
  or "meaning"."""
  return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get(mark))


_INVALID = object()
_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number",
               str: "a string"}


def _convert(kind, value):
  """`value` as type `kind` (JSON's view: 3.0 is an integer, 3 a number), or _INVALID."""
  origin, args = typing.get_origin(kind), typing.get_args(kind)
  if origin is typing.Union:  # Optional[X]
    if value is None and type(None) in args:
      return None
    return _convert(next(a for a in args if a is not type(None)), value)
  if kind is bool:
    return value if isinstance(value, bool) else _INVALID
  if isinstance(value, bool):  # a bool is no number
    return _INVALID
  if kind is int:
    if isinstance(value, float) and value.is_integer():
      return int(value)
    return value if isinstance(value, int) else _INVALID
  if kind is float:
    ok = isinstance(value, (int, float)) and math.isfinite(value)
    return float(value) if ok else _INVALID
  if kind is str:
    return value if isinstance(value, str) else _INVALID
  if origin is dict:
    return value if isinstance(value, dict) else _INVALID
  if origin is list:
    if not isinstance(value, list):
      return _INVALID
    items = [_convert(args[0], v) for v in value]
    return _INVALID if any(v is _INVALID for v in items) else items
  return value


def _describe(kind, allowed: Optional[Allowed]) -> str:
  origin, args = typing.get_origin(kind), typing.get_args(kind)
  if origin is typing.Union:
    inner = next(a for a in args if a is not type(None))
    return _describe(inner, allowed) + " or null"
  if origin is dict:
    return "a JSON object"
  if origin is list:
    return f"a list of {_describe(args[0], None)[2:]}s"
  if allowed is not None and allowed.choices is not None:
    return str(allowed)
  name = _TYPE_NAMES.get(kind, getattr(kind, "__name__", str(kind)))
  return f"{name} {allowed}" if allowed is not None else name


@functools.cache
def _fields(cls) -> Dict[str, tuple]:
  """{name: (type, Allowed or None)} of dataclass `cls`, computed once per class."""
  hints = typing.get_type_hints(cls)
  return {f.name: (hints[f.name], f.metadata.get("allowed"))
          for f in dataclasses.fields(cls)}


def _settable(cls) -> Dict[str, tuple]:
  """_fields(cls) and the names a config accepts only as it is built (its
  dataclasses.InitVar aliases, e.g. the original's switches for a newer field)."""
  aliases = {name: (hint.type, None) for name, hint in typing.get_type_hints(cls).items()
             if isinstance(hint, dataclasses.InitVar)}
  return {**_fields(cls), **aliases}


def field_names(cls) -> list:
  """The names dataclass `cls` takes as overrides: its fields and its InitVar aliases."""
  return list(_settable(cls))


def settable_names(cls) -> list:
  """The hyperparameter names of config class `cls`: field_names, unless it lists its
  own in a `hyperparameter_names` classmethod (a config with sections)."""
  listed = getattr(cls, "hyperparameter_names", None)
  return field_names(cls) if listed is None else listed()


def check_flag(flag: str, value, kind=int, **allowed):
  """`value` of command-line flag `flag` (e.g. "--seed") converted to `kind`, as a
  field of that type with `allowed`'s values (field's at_least, above, at_most, below,
  choices) would take it; HParamsError naming the flag if refused."""
  rule = Allowed(**{k: tuple(v) if k == "choices" else v for k, v in allowed.items()})
  return _checked(kind, rule if rule != Allowed() else None, value, flag)


def _checked(kind, allowed: Optional[Allowed], value, shown_name: str):
  """`value` converted to `kind`; HParamsError naming `shown_name` if refused."""
  converted = _convert(kind, value)
  if converted is _INVALID or (allowed is not None and converted is not None and
                               not allowed.admits(converted)):
    try:
      shown = json.dumps(value)
    except (TypeError, ValueError):
      shown = repr(value)
    raise HParamsError(f"{shown_name} {shown}: expected "
                       f"{_describe(kind, allowed)}")
  return converted


def check_fields(obj, flag_style: bool = False):
  """Checks every field of dataclass `obj` (call from __post_init__), converting 3.0 to
  3 for integers and 3 to 3.0 for numbers in place. `flag_style` names a field as the
  command-line flag it comes from (--num-processes), not as a hyperparameter."""
  for name, (kind, allowed) in _fields(type(obj)).items():
    value = getattr(obj, name)
    shown = "--" + name.replace("_", "-") if flag_style else name
    converted = _checked(kind, allowed, value, shown)
    if converted is not value:
      object.__setattr__(obj, name, converted)


def check_overrides(cls, overrides: Dict[str, Any], source: str = "--hparams",
                    elsewhere: Optional[Dict[str, Callable[[], type]]] = None
                    ) -> Dict[str, Any]:
  """`overrides` with each value checked against dataclass `cls`; errors name `source`.
  `elsewhere`: as refuse_unknown's."""
  names = _settable(cls)
  checked = {}
  for name, value in overrides.items():
    if name not in names:
      refuse_unknown(name, names, source, elsewhere)
    try:
      checked[name] = _checked(*names[name], value, name)
    except HParamsError as e:
      raise HParamsError(f"{source}: {e}") from None
  return checked


def refuse_unknown(name: str, known: Sequence[str], source: str = "--hparams",
                   elsewhere: Optional[Dict[str, Callable[[], type]]] = None):
  """Raises HParamsError for a name none of `known` (this phase's names) is. `elsewhere`
  ({"pre-training (run_pretraining.py)": a function returning its config class,
  imported only when needed}): a name that belongs there is said to, rather than
  matched to a near name of this phase."""
  home = next((where for where, other in (elsewhere or {}).items()
               if name in settable_names(other())), None)
  if home:
    raise HParamsError(f"{source}: {name!r} is a hyperparameter of {home}, not of this "
                       "command")
  raise HParamsError(f"{source}: {unknown_name_message(name, known)}")


def first_repeated(items):
  seen = []
  for item in items:
    if item in seen:
      return item
    seen.append(item)
  return None


def load_json(text: str, source: str):
  """json.loads(text), refusing (HParamsError naming `source`) an object that repeats a
  key, whose last value json would keep without a word; invalid JSON raises
  json.JSONDecodeError, which the caller words."""
  def unique(pairs):
    repeated = first_repeated(key for key, _ in pairs)
    if repeated is not None:
      raise HParamsError(f"{source}: key {repeated!r} appears twice in one JSON object; "
                         "give each name once")
    return dict(pairs)
  return json.loads(text, object_pairs_hook=unique)


def parse_hparams(text: str, flag: str = "--hparams") -> Dict[str, Any]:
  """Reads `--hparams`: a JSON object, or the path of a JSON file holding one."""
  text = (text or "").strip()
  if not text:
    return {}
  if not text.startswith("{"):
    if not os.path.isfile(text):
      raise HParamsError(f"{flag}: {text!r} is neither a JSON object nor an existing "
                         "JSON file")
    try:
      with open(text, encoding="utf-8") as f:
        source, text = text, f.read()
    except UnicodeDecodeError as e:
      raise HParamsError(f"{flag}: {text}: not UTF-8 text (byte {e.start}); expected a "
                         "JSON file") from None
  else:
    source = flag
  try:
    value = load_json(text, source)
  except json.JSONDecodeError as e:
    raise HParamsError(f"{source}: invalid JSON at line {e.lineno} column {e.colno}: "
                       f"{e.msg}") from None
  if not isinstance(value, dict):
    raise HParamsError(f"{source}: expected a JSON object of name: value pairs, got "
                       f"{type(value).__name__}")
  return value


def set_from_flag(overrides: Dict[str, Any], name: str, value, flag: str):
  """overrides[name] = a given flag's value, refusing --hparams's other value for it."""
  if not value:
    return
  if name in overrides and overrides[name] != value:
    raise HParamsError(f"{flag} {value!r} and --hparams' {name} {overrides[name]!r} "
                       "disagree; give one of them")
  overrides[name] = value


def load_preset(*path_parts: str) -> Dict[str, Any]:
  path = os.path.join(CONFIGS_DIR, *path_parts) + ".json"
  if not os.path.isfile(path):
    folder = os.path.dirname(path)
    known = sorted(n[:-5] for n in os.listdir(folder) if n.endswith(".json")) \
        if os.path.isdir(folder) else []
    raise HParamsError(f"no preset {path_parts[-1]!r} in {folder} (known: "
                       f"{', '.join(known) or 'none'})")
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def model_size(model_name: str, overrides: Dict[str, Any]) -> str:
  """The size preset of a run: `model_size` if given, else the one its name mentions
  (electra_tiny/small/base/large), else "small"."""
  return overrides.get("model_size") or next(
      (s for s in ("tiny", "small", "base", "large") if s in model_name), "small")
