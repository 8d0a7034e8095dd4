"""The serving SavedModel: its in-graph tokenizer gives data_prep's ids on the tokenizer
parity tests' inputs, and loaded in a clean subprocess (tensorflow and tensorflow_text
only) it predicts what the Keras model predicts on the same strings."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import config as finetune_config
from finetune import serving, trainer
from finetune.tagging import data as tagging_data
from tests.conftest import shared_path, write_tiny_pretrained_model
from tests.test_finetune_glue import head_of
from tests.test_finetune_tagging_run import chunk_data
from tests.test_tokenization import ADVERSARIAL, _code_point_lines


@pytest.mark.parametrize("lower_case", [True, False])
def test_graph_tokenizer_gives_data_prep_ids(lower_case):
  vocab = load_vocab(shared_path("vocab", "bert_uncased_vocab.txt"))
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    corpus = f.read().split("\n")[:3000]
  lines = ADVERSARIAL + _code_point_lines() + corpus
  graph = serving.GraphTokenizer(vocab.tokens, lower_case, lower_case)
  got = graph(tf.constant(lines))
  ids, offsets = Tokenizer(vocab, lower_case, lower_case).batch_ids(lines)
  for i, (line, row) in enumerate(zip(lines, got.to_list())):
    assert row == ids[offsets[i]:offsets[i + 1]].tolist(), f"line {i}: {line[:80]!r}"
  # Invalid UTF-8 counts as U+FFFD, which BERT drops (as data_prep's readers' do).
  raw = "naïve café".encode() + b"\xff\xc3 ok"
  assert graph(tf.constant([raw])).to_list()[0] == Tokenizer(
      vocab, lower_case, lower_case).ids(raw.decode("utf-8", errors="replace"))
  if lower_case:  # the documented exception: NFD sorts adjacent combining spacing marks
    text = "a\U0001d16d\U0001d165"
    assert graph.normalize(tf.constant([text])).numpy()[0].decode() == text
    assert Tokenizer(vocab).normalize(text).decode() == "a\U0001d165\U0001d16d"


# Loads the SavedModel with nothing of the project importable, calls each signature on
# the strings given as JSON on stdin, prints the outputs as JSON.
LOADER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer's ops
assert not any(p.endswith("wt12b") or p == "" for p in sys.path), sys.path
calls = json.load(sys.stdin)
loaded = tf.saved_model.load(calls.pop("path"))
out = {}
for name, inputs in calls.items():
  result = loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
  out[name] = {k: v.numpy().tolist() if v.dtype != tf.string else
               [x.decode() for x in v.numpy().ravel()] for k, v in result.items()}
print(json.dumps(out))
"""


def call_in_clean_process(tmp_path, calls):
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  result = subprocess.run([sys.executable, "-I", "-c", LOADER], input=json.dumps(calls),
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def keras_outputs(config, index, split):
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  model = finetuner.build_model()
  finetuner.restore(model, 1)
  return finetuner.outputs(model, index, split)


def test_sentence_pair_single_and_regression_export(tmp_path):
  data = tmp_path / "data"
  for folder in ("MRPC", "STS-B", "SST-2"):
    for split in ("train", "dev"):
      head_of(shared_path("glue", folder, f"{split}.tsv"),
              data / "finetuning_data" / folder / f"{split}.tsv", 33)
  write_tiny_pretrained_model(data)
  # Short sequences: the pair truncation is exercised on most rows.
  config = finetune_config.load_config(
      "tiny", ["glue/mrpc", "glue/stsb", "glue/sst2"], str(data),
      {"train_batch_size": 16, "eval_batch_size": 32, "max_seq_length": 24,
       "num_train_epochs": 1.0})
  trainer.run(config, log=lambda _: None)
  path = os.path.join(f"{config.model_dir}_1", serving.SAVED_MODEL)
  assert os.path.isdir(path) and not [
      name for name in os.listdir(f"{config.model_dir}_1") if name.startswith(".")]
  mrpc, mrpc_logits = keras_outputs(config, 0, "dev")
  stsb, stsb_scores = keras_outputs(config, 1, "dev")
  sst2, sst2_logits = keras_outputs(config, 2, "dev")
  pairs = lambda split: {"text_a": [e.text_a for e in split.examples],
                         "text_b": [e.text_b for e in split.examples]}
  out = call_in_clean_process(tmp_path, {"path": path, "serving_default": pairs(mrpc),
                                         "glue_stsb": pairs(stsb), "glue_sst2": {
                                             "text_a": [e.text_a for e in sst2.examples]}})
  probabilities = tf.nn.softmax(mrpc_logits).numpy()
  assert len(out["serving_default"]["probabilities"]) == len(mrpc.examples) == 32
  np.testing.assert_allclose(out["serving_default"]["probabilities"], probabilities,
                             atol=1e-5)
  assert out["serving_default"]["label"] == [str(k) for k in probabilities.argmax(-1)]
  np.testing.assert_allclose(out["glue_stsb"]["score"], stsb_scores, atol=1e-5)
  np.testing.assert_allclose(out["glue_sst2"]["probabilities"],
                             tf.nn.softmax(sst2_logits).numpy(), atol=1e-5)


def test_tagging_export(tmp_path):
  data = chunk_data(tmp_path, 32, 20)
  # max_seq_length 24 cuts the longer sentences: their last words are tagged O.
  config = finetune_config.load_config(
      "tiny", ["chunk"], str(data), {"train_batch_size": 16, "eval_batch_size": 20,
                                     "max_seq_length": 24, "num_train_epochs": 1.0})
  trainer.run(config, log=lambda _: None)
  split, logits = keras_outputs(config, 0, "test")
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  want = finetuner.runners[0].predicted_tags(split.examples, split.features, logits)
  assert any(len(tags) > split.features["word_label_mask"][i].sum()
             for i, tags in enumerate(want))  # some sentence is cut
  text = {"text": ["  ".join(e.words) for e in split.examples]}
  path = os.path.join(f"{config.model_dir}_1", serving.SAVED_MODEL)
  out = call_in_clean_process(tmp_path, {"path": path, "serving_default": text})
  width = max(map(len, want))
  assert out["serving_default"]["tag"] == [t for tags in want
                                           for t in tags + [""] * (width - len(tags))]
  assert set(out["serving_default"]["tag"]) <= set(tagging_data.CHUNK_TAGS) | {""}
