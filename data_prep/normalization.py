"""The text normalisation of a vocabulary: lower-casing and accent stripping, one pair.

The build decides the pair once and writes it as transformers' tokenizer_config.json
beside what it writes, and every copy of the vocabulary carries it. Every later step
reads it (settle), never decides it again; where nothing records it (a released
checkpoint, a deleted file), settle reads it from the vocabulary's tokens as the build
reads a given vocabulary, and says so: for BERT's and ELECTRA's English vocabularies
that is the original's, ORIGINAL, lower-casing with accent stripping.

Accent stripping (NFD, then Mn marks dropped) changes more than Latin accents: it splits
every Hangul syllable into its jamo, takes the voicing marks off kana, the vowel signs
off Indic scripts. So a vocabulary learned from a corpus keeps accents when they matter
to it (CORPUS_SHARE); a vocabulary given to the build is read for its case and accents.
"""

import dataclasses
import json
import os
from collections import Counter
from typing import Callable, Dict, Iterable, Optional, Sequence, Tuple

from data_prep import reference_tokenizer as ref
from data_prep.vocab import VocabError, load_vocab

FILE = "tokenizer_config.json"
# A learned vocabulary keeps accents when at least this share of the corpus's characters
# (white space aside) are ones that accent stripping changes beyond case: one in a
# thousand. English text has about one in 100,000 (a few "é" and "ñ"); Korean, Japanese,
# Vietnamese or French text has far more.
CORPUS_SHARE = 0.001
# A given vocabulary is cased when over this share of its tokens with cased letters hold
# capitals, and keeps accents when over this share of its word tokens hold characters
# accent stripping changes.
VOCAB_SHARE = 0.01
EXAMPLES = 8  # characters a summary row shows


class NormalizationError(ValueError):
  """A recorded pair that cannot be read, or one that contradicts what a step asks."""


@dataclasses.dataclass(frozen=True)
class Normalization:
  """Whether the text is lower-cased and whether, when it is, accents are stripped (as in
  ELECTRA's release, accent stripping happens only with lower-casing). Unpacks as the
  tokenizers' two arguments: Tokenizer(vocab, *normalization)."""
  lower_case: bool = True
  strip_accents: bool = True

  def __post_init__(self):
    if not (isinstance(self.lower_case, bool) and isinstance(self.strip_accents, bool)):
      raise TypeError(f"Normalization({self.lower_case!r}, {self.strip_accents!r}): "
                      "expected two bools")
    object.__setattr__(self, "strip_accents", self.strip_accents and self.lower_case)

  def __iter__(self):
    return iter((self.lower_case, self.strip_accents))

  def __str__(self) -> str:
    return ("lower-cased, accents stripped" if self.strip_accents else
            "lower-cased, accents kept" if self.lower_case else "cased, accents kept")

  def fields(self) -> Dict[str, bool]:
    """As tokenizer_config.json and the runs' configs name them."""
    return {"do_lower_case": self.lower_case, "strip_accents": self.strip_accents}

  def changes(self, char: str) -> bool:
    """Whether the character comes out changed beyond case."""
    return self.strip_accents and ref.strip_accents(char.lower()) != char.lower()

  def as_kept(self, char: str) -> str:
    """The character as the vocabulary should hold it: lower-cased when lower-casing."""
    return char.lower() if self.lower_case else char


ORIGINAL = Normalization(True, True)


def from_fields(values: dict) -> Normalization:
  """The pair named as tokenizer_config.json, a run's config or deploy.json name it;
  a missing or null field is the original's (accents stripped when lower-casing)."""
  lower = values.get("do_lower_case")
  lower = ORIGINAL.lower_case if lower is None else lower
  strip = values.get("strip_accents")
  return Normalization(lower, lower if strip is None else strip)


def read(folder: str) -> Optional[Normalization]:
  """The pair tokenizer_config.json in `folder` records; None when there is none."""
  path = os.path.join(folder, FILE)
  if not os.path.isfile(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      values = json.load(f)
  except (OSError, UnicodeDecodeError, ValueError) as e:
    raise NormalizationError(f"{path}: cannot be read ({e}); expected a JSON object with "
                             "do_lower_case and strip_accents") from None
  if not isinstance(values, dict):
    raise NormalizationError(f"{path}: expected a JSON object with do_lower_case and "
                             "strip_accents")
  for name in ("do_lower_case", "strip_accents"):
    if values.get(name) is not None and not isinstance(values[name], bool):
      raise NormalizationError(f"{path}: {name} {json.dumps(values[name])}: expected true, "
                               "false or null")
  return from_fields(values)


def write(folder: str, normalization: Normalization):
  """tokenizer_config.json in `folder`, atomically."""
  # Imported here: the reading half ships with exported models (export/bundle.py),
  # which carry no util/.
  from util.files import atomic_write  # pylint: disable=import-outside-toplevel
  with atomic_write(os.path.join(folder, FILE)) as f:
    json.dump(normalization.fields(), f, indent=2)
    f.write("\n")


def as_hparam(name: str, value: bool) -> str:
  """How a run's config asks for a field of the pair, for settle's messages."""
  return f"--hparams' {name} {json.dumps(value)}"


def settle(vocab_file: str, folders: Iterable[str] = (), lower_case: Optional[bool] = None,
           strip_accents: Optional[bool] = None,
           asked: Callable[[str, bool], str] = as_hparam,
           note: Callable[[str], None] = print) -> Normalization:
  """The pair a step uses, the one rule of every reader: what the tokenizer_config.json
  files in `folders` (the records', the vocabulary's, a model's) and beside `vocab_file`
  record (they must agree); where none does, what the vocabulary's tokens show, by the
  build's rule for a given vocabulary (decide_for_vocab), said in one line (`note`).
  `lower_case`, `strip_accents`: what the step was asked (None: nothing), refused where
  it contradicts a record; `asked(field, value)` says how it was asked, for the
  message."""
  vocab_folder = os.path.dirname(os.path.abspath(vocab_file))
  found = {}  # the file's real path: (its path as given, its pair)
  for folder in [*folders, vocab_folder]:
    pair = read(folder)
    if pair is not None:
      path = os.path.join(folder, FILE)
      found.setdefault(os.path.realpath(path), (path, pair))
  if len({pair for _, pair in found.values()}) > 1:
    raise NormalizationError("; ".join(f"{path} records {pair}" for path, pair in
                                       found.values()) + ": the vocabulary and the model "
                             "they describe disagree; use the vocab.txt the model was "
                             "trained with")
  wanted = {"do_lower_case": lower_case, "strip_accents": strip_accents}
  if not found:
    pair = decide_for_vocab(load_vocab(vocab_file).tokens, vocab_file, lower_case,
                            strip_accents, asked)
    if None in wanted.values():
      elsewhere = "".join(f" or in {folder}" for folder in folders
                          if os.path.abspath(folder) != vocab_folder)
      note(f"note: no {FILE} beside {vocab_file}{elsewhere}: the text read from the "
           f"vocabulary as {pair} (do_lower_case {json.dumps(pair.lower_case)}, "
           f"strip_accents {json.dumps(pair.strip_accents)})")
    return pair
  path, pair = next(iter(found.values()))
  for name, value in wanted.items():
    if value is not None and value != pair.fields()[name]:
      raise NormalizationError(f"{asked(name, value)}: {path} records the text {pair} "
                               "(the vocabulary was built so); drop it, or build the "
                               "data again with the normalisation you want")
  return pair


def of_model(vocab_file: str, model_folder: str = "", lower_case: Optional[bool] = None,
             strip_accents: Optional[bool] = None,
             asked: Callable[[str, bool], str] = as_hparam,
             note: Callable[[str], None] = print) -> Normalization:
  """settle over the folders of a vocabulary and of the model it serves (if any)."""
  return settle(vocab_file, [os.path.dirname(os.path.abspath(vocab_file)),
                             *([model_folder] if model_folder else [])],
                lower_case, strip_accents, asked, note)


def as_flag(name: str, value: bool) -> str:
  """The data build's (and tools.tokenize's) flag for a field of the pair, for settle's
  messages: --do-lower-case, --no-strip-accents, ..."""
  return f"--{'do' if value else 'no'}-{name.removeprefix('do_').replace('_', '-')}"


def as_cased_flag(name: str, value: bool) -> str:
  """The tools' --cased, for settle's messages (it asks for both fields false)."""
  del name, value
  return "--cased"


def _is_counted(char: str) -> bool:
  # What BERT's cleaning keeps, white space aside.
  return not (char.isspace() or ref.is_control(char) or char == "\ufffd")


def count_characters(lines: Sequence[str], counts: Counter, watched: str = "") -> int:
  """Adds the lines' characters to `counts`, one by one for the lines that are not
  ASCII (ASCII is never changed beyond case) and for the `watched` ASCII characters;
  returns how many characters the lines hold, white space aside."""
  text = "\n".join(lines)
  total = 0
  if not text.isascii():
    other = Counter("".join(line for line in lines if not line.isascii()))
    counts.update(other)
    total += sum(n for char, n in other.items() if _is_counted(char))
    text = "\n".join(line for line in lines if line.isascii())
  total += len(text) - sum(text.count(char) for char in " \t\n\r\v\f")
  for char in watched:
    counts[char] += text.count(char)
  return total


def vocab_characters(tokens: Sequence[str]) -> set:
  """Every character the vocabulary's word tokens hold ("##" aside)."""
  return {char for token in _words(tokens) for char in token.removeprefix("##")}


def absent_ascii(tokens: Sequence[str], normalization: Normalization) -> str:
  """The printable ASCII characters no token holds, as `normalization` leaves them."""
  held = vocab_characters(tokens)
  return "".join(chr(cp) for cp in range(33, 127)
                 if not set(normalization.as_kept(chr(cp))) <= held)


def changed(counts: Counter, normalization: Normalization) -> Counter:
  """The counted characters `normalization` changes beyond case, with their counts."""
  return Counter({char: n for char, n in counts.items()
                  if n and _is_counted(char) and normalization.changes(char)})


def absent(counts: Counter, tokens: Sequence[str], normalization: Normalization
           ) -> Counter:
  """The counted characters that no token holds as `normalization` leaves their case,
  with their counts."""
  held = vocab_characters(tokens)
  return Counter({char: n for char, n in counts.items() if n and _is_counted(char)
                  and not set(normalization.as_kept(char)) <= held})


def describe(kinds: Counter, total: int) -> str:
  """"0.12% of the characters (3 distinct: é ó ñ)": a share of `total` characters."""
  share = f"{100.0 * sum(kinds.values()) / total:.2f}%" if total else "n/a"
  shown = " ".join(char for char, _ in kinds.most_common(EXAMPLES))
  more = ", ..." if len(kinds) > EXAMPLES else ""
  return (f"{share} of the characters ({len(kinds)} distinct"
          + (f": {shown}{more})" if kinds else ")"))


def flag_that_changes(normalization: Normalization) -> str:
  """The build's flag that turns this pair's accent stripping the other way."""
  if not normalization.lower_case:
    return "--do-lower-case lower-cases the text"
  return ("--no-strip-accents keeps accents" if normalization.strip_accents
          else "--do-strip-accents strips them")


def decide_for_corpus(counts: Counter, total: int, lower_case: Optional[bool],
                      strip_accents: Optional[bool]) -> Tuple[Normalization, str]:
  """The pair of a vocabulary learned from a corpus of these character counts, and why
  (for the build's log): as the flags ask, else lower-casing, with accent stripping
  unless at least CORPUS_SHARE of the characters are ones it changes beyond case."""
  lower = ORIGINAL.lower_case if lower_case is None else lower_case
  if strip_accents is not None or not lower:
    return Normalization(lower, bool(strip_accents)), "as the flags ask"
  share = sum(changed(counts, Normalization(lower, True)).values()) / total if total \
      else 0.0
  keep = share >= CORPUS_SHARE
  return Normalization(lower, not keep), (
      f"{share:.2%} of the corpus's characters would change beyond case under accent "
      f"stripping ({'at least' if keep else 'under'} {CORPUS_SHARE:.1%})")


def _words(tokens: Sequence[str]):
  return [t for t in tokens if not (t.startswith("[") and t.endswith("]"))]


def decide_for_vocab(tokens: Sequence[str], path: str, lower_case: Optional[bool],
                     strip_accents: Optional[bool],
                     asked: Callable[[str, bool], str] = as_flag) -> Normalization:
  """The pair of a vocabulary that records none, read from its tokens: lower-casing
  unless it is cased, accent stripping (when lower-casing) unless its tokens hold what
  stripping changes. Flags override (`asked` names them), but lower-casing a cased
  vocabulary, or not lower-casing an uncased one, is refused (counting only tokens whose
  letters have case: Hangul, kana and CJK have none)."""
  words = _words(tokens)
  with_case = [t for t in words if t.lower() != t.upper()]
  cased = sum(t != t.lower() for t in with_case)
  is_cased = cased > VOCAB_SHARE * len(with_case)
  is_uncased = not cased and len(with_case) > VOCAB_SHARE * len(words)
  if lower_case and is_cased:
    raise VocabError(
        f"{path}: a cased vocabulary ({cased} of its {len(with_case)} tokens with cased "
        f"letters hold capitals) used with {asked('do_lower_case', True)}; drop "
        f"{asked('do_lower_case', True)}, or use an uncased vocab.txt")
  if lower_case is False and is_uncased:
    raise VocabError(
        f"{path}: an uncased vocabulary (none of its {len(with_case)} tokens with cased "
        f"letters holds a capital) used with {asked('do_lower_case', False)}: every "
        f"capitalised word would be [UNK]; drop {asked('do_lower_case', False)}")
  lower = not is_cased if lower_case is None else lower_case
  changing = {char for char in vocab_characters(words) if ORIGINAL.changes(char)}
  accented = sum(not changing.isdisjoint(t.removeprefix("##")) for t in words)
  strip = accented <= VOCAB_SHARE * len(words) if strip_accents is None else strip_accents
  return Normalization(lower, strip)
