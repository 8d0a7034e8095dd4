"""Starts that keep a pre-trained encoder fine-tunable, and the line that says when one
is not: init_scheme "mimetic_generator", init_adjustment, finetune/prior_watch.py."""

import io
import json

import numpy as np
import pytest
import tensorflow as tf

from finetune import prior_watch
from finetune.prior_watch import PriorWatch
from finetune.runner import label_entropy
from model.config import ModelConfig
from model.electra import ElectraPair
from model.encoder import ElectraEncoder
from model.initialization import adjust_pretrained, apply_init_scheme, sinusoids
from model.weights import huggingface
from model.weights.original import original_variables
from runs.pretrained import open_weights
from pretrain import config as pretrain_config
from tests.helpers import shared_path, write_tiny_pretrained_model, save_original
from util.hparams import HParamsError

SIZES = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, embedding_size=32, max_position_embeddings=16)
BATCH = {"input_ids": tf.constant([[2, 10, 11, 12, 13, 3, 0, 0]]),
         "input_mask": tf.constant([[1, 1, 1, 1, 1, 1, 0, 0]]),
         "segment_ids": tf.zeros([1, 8], tf.int32)}


def values(variables):
  return [v.numpy().copy() for v in variables]


def names_and_shapes(pair):
  return [(name, tuple(v.shape)) for name, v, _ in original_variables(pair)]


@pytest.mark.parametrize("untied_embeddings", [False, True])
def test_mimetic_generator_leaves_the_discriminator_as_the_original_starts_it(
    untied_embeddings):
  # Seeded: the word embeddings' random start decides how peaked similarity is.
  tf.random.set_seed(0)
  config = ModelConfig.from_dict(dict(SIZES, generator_hidden_size=0.5,
                                      untied_generator_embeddings=untied_embeddings))
  pair = ElectraPair(config).build_variables()
  discriminator = values(pair.discriminator.trainable_variables)
  generator = values(pair.generator.trainable_variables)
  layout = names_and_shapes(pair)
  apply_init_scheme(pair, "mimetic_generator", seed=0,
                    initializer_range=config.initializer_range)
  for before, after in zip(discriminator, values(pair.discriminator.trainable_variables)):
    np.testing.assert_array_equal(before, after)
  changed = [not np.array_equal(b, a) for b, a in
             zip(generator, values(pair.generator.trainable_variables))]
  assert any(changed)
  # The generator's attention follows similarity: far from uniform over 6 tokens.
  probs = pair.generator.inspect(BATCH)[1][0].numpy()[0, :, :6, :6]
  assert probs.max() > 2 / 6
  table = pair.generator.embeddings.position_table.numpy()
  if untied_embeddings:  # its own positions are sinusoids; the discriminator's are not
    np.testing.assert_allclose(table, sinusoids(*table.shape, 4 * config.initializer_range),
                               rtol=1e-6)
  else:
    assert pair.generator.embeddings is pair.discriminator.embeddings
  assert names_and_shapes(pair) == layout  # values only: the original's checkpoint


def test_mimetic_generator_is_refused_where_there_is_no_separate_generator(tmp_path):
  for overrides, flag in (({"electra_objective": False}, "objective electra"),
                          ({"untied_generator": False}, "untied_generator"),
                          ({"electric_objective": True}, "two-tower")):
    with pytest.raises(HParamsError, match="init_scheme mimetic_generator .*" + flag):
      pretrain_config.load_config("run", str(tmp_path), {
          "model_size": "tiny", "init_scheme": "mimetic_generator", **overrides})


def test_init_adjustment_attention_starts_uniform_and_positions_balanced():
  config = ModelConfig.from_dict(SIZES)
  encoder = ElectraEncoder(config)
  encoder(BATCH)
  names = [v.name for v in encoder.weights]
  shapes = [tuple(v.shape) for v in encoder.weights]
  table = encoder.embeddings.position_table
  table.assign(table * 10.0)  # positions dominate, as after the mimetic start
  adjust_pretrained(encoder, "none")
  assert np.mean(np.linalg.norm(table.numpy(), axis=-1)) > 2 * np.mean(
      np.linalg.norm(encoder.embedding_table.numpy(), axis=-1))
  adjust_pretrained(encoder, "attention_and_positions")
  for probs in encoder.inspect(BATCH)[1]:
    np.testing.assert_allclose(probs.numpy()[0, :, :, :6], 1 / 6, rtol=1e-5)
    np.testing.assert_array_equal(probs.numpy()[0, :, :, 6:], 0)
  np.testing.assert_allclose(np.mean(np.linalg.norm(table.numpy(), axis=-1)),
                             np.mean(np.linalg.norm(encoder.embedding_table.numpy(),
                                                    axis=-1)), rtol=1e-5)
  assert [v.name for v in encoder.weights] == names
  assert [tuple(v.shape) for v in encoder.weights] == shapes
  with pytest.raises(ValueError, match="init_adjustment 'bogus'"):
    adjust_pretrained(encoder, "bogus")


def test_adjusted_weights_keep_the_original_and_transformers_layouts(tmp_path):
  """A fine-tuned encoder started with init_adjustment saves under the original's names
  and shapes, and loads back through both formats bit for bit."""
  config = ModelConfig.from_dict(SIZES)
  pair = ElectraPair(config).build_variables()
  layout = names_and_shapes(pair)
  adjust_pretrained(pair.discriminator, "attention_and_positions")
  assert names_and_shapes(pair) == layout
  prefix = save_original(pair, str(tmp_path / "ckpt" / "model.ckpt"))
  hf_dir = tmp_path / "hf"
  hf_dir.mkdir()
  mapping = original_variables(pair, "discriminator")
  state = huggingface.state_dict(mapping)
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  save_file(state, str(hf_dir / "model.safetensors"))
  (hf_dir / "config.json").write_text(json.dumps(huggingface.config_json(
      config, "ElectraForPreTraining")))
  for path in (prefix, str(hf_dir)):
    fresh = ElectraEncoder(config)
    fresh(BATCH)
    open_weights(path).load_encoder(fresh)
    for a, b in zip(values(pair.discriminator.weights), values(fresh.weights)):
      np.testing.assert_array_equal(a, b)


def test_label_entropy_is_the_prior_cross_entropy():
  labels = np.array([0, 0, 0, 1])
  assert label_entropy(labels) == pytest.approx(-(0.75 * np.log(0.75) + 0.25 * np.log(0.25)))


def watch_lines(losses, prior=0.69):
  out = io.StringIO()
  watch = PriorWatch(prior, len(losses), "try X", out=out)
  for step, loss in enumerate(losses, 1):
    watch(step, {"mean_loss": loss})
  return out.getvalue().splitlines()


def test_prior_watch_speaks_once_at_the_prior_and_never_while_learning():
  rng = np.random.default_rng(0)
  stuck = 0.70 + 0.03 * rng.standard_normal(300)
  lines = watch_lines(stuck)
  assert len(lines) == 1 and lines[0].startswith(
      "note: after 150 of 300 steps the training loss is still at the label prior's "
      "(mean 0.70")
  assert lines[0].endswith("the encoder has not started on the task; try X")
  learning = np.linspace(0.70, 0.40, 300) + 0.03 * rng.standard_normal(300)
  assert watch_lines(learning) == []
  # Stuck for 150 steps, then learning: said once, at step 150.
  assert watch_lines(np.concatenate([stuck[:150], learning[150:] - 0.1])) == [lines[0]]
  # Short runs are checked at their end only: random weights are near the prior at
  # half of a 125-step run and still learn.
  late = np.concatenate([np.full(62, 0.70), np.linspace(0.69, 0.60, 63)])
  assert watch_lines(late) == []
  assert watch_lines(np.full(125, 0.70))[0].startswith("note: after 125 of 125 steps")


def write_keyword_task(folder, num_train: int) -> str:
  """A task random weights learn in a few dozen steps: the label is which of two word
  sets the sentence's one keyword comes from."""
  rng = np.random.default_rng(0)
  filler = ["the", "a", "film", "plot", "was", "and", "actors", "story", "it", "very"]
  keywords = {"good": ["excellent", "wonderful", "great"], "bad": ["terrible", "awful",
                                                                   "boring"]}
  rows = ["id,review,stars"]
  for i in range(num_train):
    label = "good" if i % 2 else "bad"
    words = list(rng.choice(filler, 6)) + [rng.choice(keywords[label])]
    rows.append(f"{i},{' '.join(rng.permutation(words))},{label}")
  (folder / "train.csv").write_text("\n".join(rows))
  (folder / "dev.csv").write_text("\n".join(rows[:65]))
  spec = {"name": "keywords", "format": "csv", "text_a": "review", "label": "stars",
          "labels": ["bad", "good"], "metric": "accuracy", "train": "train.csv",
          "dev": "dev.csv"}
  (folder / "task.json").write_text(json.dumps(spec))
  return str(folder / "task.json")


@pytest.mark.slow  # the second encoder must learn the task
def test_prior_line_fires_from_a_constant_encoder_and_not_from_one_that_learns(
    tmp_path, capsys):
  import run_finetuning  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  task = write_keyword_task(tmp_path, 256)
  learning = str(data / "models" / "tiny" / "export")
  # A discriminator whose output is constant: every weight zero, so every token's
  # state is the last LayerNorm's bias whatever the sentence.
  pair = ElectraPair(open_weights(learning).model_config()).build_variables()
  for variable in pair.discriminator.weights:
    variable.assign(tf.zeros_like(variable))
  constant = save_original(pair, str(tmp_path / "constant" / "model.ckpt"))

  def run(init, name):
    code = run_finetuning.main(
        ["--task", task, "--model-name", "tiny", "--data-dir", str(data),
         "--init-checkpoint", init, "--hparams", json.dumps(
             {"train_batch_size": 16, "max_seq_length": 16, "num_train_epochs": 4,
              "learning_rate": 1e-3, "layerwise_lr_decay": 1.0, "export_serving": False,
              "write_curves": False, "model_dir": str(tmp_path / name)})])
    out = capsys.readouterr()
    assert code == 0, out.err
    return [line for line in out.err.splitlines() if "label prior" in line]

  lines = run(constant, "constant")
  prior = label_entropy(np.arange(256) % 2)
  assert len(lines) == 1 and lines[0].startswith(
      f"note: after 64 of 64 steps the training loss is still at the label prior's "
      f"(mean ") and f"scores {prior:.4g})" in lines[0]
  assert run(learning, "learning") == []


def test_init_adjustment_without_pretrained_weights_is_one_line(tmp_path, capsys):
  import run_finetuning  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  data.mkdir()
  (data / "vocab.txt").write_bytes(
      open(shared_path("vocab", "bert_uncased_vocab.txt"), "rb").read())
  task = write_keyword_task(tmp_path, 32)
  code = run_finetuning.main(["--task", task, "--data-dir", str(data), "--hparams",
                              json.dumps({"debug": True, "init_adjustment": "positions"})])
  err = capsys.readouterr().err
  assert code == 2 and err == (
      "error: init_adjustment positions changes pre-trained weights, and this run starts "
      "from random weights (no init_checkpoint and no pre-trained model found); set "
      "\"init_adjustment\": \"none\" or give --init-checkpoint\n")
  assert not (data / "models").exists() or not any((data / "models").rglob("*.index"))


def test_prior_line_words_a_regression_by_its_mean_not_by_classes():
  out = io.StringIO()
  watch = PriorWatch(0.5, 125, "try X", out=out, baseline=prior_watch.REGRESSION)
  for step in range(1, 126):
    watch(step, {"mean_loss": 0.5})
  line, = out.getvalue().splitlines()
  assert line.startswith("note: after 125 of 125 steps the training loss is still at the "
                         "label mean's (mean 0.5 over the last 31 steps; predicting the "
                         "training labels' mean scores 0.5): ")
  assert "frequenc" not in line and "class" not in line
  from finetune import tasks as task_registry  # pylint: disable=g-import-not-at-top
  words = lambda name: task_registry.runner_for(task_registry.get_task(name), None,
                                                None).prior_words()
  assert words("glue/stsb") == prior_watch.REGRESSION
  assert words("glue/sst2") == words("chunk") == prior_watch.CLASSES
