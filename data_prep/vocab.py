"""WordPiece vocabularies: reading a BERT vocab.txt (validated) and learning one.

A vocab.txt holds one token per line; the line number is the id. A learned vocabulary
puts the special tokens where BERT's has them ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102,
[MASK] 103, [unused0..98] between) so that code written for BERT's ids keeps working.
"""

import collections
import io
import os
import tempfile
from typing import Dict, List

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
BERT_LAYOUT = (["[PAD]"] + [f"[unused{i}]" for i in range(99)]
               + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])
MIN_LEARNED_SIZE = len(BERT_LAYOUT) + 100


class VocabError(ValueError):
  """A vocabulary file that cannot be used."""


class Vocab:
  """Tokens by id and ids by token, plus the special ids masking and packing need."""

  def __init__(self, tokens: List[str], path: str = "<memory>"):
    self.path = path
    self.tokens = tokens
    self.ids: Dict[str, int] = {}
    for i, token in enumerate(tokens):
      if token in self.ids:
        raise VocabError(f"{path}: line {i + 1}: token {token!r} repeats line "
                         f"{self.ids[token] + 1}; every token must be unique")
      self.ids[token] = i
    missing = [t for t in SPECIAL_TOKENS if t not in self.ids]
    if missing:
      raise VocabError(f"{path}: not a BERT WordPiece vocab.txt: missing "
                       f"{', '.join(missing)} (expected one token per line, with "
                       f"{', '.join(SPECIAL_TOKENS)})")
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
        self.ids[t] for t in SPECIAL_TOKENS)

  def __len__(self):
    return len(self.tokens)


def load_vocab(path: str) -> Vocab:
  """Reads and validates a BERT vocab.txt; a clear VocabError for anything else."""
  if not path:
    raise VocabError("--vocab-file: no vocabulary file given")
  # Named by path: commands give it by several flags and hyperparameters.
  if os.path.isdir(path):
    raise VocabError(f"{path}: is a directory; expected a BERT vocab.txt file (one "
                     "WordPiece token per line)")
  if not os.path.isfile(path):
    raise VocabError(f"{path}: does not exist; expected a BERT vocab.txt file")
  with open(path, "rb") as f:
    data = f.read()
  if path.endswith(".model") or b"\x00" in data[:4096]:
    raise VocabError(f"{path}: looks like a SentencePiece model (binary); expected a BERT "
                     "WordPiece vocab.txt, one token per line")
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data[:e.start].count(b"\n") + 1
    raise VocabError(f"{path}: line {line}: not UTF-8 text; expected a BERT vocab.txt "
                     "in UTF-8")
  # A byte-order mark (some Windows editors write one) is no part of the first token.
  lines = text.removeprefix("\ufeff").split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  tokens = [line.strip() for line in lines]  # BERT strips each line, "\r" included
  if tokens and all("\t" in line for line in tokens[:10]):
    raise VocabError(f"{path}: looks like a SentencePiece .vocab (token<TAB>score); "
                     "expected a BERT WordPiece vocab.txt, one token per line")
  return Vocab(tokens, path)


def write_vocab(tokens: List[str], path: str):
  # Imported here: the reading half ships with exported models (export/bundle.py),
  # which carry no util/.
  from util.files import atomic_write  # pylint: disable=import-outside-toplevel
  with atomic_write(path) as f:
    f.writelines(token + "\n" for token in tokens)


def learn_vocab(word_counts: collections.Counter, vocab_size: int) -> List[str]:
  """A WordPiece vocabulary of `vocab_size` tokens, BERT's special ids in place.

  `word_counts` counts the words of BERT's basic tokenization. SentencePiece learns BPE
  pieces from them (in C++; tensorflow-text's WordPiece learner is pure Python and slow);
  a piece that starts a word ("\u2581the") becomes "the", one inside a word becomes
  "##the". Every character seen is kept in both forms, so no word of the corpus is [UNK].
  """
  import sentencepiece as spm
  if vocab_size < MIN_LEARNED_SIZE:
    raise VocabError(f"--vocab-size: {vocab_size} is too small; at least "
                     f"{MIN_LEARNED_SIZE} (BERT's {len(BERT_LAYOUT)} reserved tokens and "
                     "room for characters)")
  if not word_counts:
    raise VocabError("cannot learn a vocabulary: the corpus has no words")
  chars = sorted({ch for word in word_counts for ch in word})
  tokens = list(BERT_LAYOUT) + chars + ["##" + ch for ch in chars]
  with tempfile.TemporaryDirectory() as tmp:
    counts_file = os.path.join(tmp, "words.tsv")
    with open(counts_file, "w", encoding="utf-8") as f:
      f.writelines(f"{word}\t{count}\n" for word, count in sorted(word_counts.items())
                   if "\t" not in word)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        input=counts_file, input_format="tsv", model_writer=model,
        vocab_size=max(8, vocab_size - len(tokens)), hard_vocab_limit=False,
        model_type="bpe", character_coverage=1.0, num_threads=1,
        normalization_rule_name="identity", add_dummy_prefix=True,
        split_by_number=False, split_by_unicode_script=False, split_digits=False,
        max_sentencepiece_length=32, bos_id=-1, eos_id=-1, unk_id=0, minloglevel=2)
  processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
  seen = set(tokens)
  for i in range(processor.get_piece_size()):
    if processor.is_unknown(i):
      continue
    piece = processor.id_to_piece(i)
    token = piece[1:] if piece.startswith("\u2581") else "##" + piece
    if token not in seen and token not in ("", "##"):
      seen.add(token)
      tokens.append(token)
  return tokens[:vocab_size]
