"""The tagging family's declaration (finetune/family.py): its config fields, and its
tasks: chunking, named entities and parts of speech by name (data.py), and users' own
from their task files."""

import dataclasses

from finetune.errors import DataError
from finetune.family import Family, read_once, task_file_metrics, task_file_splits
from finetune.tagging import data
from util import hparams
from util.hparams import first_repeated, unknown_name_message

_KEYS = ("family", "name", "format", "word_column", "tag_column", "scheme", "tags",
         "metric", "metrics", "train", "dev", "test")
METRICS = ("f1", "accuracy")


def _infer_scheme(tags, where, inside: int, begin: int) -> str:
  """The scheme of tags no "scheme" names (docs/finetuning.md's rule)."""
  entity = [t for t in tags if t[:2] in ("B-", "I-", "E-", "S-")]
  if not entity:
    return "none"
  plain = next((t for t in tags if t != "O" and t not in entity), None)
  if plain is not None:
    raise DataError(f"{where(plain)}tag {plain!r} has no B-/I-/E-/S- prefix but "
                    f"{entity[0]!r} has; give \"scheme\" in the task file (\"none\": tags "
                    "without entities)")
  if any(t[:2] in ("E-", "S-") for t in entity):
    return "bioes"
  return "iob1" if inside > begin else "iob2"


def load_task_file(json_path: str, spec: dict) -> data.TaggingTask:
  """A user's tagging task from its task file, `spec` its object (docs/finetuning.md,
  "A tagging task of your own")."""
  def problem(text):
    return DataError(f"{json_path}: {text}")

  files = task_file_splits(json_path, spec, _KEYS)
  file_format = spec.get("format", "conll")
  if file_format not in data.FORMATS:
    raise problem(unknown_name_message(str(file_format), data.FORMATS, '"format"',
                                       list_valid=True))
  columns = (1, 3) if file_format == "conllu" else (0, -1)
  word_column, tag_column = (spec.get(k, default) for k, default in zip(
      ("word_column", "tag_column"), columns))
  for key, column in (("word_column", word_column), ("tag_column", tag_column)):
    if not isinstance(column, int) or isinstance(column, bool):
      raise problem(f'"{key}" must be a column index (0-based; -1 the last)')
  scheme = spec.get("scheme")
  if scheme is not None and scheme not in data.SCHEME_NAMES:
    raise problem(unknown_name_message(str(scheme), data.SCHEME_NAMES, '"scheme"',
                                       list_valid=True))
  scheme = data.SCHEME_NAMES.get(scheme)
  tags = spec.get("tags")
  if tags is not None:
    if not (isinstance(tags, list) and tags and all(isinstance(t, str) and t for t in tags)):
      raise problem('"tags" must be a non-empty list of tags')
    if first_repeated(tags) is not None:
      raise problem(f'"tags" names {first_repeated(tags)!r} twice; tags must be distinct')
  first_line, train_path = {}, ""

  def where(tag) -> str:  # the first line of a tag read from the training file
    return (f"{train_path}:{first_line[tag]}: " if tag in first_line else
            f'{json_path}: "tags": ')

  if tags is None or scheme is None:
    task = data.TaggingTask(spec["name"], (), {}, file_format=file_format, files=files)
    train_path = data.split_file(task, "", "train")
    first_line, inside, begin = read_once(data.scan_tags, train_path, file_format,
                                          word_column, tag_column)
    tags = tags or sorted(first_line)
    scheme = scheme or _infer_scheme(tags, where, inside, begin)
  for tag in tags if scheme != "none" else ():
    prefix, _, kind = tag.partition("-")
    if tag != "O" and (prefix not in data.PREFIXES[scheme] or len(prefix) != 1 or not kind):
      raise DataError(f"{where(tag)}tag {tag!r} is outside the {scheme.upper()} scheme (O, "
                      f"{', '.join(p + '-TYPE' for p in data.PREFIXES[scheme])})")
  task_metrics = task_file_metrics(json_path, spec, METRICS,
                                   ["f1" if scheme != "none" else "accuracy"])
  if "f1" in task_metrics and scheme == "none":
    raise problem('metric "f1" counts entities, and these tags have none (scheme '
                  '"none"); use "accuracy"')
  return data.TaggingTask(
      spec["name"], tuple(tags), {}, scheme=scheme, metrics=task_metrics,
      eval_splits=("dev",) if "dev" in files else (),
      test_splits=("test",) if "test" in files else (), file_format=file_format,
      word_column=word_column, tag_column=tag_column, files=files)


@dataclasses.dataclass(frozen=True)
class TaggingSettings:
  tagging_stride: int = hparams.field(
      64, at_least=1,
      help="New: a sentence longer than max_seq_length - 2 pieces is read in windows "
           "starting every this many pieces (as QA's doc_stride), each word tagged from "
           "the one where it has the most context.")


def _runner():
  from finetune.tagging.model import TaggingRunner  # pylint: disable=g-import-not-at-top
  return TaggingRunner


FAMILY = Family(name="tagging", task_type=data.TaggingTask, tasks=data.TAGGING_TASKS,
                split_file=data.split_file, read_file=data.read_file,
                read_tfds=data.read_tfds, runner=_runner,
                settings=TaggingSettings, load_task_file=load_task_file)
