"""The serving SavedModel: its in-graph tokenizer gives data_prep's ids on the tokenizer
parity tests' inputs, and loaded in a clean subprocess (tensorflow and tensorflow_text
only) it predicts what the Keras model predicts on the same strings (QA: the head's
outputs, from which the reader answers as --predict)."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data_prep.tokenizer import Tokenizer, normalize
from data_prep.vocab import load_vocab
from finetune import config as finetune_config
from finetune import graph_tokenizer, serving, tasks, trainer
from finetune.qa import data as qa_data
from finetune.qa import deployed as qa_deployed
from finetune.tagging import data as tagging_data
from tests.export_helpers import (ODD_CONTEXT, TRANSFORMERS_QA_HEAD,
                                   call_in_clean_process, predict_questions,
                                   shared_chunk_model, shared_squad_model)
from tests.helpers import (ADVERSARIAL, code_point_lines, head_of, shared_path,
                           write_tiny_pretrained_model)


@pytest.mark.parametrize("lower_case", [True, False])
def test_graph_tokenizer_gives_data_prep_ids(lower_case):
  vocab = load_vocab(shared_path("vocab", "bert_uncased_vocab.txt"))
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    corpus = f.read().split("\n")[:3000]
  lines = ADVERSARIAL + code_point_lines() + corpus
  graph = graph_tokenizer.GraphTokenizer(vocab.tokens, lower_case, lower_case)
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
    assert normalize(text).decode() == "a\U0001d165\U0001d16d"


def keras_outputs(config, split, count=1):
  """(the split, the restored Keras model's outputs on it) of each of the run's first
  `count` tasks, every batch padded to max_seq_length: the exports, which run at the
  input's length, must give the same."""
  finetuner = trainer.Finetuner(dataclasses.replace(config, batch_length_multiple=0),
                                log=lambda _: None)
  model = finetuner.build_model()
  finetuner.restore(model, 1)
  return [finetuner.outputs(model, index, split) for index in range(count)]


@pytest.mark.slow
def test_sentence_pair_single_and_regression_export(tmp_path):
  data = tmp_path / "data"
  for folder in ("MRPC", "STS-B", "SST-2"):
    for split in ("train", "dev"):
      head_of(shared_path("glue", folder, f"{split}.tsv"),
              data / "finetuning_data" / folder / f"{split}.tsv", 33)
  write_tiny_pretrained_model(data, layers=1)
  # Short sequences: the pair truncation is exercised on most rows.
  config = finetune_config.load_config(
      "tiny", ["glue/mrpc", "glue/stsb", "glue/sst2"], str(data),
      {"train_batch_size": 16, "eval_batch_size": 32, "max_seq_length": 24,
       "num_train_epochs": 1.0, "write_curves": False})
  trainer.run(config, log=lambda _: None)
  path = os.path.join(f"{config.model_dir}_1", serving.SAVED_MODEL)
  assert os.path.isdir(path) and not [
      name for name in os.listdir(f"{config.model_dir}_1") if name.startswith(".")]
  (mrpc, mrpc_logits), (stsb, stsb_scores), (sst2, sst2_logits) = keras_outputs(
      config, "dev", 3)
  pairs = lambda split: {"text_a": [e.text_a for e in split.examples],
                         "text_b": [e.text_b for e in split.examples]}
  [out] = call_in_clean_process({
      "path": path, "serving_default": pairs(mrpc), "glue_stsb": pairs(stsb),
      "glue_sst2": {"text_a": [e.text_a for e in sst2.examples]}})
  probabilities = tf.nn.softmax(mrpc_logits).numpy()
  assert len(out["serving_default"]["probabilities"]) == len(mrpc.examples) == 32
  np.testing.assert_allclose(out["serving_default"]["probabilities"], probabilities,
                             atol=1e-5)
  assert out["serving_default"]["label"] == [str(k) for k in probabilities.argmax(-1)]
  np.testing.assert_allclose(out["glue_stsb"]["score"], stsb_scores, atol=1e-5)
  np.testing.assert_allclose(out["glue_sst2"]["probabilities"],
                             tf.nn.softmax(sst2_logits).numpy(), atol=1e-5)


@pytest.mark.slow
def test_tagging_export(tmp_path_factory):
  config = shared_chunk_model(tmp_path_factory)
  [(split, logits)] = keras_outputs(config, "test")
  task = tasks.get_task("chunk")
  want = tagging_data.predicted_tags(split.examples, split.features, logits,
                                     task.output_tags)
  # Some sentences span several (overlapping) windows.
  assert len(set(split.features["sentence_index"])) < len(split.features["input_ids"])
  text = {"text": ["  ".join(e.words) for e in split.examples]}
  path = os.path.join(f"{config.model_dir}_1", serving.SAVED_MODEL)
  [out] = call_in_clean_process({"path": path, "serving_default": text})
  width = max(map(len, want))
  assert out["serving_default"]["tag"] == [t for tags in want
                                           for t in tags + [""] * (width - len(tags))]
  assert set(out["serving_default"]["tag"]) <= set(task.tags) | {""}


def qa_questions(articles):
  questions = [(q["question"], p["context"]) for p in articles[2]["paragraphs"][:3]
               for q in p["qas"][:2]]
  return questions + [("Who was born in (1895-1943)?", ODD_CONTEXT),
                      # Separators of split_words (tab, U+202F, line breaks); a question
                      # cut.
                      (" ".join(["why"] * 30), "\tTabs\tand\u202fnarrow  spaces,\r\nline "
                       "one of two; a short context."),
                      ("What\x1cis\u3000it?", "It is 42."),
                      # Chinese, without spaces: each CJK character a word, "中国"
                      # twice (the answer's place is the one its pieces are at).
                      ("文化中心在哪个国家？", "北京是中国的首都。北京也是中国的文化中心。"),
                      ("哪里？", "中国 中国中国。上海在中国东部。")]


def qa_reader(config):
  """The run's QA reader (finetune/qa/deployed.py), with the deploy.json tools.export
  writes for it."""
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  [runner] = finetuner.runners
  return qa_deployed.Reader({"max_seq_length": config.max_seq_length,
                             **runner.serving.info(runner)}, finetuner.tokenizer)


@pytest.mark.slow
def test_squad_exports_answer_as_predict(tmp_path, tmp_path_factory):
  """Tiny models fine-tuned on 12 SQuAD questions (fine_tune_squad's) of SQuAD 1.1 and
  of SQuAD 2.0 (its default head and transformers'): each exported SavedModel, called in
  one clean subprocess, gives the head's outputs on --predict's windows, from which the
  shipped reader answers as --predict, SQuAD 2.0's with its no-answer score."""
  models = {"squad/v1.1": shared_squad_model(tmp_path_factory, "squad/v1.1", "squadv1"),
            "squad/v2.0": shared_squad_model(tmp_path_factory, "squad/v2.0", "squad"),
            "squad/v2.0, transformers' head": shared_squad_model(
                tmp_path_factory, "squad/v2.0", "squad", TRANSFORMERS_QA_HEAD)}
  questions = qa_questions(models["squad/v1.1"][1])
  contexts = [c for _, c in questions]
  want = {}
  for name, (config, _) in models.items():
    path, want[name] = predict_questions(tmp_path, config, questions)
  windows = np.bincount(qa_data.featurize(
      Tokenizer(load_vocab(config.vocab_file)), list(qa_data.read_questions(str(path))),
      config.max_seq_length, config.sections["qa"].max_query_length,
      config.sections["qa"].doc_stride).example_index)
  assert windows.max() >= 5 and windows.min() == 1  # long paragraphs and short contexts
  outputs = call_in_clean_process(*[
      {"path": os.path.join(f"{config.model_dir}_1", serving.SAVED_MODEL),
       "serving_default": {"question": [q for q, _ in questions], "context": contexts}}
      for config, _ in models.values()])
  for (name, (config, _)), out in zip(models.items(), outputs):
    # JSON's floats back to the model's float32.
    out = {key: np.array(value, np.float32 if "log" in key else None)
           for key, value in out["serving_default"].items()}
    assert np.bincount(out.pop("window_question")).tolist() == windows.tolist(), name
    reader = qa_reader(config)
    reader.inputs([q for q, _ in questions], contexts)
    got = reader.records(out)
    assert [r.pop("probability") for r in got] == pytest.approx(
        [r.pop("probability") for r in want[name]], abs=1e-5), name
    if "v2.0" in name:
      assert [r.pop("no_answer_score") for r in got] == pytest.approx(
          [r.pop("no_answer_score") for r in want[name]], abs=1e-5), name
    assert got == want[name], name
  # Some answer starts or ends inside a word (get_final_text trimmed it).
  assert any(0 < w["start"] and not c[w["start"] - 1].isspace() or
             w["end"] < len(c) and not c[w["end"]].isspace()
             for w, c in zip(want["squad/v1.1"], contexts))
