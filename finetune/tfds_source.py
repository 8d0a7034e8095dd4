"""TensorFlow Datasets as a source of task data: what is prepared, or fetched on demand.

A GLUE, SQuAD, CoNLL-2002/2003 or XTREME POS task whose files are missing is downloaded
and prepared by TFDS once (its progress bars shown) into the TFDS data directory and
read from there. Offline, the download hosts are probed first, so the answer is one line
at once rather than minutes of retries. tensorflow_datasets is imported lazily: the
readers of plain files do not need it; util/ too: the families' data modules import this
one, and the exported models' readers ship those without util/ (tests/export_helpers.py
RUNNER).
"""

import socket
import urllib.parse
from typing import Callable, Dict, Iterator, List, Optional

from finetune.errors import DataError

PROBE_TIMEOUT_SECONDS = 5
# What TFDS logs (absl WARNING) for a dataset folder not prepared yet: that is the
# question asked, not a problem.
NOT_PREPARED_LINE = "has no dataset_info.json"


def prepared_builder(name: Optional[str], data_dir: Optional[str] = None):
  """The TFDS builder of `name` when it is prepared in `data_dir`, else None."""
  if not name:
    return None
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  try:
    builder = tfds.builder(name, data_dir=data_dir)
  except Exception:  # pylint: disable=broad-except
    return None  # a name this TFDS version lacks is the same as "not prepared"
  from util import stderr  # pylint: disable=g-import-not-at-top
  with stderr.without_lines(NOT_PREPARED_LINE):
    return builder if builder.is_prepared() else None


def unreachable_hosts(builder) -> List[str]:
  """The dataset's download hosts when none of them answers (offline), else []."""
  hosts = sorted({urllib.parse.urlparse(url).hostname for url in builder.url_infos or {}}
                 - {None})
  for host in hosts:
    try:
      socket.create_connection((host, 443), timeout=PROBE_TIMEOUT_SECONDS).close()
      return []
    except OSError:
      continue
  return hosts


def fetch(name: str, data_dir: Optional[str] = None, log=print):
  """The builder of `name`, downloaded and prepared into `data_dir` (TFDS's default
  when None); a DataError saying what failed otherwise."""
  from util import cli  # pylint: disable=g-import-not-at-top
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    builder = tfds.builder(name, data_dir=data_dir)
  except Exception as e:  # pylint: disable=broad-except
    raise DataError(f"TensorFlow Datasets cannot build {name} ({cli.first_line(e)})") \
        from None
  where = f"{name} with TensorFlow Datasets into {builder.data_dir}"
  offline = unreachable_hosts(builder)
  if offline:
    raise DataError(f"fetching {where} failed: cannot reach {', '.join(offline)} "
                    "(offline?)")
  log(f"preparing {where} (a download, once)")
  try:
    builder.download_and_prepare()
  except Exception as e:  # pylint: disable=broad-except
    raise DataError(f"fetching {where} failed: {cli.first_line(e)}") from None
  return builder


def files_else_tfds(find_file: Callable[[], str], read_file: Callable[[str], list],
                    read_tfds: Callable[[object], list], name: Optional[str],
                    data_dir: Optional[str] = None, fetch_missing: bool = False) -> list:
  """read_file(find_file()): a task's split from its file; or, when find_file says it is
  missing (its DataError), read_tfds(the builder of TFDS's `name`), prepared in
  `data_dir` already or, with `fetch_missing`, now. Else the DataError stands, followed
  by why fetching failed (the files' expected places stay in the message)."""
  try:
    path = find_file()
  except DataError as missing:
    builder = prepared_builder(name, data_dir)
    if builder is None and name and fetch_missing:
      try:
        builder = fetch(name, data_dir)
      except DataError as failed:
        raise DataError(f"{missing}; {failed}") from None
    if builder is None:  # no TFDS name, or not prepared and not to be fetched
      raise
    return read_tfds(builder)
  return read_file(path)


def records(builder, split: str) -> Iterator[Dict]:
  """The split's records as NumPy values (text as bytes), in the stored order."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return iter(tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False)))
