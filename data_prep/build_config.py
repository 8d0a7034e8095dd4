"""What a data build is asked (BuildConfig, checked when made) and what it did (Stats)."""

import collections
import dataclasses
from typing import Optional

from data_prep.normalization import Normalization
from util import hparams


@dataclasses.dataclass(frozen=True)
class BuildConfig:
  """The build's settings; each is a flag of build_pretraining_dataset.py (the paths are
  filled in by data_prep.prepare when left empty)."""
  corpus_dir: str = ""
  vocab_file: str = ""
  output_dir: str = ""
  max_seq_length: int = hparams.field(128, at_least=8)
  num_processes: int = hparams.field(1, at_least=1)
  blanks_separate_docs: bool = True
  # The text's normalisation (data_prep/normalization.py); None: decided by the build
  # from the vocabulary, or the corpus it learns one from.
  do_lower_case: Optional[bool] = None
  strip_accents: Optional[bool] = None
  seed: int = hparams.field(0, **hparams.SEED)
  num_out_files: Optional[int] = hparams.field(None, at_least=1)
  static_masking: bool = False
  mask_prob: float = hparams.field(0.15, above=0, below=1)
  overwrite: bool = False
  progress: bool = True

  def __post_init__(self):
    hparams.check_fields(self, flag_style=True)

  @property
  def normalization(self) -> Normalization:
    """The pair, once the build has settled it (build.with_normalization)."""
    return Normalization(self.do_lower_case, self.strip_accents)


@dataclasses.dataclass
class Stats:
  """What one process did; summed over processes for the closing summary."""
  documents: int = 0
  lines: int = 0
  tokens: int = 0
  unk_tokens: int = 0
  dropped_tokens: int = 0  # cut by truncation to max_seq_length
  examples: int = 0
  single_segment: int = 0
  short_target: int = 0
  real_positions: int = 0
  positions: int = 0
  invalid_bytes: int = 0
  characters: int = 0  # of the lines, white space aside
  # Those the normalisation changes beyond case, and those no token holds: {char: count}.
  changed_characters: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  absent_characters: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  file_bytes: int = 0  # of the corpus files read (compressed bytes of compressed files)
  # Lines of over LONG_LINE_FACTOR x max_seq_length word-pieces, and the first one.
  long_lines: int = 0
  long_line_place: str = ""  # "<file>:<line>"
  long_line_tokens: int = 0
  loop_seconds: float = 0.0  # in the tokenize-pack-write loop, the slowest process's
  loop_cpu_seconds: float = 0.0  # CPU time in that loop, all processes together

  def add(self, other: "Stats"):
    if not self.long_line_place:  # the first process's first, in corpus order
      self.long_line_place = other.long_line_place
      self.long_line_tokens = other.long_line_tokens
    for field in dataclasses.fields(self):
      if field.name in ("long_line_place", "long_line_tokens"):
        continue
      mine, theirs = getattr(self, field.name), getattr(other, field.name)
      setattr(self, field.name,
              max(mine, theirs) if field.name == "loop_seconds" else mine + theirs)
