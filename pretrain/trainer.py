"""Pre-training: build the objective and optimizer, train, evaluate, export.

The loop is training/'s; this adds the objective, the eval metrics
(<model_dir>/results/unsup_results.{txt,json}) and the export in the original release's
format (<model_dir>/export: model.ckpt-<step>, config.json in BertConfig form, vocab.txt,
tokenizer_config.json), which fine-tuning loads.
"""

import json
import os
from typing import Dict, Optional, Sequence

import tensorflow as tf

from data_prep import normalization
from model.encoder import use_recompute
from model.initialization import (apply_init_scheme, prior_discriminator_head,
                                  unigram_generator_head)
from model.weights.original import original_variables, save_folder
from pretrain import input_pipeline
from pretrain.config import PretrainingConfig
from pretrain.config_fitting import checked_and_sized
from pretrain.eval_metrics import FixedCorruptionMetrics, PretrainingMetrics
from pretrain.input_pipeline import InputError
from pretrain.model import PretrainingModel
from pretrain.objectives import objective_for
from pretrain.run_record import (RUN_CONFIG, check_model_dir, run_normalization,
                                 run_signature, write_run_config)
from runs import lock, model_files, record
from runs.checkpoints import kept_checkpoints, restore_weights
from runs.model_files import (CHECKPOINT_NAME, CURVES_NAME, EVAL_BOARD, EVAL_CURVE_NAME,
                              EXPORT_DIR, LOG_NAME, RESULTS_TXT)
from training import runtime, stopping
from training.curves import plot_curves, read_eval_curve
from training.loop import LoopSettings, TrainLoop
from training.optimization import create_optimizer, logged_learning_rate, own_warmup
from util import files

EVAL_SEED_OFFSET = 1 << 30  # eval draws masks from seeds no training step uses
FIXED_CORRUPTION_SEED = 2020  # the fixed corruption's seeds: the batch index and this


class Pretrainer:
  """One pre-training run: the strategy, model, optimizer and loop for a config."""

  def __init__(self, config: PretrainingConfig):
    self.strategy = runtime.start_run(config, config.seed)  # before any TensorFlow op
    self.files = input_pipeline.input_files(config)
    config, self.start = checked_and_sized(config)
    self.config = config
    self.objective = objective_for(config)  # its step runs over self.model's networks
    self.static_mask_length = input_pipeline.check_files(
        self.files, config.max_seq_length, config.mask_prob)
    input_pipeline.check_token_ids(self.files, config.vocab_size, config.vocab_file)
    check_model_dir(config, self.start)
    runtime.check_same_settings(self.strategy, run_signature(config, self.start))
    if config.do_train:  # before any model call: one too big would never return
      config.check_batch_split(config.train_batch_size,
                               self.strategy.num_replicas_in_sync)
      pieces = self.strategy.num_replicas_in_sync * config.gradient_accumulation_steps
      runtime.check_step_memory(
          self.strategy, config.mixed_precision, self.objective.step_memory(
              max(1, config.train_batch_size // pieces)))
    with self.strategy.scope():
      self.model = PretrainingModel(config).build_variables(config.max_seq_length)
      use_recompute(self.model, config.recompute)
      self.optimizer = create_optimizer(
          config.learning_rate, config.num_train_steps, config.num_warmup_steps,
          weight_decay_rate=config.weight_decay_rate, lr_decay_power=config.lr_decay_power,
          lr_multiplier=self._lr_multiplier(), mixed_precision=config.mixed_precision)
    settings = LoopSettings(
        model_dir=config.model_dir, num_train_steps=config.num_train_steps,
        save_checkpoints_steps=config.save_checkpoints_steps,
        keep_checkpoint_max=config.keep_checkpoint_max,
        log_every_steps=config.log_every_steps,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        use_xla=config.use_xla,
        tokens_per_step=config.train_batch_size * config.max_seq_length,
        flops_per_step=self.objective.flops().train_flops_per_step,
        peak_flops=runtime.peak_flops(self.strategy, config.mixed_precision),
        learning_rate=logged_learning_rate(self.optimizer), record_name=RUN_CONFIG,
        seed=config.seed)
    self.loop = TrainLoop(self.strategy, self.model, self.optimizer, self.objective,
                          settings)

  def _lr_multiplier(self):
    """disc_lr_multiplier (with disc_warmup_steps, a schedule of the step) for the
    discriminator's variables, else None (one rate)."""
    config = self.config
    multiplier = config.disc_lr_multiplier
    scaled = {v.ref() for v in self.objective.discriminator_variables(self.model)}
    if (multiplier == 1.0 and not config.disc_warmup_steps) or not scaled:
      return None
    if config.disc_warmup_steps:
      multiplier = own_warmup(multiplier, config.disc_warmup_steps, config.num_warmup_steps)
    return lambda variable: multiplier if variable.ref() in scaled else 1.0

  def dataset_fn(self, training: bool = True):
    """The input pipeline of training or eval, as TrainLoop.run and evaluate take it."""
    batch_size = self.config.train_batch_size if training else self.config.eval_batch_size

    def dataset_fn(context: tf.distribute.InputContext):
      per_replica = context.get_per_replica_batch_size(batch_size)
      local_replicas = context.num_replicas_in_sync // context.num_input_pipelines
      return input_pipeline.make_dataset(
          self.files, per_replica * local_replicas, self.config.max_seq_length,
          training=training, seed=self.config.seed,
          static_mask_length=self.static_mask_length, input_context=context)
    return dataset_fn

  def _initialize(self):
    """A fresh run's first values: the start's weights, else the init_scheme's values
    and the heads' optional starts (disc_prior_init, generator_unigram_init)."""
    if self.start:
      path = self.start.weights.load_into(self.model.electra)
      print(f"initialized the generator and discriminator from {path}", flush=True)
      if self.config.init_scheme != PretrainingConfig.init_scheme:
        print(f"note: init_scheme {self.config.init_scheme} does not apply: every weight "
              f"comes from init_checkpoint (pretrain_config.json records the start)",
              flush=True)
    else:
      apply_init_scheme(self.model, self.config.init_scheme, self.config.seed,
                        self.model.model_config.initializer_range,
                        cls_id=self.model.special_tokens.cls_id)
      if self.config.generator_unigram_init and not self.config.uniform_generator:
        unigram_generator_head(
            self.objective.generator_head(self.model),
            input_pipeline.token_log_frequencies(
                self.files, self.config.vocab_size, self.model.special_tokens,
                self.static_mask_length))
      if self.config.disc_prior_init and self.objective.has_discriminator:
        prior_discriminator_head(self.model.electra.discriminator_head,
                                 self.objective.replaced_prior)

  def _reading_data(self, action):
    """`action()`, a corrupt record's error turned into one naming its file."""
    try:
      return action()
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      located = input_pipeline.locate_corrupt_file(self.files)
      if located:
        raise InputError(located) from None
      raise e

  def train(self) -> Dict[str, float]:
    # A start that cannot be read (a cut init_checkpoint) fails in _initialize, after the
    # record is written: it goes again, or the corrected run would be refused.
    with record.kept_once_trained(self.config.model_dir, RUN_CONFIG):
      if self.loop.chief:
        latest = self.loop.checkpoints.latest()
        step = int(latest.rsplit("-", 1)[1]) if latest else 0
        write_run_config(self.config, step, self.start)
        if step > self.config.num_train_steps:
          print(f"note: the run in {self.config.model_dir} is already at step {step}, "
                f"past num_train_steps {self.config.num_train_steps}: nothing to train "
                "(raise num_train_steps to continue it)", flush=True)
      return self._reading_data(lambda: self.loop.run(
          self.dataset_fn(training=True), init_fn=self._initialize))

  def evaluate(self, checkpoint: Optional[str] = None, write: bool = True
               ) -> Dict[str, float]:
    """Metrics over num_eval_steps batches of the latest (or the given) checkpoint,
    written to <model_dir>/results/ unless `write` is false."""
    restored = self.loop.checkpoints.restore(checkpoint)
    if not restored:
      if not self.config.init_checkpoint:
        raise InputError(f"{self.config.model_dir}: no checkpoint to evaluate; train "
                         "first (\"do_train\": true) or set init_checkpoint")
      self._initialize()
    with self.strategy.scope():
      metrics = PretrainingMetrics()

    def replica_fn(batch, index):
      replica_id = tf.distribute.get_replica_context().replica_id_in_sync_group
      seed = runtime.stateless_seed(self.config.seed, EVAL_SEED_OFFSET + index,
                                     replica_id)
      _, outputs = self.objective.compute(self.model, batch, seed, training=False)
      metrics.update(outputs)
      # The same corruption for every checkpoint and run: no config seed in it.
      return self.objective.eval_outputs(
          self.model, batch, runtime.stateless_seed(FIXED_CORRUPTION_SEED, index,
                                                     replica_id))

    fixed = FixedCorruptionMetrics()
    for outputs in self._reading_data(lambda: self.loop.evaluate(
        self.dataset_fn(training=False), replica_fn, self.config.num_eval_steps)):
      fixed.update(outputs)
    results = {**metrics.result(), **fixed.result(),
               "global_step": int(self.loop.train_step.global_step.numpy())}
    if self.loop.chief:
      record_eval(self.config, results)
      if write:  # "name = value" lines, as the original's, and a JSON beside them
        model_files.write(self.config.model_dir, RESULTS_TXT, "".join(
            f"{name} = {results[name]}\n" for name in sorted(results)))
        model_files.write(self.config.model_dir,
                          os.path.splitext(RESULTS_TXT)[0] + ".json", results)
    return results

  def export(self, step: Optional[int] = None) -> Optional[str]:
    """The pair in the original format, with config.json and vocab.txt: the trained
    model in export/, or the kept training checkpoint ckpt-<step> in export/step_<step>
    (to fine-tune from part of a run)."""
    if not self.loop.chief:
      return None
    model_dir, kept_step = self.config.model_dir, step
    if step is None:
      step = int(self.loop.train_step.global_step.numpy())
    else:
      path = os.path.join(model_dir, f"{CHECKPOINT_NAME}-{step}")
      if not tf.io.gfile.exists(path + ".index"):
        kept = kept_checkpoints(model_dir, lambda _: None)
        raise InputError(f"{path}: no such training checkpoint (kept: "
                         f"{', '.join(os.path.basename(p) for p in kept) or 'none'}); "
                         "save_checkpoints_steps and keep_checkpoint_max decide")
      restore_weights(self.model, path)
    with model_files.export_folder(model_dir, kept_step) as folder:
      save_folder(original_variables(self.model.electra, self.objective.exported_part),
                  folder, f"model.ckpt-{step}", self.model.model_config,
                  self.config.vocab_file, step)
      normalization.write(folder, run_normalization(self.config))
    return os.path.join(model_dir, EXPORT_DIR, "" if kept_step is None
                        else f"step_{step}", f"model.ckpt-{step}")


def explain_results(results: Dict[str, float]) -> str:
  """What the discriminator's eval figures mean, against its base rate."""
  rate = results["disc_replaced_rate"]
  return (f"what this means: the generator replaced {rate:.1%} of the tokens; a "
          f"discriminator that learned nothing calls every token original (disc_accuracy "
          f"{1 - rate:.3f}, precision and recall 0, disc_auc about 0.5); disc_auc "
          f"{results['disc_auc']:.2f} is how often it scores a replaced token above an "
          f"original one, and masked_lm_accuracy {results['masked_lm_accuracy']:.3f} is "
          "how often the generator's first guess is the hidden token")


def record_eval(config: PretrainingConfig, results: Dict[str, float]):
  """One evaluated checkpoint into <model_dir>/eval_curve.jsonl (a step evaluated again
  replaces its row), TensorBoard (<model_dir>/eval) and the curves' PNG."""
  rows = read_eval_curve(os.path.join(config.model_dir, EVAL_CURVE_NAME))
  rows[results["global_step"]] = {k: v for k, v in results.items() if k != "global_step"}
  model_files.write(config.model_dir, EVAL_CURVE_NAME, "".join(
      json.dumps({"global_step": step, **rows[step]}) + "\n" for step in sorted(rows)))
  writer = model_files.summary_writer(config.model_dir, EVAL_BOARD)
  with writer.as_default(step=results["global_step"]):
    for name, value in results.items():
      if name != "global_step":
        tf.summary.scalar(name, value)
  writer.close()
  if os.path.exists(os.path.join(config.model_dir, LOG_NAME)):
    plot_curves(config.model_dir)  # the eval markers join the training curves


def run(config: PretrainingConfig, export_steps: Sequence[int] = ()) -> Dict[str, float]:
  """do_train, then export, then do_eval, as the config asks, then the export of kept
  training checkpoints at `export_steps`; returns eval results. A signal stops it saved,
  whenever it comes (training/stopping.py)."""
  if not (config.do_train or config.do_eval or export_steps):
    raise InputError("nothing to do: set \"do_train\" and/or \"do_eval\" to true")
  record.check_run_folder(  # before its lock is made
      config.model_dir, config.data_dir,
      deletes="overwrite_model_dir" if config.do_train and config.overwrite_model_dir
      else "")
  # The exports are written at the end: an input in their way is refused now.
  init = config.init_checkpoint
  files.check_output(
      "the run's export", os.path.join(config.model_dir, EXPORT_DIR),
      {"init_checkpoint": init if os.path.isdir(init) else os.path.dirname(init),
       "vocab_file": config.vocab_file},
      writes=[os.path.join(folder, name) for folder in
              ["", *(f"step_{step}" for step in export_steps)]
              for name in ("config.json", "vocab.txt", normalization.FILE, "checkpoint")],
      remedy="copy it out of the export folder first, or use another model_dir")
  with lock.run_dir_lock(config.distribution_strategy, config.model_dir):
    with stopping.held():
      return _run(config, export_steps)


def _run(config: PretrainingConfig, export_steps: Sequence[int]) -> Dict[str, float]:
  trainer = Pretrainer(config)
  results = {}
  if config.do_train:
    trainer.train()
    prefix = trainer.export()
    if prefix:
      print(f"exported the generator and discriminator to {prefix} (original format; "
            f"fine-tuning loads {os.path.dirname(prefix)})", flush=True)
      print(f"training curves: {os.path.join(config.model_dir, CURVES_NAME)}; "
            f"TensorBoard: tensorboard --logdir {config.model_dir}", flush=True)
  if config.do_eval:
    results = trainer.evaluate()
    if trainer.loop.chief:
      print(f"eval results ({os.path.join(config.model_dir, RESULTS_TXT)}):", flush=True)
      for name in sorted(results):
        print(f"  {name} = {results[name]:.4f}" if isinstance(results[name], float)
              else f"  {name} = {results[name]}", flush=True)
      if "disc_replaced_rate" in results:
        print(explain_results(results), flush=True)
  for step in export_steps:
    prefix = trainer.export(step)
    if prefix:
      print(f"exported training checkpoint {step} to {prefix}", flush=True)
  return results
