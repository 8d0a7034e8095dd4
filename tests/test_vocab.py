"""Vocabulary files: validation with clear errors, and learning one from a corpus."""

import collections

import pytest

from tests import reference_tokenizer as ref
from data_prep import vocab as vocab_lib
from tests.helpers import shared_path


def test_bert_vocab_loads_with_the_special_ids_bert_has():
  vocab = vocab_lib.load_vocab(shared_path("vocab", "bert_uncased_vocab.txt"))
  assert len(vocab) == 30522
  assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
      0, 100, 101, 102, 103)


@pytest.mark.parametrize("content, message", [
    (None, "is a directory"),
    (b"\n\x00\x08\x12\x0csentencepiece\x00\x01", "SentencePiece model"),
    ("[PAD]\t0\n[UNK]\t0\n[CLS]\t0\nthe\t-1\n", "SentencePiece .vocab"),
    ("[PAD]\n[UNK]\nthe\n", r"missing \[CLS\], \[SEP\], \[MASK\]"),
    (b"[PAD]\n\xff\xfe\n", "not UTF-8"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nthe\n", "repeats line 6"),
])
def test_bad_vocab_files_get_clear_errors(tmp_path, content, message):
  path = tmp_path / "vocab.txt"
  if content is None:
    path.mkdir()
  elif isinstance(content, bytes):
    path.write_bytes(content)
  else:
    path.write_text(content, encoding="utf-8")
  with pytest.raises(vocab_lib.VocabError, match=message):
    vocab_lib.load_vocab(str(path))
  with pytest.raises(vocab_lib.VocabError, match="does not exist"):
    vocab_lib.load_vocab(str(tmp_path / "missing.txt"))


def test_learned_vocab_has_bert_layout_and_covers_its_corpus(tmp_path):
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    lines = [next(f) for _ in range(3000)]
  counts = collections.Counter(w for line in lines for w in ref.basic_tokenize(line))
  tokens = vocab_lib.learn_vocab(counts, 3000)
  vocab_lib.write_vocab(tokens, str(tmp_path / "vocab.txt"))
  vocab = vocab_lib.load_vocab(str(tmp_path / "vocab.txt"))
  assert 2000 < len(vocab) <= 3000
  assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
      0, 100, 101, 102, 103)
  # Every word of the corpus it came from tokenizes without [UNK], and frequent words
  # are single tokens.
  tokenizer = ref.ReferenceTokenizer(vocab.ids)
  assert all("[UNK]" not in tokenizer.tokenize(line) for line in lines)
  for word, _ in counts.most_common(50):
    assert tokenizer.tokenize(word) == [word]
  assert any(t.startswith("##") and len(t) > 3 for t in vocab.tokens)


def test_learning_needs_room_and_words():
  with pytest.raises(vocab_lib.VocabError, match="too small"):
    vocab_lib.learn_vocab(collections.Counter({"a": 1}), 150)
  with pytest.raises(vocab_lib.VocabError, match="no words"):
    vocab_lib.learn_vocab(collections.Counter(), 1000)
