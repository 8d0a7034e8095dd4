"""Helpers several test files share: the checkout and ../shared/data, data they write
and inputs they build. Plain functions (fixtures live in conftest.py); test files
import from here (the export tests also from export_helpers.py), never from each
other."""

import contextlib
import json
import os
import runpy
import shutil
import signal
import stat
import subprocess
import sys
import time
import unicodedata
import warnings
from unittest import mock

import filelock
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bench.bench_multi_worker import loopback_cluster
from data_prep import normalization, records
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from model import encoder
from model.dropout import dropout_generators
from pretrain.config import load_config
from pretrain.model import SpecialTokens
from tests import numpy_electra
from training.loop import LoopSettings, TrainLoop
from training.runtime import use_checkpointed_dropout


# The checkout (as conftest.py puts it on sys.path) and the shared data beside it.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")


def shared_path(*parts: str) -> str:
  """Path under ../shared/data; a test that needs it fails without it, in CI or not (a
  skip would let a run without the data pass green with much of the suite unrun)."""
  path = os.path.join(SHARED_DATA, *parts)
  if not os.path.exists(path):
    pytest.fail(f"{path} is missing: the suite needs ../shared (its data/) beside the "
                "checkout")
  return path


def shared_folder(tmp_path_factory, name, make):
  """The folder <name>, filled once per test session by make(folder) for every test that
  only reads it, whichever pytest-xdist worker asks first (the workers' temp folders
  share a parent; a file lock makes the others wait for it)."""
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent
  home = root / name
  done = root / f"{name}.done"
  with filelock.FileLock(f"{home}.lock"):
    if not done.exists():
      shutil.rmtree(home, ignore_errors=True)  # a run killed while making it
      home.mkdir()
      make(home)
      done.write_text("")
  return home


def run_as_main(module: str, argv) -> int:
  """`python -m <module> <argv>` in this process, as -m runs it (runpy, under the name
  __main__): its exit status. For a command run whole whose process start is not what a
  test checks: TensorFlow is not loaded a second time."""
  with mock.patch.object(sys, "argv", [module, *argv]), warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # "found in sys.modules": imported here
    try:
      runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
      return 0 if exit_.code is None else exit_.code
  return 0


def save_original(pair, prefix: str, part: str = "pair", global_step=None) -> str:
  """Writes `part` of `pair` in the original checkpoint format at `prefix`."""
  from model.weights.original import original_variables, save_variables  # pylint: disable=g-import-not-at-top
  return save_variables(original_variables(pair, part), prefix, global_step)


def write_tiny_pretrained_model(data, layers=2):
  """<data>/vocab.txt (BERT's) and a tiny random model named "tiny" of `layers`
  transformer layers, exported where run_pretraining.py exports
  (<data>/models/tiny/export/), for fine-tuning tests."""
  from model.config import ModelConfig  # pylint: disable=g-import-not-at-top
  from model.electra import ElectraPair  # pylint: disable=g-import-not-at-top
  with open(shared_path("vocab", "bert_uncased_vocab.txt"), "rb") as f:
    (data / "vocab.txt").write_bytes(f.read())
  # As a build writes it beside its vocabulary (else each command infers it, saying so).
  normalization.write(str(data), normalization.ORIGINAL)
  config = ModelConfig.from_dict(dict(vocab_size=30522, hidden_size=32,
                                      num_hidden_layers=layers, embedding_size=16,
                                      max_position_embeddings=128))
  save_original(ElectraPair(config).build_variables(),
                str(data / "models" / "tiny" / "export" / "model.ckpt"))


def listing(root) -> dict:
  """{path under root: (file type, size, mtime)} of every entry, links not followed: two
  equal listings show that nothing there was added, removed, replaced or written."""
  found = {}
  for folder, dirs, names in os.walk(root):
    for name in dirs + names:
      path = os.path.join(folder, name)
      info = os.lstat(path)
      found[os.path.relpath(path, root)] = (stat.S_IFMT(info.st_mode), info.st_size,
                                            info.st_mtime_ns)
  return found


@contextlib.contextmanager
def run_lock_held_elsewhere(directory):
  """Yields the Popen of another process holding `directory`'s run lock (as a live run
  does, through runs/lock.py's run_lock); kills it (SIGKILL, no clean-up) on exit."""
  code = ("import sys, time\nfrom runs import lock\nwith lock.run_lock(sys.argv[1]):\n"
          "  print('held', flush=True)\n  time.sleep(600)\n")
  holder = subprocess.Popen([sys.executable, "-c", code, str(directory)],
                            stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == "held\n"
    yield holder
  finally:
    holder.kill()
    holder.wait()
    holder.stdout.close()


# The training loop (training/loop.py) on a toy regression model; the multi-worker
# tests' workers run it too.
def toy_dataset(batch_size=8):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 5)).astype(np.float32)
  y = (x @ rng.normal(size=(5, 1)) + 0.1).astype(np.float32)
  return tf.data.Dataset.from_tensor_slices({"x": x, "y": y}).shuffle(
      64, seed=1).repeat().batch(batch_size, drop_remainder=True)


class Objective:
  """`loss_fn(model, batch, seed, step) -> (loss, outputs)` as the objective
  training/step.py's TrainStep calls, every output logged."""

  def __init__(self, loss_fn):
    self.loss_fn = loss_fn

  def compute(self, model, batch, seed, training, step):
    del training
    return self.loss_fn(model, batch, seed, step)

  @staticmethod
  def logged(outputs):
    return outputs


def toy_loss(noisy=True, nan_from_step=None, signal_at_step=None):
  """MSE plus (optionally) noise drawn from the stateless per-step seed."""
  def loss_fn(model, batch, seed, step):
    pred = model(batch["x"], training=True)
    loss = tf.reduce_mean(tf.square(pred - batch["y"]))
    if noisy:  # the step's seed: stateless_seed(LoopSettings.seed, step, replica, micro)
      loss += 0.01 * tf.random.stateless_normal([], seed)
    if nan_from_step is not None:
      loss *= tf.where(step >= nan_from_step, float("nan"), 1.0)
    if signal_at_step is not None:
      def send(s):
        if int(s) == signal_at_step:
          os.kill(os.getpid(), signal.SIGTERM)
        return s
      tf.py_function(send, [step], tf.int64)
    return loss, {"mse": loss}
  return Objective(loss_fn)


def train_toy(model_dir, num_steps, strategy=None, accumulation=1, dropout=0.3,
              batch_size=8, settings=None, **loss_options):
  """Builds the toy model and trains it to num_steps (more LoopSettings in `settings`;
  no curves' PNG unless they ask for it: a second of drawing per run, which only a test
  of the curves reads); returns (weights, loop)."""
  use_checkpointed_dropout(3)
  strategy = strategy or tf.distribute.get_strategy()
  with strategy.scope():
    model = tf_keras.Sequential([tf_keras.layers.Dense(16, activation="relu"),
                                 tf_keras.layers.Dropout(dropout),
                                 tf_keras.layers.Dense(1)])
    model.build([None, 5])
    optimizer = tf_keras.optimizers.legacy.Adam(0.05)
  loop_settings = LoopSettings(model_dir=model_dir, num_train_steps=num_steps,
                               save_checkpoints_steps=2, keep_checkpoint_max=3,
                               log_every_steps=1,
                               gradient_accumulation_steps=accumulation, seed=7,
                               **{"plot_curves": False, **(settings or {})})
  loop = TrainLoop(strategy, model, optimizer, toy_loss(**loss_options), loop_settings)
  def dataset_fn(context):
    # Each worker takes its consecutive share of the global batch, as tf.distribute
    # splits one worker's batch over its local replicas.
    share = batch_size // context.num_input_pipelines
    first = context.input_pipeline_id * share
    return toy_dataset(batch_size).map(
        lambda b: {k: v[first:first + share] for k, v in b.items()})
  loop.run(dataset_fn)
  return [w.numpy() for w in model.weights], loop


# Pre-training records: the shared corpus as TFRecords and a vocabulary of its tokens.
def int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def write_records(path, sequences, seq_length, static_masks=None):
  """One TFRecord file of [CLS]-to-[SEP] id lists, padded to seq_length."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with tf.io.TFRecordWriter(path) as writer:
    for i, ids in enumerate(sequences):
      pad = seq_length - len(ids)
      features = {"input_ids": int_feature(list(ids) + [0] * pad),
                  "input_mask": int_feature([1] * len(ids) + [0] * pad),
                  "segment_ids": int_feature([0] * seq_length)}
      if static_masks is not None:
        positions, labels, weights = static_masks[i]
        features["masked_lm_positions"] = int_feature(positions)
        features["masked_lm_ids"] = int_feature(labels)
        features["masked_lm_weights"] = tf.train.Feature(
            float_list=tf.train.FloatList(value=weights))
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=features)).SerializeToString())


def corpus_sequences(seq_length, num_lines):
  """[CLS] tokens [SEP] sequences of the shared English corpus (BERT uncased vocab),
  packed greedily from consecutive lines, as build_pretraining_dataset.py packs."""
  vocab = load_vocab(shared_path("vocab", "bert_uncased_vocab.txt"))
  tokenizer = Tokenizer(vocab)
  cls, sep = vocab.tokens.index("[CLS]"), vocab.tokens.index("[SEP]")
  sequences, current = [], []
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    for _, line in zip(range(num_lines), f):
      current += tokenizer.ids(line)
      while len(current) >= seq_length - 2:
        sequences.append([cls] + current[:seq_length - 2] + [sep])
        current = current[seq_length - 2:]
  return sequences


def make_data_dir(root, seq_length=64, num_lines=1500, shards=2):
  """<root>/pretrain_tfrecords/pretrain_data.tfrecord-i-of-n and <root>/vocab.txt.

  The vocabulary keeps only the BERT tokens these lines use (ids remapped), so a small
  model trains quickly; the specials stay at BERT's ids 0-103 order.
  """
  sequences = corpus_sequences(seq_length, num_lines)
  bert = load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")).tokens
  used = sorted(set(range(104)) | {i for seq in sequences for i in seq})
  new_id = {old: new for new, old in enumerate(used)}
  sequences = [[new_id[i] for i in seq] for seq in sequences]
  for i in range(shards):
    write_records(os.path.join(root, "pretrain_tfrecords",
                               records.FILE_PATTERN.format(index=i, count=shards)),
                  sequences[i::shards], seq_length)
  with open(os.path.join(root, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("".join(bert[i] + "\n" for i in used))
  return str(root), len(used)


# One small layer, as pre-training overrides: enough to show a run trains, quick to
# build.
TINY_MODEL = {"model_hparam_overrides": {"num_hidden_layers": 1, "hidden_size": 64,
                                         "num_attention_heads": 1,
                                         "intermediate_size": 128},
              "embedding_size": 32}


# A tiny pre-training config and batches for the objectives.
SPECIAL = SpecialTokens(cls_id=2, sep_id=3, mask_id=4)  # 0 is padding
VOCAB = 50


def tiny_config(**overrides):
  values = {"debug": True, "vocab_size": VOCAB, "max_seq_length": 16,
            "embedding_size": 24, "generator_hidden_size": 0.5,
            "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1,
                                       "num_attention_heads": 2,
                                       "intermediate_size": 64,
                                       "max_position_embeddings": 128}}
  values.update(overrides)
  return load_config("electra_small", "unused_data_dir", values)


def make_batch(rng, batch=4, seq=16, min_length=6):
  """[CLS] A [SEP] B [SEP] then padding, with random lengths."""
  input_ids = rng.integers(5, VOCAB, (batch, seq)).astype(np.int32)
  input_mask = np.zeros((batch, seq), np.int32)
  segment_ids = np.zeros((batch, seq), np.int32)
  for row in range(batch):
    length = int(rng.integers(min_length, seq + 1))
    middle = length // 2
    input_ids[row, 0] = SPECIAL.cls_id
    input_ids[row, middle] = input_ids[row, length - 1] = SPECIAL.sep_id
    input_ids[row, length:] = 0
    input_mask[row, :length] = 1
    segment_ids[row, middle + 1:length] = 1
  return {"input_ids": tf.constant(input_ids), "input_mask": tf.constant(input_mask),
          "segment_ids": tf.constant(segment_ids)}


# Multi-worker runs: one process per worker of a loopback cluster.
def start_workers(command, folder, count=2, env=None, cluster=None, indices=None):
  """Starts `command` (argv) once per worker of a loopback cluster (or of `cluster`),
  each with its TF_CONFIG, or only the workers of `indices`; output goes to
  <folder>/worker_<i>.out and .err (files, not pipes: a worker never blocks on a full
  pipe while another is waited for)."""
  cluster = cluster or loopback_cluster(count)
  os.makedirs(folder, exist_ok=True)
  workers = []
  for index in range(len(cluster["worker"])) if indices is None else indices:
    out, err = (open(os.path.join(folder, f"worker_{index}.{kind}"), "w+",
                     encoding="utf-8") for kind in ("out", "err"))
    worker_env = dict(env or os.environ, TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}}))
    workers.append((subprocess.Popen(command, stdout=out, stderr=err, text=True,
                                     env=worker_env), out, err))
  return workers


def wait_for_exit(workers, timeout, only_success=False):
  """Each worker's (exit code, stdout, stderr) once all have exited; a worker still
  running after `timeout` seconds fails the test (all are killed). With `only_success`,
  a worker that exits other than 0 fails it at once with its stderr (the others,
  waiting for it, are killed)."""
  deadline = time.monotonic() + timeout
  try:
    while True:
      codes = [process.poll() for process, _, _ in workers]
      for index, ((_, _, err), code) in enumerate(zip(workers, codes)):
        if only_success and code not in (None, 0):
          err.seek(0)
          pytest.fail(f"worker {index} exited with {code}:\n{err.read()[-3000:]}")
      if None not in codes:
        break
      if time.monotonic() > deadline:
        pytest.fail(f"workers still running after {timeout} s (exit codes {codes})")
      time.sleep(0.1)
    ended = []
    for (_, out, err), code in zip(workers, codes):
      out.seek(0)
      err.seek(0)
      ended.append((code, out.read(), err.read()))
    return ended
  finally:
    for process, out, err in workers:
      if process.poll() is None:
        process.kill()
        process.wait()
      out.close()
      err.close()


def wait_for_workers(workers, timeout):
  """The workers' stdouts once all exit 0 (wait_for_exit with only_success)."""
  return [out for _, out, _ in wait_for_exit(workers, timeout, only_success=True)]


# Checkpointed dropout: its generators' states and one transformer layer.
def dropout_states(model):
  return [g.state.numpy() for g in dropout_generators(model)]


def set_dropout_states(model, states):
  for generator, state in zip(dropout_generators(model), states):
    generator.state.assign(state)


def one_layer(dropout: float, seed: int):
  """(a built 1-layer encoder's transformer layer, an input [2, 6, 16]), with
  checkpointed dropout at `dropout` in attention and after both sublayers."""
  use_checkpointed_dropout(seed)
  config = encoder.ModelConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=32,
                               hidden_dropout_prob=dropout,
                               attention_probs_dropout_prob=dropout)
  return (encoder.ElectraEncoder(config).transformer_layers[0],
          tf.random.stateless_normal([2, 6, 16], [0, 1]))


# Tiny original-format checkpoints (tests/numpy_electra.py) and inputs for them.
TINY = dict(vocab=97, emb=24, hidden=32, layers=2, inner=128, gen_hidden=16,
            gen_layers=2, gen_inner=64, max_pos=40)


def padded_batch(vocab, seq=16, seed=0):
  """Three sequences: full length, padded, and short; each with a segment B."""
  rng = np.random.default_rng(seed)
  input_ids = rng.integers(1, vocab, (3, seq)).astype(np.int32)
  input_mask = np.zeros((3, seq), np.int32)
  segment_ids = np.zeros((3, seq), np.int32)
  for row, length in enumerate((seq, seq - 5, 7)):
    input_mask[row, :length] = 1
    segment_ids[row, length // 2:length] = 1
    input_ids[row, length:] = 0
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


def make_checkpoint(tmp_path, sizes, seed=0, **kwargs):
  shapes = numpy_electra.original_shapes(**sizes, **kwargs)
  weights = numpy_electra.random_weights(shapes, seed)
  prefix = numpy_electra.write_tf1_checkpoint(weights, str(tmp_path / "model.ckpt"))
  return prefix, weights


# Hugging Face directories.
def bert_dir(folder, model_class=None, **save):
  """A random BERT (model_class, BertModel by default) of tiny sizes with BERT's uncased
  vocabulary, as save_pretrained writes it."""
  import torch  # pylint: disable=import-outside-toplevel  # only the Hugging Face tests load it
  import transformers  # pylint: disable=import-outside-toplevel
  torch.manual_seed(0)
  model_class = model_class or transformers.BertModel
  model = model_class(transformers.BertConfig(
      vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
      intermediate_size=40, max_position_embeddings=128)).eval()
  model.save_pretrained(str(folder), **save)
  shutil.copyfile(shared_path("vocab", "bert_uncased_vocab.txt"), folder / "vocab.txt")
  return model


# Sentence tasks: GLUE files cut short and a user's CSV task.
WORDS = "the a film movie good bad great dull plot actor scene fun long short".split()


def sentence(rng, n=8):
  return " ".join(rng.choice(WORDS, n))


def head_of(src, dst, lines):
  """The first `lines` lines of a shared GLUE file (its header included)."""
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  with open(src, "rb") as f_in, open(dst, "wb") as f_out:
    for _, line in zip(range(lines), f_in):
      f_out.write(line)


def write_reviews_task(folder, num_train: int) -> str:
  """A user's CSV task ("reviews") of `num_train` training rows; its JSON's path."""
  rng = np.random.default_rng(1)
  rows = [("id", "review", "stars")] + [
      (i, sentence(rng), "good" if i % 2 else "bad") for i in range(num_train)]
  (folder / "train.csv").write_text("\n".join(",".join(map(str, r)) for r in rows))
  (folder / "dev.csv").write_text("\n".join(",".join(map(str, r)) for r in rows[:17]))
  spec = {"name": "reviews", "format": "csv", "text_a": "review", "label": "stars",
          "labels": ["bad", "good"], "metric": "accuracy", "train": "train.csv",
          "dev": "dev.csv"}
  (folder / "task.json").write_text(json.dumps(spec))
  return str(folder / "task.json")


# SQuAD documents.
def squad_subset(articles, paragraphs, questions):
  return {"version": "1.1", "data": [
      {"title": a["title"], "paragraphs": [
          {"context": p["context"], "qas": p["qas"][:questions]}
          for p in a["paragraphs"][:paragraphs]]} for a in articles]}


def as_v2(document):
  """SQuAD 2.0 format: each paragraph also gets its neighbour's first question, with
  no answer (a question this paragraph does not answer)."""
  document = json.loads(json.dumps(document))
  paragraphs = [p for a in document["data"] for p in a["paragraphs"]]
  for i, paragraph in enumerate(paragraphs):
    for qa_ in paragraph["qas"]:
      qa_["is_impossible"] = False
    other = paragraphs[(i + 1) % len(paragraphs)]["qas"][0]
    paragraph["qas"].append({"id": other["id"] + "_na", "question": other["question"],
                             "answers": [], "is_impossible": True})
  document["version"] = "v2.0"
  return document


def write_json(path, document):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(document, f)


# CoNLL-2000 chunking.
def first_sentences(src, dst, count):
  """The first `count` sentences of a CoNLL file."""
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  with open(src, encoding="utf-8") as f:
    blocks = f.read().split("\n\n")[:count]
  with open(dst, "w", encoding="utf-8") as f:
    f.write("\n\n".join(blocks) + "\n")


def chunk_data(tmp_path, train: int, test: int, layers: int = 2):
  """<tmp_path>/data with the first CoNLL-2000 sentences of each split and a tiny
  pre-trained model (of `layers` layers)."""
  data = tmp_path / "data"
  for split, count in (("train", train), ("test", test)):
    first_sentences(shared_path("conll2000", f"{split}.txt"),
                    data / "finetuning_data" / "chunk" / f"{split}.txt", count)
  write_tiny_pretrained_model(data, layers)
  return data


# Text that tests a tokenizer.
def code_point_lines():
  """Every assigned code point (and a sample of unassigned/private ones), alone and inside
  a word; letters also between capital sigmas (lower-casing depends on the context)."""
  points = [cp for cp in range(1, sys.maxunicode + 1)
            if cp != 10 and (unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")
                             or cp % 97 == 0) and not 0xD800 <= cp < 0xE000]
  lines = []
  for i in range(0, len(points), 300):
    chars = [chr(cp) for cp in points[i:i + 300]]
    lines.append(" ".join(chars))
    lines.append(" ".join(f"ab{ch}cd" for ch in chars))
    lines.append(" ".join(f"Σx{ch}ΣA." for ch in chars if unicodedata.category(ch)[0] in "LM"))
  return lines


ADVERSARIAL = [
    "Café naïve résumé Ångström façade ÉCOLE", "e\u0301 a\u0308 \u0301 \u0345x",
    "北京大学 東京 日本語テキスト 한국어 문장 中文English混合", "𠀀𪜀 \U0002b740\U0002b820x",
    "emoji 😀👍🏽 👨‍👩‍👧 flags 🇫🇷 ✨!", "nul\x00here a\x01b\x1fc\x7fd \x85e \u200bf\u200dg",
    "replacement \ufffd char a\ufffdb", "tab\there\u00a0nbsp\u2003em\u3000ideo\u2028ls\u2029ps",
    "\u1680ogham\u202fnarrow\u205fmath \x0bvt\x0cff", "...!!!??? --- ((([[{{}}]]))) $$$ ^^^ ```",
    "a" * 199, "a" * 200, "a" * 201, "b" * 200 + "!" + "c" * 201, "é" * 201, "ab" * 150,
    "İstanbul ΣΟΦΙΑ ΟΔΥΣΣΕΥΣ ß ẞ ǅ ﬁ ﬀ Ⅻ ①", "[CLS] text [SEP] more [MASK] [UNK] [PAD]",
    "[CLS][SEP][MASK]", "MiXeD CaSe WoRdS iPhone eBay McDonald's", "",
    "   ", "\r", "trailing\r", "x\u0000\u0000y", "١٢٣ ٤٥٦ أبجد", "שלום עולם",
    "Привет, мир! Ёлка", "ＦＵＬＬ　ｗｉｄｔｈ１２３", "x²³ ½ ¼ µ °C ™ © ®", "\ue000 \uf8ff",
    "don't won't it's rock'n'roll", "e.g. i.e. U.S.A. 3.14 1,000,000 10:30 50%",
    "\U0001d400\U0001d401 \U000e0001 \U000f0000", "\u00ad soft\u00adhyphen",
]


def tiny_vocab_text(size: int) -> str:
  """A vocab.txt of `size` tokens: BERT's special tokens first, then t5, t6, ..."""
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  return "".join(f"{t}\n" for t in special + [f"t{i}" for i in range(5, size)])
