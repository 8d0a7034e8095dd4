"""Released weights by name, fetched once into a cache; a local path always wins.

- The original release's checkpoints by their names (RELEASES: electra_small,
  electra_base, electra_large), from the links in the original README: each zip is
  downloaded once into <cache>/releases/ (cache: $ELECTRA_CACHE, else
  ~/.cache/electra), with progress, checked (every byte the server announced, and each
  member's CRC) and unpacked into a temporary folder that is renamed into place, so an
  interrupted download never leaves a checkpoint that is later read.
- A Hugging Face model id (`org/name`, `org/name@revision`) through huggingface_hub,
  into its own cache (HF_HOME; HF_HUB_OFFLINE honoured). A family's name without the
  part (`google/electra-small`) is the pair, by transformers' convention
  (`<family>-discriminator` and `<family>-generator`): what pre-training and
  `--corrupt` need.
What is fetched is then an ordinary path of its format (formats.py).
"""

import contextlib
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from typing import Dict, Optional

from model.weights import CheckpointError
from model.weights.huggingface import HF_WEIGHT_FILES
from util import cli, files
from util.progress import Progress

RELEASES = ("electra_small", "electra_base", "electra_large")
RELEASE_URL = "https://storage.googleapis.com/electra-data/{name}.zip"
URL_ENV = "ELECTRA_RELEASE_URL"  # another place to fetch the zips from (a mirror, tests)
CACHE_ENV = "ELECTRA_CACHE"
HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+(@[\w./-]+)?$")
PARTS = ("discriminator", "generator")
# What a transformers directory needs here, besides its weights in one of two formats.
HUB_FILES = ["config.json", "vocab.txt"]
CHUNK = 1 << 20


def cache_dir() -> str:
  return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache",
                                                   "electra")


def is_name(path: str) -> bool:
  """Whether `path` names released weights rather than a local path (which wins)."""
  if not path or os.path.exists(path) or os.path.exists(path + ".index"):
    return False
  # org/name where a local folder "org" exists is a path that went wrong, not an id.
  return path in RELEASES or bool(HUB_ID.match(path)) and not os.path.isdir(
      path.split("/")[0])


def resolve(path: str) -> str:
  """The local folder of the weights `path` names (fetched if not cached yet), else
  `path` itself."""
  if not is_name(path):
    return path
  return _release(path) if path in RELEASES else _hub(path)


def remedy(path: str) -> str:
  """What to do about weights at `path` that do not read whole: fetch a release anew,
  copy anything else again."""
  releases = os.path.realpath(os.path.join(cache_dir(), "releases"))
  inside = os.path.relpath(os.path.realpath(path), releases)
  if inside.split(os.sep)[0] in RELEASES:
    folder = os.path.join(releases, inside.split(os.sep)[0])
    return f"delete {folder} and run again to fetch it anew"
  return "copy or fetch it again"


# ---- the original release -----------------------------------------------------------

@contextlib.contextmanager
def _writing_the_cache():
  """An OSError of the cache folder (a file, read-only, full) named as the cache's."""
  try:
    yield
  except OSError as e:
    where = (f"{CACHE_ENV}={os.environ[CACHE_ENV]}" if os.environ.get(CACHE_ENV) else
             f"the weights cache {cache_dir()}")
    raise CheckpointError(f"{where}: cannot write there ({e.strerror}: {e.filename}); "
                          f"set {CACHE_ENV} to a writable folder") from None


def _release(name: str) -> str:
  folder = os.path.join(cache_dir(), "releases", name)
  if os.path.isdir(folder):
    return _unpacked_root(folder)
  with _writing_the_cache():
    return _fetch_release(name, folder)


def _fetch_release(name: str, folder: str) -> str:
  url = (os.environ.get(URL_ENV) or RELEASE_URL).format(name=name)
  os.makedirs(os.path.dirname(folder), exist_ok=True)
  for leftover in os.listdir(os.path.dirname(folder)):  # of a run killed mid-way
    if leftover.startswith(f".{name}."):
      shutil.rmtree(os.path.join(os.path.dirname(folder), leftover), ignore_errors=True)
  with tempfile.TemporaryDirectory(dir=os.path.dirname(folder),
                                   prefix=f".{name}.") as scratch:
    archive = os.path.join(scratch, f"{name}.zip")
    _download(url, archive, name)
    try:
      with zipfile.ZipFile(archive) as zipped:
        bad = zipped.testzip()
        if bad:
          raise CheckpointError(f"{name}: {url} gave a zip whose {bad} fails its CRC "
                                "check; run again to fetch it anew")
        with files.atomic_directory(folder) as unpacked:  # whole, or not there at all
          zipped.extractall(unpacked)
    except zipfile.BadZipFile as e:
      raise CheckpointError(f"{name}: {url} did not give a readable zip ({e}); run again "
                            "to fetch it anew") from None
  return _unpacked_root(folder)


def _download(url: str, target: str, name: str):
  """`url` into `target`, every announced byte, with progress on stderr."""
  manual = (f"download {RELEASE_URL.format(name=name)} and unzip it into "
            f"{os.path.join(cache_dir(), 'releases', name)}, or pass the unzipped "
            "folder's path")
  done = total = 0
  try:
    with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as out:
      total = int(response.headers.get("Content-Length") or 0)
      progress = Progress(f"fetching {name}", total / 2**20 or None, "MiB")
      while chunk := response.read(CHUNK):
        out.write(chunk)
        done += len(chunk)
        progress.update(done / 2**20)
      progress.update(done / 2**20, force=True)
  except (urllib.error.URLError, OSError, ValueError) as e:
    raise CheckpointError(f"{name}: could not fetch {url} ({getattr(e, 'reason', e)}); "
                          f"{manual}") from None
  if total and done != total:
    raise CheckpointError(f"{name}: {url} stopped after {done:,} of {total:,} bytes; "
                          f"run again to fetch it anew, or {manual}")


def _unpacked_root(folder: str) -> str:
  """The folder holding the checkpoint: the zips hold one folder of the release's name."""
  entries = os.listdir(folder)
  if len(entries) == 1 and os.path.isdir(os.path.join(folder, entries[0])):
    return os.path.join(folder, entries[0])
  return folder


# ---- Hugging Face --------------------------------------------------------------------

def _hub(model_id: str) -> str:
  repo, _, revision = model_id.partition("@")
  if repo.endswith(tuple(f"-{part}" for part in PARTS)):
    return _snapshot(repo, revision or None, model_id)
  # A family: its two parts side by side, as a folder of two (huggingface.py).
  parts = {part: _snapshot(f"{repo}-{part}", revision or None, model_id)
           for part in PARTS}
  folder = os.path.join(cache_dir(), "hub_pairs", repo.replace("/", "--") +
                        (f"@{revision}" if revision else ""))
  with _writing_the_cache():
    _link_pair(folder, parts)
  return folder


def _snapshot(repo: str, revision: Optional[str], asked: str) -> str:
  """The local snapshot of `repo` with its config, vocabulary and weights."""
  import huggingface_hub  # pylint: disable=g-import-not-at-top
  from huggingface_hub import errors  # pylint: disable=g-import-not-at-top
  try:
    folder = None
    for weights in HF_WEIGHT_FILES:  # the first format the repository has
      folder = huggingface_hub.snapshot_download(
          repo, revision=revision, allow_patterns=HUB_FILES + [weights])
      if os.path.isfile(os.path.join(folder, weights)):
        return folder
    raise CheckpointError(f"{asked}: {repo} holds neither "
                          f"{' nor '.join(HF_WEIGHT_FILES)}")
  except (errors.OfflineModeIsEnabled, errors.LocalEntryNotFoundError,
          errors.RepositoryNotFoundError, errors.RevisionNotFoundError,
          errors.HfHubHTTPError, errors.HFValidationError, OSError) as e:
    why = cli.first_line(e, limit=160)
    raise CheckpointError(
        f"{asked}: no such path, and could not fetch {repo} from the Hugging Face Hub "
        f"({why}); fetch it where you can (`huggingface-cli download {repo}`) and copy "
        "the cache (HF_HOME), or pass the path of a transformers directory") from None


def _link_pair(folder: str, parts: Dict[str, str]):
  """`folder` holding links to the two snapshots (made anew in a temporary folder and
  renamed in, so a reader never sees half of it)."""
  if all(os.path.realpath(os.path.join(folder, p)) == os.path.realpath(parts[p])
         for p in PARTS):
    return
  with files.atomic_directory(folder) as scratch:
    for part, snapshot in parts.items():
      os.symlink(os.path.abspath(snapshot), os.path.join(scratch, part))
