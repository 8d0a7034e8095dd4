"""Bad input met as a user meets it, grouped by command: each case gets one `error: ...`
line naming the file, flag or field and what was expected (exit 2, no traceback), and
leaves what it would have written over as it was. The cases a sweep of every command
found wrong; the commands run in this process (main(argv)), their output read back."""

import json
import os
import re
import shlex
import shutil
import stat
import threading

import numpy as np
import pytest

import build_pretraining_dataset
import run_finetuning
import run_pretraining
from bench import bench_data_prep
from export.reader import Reader
from finetune.qa import data as qa_data
from finetune.tagging import data as tagging_data
from pretrain import input_pipeline, trainer
from pretrain.config_fitting import checked_and_sized
from tests.helpers import (head_of, listing, make_data_dir, ROOT, shared_path, TINY_MODEL,
                           write_reviews_task, write_tiny_pretrained_model)
from tools import compare_runs, eval_checkpoints, hparams_reference, litert_ops, squad_eval
from tools import export_hf, export_lite, reference_outputs
from tools import tokenize as tokenize_tool
from util import cli

FINETUNE_HPARAMS = json.dumps({"max_seq_length": 16, "train_batch_size": 8,
                               "num_train_epochs": 1, "export_serving": False})


def one_error(capsys, code) -> str:
  """The one `error:` line of a refused command (exit 2, nothing else on stderr)."""
  err = capsys.readouterr().err
  assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (code, err)
  return err.strip()


def usage_error(capsys, main, argv) -> str:
  """argparse's refusal of `argv` (exit 2, its usage, then `prog: error: ...`): its
  `error: ...` part."""
  with pytest.raises(SystemExit) as exit_info:
    main(argv)
  assert exit_info.value.code == 2
  return capsys.readouterr().err.strip().splitlines()[-1].split(": ", 1)[1]


def a_file(tmp_path):
  """A file that an output path then tries to use as a folder."""
  path = tmp_path / "notes.txt"
  path.write_text("kept\n")
  return path


# The README's commands as written
def readme_argv(script: str) -> list:
  """The flags of the README's command line of `script`, its optional [...] left out."""
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read().replace("\\\n", " ")
  line = re.search(rf"^python {re.escape(script)} (.*)$", text, re.M).group(1)
  return shlex.split(re.sub(r"\[[^]]*\]", "", line))


def test_the_readmes_data_command_leaves_what_its_pretraining_command_reads(
    tmp_path, monkeypatch, capsys):
  """Step 1 on a corpus in my_corpus/ (a vocab.txt at hand too, should it be named),
  then step 2 up to its first step: both as the README writes them. Records without
  their vocabulary (built with a --vocab-file kept elsewhere) are said to be so."""
  monkeypatch.chdir(tmp_path)
  head_of(shared_path("corpus", "english_corpus.txt"), "my_corpus/part.txt", 3000)
  shutil.copyfile(shared_path("vocab", "bert_uncased_vocab.txt"), "vocab.txt")
  assert build_pretraining_dataset.main(
      readme_argv("build_pretraining_dataset.py") + ["--no-progress"]) == 0
  read = []
  monkeypatch.setattr(trainer, "_run", lambda config, _: read.append(
      (input_pipeline.input_files(config), checked_and_sized(config)[0].vocab_file)))
  assert run_pretraining.main(readme_argv("run_pretraining.py")) == 0
  assert read == [(["data/pretrain_tfrecords/pretrain_data.tfrecord-0-of-2",
                    "data/pretrain_tfrecords/pretrain_data.tfrecord-1-of-2"],
                   "data/vocab.txt")]
  os.remove("data/vocab.txt")
  capsys.readouterr()
  assert one_error(capsys, run_pretraining.main(readme_argv("run_pretraining.py"))) == (
      "error: data/vocab.txt: vocabulary not found beside the records "
      "data/pretrain_tfrecords/pretrain_data.tfrecord*; set vocab_file to the vocab.txt "
      "they were built with (build_pretraining_dataset.py's --vocab-file)")


# run_finetuning.py
@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
  """A data dir with a tiny pre-trained model, a user's task, the flags that fine-tuned
  it, and the output of a first attempt from a cut checkpoint under the same model dir.
  """
  root = tmp_path_factory.mktemp("finetuned")
  data = root / "data"
  data.mkdir()
  write_tiny_pretrained_model(data, layers=1)
  task = write_reviews_task(root, 16)
  export = data / "models" / "tiny" / "export"
  cut = root / "cut"
  shutil.copytree(export, cut)
  weights = cut / "model.ckpt.data-00000-of-00001"
  weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
  flags = ["--task", task, "--model-name", "tiny", "--data-dir", str(data), "--hparams",
           FINETUNE_HPARAMS]
  with pytest.MonkeyPatch.context() as patch:
    captured = []
    patch.setattr("sys.stderr", _Recorder(captured))
    first = run_finetuning.main(flags + ["--init-checkpoint", str(cut)])
  trial = data / "models" / "tiny" / "finetuning_models" / "reviews_model_1"
  left = sorted(os.listdir(trial))
  second = run_finetuning.main(flags + ["--init-checkpoint", str(export)])
  return {"root": root, "data": data, "task": task, "weights": weights,
          "flags": flags + ["--init-checkpoint", str(export)],
          "first": (first, "".join(captured)), "left": left, "second": second}


class _Recorder:
  """A stderr that keeps what is written (capsys is per test, not per module)."""

  def __init__(self, chunks):
    self.chunks = chunks

  def write(self, text):
    self.chunks.append(text)
    return len(text)

  def flush(self):
    pass


def test_a_run_that_failed_before_training_does_not_bind_its_model_dir(finetuned):
  """A cut init checkpoint is refused naming its data file, and the run leaves no record
  in the model dir, so the same run from a whole checkpoint trains instead of being
  refused as "a run with a different config"."""
  code, err = finetuned["first"]
  last = err.strip().splitlines()[-1]
  assert code == 2 and "Traceback" not in err, err
  assert last.startswith(f"error: {finetuned['weights']}: ") and "cut short" in last
  assert "finetuning_config.json" not in finetuned["left"]
  assert finetuned["second"] == 0
  trial = finetuned["data"] / "models" / "tiny" / "finetuning_models" / "reviews_model_1"
  record = json.loads((trial / "finetuning_config.json").read_text())
  assert record["finetuning"]["init_checkpoint"].endswith("export")


def test_predict_refuses_a_directory_and_an_output_under_a_file(finetuned, capsys,
                                                                 tmp_path):
  capsys.readouterr()
  folder = tmp_path / "inputs"
  folder.mkdir()
  assert one_error(capsys, run_finetuning.main(finetuned["flags"] + [
      "--predict", str(folder)])) == f"error: {folder}: a directory; expected the file " \
                                      "to predict"
  sentences = tmp_path / "in.csv"
  sentences.write_text("review\na fine film\n")
  blocking = a_file(tmp_path)
  output = blocking / "out.jsonl"
  assert one_error(capsys, run_finetuning.main(finetuned["flags"] + [
      "--predict", str(sentences), "--output", str(output)])) == (
          f"error: {output}: {blocking} is a file, not a folder")
  assert blocking.read_text() == "kept\n"


def test_predict_writes_through_a_fifo_and_numbers_inputs_by_their_line(finetuned,
                                                                         tmp_path):
  """The FIFO's reader gets every prediction (a rename would have put a file in its
  place); a blank line gives no prediction but keeps its number."""
  sentences = tmp_path / "in.csv"
  sentences.write_text("review\na fine film\n\na tired plot\n")
  fifo = tmp_path / "predictions"
  os.mkfifo(fifo)
  before = listing(finetuned["root"]), listing(tmp_path)
  read = []
  # A daemon: a write that misses the FIFO leaves it waiting for good.
  reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
  reader.start()
  assert run_finetuning.main(finetuned["flags"] + ["--predict", str(sentences),
                                                   "--output", str(fifo)]) == 0
  reader.join(timeout=60)
  assert [json.loads(line)["index"] for line in "".join(read).splitlines()] == [0, 2]
  assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
  after = listing(finetuned["root"]), listing(tmp_path)
  assert after[0] == before[0] and after[1].keys() == before[1].keys()
  assert after[1]["in.csv"] == before[1]["in.csv"]


def test_tagging_and_qa_inputs_to_predict_are_numbered_by_their_line(tmp_path):
  """The other families' --predict readers: a tagged sentence's index, a question's
  default id (those --predict writes)."""
  sentences, questions = tmp_path / "sentences.txt", tmp_path / "questions.jsonl"
  sentences.write_text("He reckons\n\nthe deficit\n")
  asked = [{"question": "Who?", "context": "He reckons."}, None,
           {"question": "What?", "context": "The deficit."},
           {"question": "Why?", "context": "It is.", "id": "x"}]
  questions.write_text("".join((json.dumps(q) if q else " ") + "\n" for q in asked))
  assert [(e.eid, e.words) for e in tagging_data.read_sentences(str(sentences))] == [
      (0, ("He", "reckons")), (2, ("the", "deficit"))]
  assert [e.qid for e in qa_data.read_questions(str(questions))] == ["0", "2", "x"]


def test_fine_tuning_refuses_to_overwrite_a_trial_dir_that_is_a_link(finetuned, capsys,
                                                                     tmp_path):
  """Its run would be deleted through the link: the linked run's, here the trained
  trial of the fixture."""
  trial = finetuned["data"] / "models" / "tiny" / "finetuning_models" / "reviews_model_1"
  (tmp_path / "reviews_model_1").symlink_to(trial)
  before = listing(finetuned["root"]), listing(tmp_path)
  flags = list(finetuned["flags"])
  flags[flags.index("--hparams") + 1] = json.dumps(
      {**json.loads(FINETUNE_HPARAMS), "learning_rate": 1e-3, "overwrite_model_dir": True,
       "model_dir": str(tmp_path / "reviews_model")})
  assert one_error(capsys, run_finetuning.main(flags)) == (
      f"error: the model dir {tmp_path / 'reviews_model_1'} is a link to {trial}, whose "
      "run overwrite_model_dir would delete: give that folder itself as the model dir, "
      "or another --model-name or model_dir")
  assert (listing(finetuned["root"]), listing(tmp_path)) == before


def test_a_task_file_that_is_a_directory_is_named_as_one(finetuned, capsys, tmp_path):
  task = write_reviews_task(tmp_path, 4)
  os.remove(tmp_path / "train.csv")
  (tmp_path / "train.csv").mkdir()
  code = run_finetuning.main(["--task", task, "--model-name", "tiny", "--data-dir",
                              str(finetuned["data"]), "--hparams", FINETUNE_HPARAMS])
  assert one_error(capsys, code) == (
      f"error: {tmp_path / 'train.csv'}: the train file of task reviews is a directory")


def test_no_model_of_the_name_is_said_so_not_blamed_on_the_vocabulary(tmp_path, capsys,
                                                                      monkeypatch):
  """docs/finetuning.md's command for a task of your own after the quick start, whose
  data/vocab.txt (8,192 tokens) is another model's and no electra_small was trained."""
  monkeypatch.chdir(tmp_path)
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data, layers=1)
  vocab = data / "vocab.txt"
  vocab.write_text("".join(vocab.read_text().splitlines(keepends=True)[:8192]))
  write_reviews_task(tmp_path, 16)
  assert one_error(capsys, run_finetuning.main(["--task", "task.json"])).startswith(
      "error: no pre-trained model: data/models/electra_small holds no checkpoint; "
      "--model-name tiny names one pre-trained in data/models; or pre-train one with "
      "`python run_pretraining.py --model-name electra_small --data-dir data`")


def test_files_that_are_not_utf8_are_named(tmp_path, capsys):
  hparams_file = tmp_path / "hparams.json"
  hparams_file.write_bytes(b'{"learning_rate": 1e-4, "note": "caf\xe9"}')
  task = tmp_path / "task.json"
  task.write_bytes(b'{"name": "caf\xe9"}')
  code = run_finetuning.main(["--task", "glue/sst2", "--hparams", str(hparams_file)])
  assert one_error(capsys, code) == (
      f"error: --hparams: {hparams_file}: not UTF-8 text "
      f"(byte {hparams_file.read_bytes().index(0xe9)}); expected a JSON file")
  code = run_finetuning.main(["--task", str(task), "--data-dir", str(tmp_path)])
  assert one_error(capsys, code) == (
      f"error: {task}: not UTF-8 text (byte {task.read_bytes().index(0xe9)}); expected "
      "the task's JSON description")


def test_conflicting_flags_are_refused(tmp_path, capsys):
  for main, extra in ((run_finetuning.main, ["--task", "glue/sst2"]),
                      (run_pretraining.main, ["--model-name", "x"])):
    code = main(extra + ["--data-dir", str(tmp_path), "--init-checkpoint", "a/ckpt",
                         "--hparams", '{"init_checkpoint": "b/ckpt"}'])
    assert one_error(capsys, code) == (
        "error: --init-checkpoint 'a/ckpt' and --hparams' init_checkpoint 'b/ckpt' "
        "disagree; give one of them")
  # Given twice alike is no conflict: the run goes on to find no data in tmp_path.
  code = run_pretraining.main(["--model-name", "x", "--data-dir", str(tmp_path),
                               "--init-checkpoint", "a/ckpt", "--hparams",
                               '{"init_checkpoint": "a/ckpt"}'])
  assert "disagree" not in one_error(capsys, code)
  assert usage_error(capsys, run_finetuning.main, [
      "--task", "glue/sst2", "--output", str(tmp_path / "p.jsonl")]) == (
          "error: --output is where --predict writes; give --predict FILE too")
  assert not (tmp_path / "p.jsonl").exists()


# run_pretraining.py
def test_a_shard_that_is_not_a_tfrecord_is_named_without_tensorflow_internals(
    tmp_path, capsys):
  records = tmp_path / "pretrain_tfrecords"
  records.mkdir()
  shard = records / "pretrain_data.tfrecord-0-of-1"
  shard.write_bytes(bytes(range(256)) * 20)
  (tmp_path / "vocab.txt").write_text(
      "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdef")) + "\n")
  code = run_pretraining.main(["--model-name", "x", "--data-dir", str(tmp_path),
                               "--hparams", '{"debug": true, "max_seq_length": 32}'])
  assert one_error(capsys, code) == (
      f"error: {shard}: not a readable TFRecord file (corrupted record at 0 (Is this "
      "even a TFRecord file?)); rebuild it")


@pytest.mark.slow
def test_a_relative_data_dir_resumes_from_anywhere_and_moved_data_starts_over(
    tmp_path, capsys, monkeypatch):
  """The checkpointed input position names its shards absolutely; one naming shards
  that moved since is a note, and the data starts over in a fresh iterator."""
  (tmp_path / "a").mkdir()
  (tmp_path / "b").mkdir()
  make_data_dir(str(tmp_path / "a" / "data"), seq_length=32, num_lines=300)

  def pretrain(where, data_dir, steps):  # a one-layer model: nothing here needs more
    monkeypatch.chdir(tmp_path / where)
    capsys.readouterr()
    code = run_pretraining.main(["--model-name", "m", "--data-dir", data_dir, "--hparams",
                                 json.dumps({"debug": True, "max_seq_length": 32,
                                             "num_train_steps": steps, "do_eval": False,
                                             "save_checkpoints_steps": 2,
                                             **TINY_MODEL})])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out
  pretrain("a", "data", 2)
  assert "no input position" not in pretrain("b", "../a/data", 4)
  os.rename(tmp_path / "a" / "data", tmp_path / "a" / "moved")
  resumed = pretrain("b", "../a/moved", 6)
  assert "note: no input position for ../a/moved/models/m/ckpt-4 (" in resumed
  assert "; the data starts over\nresuming from ../a/moved/models/m/ckpt-4" in resumed


def test_a_compiled_functions_error_is_its_reason(capsys):
  """Not "Graph execution error:", the first line of every error in a tf.function."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  @tf.function
  def gather(ids):  # a lambda's error would carry no stack
    return tf.gather(ids, 5)
  assert one_error(capsys, cli.run_command(lambda: gather(tf.constant([1, 2, 3])))) == (
      "error: indices = 5 is not in [0, 3)")


def test_a_hugging_face_config_field_is_named_once(tmp_path, capsys):
  (tmp_path / "config.json").write_text(json.dumps(
      {"model_type": "electra", "architectures": ["ElectraForPreTraining"],
       "hidden_size": "x"}))
  (tmp_path / "model.safetensors").write_bytes(b"")
  (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
  code = run_finetuning.main(["--task", "glue/sst2", "--data-dir", str(tmp_path),
                              "--init-checkpoint", str(tmp_path)])
  assert one_error(capsys, code) == (
      f"error: {tmp_path / 'config.json'}: hidden_size \"x\": expected an integer >= 1")


def test_a_hugging_face_config_that_contradicts_its_weights_names_both_sizes(tmp_path,
                                                                            capsys):
  write_tiny_pretrained_model(tmp_path, layers=1)  # hidden_size 32
  hf = tmp_path / "hf"
  assert export_hf.main(["--checkpoint", str(tmp_path / "models" / "tiny" / "export"),
                         "--vocab", str(tmp_path / "vocab.txt"), "--output",
                         str(hf)]) == 0
  config = json.loads((hf / "config.json").read_text())
  (hf / "config.json").write_text(json.dumps({**config, "hidden_size": 64}))
  np.savez(tmp_path / "in.npz", **{name: np.ones([1, 4], np.int32) for name in (
      "input_ids", "input_mask", "segment_ids")})
  capsys.readouterr()
  code = reference_outputs.main(["--checkpoint", str(hf), "--inputs",
                                 str(tmp_path / "in.npz"), "--output",
                                 str(tmp_path / "out.npz")])
  assert one_error(capsys, code) == (
      f"error: {hf / 'config.json'}: hidden_size 64, but the weights in "
      f"{hf / 'model.safetensors'} have 32 (electra.encoder.layer.0.output.LayerNorm."
      "weight is [32]); expected the config.json saved with these weights")


@pytest.mark.slow
def test_a_run_reached_through_a_link_or_a_copy_leaves_the_other_run_alone(
    tmp_path, capsys, monkeypatch):
  """overwrite_model_dir through a link to another run's folder is refused before
  anything is touched; tools.eval_checkpoints on a copy of a run evaluates the copy's
  own checkpoints (not those of the folder its copied record names), writes only into
  it, and says which of them cannot be read."""
  data, _ = make_data_dir(tmp_path / "data", seq_length=32, num_lines=200)
  hparams = {"debug": True, "max_seq_length": 32, "num_train_steps": 2,
             "save_checkpoints_steps": 1, "keep_checkpoint_max": 5, "do_eval": False,
             **TINY_MODEL}
  assert run_pretraining.main(["--model-name", "k9", "--data-dir", data, "--hparams",
                               json.dumps(hparams)]) == 0
  models = tmp_path / "data" / "models"
  (models / "link9").symlink_to("k9")
  before = listing(tmp_path)
  capsys.readouterr()
  assert one_error(capsys, run_pretraining.main([
      "--model-name", "link9", "--data-dir", data, "--hparams",
      json.dumps({**hparams, "learning_rate": 0.1, "overwrite_model_dir": True})])) == (
          f"error: the model dir {models / 'link9'} is a link to {models / 'k9'}, whose "
          "run overwrite_model_dir would delete: give that folder itself as the model "
          "dir, or another --model-name or model_dir")
  assert listing(tmp_path) == before
  copy = models / "ecut"
  shutil.copytree(models / "k9", copy)
  cut = copy / "ckpt-2.data-00000-of-00001"
  cut.write_bytes(cut.read_bytes()[:1000])
  before = listing(tmp_path)
  monkeypatch.setattr("sys.argv", ["eval_checkpoints", "--data-dir", data,
                                   "--model-name", "ecut", "--eval-batches", "1"])
  assert eval_checkpoints.main() == 0
  out = capsys.readouterr()
  assert [json.loads(line)["global_step"] for line in out.out.splitlines()
          if line.startswith("{")] == [1]
  assert [line for line in out.err.splitlines() if line.startswith("note:")] == [
      f"note: skipping ckpt-2 of {copy}, which cannot be read ({cut}: Read less bytes "
      "than requested)"]
  after = listing(tmp_path)
  outside = lambda found: {path: entry for path, entry in found.items()
                           if not path.startswith(os.path.join("data", "models", "ecut"))}
  assert outside(after) == outside(before)
  assert "eval_curve.jsonl" in os.listdir(copy)


# build_pretraining_dataset.py
def test_build_refuses_flags_the_other_flags_leave_unused(tmp_path, capsys):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
  main = build_pretraining_dataset.main
  assert usage_error(capsys, main, ["--mask-prob", "0.3"]) == (
      "error: --mask-prob is the masking probability of "
      "--static-masking; give both or neither")
  assert usage_error(capsys, main, ["--vocab-file", str(vocab), "--vocab-size", "900"]) \
      == ("error: --vocab-size is the size of a vocabulary "
          "learned from the corpus, unused with --vocab-file; give one of them")
  assert os.listdir(tmp_path) == ["vocab.txt"]


def test_build_names_the_file_in_the_way_of_its_output(tmp_path, capsys):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("One sentence here.\nAnother one.\n")
  blocking = a_file(tmp_path)
  code = build_pretraining_dataset.main([
      "--corpus-dir", str(corpus), "--vocab-file",
      shared_path("vocab", "bert_uncased_vocab.txt"), "--output-dir",
      str(blocking / "out"), "--no-progress"])
  assert one_error(capsys, code) == (
      f"error: --output-dir: cannot create {blocking}: {blocking} is a file, not a folder")
  assert blocking.read_text() == "kept\n"


def test_a_build_with_a_vocabulary_not_of_its_corpus_warns_of_its_unk_rate(tmp_path,
                                                                          capsys):
  """A Korean vocabulary given an English and Korean corpus: the build passes (exit 0),
  with one warning naming the [UNK] rate, the summary's figure, and the likely cause."""
  korean = ["오늘 날씨가 정말 좋네요", "음악이 아름답고 좋았어요"]
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("".join(f"{korean[i % 2]}\nthe film was fine\n\n"
                                        for i in range(20)), encoding="utf-8")
  vocab = tmp_path / "vocab.txt"
  syllables = sorted({c for line in korean for c in line if c != " "})
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + syllables
                             + ["##" + c for c in syllables]) + "\n", encoding="utf-8")
  capsys.readouterr()
  assert build_pretraining_dataset.main([
      "--corpus-dir", str(corpus), "--vocab-file", str(vocab), "--output-dir",
      str(tmp_path / "out"), "--max-seq-length", "32", "--no-progress"]) == 0
  out, err = capsys.readouterr()
  rate = re.search(r"^\[UNK\] rate +(\S+)$", out, re.M)[1]
  # A Korean line is a word-piece per syllable, an English one 4 [UNK]s.
  pieces = sum(len(korean[i % 2].replace(" ", "")) for i in range(20))
  assert rate == f"{100 * 80 / (80 + pieces):.2f}%"
  assert err == (
      f"warning: {rate} of the corpus's tokens are [UNK] (over 5%): the vocabulary "
      f"{vocab} is likely not of this corpus's language or casing (the text lower-cased, "
      "accents kept); the summary's \"not in the vocabulary\" names the characters it "
      "lacks\n")


# tools
def test_litert_ops_names_a_file_that_is_not_a_model(tmp_path, capsys):
  empty, garbage = tmp_path / "empty.tflite", tmp_path / "garbage.tflite"
  empty.write_bytes(b"")
  garbage.write_bytes(b"not a flatbuffer" * 8)
  for path, says in ((tmp_path / "none.tflite", "no such file; expected a .tflite model"),
                     (tmp_path, "no such file; expected a .tflite model"),
                     (empty, "an empty file; expected a .tflite model"),
                     (garbage, "not a LiteRT model (")):
    assert one_error(capsys, litert_ops.main([str(path)])).startswith(
        f"error: {path}: {says}")


def test_export_hf_names_a_vocabulary_that_is_not_utf8_or_not_there(tmp_path, capsys):
  write_tiny_pretrained_model(tmp_path, layers=1)
  latin1, missing = tmp_path / "latin1.txt", tmp_path / "none.txt"
  latin1.write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n")
  for vocab, says in ((latin1, "line 6: not UTF-8 text; expected a BERT vocab.txt in "
                               "UTF-8"),
                      (missing, "does not exist; expected a BERT vocab.txt file")):
    code = export_hf.main(["--checkpoint", str(tmp_path / "models" / "tiny" / "export"),
                           "--vocab", str(vocab), "--output", str(tmp_path / "hf")])
    assert one_error(capsys, code) == f"error: {vocab}: {says}"
  assert not (tmp_path / "hf").exists()


def test_reference_outputs_names_inputs_it_cannot_read(tmp_path, capsys):
  """Read before the checkpoint is: an empty or cut file, an array of objects, one of
  no [batch, seq] shape."""
  empty, cut, objects = (tmp_path / f"{name}.npz" for name in ("empty", "cut", "objects"))
  empty.write_bytes(b"")
  np.savez(objects, **{name: np.array([[{}]], object) for name in (
      "input_ids", "input_mask", "segment_ids")})
  cut.write_bytes(objects.read_bytes()[:100])
  for inputs, reason in ((empty, "No data left in file"), (cut, "File is not a zip file"),
                         (objects, "Object arrays cannot be loaded when "
                                   "allow_pickle=False")):
    code = reference_outputs.main(["--checkpoint", str(tmp_path), "--inputs", str(inputs),
                                   "--output", str(tmp_path / "out.npz")])
    assert one_error(capsys, code) == (
        f"error: {inputs}: cannot read as .npz ({reason}); expected a .npz of input_ids, "
        "input_mask, segment_ids of shape [batch, seq]")
  np.savez(objects, input_ids=np.int32(1), input_mask=np.int32(1), segment_ids=np.int32(1))
  code = reference_outputs.main(["--checkpoint", str(tmp_path), "--inputs", str(objects),
                                 "--output", str(tmp_path / "out.npz")])
  assert one_error(capsys, code) == (
      f"error: {objects}: input_ids has shape []; expected [batch, seq]")
  assert not (tmp_path / "out.npz").exists()


def test_a_corpus_or_config_that_is_empty_or_not_utf8_is_named_with_its_flag(tmp_path,
                                                                          capsys):
  empty, latin1, config = (tmp_path / name for name in ("empty.txt", "latin1.txt",
                                                         "config.json"))
  empty.write_bytes(b"")
  latin1.write_bytes(b"caf\xe9 au lait\n")
  config.write_bytes(b'{"hidden_size": 32, "note": "caf\xe9"}')
  np.savez(tmp_path / "in.npz", **{name: np.ones([1, 4], np.int32) for name in (
      "input_ids", "input_mask", "segment_ids")})
  before = listing(tmp_path)
  vocab = shared_path("vocab", "bert_uncased_vocab.txt")
  for corpus, says in ((empty, "no text"), (latin1, "not UTF-8 text (byte 3)")):
    code = bench_data_prep.main(["--corpus", str(corpus), "--vocab", vocab,
                                 "--skip-scaling"])
    assert one_error(capsys, code) == (
        f"error: --corpus {corpus}: {says}; expected a UTF-8 text corpus")
  code = reference_outputs.main(["--checkpoint", str(tmp_path), "--config", str(config),
                                 "--inputs", str(tmp_path / "in.npz"), "--output",
                                 str(tmp_path / "out.npz")])
  assert one_error(capsys, code) == (
      f"error: --config {config}: not UTF-8 text (byte "
      f"{config.read_bytes().index(0xe9)}); expected a model's config.json")
  assert listing(tmp_path) == before


def test_hparams_reference_output_that_cannot_be_written(tmp_path, capsys):
  blocking = a_file(tmp_path)
  assert one_error(capsys, hparams_reference.main(["--output", str(blocking / "h.md")])) \
      == f"error: {blocking / 'h.md'}: {blocking} is a file, not a folder"
  assert one_error(capsys, hparams_reference.main(["--output", str(tmp_path)])) == (
      f"error: {tmp_path}: is a directory; expected a file to write")
  assert hparams_reference.main(["--output", str(tmp_path / "h.md")]) == 0
  assert (tmp_path / "h.md").read_text().startswith("#")


def a_pretraining_run(folder, log_lines):
  """A model dir as compare_runs reads it: the run's record and its training log."""
  folder.mkdir()
  (folder / "pretrain_config.json").write_text(json.dumps(
      {"signature": {}, "config": {"train_batch_size": 4, "max_seq_length": 32}}))
  (folder / "train_log.jsonl").write_text("".join(line + "\n" for line in log_lines))
  return folder


def test_compare_runs_spares_its_inputs_and_names_a_cut_log(tmp_path, capsys,
                                                            monkeypatch):
  rows = [json.dumps({"step": s, "mlm_loss": 7.0 - s / 10, "disc_loss": 0.7})
          for s in (1, 2, 3)]
  run = a_pretraining_run(tmp_path / "run", rows)
  log = run / "train_log.jsonl"

  def compare(*argv):
    monkeypatch.setattr("sys.argv", ["compare_runs", *map(str, argv)])
    return compare_runs.main()
  assert one_error(capsys, compare(f"a={run}", "--output", log)) == (
      f"error: --output {log} is an input of this command (run a: {run}); choose "
      "another --output")
  assert log.read_text() == "".join(r + "\n" for r in rows)
  cut = a_pretraining_run(tmp_path / "cut", [rows[0], rows[1][:20]])
  assert one_error(capsys, compare(f"a={cut}", "--output", tmp_path / "c.png")).startswith(
      f"error: {cut / 'train_log.jsonl'}:2: not a row with 'step' (")
  assert compare(f"a={run}", "--output", tmp_path / "c.png") == 0
  assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_squad_eval_names_data_that_is_not_utf8(tmp_path, capsys):
  data, predictions = tmp_path / "dev.json", tmp_path / "predictions.json"
  data.write_bytes(b'{"version": "1.1", "data": [{"title": "caf\xe9"}]}')
  predictions.write_text("{}")
  assert one_error(capsys, squad_eval.main([str(data), str(predictions)])) == (
      f"error: {data}: the SQuAD data are not UTF-8 text "
      f"(byte {data.read_bytes().index(0xe9)})")


def test_file_outputs_name_the_file_in_their_way(finetuned, tmp_path, capsys):
  """tokenize (an atomic file) and export_lite (an atomic folder)."""
  blocking = a_file(tmp_path)
  text = tmp_path / "in.txt"
  text.write_text("a fine film\n")
  output = blocking / "out.jsonl"
  assert one_error(capsys, tokenize_tool.main([
      "--vocab-file", shared_path("vocab", "bert_uncased_vocab.txt"), "--input",
      str(text), "--output", str(output)])) == (
          f"error: {output}: {blocking} is a file, not a folder")
  trial = finetuned["data"] / "models" / "tiny" / "finetuning_models" / "reviews_model_1"
  output = blocking / "export"
  assert one_error(capsys, export_lite.main([
      "--model-dir", str(trial), "--output", str(output), "--format", "original"])) == (
          f"error: {output}: {blocking} is a file, not a folder")
  assert blocking.read_text() == "kept\n"


# The exported reader bundle (export/reader.py, in this process).
def test_reader_refuses_a_text_where_a_list_belongs_and_texts_not_str(tmp_path):
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "film"]
  (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
  (tmp_path / "deploy.json").write_text(json.dumps(
      {"reader": "finetune.sentence.deployed", "lower_case": True, "task": "reviews",
       "pair": False, "regression": False, "labels": ["bad", "good"],
       "max_seq_length": 8}))
  reader = Reader(str(tmp_path))
  ids = reader.inputs(["a fine film", "film"])["input_ids"]
  assert ids.tolist() == [[2, 5, 6, 7, 3], [2, 7, 3, 0, 0]]  # the longest text's length
  for bad, says in (("a fine film", "inputs takes a list per argument, one item per "
                                    "input; got a str: put one text in a list"),
                    ([b"caf\xe9"], "input 0: b'caf\\xe9'; expected a str (decode it "
                                   "from UTF-8 first)"),
                    (["a", None], "input 1: None; expected a str")):
    with pytest.raises(ValueError) as refused:
      reader.inputs(bad)
    assert str(refused.value) == says
  assert reader.inputs([""])["input_ids"].tolist() == [[2, 3]]
