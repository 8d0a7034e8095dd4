"""Text in any language (data_prep/normalization.py): the build's normalisation of a
Korean, Chinese, Japanese, French and Vietnamese corpus keeps every script whole and
reports what it changes; the pair it decides travels from the build to pre-training,
fine-tuning, --predict, the serving SavedModel, the LiteRT/ONNX reader and the Hugging
Face files, where every form gives the same ids and labels; a task, labels and files
named in Hangul work in every command; English with BERT's vocabulary stays the
original's."""

import collections
import glob
import json
import shutil
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

import build_pretraining_dataset
import run_finetuning
import run_pretraining
from data_prep import normalization
from tests import reference_tokenizer as ref
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import Vocab, load_vocab
from export import registry
from finetune import config as finetune_config
from finetune import graph_tokenizer, serving, trainer
from finetune.runner import scope_name
from tests.export_helpers import call_in_clean_process, run_readers
from tests.helpers import ADVERSARIAL, code_point_lines, shared_path
from tools import tokenize as tokenize_tool

KOREAN = ["한국어 자연어 처리는 재미있습니다.", "오늘 날씨가 정말 좋네요.", "이 영화는 정말 감동적이었어요.",
          "배우들의 연기가 훌륭했습니다.", "너무 지루하고 재미없었어요.", "시간 낭비였습니다.",
          "연기가 어색하고 별로였어요.", "음악이 아름답고 좋았어요."]
CHINESE = ["自然语言处理是人工智能的重要领域。", "今天天气很好，我们去公园散步吧。", "这部电影非常感人。"]
JAPANESE = ["プログラミングはとても楽しいです。", "ガラスのグラスでジュースを飲みます。", "今日はいい天気ですね。"]
LATIN = ["Le café était délicieux et très élégant.", "Où se trouve la bibliothèque ?",
         "Tiếng Việt là ngôn ngữ chính thức của Việt Nam.", "Hôm nay trời rất đẹp."]
GOOD = ["이 영화는 정말 감동적이었어요", "배우들의 연기가 훌륭했습니다", "음악이 아름답고 좋았어요"]
BAD = ["너무 지루하고 재미없었어요", "시간 낭비였습니다", "연기가 어색하고 별로였어요"]
TASK = "영화평"
LABELS = ["나쁨", "좋음"]
KEPT = {"do_lower_case": True, "strip_accents": False}
TINY = {"debug": True, "max_seq_length": 32, "train_batch_size": 8, "num_train_steps": 2,
        "save_checkpoints_steps": 2, "embedding_size": 32,
        "model_hparam_overrides": {"num_hidden_layers": 1, "hidden_size": 64,
                                   "num_attention_heads": 1, "intermediate_size": 128}}
FINETUNING = {"max_seq_length": 32, "train_batch_size": 8, "num_train_epochs": 2.0,
              "learning_rate": 3e-3, "write_test_outputs": True}


def write_corpus(folder):
  """Each language's lines, a document of 6 lines at a time, 240 lines."""
  lines = [pool[i % len(pool)] for i in range(60)
           for pool in (KOREAN, CHINESE, JAPANESE, LATIN)]
  folder.mkdir(parents=True)
  text = "".join(line + "\n" + ("\n" if i % 6 == 5 else "") for i, line in enumerate(lines))
  (folder / "corpus.txt").write_text(text, encoding="utf-8")
  return lines


def stripped(char):
  """BERT's accent stripping of a lower-cased character, written out here."""
  return "".join(c for c in unicodedata.normalize("NFD", char.lower())
                 if unicodedata.category(c) != "Mn")


def word_tokens(vocab_file):
  return [t for t in load_vocab(str(vocab_file)).tokens
          if not (t.startswith("[") and t.endswith("]"))]


def summary_rows(printed):
  return {line[:30].strip(): line[30:].strip() for line in printed.splitlines()
          if line[:30].strip() in ("normalisation", "changed beyond case",
                                   "not in the vocabulary", "[UNK] rate")}


def build(corpus, data, capsys, *flags):
  capsys.readouterr()
  assert build_pretraining_dataset.main(["--corpus-dir", str(corpus), "--data-dir",
                                         str(data), "--vocab-size", "800",
                                         "--no-progress", *flags]) == 0
  return summary_rows(capsys.readouterr().out)


def test_the_default_build_keeps_every_script_whole(tmp_path, capsys):
  lines = write_corpus(tmp_path / "corpus")
  rows = build(tmp_path / "corpus", tmp_path / "data", capsys)
  data = tmp_path / "data"
  for folder in (data, data / "pretrain_tfrecords"):
    assert json.loads((folder / "tokenizer_config.json").read_text()) == KEPT
  tokens = word_tokens(data / "vocab.txt")
  held = {char for token in tokens for char in token.removeprefix("##")}
  characters = collections.Counter(char for line in lines for char in line
                                    if not char.isspace())
  assert not [char for char in characters if char.lower() not in held]
  assert any(0xAC00 <= ord(char) <= 0xD7A3 for char in held)  # Hangul syllables
  assert not [char for char in held if 0x1100 <= ord(char) <= 0x11FF]  # no lone jamo
  assert {"グ", "ジ", "é", "ệ"} <= held
  assert rows == {"normalisation": "lower-cased, accents kept (--do-strip-accents "
                                   "strips them)",
                  "changed beyond case": "0.00% of the characters (0 distinct)",
                  "not in the vocabulary": "0.00% of the characters (0 distinct)",
                  "[UNK] rate": "0.00%"}
  vocab = load_vocab(str(data / "vocab.txt"))
  text = " ".join(KOREAN + JAPANESE)
  assert "[UNK]" not in Tokenizer(vocab, True, False).tokenize(text)
  pieces = Tokenizer(vocab, True, False).tokenize("プログラミング 한국어")
  assert "".join(p.removeprefix("##") for p in pieces) == "プログラミング한국어"

  # Stripping asked for: the same corpus loses its syllables and voicing marks, and the
  # summary says how much of it changed, naming the flag that keeps it.
  rows = build(tmp_path / "corpus", tmp_path / "stripped", capsys, "--do-strip-accents")
  changed = {char: n for char, n in characters.items() if stripped(char) != char.lower()}
  assert (json.loads((tmp_path / "stripped" / "tokenizer_config.json").read_text())
          == {"do_lower_case": True, "strip_accents": True})
  share = 100 * sum(changed.values()) / sum(characters.values())
  assert rows["changed beyond case"].startswith(
      f"{share:.2f}% of the characters ({len(changed)} distinct: ")
  assert rows["not in the vocabulary"].startswith(
      f"{share:.2f}% of the characters ({len(changed)} distinct")
  assert rows["normalisation"] == ("lower-cased, accents stripped (--no-strip-accents "
                                   "keeps accents)")
  held = {c for t in word_tokens(tmp_path / "stripped" / "vocab.txt") for c in t}
  assert not any(0xAC00 <= ord(char) <= 0xD7A3 for char in held) and "グ" not in held

  # Rebuilt from the learned vocabulary, a flag that contradicts it is one line.
  assert build_pretraining_dataset.main([
      "--corpus-dir", str(tmp_path / "corpus"), "--data-dir", str(data), "--overwrite",
      "--do-strip-accents", "--no-progress"]) == 2
  assert capsys.readouterr().err == (
      f"error: --do-strip-accents: {data / 'tokenizer_config.json'} records the text "
      "lower-cased, accents kept (the vocabulary was built so); drop it, or build the "
      "data again with the normalisation you want\n")


def test_a_vocabulary_given_is_read_for_its_case_and_accents(tmp_path, capsys):
  corpus = tmp_path / "corpus"
  write_corpus(corpus)
  specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

  def built(name, tokens, *flags):
    (tmp_path / f"{name}.txt").write_text("\n".join(specials + tokens) + "\n",
                                          encoding="utf-8")
    code = build_pretraining_dataset.main([
        "--corpus-dir", str(corpus), "--vocab-file", str(tmp_path / f"{name}.txt"),
        "--output-dir", str(tmp_path / name), "--no-progress", *flags])
    err = capsys.readouterr().err
    return (json.loads((tmp_path / name / "tokenizer_config.json").read_text())
            if code == 0 else err)

  english = word_tokens(shared_path("vocab", "bert_uncased_vocab.txt"))
  assert built("bert", english) == {"do_lower_case": True, "strip_accents": True}
  capitalised = [t.capitalize() for t in english[2000:2100]]
  assert built("cased", english[:2000] + capitalised) == {"do_lower_case": False,
                                                          "strip_accents": False}
  # Hangul and kana have no case: a vocabulary of them is no uncased one, and
  # --no-lower-case takes it (the case check counts tokens with cased letters only).
  hangul = sorted({c for line in KOREAN + JAPANESE + CHINESE for c in line if c.strip()})
  assert built("hangul", hangul, "--no-lower-case") == {"do_lower_case": False,
                                                        "strip_accents": False}
  assert built("hangul_default", hangul) == KEPT
  assert built("uncased", english, "--no-lower-case") == (
      f"error: {tmp_path / 'uncased.txt'}: an uncased vocabulary (none of its 26930 "
      "tokens with cased letters holds a capital) used with --no-lower-case: every "
      "capitalised word would be [UNK]; drop --no-lower-case\n")


def test_english_with_berts_vocabulary_stays_the_original(tmp_path):
  """BERT's vocabulary records nothing: its normalisation is read as the original's,
  and every step that finds no record (old data dirs, released checkpoints) uses it."""
  vocab_file = shared_path("vocab", "bert_uncased_vocab.txt")
  assert normalization.decide_for_vocab(load_vocab(vocab_file).tokens, vocab_file, None,
                                        None) == normalization.ORIGINAL
  assert normalization.of_model(vocab_file) == normalization.ORIGINAL
  assert normalization.from_fields({}) == normalization.ORIGINAL
  assert normalization.from_fields({"do_lower_case": False}) == (
      normalization.Normalization(False, False))
  (tmp_path / "in.txt").write_text("Café Ünïcode\n", encoding="utf-8")
  assert tokenize_tool.main(["--vocab-file", vocab_file, "--input",
                             str(tmp_path / "in.txt"), "--output",
                             str(tmp_path / "out.jsonl")]) == 0
  ids = json.loads((tmp_path / "out.jsonl").read_text())["ids"]
  assert ids == ref.ReferenceTokenizer(load_vocab(vocab_file).ids, True, True).ids(
      "Café Ünïcode")


def test_the_graph_tokenizer_lower_cases_and_keeps_accents_as_data_prep():
  """Lower-casing without accent stripping, the pair of the build's Korean corpus: the
  serving graph's ids are data_prep's on every code point alone and inside a word."""
  tokens = load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")).tokens
  extra = sorted({c for line in KOREAN + JAPANESE + LATIN for c in line.lower().replace(
      " ", "")} - set(tokens))
  vocab = Vocab(tokens + extra + ["##" + c for c in extra])
  lines = ADVERSARIAL + KOREAN + JAPANESE + LATIN + code_point_lines()
  got = graph_tokenizer.GraphTokenizer(vocab.tokens, True, False)(tf.constant(lines))
  ids, offsets = Tokenizer(vocab, True, False).batch_ids(lines)
  for i, (line, row) in enumerate(zip(lines, got.to_list())):
    assert row == ids[offsets[i]:offsets[i + 1]].tolist(), f"line {i}: {line[:80]!r}"
  assert vocab.unk_id not in Tokenizer(vocab, True, False).ids(" ".join(KOREAN + LATIN))


def test_names_in_any_script_are_scopes_and_stay_apart():
  assert scope_name("glue/sst2") == "glue_sst2"
  assert scope_name("reviews-v2.1") == "reviews-v2.1"
  names = ["영화평", "영화", "映画", "my task", "my_task"]
  scopes = [scope_name(name) for name in names]
  assert len(set(scopes)) == len(scopes)
  for scope in scopes:
    with tf.name_scope("task_specific/" + scope):
      pass  # TensorFlow takes it


def write_task(folder):
  """The Korean sentiment task: a JSON named in Hangul, Korean columns and labels."""
  folder.mkdir(parents=True)
  rows = {"훈련": [(GOOD + BAD)[i % 6] for i in range(48)], "검증": GOOD + BAD,
          "시험": GOOD[:2] + BAD[:2]}
  for split, texts in rows.items():
    with open(folder / f"{split}.tsv", "w", encoding="utf-8") as f:
      f.write("문장\t평가\n" + "".join(f"{text}\t{LABELS[text in GOOD]}\n" for text in texts))
  task = {"name": TASK, "text_a": "문장", "label": "평가", "labels": LABELS,
          "train": "훈련.tsv", "dev": "검증.tsv", "test": "시험.tsv"}
  (folder / f"{TASK}.json").write_text(json.dumps(task, ensure_ascii=False),
                                       encoding="utf-8")
  return str(folder / f"{TASK}.json")


@pytest.fixture(scope="module")
def korean_run(tmp_path_factory):
  """The build (default options), a tiny pre-training and the Korean task fine-tuned
  from it, with its predictions and exports: the paths."""
  root = tmp_path_factory.mktemp("korean")
  write_corpus(root / "corpus")
  data = root / "data"
  assert build_pretraining_dataset.main(["--corpus-dir", str(root / "corpus"),
                                         "--data-dir", str(data), "--vocab-size", "800",
                                         "--max-seq-length", "32", "--no-progress"]) == 0
  assert run_pretraining.main(["--data-dir", str(data), "--model-name", "ko",
                               "--hparams", json.dumps(TINY)]) == 0
  task = write_task(root / "과제")
  argv = ["--task", task, "--model-name", "ko", "--data-dir", str(data)]
  assert run_finetuning.main(argv + ["--hparams", json.dumps(FINETUNING)]) == 0
  trial = data / "models" / "ko" / "finetuning_models" / f"{TASK}_model_1"
  (root / "예측.tsv").write_text("문장\n" + "\n".join(GOOD + BAD) + "\n", encoding="utf-8")
  assert run_finetuning.main(argv + ["--hparams", json.dumps(FINETUNING), "--predict",
                                     str(root / "예측.tsv"), "--output",
                                     str(root / "예측.jsonl")]) == 0
  registry.export(str(trial), str(root / "내보내기"),
                  ["litert", "onnx", "saved_model", "huggingface"], log=lambda _: None,
                  variants={"litert": ["float32"], "onnx": ["float32"]})
  return {"root": root, "data": data, "trial": trial, "task": task,
          "run": data / "models" / "ko", "export": root / "내보내기"}


@pytest.mark.slow
def test_the_pair_is_recorded_by_every_step(korean_run, capsys):
  run, trial, export = korean_run["run"], korean_run["trial"], korean_run["export"]
  record = json.loads((run / "pretrain_config.json").read_text())
  assert {k: record["config"][k] for k in KEPT} == KEPT
  assert {k: record["signature"][k] for k in KEPT} == KEPT
  finetuned = json.loads((trial / "finetuning_config.json").read_text())
  assert {k: finetuned["finetuning"][k] for k in KEPT} == KEPT
  for folder in (run, run / "export", trial):
    assert json.loads((folder / "tokenizer_config.json").read_text()) == KEPT
  deploy = json.loads((export / "deploy.json").read_text())
  assert {k: deploy[k] for k in KEPT} == KEPT
  hf = json.loads((export / "tokenizer_config.json").read_text())
  assert {k: hf[k] for k in KEPT} == KEPT
  # A run that asks for another normalisation than its data's is one line.
  data = korean_run["data"]
  assert run_finetuning.main(["--task", korean_run["task"], "--model-name", "ko",
                              "--data-dir", str(data), "--hparams",
                              json.dumps({**FINETUNING, "strip_accents": True})]) == 2
  assert capsys.readouterr().err == (
      f"error: --hparams' strip_accents true: {data / 'tokenizer_config.json'} records "
      "the text lower-cased, accents kept (the vocabulary was built so); drop it, or "
      "build the data again with the normalisation you want\n")
  assert run_pretraining.main(["--data-dir", str(data), "--model-name", "ko2", "--hparams",
                               json.dumps({**TINY, "do_lower_case": False})]) == 2
  assert capsys.readouterr().err == (
      f"error: --hparams' do_lower_case false: "
      f"{data / 'pretrain_tfrecords' / 'tokenizer_config.json'} records the text "
      "lower-cased, accents kept (the vocabulary was built so); drop it, or build the "
      "data again with the normalisation you want\n")


@pytest.mark.slow
def test_a_chain_without_its_tokenizer_config_reads_the_vocabulary(korean_run, tmp_path,
                                                                   capsys):
  """The data dir's tokenizer_config.json files deleted (the vocabulary's and the
  records'), pre-training, then fine-tuning from its run (whose own is deleted too), its
  --predict (the trial's deleted as well) and tools.tokenize read the pair from the
  Korean vocabulary by the build's rule for a given one, each saying so in one line: no
  Korean word is [UNK]."""
  data = tmp_path / "data"
  shutil.copytree(korean_run["data"] / "pretrain_tfrecords", data / "pretrain_tfrecords",
                  ignore=shutil.ignore_patterns(normalization.FILE))
  shutil.copy(korean_run["data"] / "vocab.txt", data / "vocab.txt")
  vocab, run = data / "vocab.txt", data / "models" / "ko"
  read_as = (": the text read from the vocabulary as lower-cased, accents kept "
             "(do_lower_case true, strip_accents false)")
  capsys.readouterr()
  assert run_pretraining.main(["--data-dir", str(data), "--model-name", "ko",
                               "--hparams", json.dumps(TINY)]) == 0
  assert json.loads((run / "tokenizer_config.json").read_text()) == KEPT
  said = f"note: no tokenizer_config.json beside {vocab}"
  assert (f"{said} or in {data / 'pretrain_tfrecords'}{read_as}"
          in capsys.readouterr().out.splitlines())
  record = json.loads((run / "pretrain_config.json").read_text())
  assert {k: record["signature"][k] for k in KEPT} == KEPT

  for folder in (run, run / "export"):
    (folder / normalization.FILE).unlink()
  assert run_finetuning.main(["--task", korean_run["task"], "--model-name", "ko",
                              "--data-dir", str(data), "--hparams", json.dumps(
                                  {**FINETUNING, "num_train_epochs": 1.0})]) == 0
  assert (f"{said} or in {run / 'export'}{read_as}"
          in capsys.readouterr().out.splitlines())
  trial = run / "finetuning_models" / f"{TASK}_model_1"
  finetuned = json.loads((trial / "finetuning_config.json").read_text())
  assert {k: finetuned["finetuning"][k] for k in KEPT} == KEPT
  # --predict, the trial's own file deleted too: the line goes to stderr, the
  # predictions alone to stdout.
  (trial / normalization.FILE).unlink()
  assert run_finetuning.main(["--task", korean_run["task"], "--model-name", "ko",
                              "--data-dir", str(data), "--hparams", json.dumps(FINETUNING),
                              "--predict", str(korean_run["root"] / "예측.tsv")]) == 0
  out, err = capsys.readouterr()
  assert [json.loads(line)["label"] in LABELS for line in out.splitlines()] == [True] * 6
  assert (f"note: no tokenizer_config.json beside {trial / 'vocab.txt'} or in "
          f"{run / 'export'}{read_as}") in err.splitlines()

  (tmp_path / "ko.txt").write_text("\n".join(GOOD + BAD) + "\n", encoding="utf-8")
  assert tokenize_tool.main(["--vocab-file", str(vocab), "--input",
                             str(tmp_path / "ko.txt"), "--output",
                             str(tmp_path / "ko.jsonl")]) == 0
  assert capsys.readouterr().out == f"{said}{read_as}\n"
  rows = [json.loads(line) for line in open(tmp_path / "ko.jsonl", encoding="utf-8")]
  assert ["".join(t.removeprefix("##") for t in row["tokens"]) for row in rows] == [
      text.replace(" ", "") for text in GOOD + BAD]


@pytest.mark.slow  # the fine-tuned model must tell the two labels apart
def test_every_form_gives_the_same_ids_and_labels(korean_run):
  root, trial, export = korean_run["root"], korean_run["trial"], korean_run["export"]
  texts = GOOD + BAD
  config = finetune_config.load_config("ko", [korean_run["task"]],
                                       str(korean_run["data"]), FINETUNING)
  finetuner = trainer.Finetuner(config, log=lambda _: None, finished=True)
  runner = finetuner.runners[0]
  features = runner.features(list(runner.read_unlabeled(str(root / "예측.tsv"))), "predict")
  vocab = finetuner.tokenizer.vocab
  lengths = features["input_mask"].sum(-1)
  ids = [row[:n].tolist() for row, n in zip(features["input_ids"], lengths)]
  # Hangul syllables whole: no [UNK], and the pieces spell the text.
  assert vocab.unk_id not in np.concatenate(ids)
  spelled = ["".join(vocab.tokens[i].removeprefix("##") for i in row[1:-1])
             for row in ids]
  assert spelled == [text.replace(" ", "") for text in texts]

  predicted = [json.loads(line) for line in open(root / "예측.jsonl", encoding="utf-8")]
  labels = [line["label"] for line in predicted]
  assert set(labels) == set(LABELS)  # the model tells the two apart
  assert labels == [LABELS[text in GOOD] for text in texts]

  saved = call_in_clean_process({"path": str(trial / serving.SAVED_MODEL),
                                 scope_name(TASK): {"text_a": texts}},
                                {"path": str(export / serving.SAVED_MODEL),
                                 "serving_default": {"text_a": texts}})
  for outputs in (saved[0][scope_name(TASK)], saved[1]["serving_default"]):
    assert outputs["label"] == labels
    np.testing.assert_allclose(outputs["probabilities"],
                               [[p["probabilities"][label] for label in LABELS]
                                for p in predicted], atol=1e-5)
  graph = tf.saved_model.load(str(trial / serving.SAVED_MODEL))
  assert [[vocab.cls_id, *row, vocab.sep_id] for row in
          graph.tokenize(tf.constant(texts)).to_list()] == ids

  names = ["model_float32.onnx", "model_float32.tflite"]
  for name, got in run_readers(export, names, [texts]).items():
    assert [row[:n] for row, n in zip(got["inputs"]["input_ids"], lengths)] == ids, name
    assert [record["label"] for record in got["records"]] == labels, name

  transformers = pytest.importorskip("transformers")
  hf = transformers.ElectraTokenizerFast.from_pretrained(str(export))
  assert hf(texts)["input_ids"] == ids


@pytest.mark.slow
def test_a_task_named_in_hangul_writes_its_files_under_its_name(korean_run):
  results = korean_run["run"] / "results"
  assert (results / f"{TASK}_results.txt").read_text().startswith(f"{TASK} dev accuracy")
  written = results / "test_predictions" / f"{TASK}_trial1" / f"{TASK}_test.jsonl"
  predicted = [json.loads(line)["label"] for line in
               open(korean_run["root"] / "예측.jsonl", encoding="utf-8")]
  assert [json.loads(line)["label"] for line in open(written, encoding="utf-8")] == (
      predicted[:2] + predicted[3:5])
  hf_config = json.loads((korean_run["export"] / "config.json").read_text())
  assert hf_config["id2label"] == {"0": "나쁨", "1": "좋음"}
  assert sorted(glob.glob(str(korean_run["trial"] / "ckpt-*.index")))
