"""tools.replaced_tokens: one score per word-piece, equal to the sigmoid of the
discriminator's logits computed directly; --corrupt marks exactly the word-pieces it
changed; the same answers from a Hugging Face export; bad input in one line."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from data_prep import normalization
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from runs.pretrained import open_weights
from tests.helpers import write_tiny_pretrained_model
from tools import export_hf, replaced_tokens

TEXTS = ["The quick brown fox jumps over the lazy dog near the river bank today.",
         "ELECTRA's discriminator flags word-pieces that do not fit: pseudopseudo!"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  """A tiny random pair exported as run_pretraining.py does (vocab.txt and
  tokenizer_config.json beside it)."""
  data = tmp_path_factory.mktemp("data")
  write_tiny_pretrained_model(data)
  export = data / "models" / "tiny" / "export"
  shutil.copyfile(data / "vocab.txt", export / "vocab.txt")
  normalization.write(str(export), normalization.ORIGINAL)
  return export


def run(capsys, *flags):
  code = replaced_tokens.main(list(map(str, flags)))
  out, err = capsys.readouterr()
  return code, out, err.strip()


def json_lines(out):
  return [json.loads(line) for line in out.splitlines()]


def direct_probabilities(checkpoint, ids_per_line):
  """sigmoid(discriminator logits) of [CLS] ids [SEP], one line at a time."""
  pair = open_weights(str(checkpoint)).load_pair()
  out = []
  for ids in ids_per_line:
    row = tf.constant([[101, *ids, 102]], tf.int32)
    logits = pair.discriminator_logits({"input_ids": row, "input_mask": tf.ones_like(row),
                                        "segment_ids": tf.zeros_like(row)})
    out.append(tf.sigmoid(logits).numpy()[0, 1:-1])
  return out


def test_scores_are_the_discriminators(model, tmp_path, capsys):
  tokenizer = Tokenizer(load_vocab(str(model / "vocab.txt")))
  lines = tmp_path / "in.txt"
  lines.write_text("\n".join(TEXTS) + "\n")
  code, out, _ = run(capsys, "--checkpoint", model, "--input", lines, "--json")
  assert code == 0
  results = json_lines(out)
  assert [r["line"] for r in results] == [1, 2]
  expected = direct_probabilities(model, [tokenizer.ids(t) for t in TEXTS])
  for text, result, probabilities in zip(TEXTS, results, expected):
    assert result["tokens"] == tokenizer.tokenize(text)
    np.testing.assert_allclose(result["probabilities"], probabilities, atol=1e-6)
    assert result["predicted_replaced"] == [bool(p > 0.5) for p in probabilities]
  assert 0 < sum(sum(r["predicted_replaced"]) for r in results) < sum(
      len(r["tokens"]) for r in results)  # both kinds of call occur

  code, out, _ = run(capsys, "--checkpoint", model, "--text", TEXTS[0])
  assert code == 0
  rows = out.splitlines()
  tokens = results[0]["tokens"]
  assert len(rows) == len(tokens) + 1
  for row, token, p in zip(rows, tokens, results[0]["probabilities"]):
    assert row.split()[:2] == [token, f"{p:.3f}"]
    assert row.endswith("*") == (p > 0.5)
  flagged = sum(results[0]["predicted_replaced"])
  assert rows[-1] == f"{len(tokens)} word-pieces, {flagged} called replaced"

  # A released model records no normalisation: the line saying it is read from the
  # vocabulary goes to stderr, and stdout holds the scores alone.
  released = tmp_path / "released"
  shutil.copytree(model, released, ignore=shutil.ignore_patterns(normalization.FILE))
  code, out, err = run(capsys, "--checkpoint", released, "--input", lines, "--json")
  assert code == 0 and json_lines(out) == results
  assert err == (f"note: no tokenizer_config.json beside {released / 'vocab.txt'}: the "
                 "text read from the vocabulary as lower-cased, accents stripped "
                 "(do_lower_case true, strip_accents true)")


def test_corrupt_marks_what_it_changed_and_hf_agrees(model, tmp_path, capsys):
  tokenizer = Tokenizer(load_vocab(str(model / "vocab.txt")))
  code, out, _ = run(capsys, "--checkpoint", model, "--text", TEXTS[0], "--corrupt",
                     "--json", "--seed", 3)
  assert code == 0
  [result] = json_lines(out)
  assert result["original_tokens"] == tokenizer.tokenize(TEXTS[0])
  changed = [a != b for a, b in zip(result["tokens"], result["original_tokens"])]
  assert result["replaced"] == changed
  assert 1 <= sum(changed) <= 3  # 15% of 16 word-pieces, rounded: at most 2 (+ dupes)
  vocab = load_vocab(str(model / "vocab.txt"))
  [expected] = direct_probabilities(model, [[vocab.ids[t] for t in result["tokens"]]])
  np.testing.assert_allclose(result["probabilities"], expected, atol=1e-6)

  _, again, _ = run(capsys, "--checkpoint", model, "--text", TEXTS[0], "--corrupt",
                    "--json", "--seed", 3)
  assert again == out  # seeded
  code, text, _ = run(capsys, "--checkpoint", model, "--text", TEXTS[0], "--corrupt",
                      "--seed", 3)
  marked = [row for row in text.splitlines()[:-1] if " replaced " in row]
  assert len(marked) == sum(changed)
  for row in marked:
    p = float(row.split()[1])
    assert row.endswith("(caught)" if p > 0.5 else "(missed)")

  # The same model as Hugging Face directories gives the same answers.
  for part in ("discriminator", "generator"):
    assert export_hf.main(["--checkpoint", str(model), "--output",
                           str(tmp_path / "hf" / part), "--part", part]) == 0
  capsys.readouterr()
  code, from_hf, _ = run(capsys, "--checkpoint", tmp_path / "hf", "--text", TEXTS[0],
                         "--corrupt", "--json", "--seed", 3)
  assert code == 0
  [hf_result] = json_lines(from_hf)
  assert hf_result["tokens"] == result["tokens"]
  np.testing.assert_allclose(hf_result["probabilities"], result["probabilities"],
                             atol=1e-5)


def test_bad_input_one_line(model, tmp_path, capsys):
  long_file = tmp_path / "long.txt"
  long_file.write_text("fine\n" + "word " * 200 + "\n")
  cases = [
      (["--input", tmp_path / "absent.txt"],
       f"error: {tmp_path / 'absent.txt'}: cannot read (No such file or directory)"),
      (["--input", long_file],
       f"error: {long_file}:2: 200 word-pieces; this model reads at most 126 "
       "(max_position_embeddings 128 less [CLS] and [SEP])"),
  ]
  for flags, message in cases:
    code, out, err = run(capsys, "--checkpoint", model, *flags)
    assert (code, out, err) == (2, "", message)
  # A vocabulary of another size than the model's (the one check, model/config.py's).
  small = tmp_path / "small" / "vocab.txt"
  small.parent.mkdir()
  small.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
  size = len(load_vocab(str(model / "vocab.txt")))
  code, _, err = run(capsys, "--checkpoint", model, "--vocab", small, "--text", "x")
  assert code == 2 and err.splitlines()[-1] == (
      f"error: {small} holds 5 tokens but {model} has a vocabulary of {size}; pass the "
      "model's vocab.txt with --vocab")
  (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
  code, _, err = run(capsys, "--checkpoint", model, "--input", tmp_path / "latin1.txt")
  assert code == 2 and err.startswith(f"error: {tmp_path / 'latin1.txt'}: not UTF-8")

  # --corrupt needs the generator: a discriminator directory alone is refused.
  assert export_hf.main(["--checkpoint", str(model), "--output",
                         str(tmp_path / "disc")]) == 0
  capsys.readouterr()
  code, _, err = run(capsys, "--checkpoint", tmp_path / "disc", "--text", "x",
                     "--corrupt")
  assert code == 2 and len(err.splitlines()) == 1
  assert "a Hugging Face discriminator only; the pair needs its generator too" in err
  code, _, err = run(capsys, "--checkpoint", tmp_path / "nothing", "--text", "x")
  assert (code, err) == (2, f"error: {tmp_path / 'nothing'}: no such checkpoint (expected "
                         "the prefix of <prefix>.index / <prefix>.data-*, or a directory "
                         "holding one)")
