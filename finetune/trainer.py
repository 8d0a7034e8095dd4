"""Fine-tuning: the original's recipe on the shared training loop, for any task runner.

Several tasks train together as the original's multi-task runs do: their training
features pooled and shuffled, each with its task id, one head per task on one encoder.
The loss is the SUM over the batch as in the original (its clipping at global norm 1.0
acts on that scale). Each epoch's dev scores are kept beside the run's record
(EPOCH_SCORES), so a resumed or re-run trial keeps those of the epochs it passed.
Trials repeat the run with other seeds; the median is reported.
"""

import dataclasses
import os
import statistics
import sys
import weakref
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from data_prep import normalization
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import padding, prior_watch, serving, tasks as task_registry
from finetune.config import FinetuningConfig
from finetune.modeling import FinetuningLoss, FinetuningModel
from model import flops as model_flops
from model.config import check_vocab_size
from model.dropout import use_padded_length
from model.encoder import use_recompute
from model.memory import encoder_step_memory
from model.weights import CheckpointError, read_json
from runs import lock, model_files, record
from runs.checkpoints import newest_readable, restore_weights
from runs.model_files import EPOCH_SCORES, RUN_VOCAB, SAVED_MODEL, TRIAL_FILES
from runs.model_files import FINETUNING_RECORD as RUN_CONFIG
from runs.start import PretrainedStart, open_start, record_name
from training import curves, runtime, stopping
from training.loop import LoopSettings, TrainLoop
from training.optimization import create_optimizer, logged_learning_rate
# What PriorWatch's line recommends.
PRIOR_REMEDY = ("an encoder pre-trained briefly from the mimetic start leaves it sooner with "
                "\"init_adjustment\": \"attention_and_positions\" (docs/cpu_recipe.md, "
                "\"A pre-trained encoder that fine-tunes worse than random weights\")")


class NotFinetunedError(ValueError):
  """A model directory without the fine-tuned checkpoint asked for."""


@dataclasses.dataclass
class SplitData:
  examples: list
  features: Dict[str, np.ndarray]


class Finetuner:
  """Reads, featurizes, trains and scores the config's tasks."""

  def __init__(self, config: FinetuningConfig, log=print, finished: bool = False):
    """`finished`: the run's trained models are only read (as by --predict, and when
    do_train is false): they tokenize with the vocabulary their training read."""
    self.config, self.log = config, log
    self.finished = finished or not config.do_train
    # One strategy for every trial, made before TensorFlow runs anything (the tokenizer
    # does): a multi-worker strategy must configure the runtime first.
    self.strategy = runtime.start_run(config, config.seed)
    self.tasks = task_registry.get_tasks(config.task_names)
    # The weights to start from (the sizes come from them): init_checkpoint (a bad path
    # fails, in debug runs too), else (unless debug) model_name's in the data dir.
    self.start = (open_start(config.init_checkpoint) if config.init_checkpoint else
                  None if config.debug else pretrained_in(config.pretrained_model_dir))
    if not self.start and not config.debug and not os.path.isfile(config.vocab_file):
      raise ValueError(f"no pre-trained model: {config.pretrained_model_dir} holds no "
                       f"checkpoint and no vocab.txt; {how_to_get_a_model(config)}")
    if config.init_adjustment != "none" and not self.start and config.do_train:
      raise ValueError(f"init_adjustment {config.init_adjustment} changes pre-trained "
                       "weights, and this run starts from random weights (no "
                       "init_checkpoint and no pre-trained model found); set "
                       "\"init_adjustment\": \"none\" or give --init-checkpoint")
    self.vocab_path = self.vocab_file()
    vocab = load_vocab(self.vocab_path)
    if self.start:
      weights = self.start.weights
      self.model_config = weights.model_config("discriminator")
      self.model_config.check_sequence_length(config.max_seq_length, weights.location)
    else:
      self.model_config = config.model_config()
    if (not self.start and not config.debug
        and len(vocab) != self.model_config.vocab_size):
      # The data dir's vocabulary is another model's (the quick start's electra_tiny):
      # the missing model is the cause, not the vocabulary.
      raise ValueError(f"no pre-trained model: {config.pretrained_model_dir} holds no "
                       f"checkpoint; {how_to_get_a_model(config)}")
    source = self.start.weights.location if self.start else "the configured model"
    check_vocab_size(self.vocab_path, len(vocab), self.model_config.vocab_size, source,
                     "use the vocab.txt the model was pre-trained with")
    # The text's normalisation, as its vocabulary and start record it: the config
    # holds it from here on, so the run's record does.
    self.normalization = normalization.of_model(
        self.vocab_path, self.start.weights.folder if self.start else "",
        config.do_lower_case, config.strip_accents, note=self.log)
    self.config = config = dataclasses.replace(config, **self.normalization.fields())
    runtime.check_same_settings(self.strategy, self.run_signature())
    self.tokenizer = Tokenizer(vocab, *self.normalization)
    self.runners = [task_registry.runner_for(task, config, self.tokenizer)
                    for task in self.tasks]
    names = {task.name for task in self.tasks}
    for runner in self.runners:
      if runner.head_name not in names:
        raise ValueError(f"task {runner.task.name} is predicted by the {runner.head_name}"
                         f" head: run them together, e.g. --task {runner.head_name},"
                         f"{runner.task.name}")
    self.data = {}  # (task name, split) -> SplitData
    # A model's compiled call (predict), gone with the model: a trial's dies with it.
    self._predict_fns = weakref.WeakKeyDictionary()

  # ---- data -------------------------------------------------------------------

  def split(self, index: int, split: str) -> SplitData:
    """Examples and features of task `index`'s split, read and featurized once."""
    task, key = self.tasks[index], (index, split)
    if key not in self.data:
      # Missing GLUE/SQuAD files are fetched by TensorFlow Datasets (once).
      examples = task_registry.read_examples(task, self.config.data_dir, split,
                                             tfds_data_dir=self.config.tfds_data_dir or None,
                                             fetch_missing=True)
      if self.config.debug:
        examples = examples[:100]
      examples = self.runners[index].prepare_examples(examples, split)
      features = self.runners[index].features(examples, split)
      features["task_id"] = np.full(len(features["input_ids"]), index, np.int32)
      self.data[key] = SplitData(examples, features)
      self.log(f"{task.name} {split}: {len(examples)} examples, "
               f"{len(features['input_ids'])} features")
    return self.data[key]

  def read_splits(self):
    """Reads every split this run will use (training, scored, test outputs), so that a
    bad dev or test file fails before training, not after its first epoch."""
    config = self.config
    for index, task in enumerate(self.tasks):
      splits = ([task.train_split] if config.do_train and task.train_split else []) + (
          list(task.eval_splits) if config.do_eval and task.metrics else []) + (
              list(task.test_splits) if config.write_test_outputs else [])
      for split in splits:
        self.split(index, split)

  def train_features(self) -> Dict[str, np.ndarray]:
    """Every task's training features pooled; a key one task lacks is zero for it."""
    parts = [self.split(i, t.train_split).features for i, t in enumerate(self.tasks)
             if t.train_split]
    if not parts:
      raise ValueError("none of the tasks has a training split")
    keys = {k: p[k] for p in parts for k in p}
    return {k: np.concatenate([p[k] if k in p else np.zeros(
        (len(p["input_ids"]),) + v.shape[1:], v.dtype) for p in parts])
            for k, v in keys.items()}

  # ---- model ------------------------------------------------------------------

  def build_model(self, features: Optional[Dict[str, np.ndarray]] = None
                  ) -> FinetuningModel:
    """The model, its variables built on one row of `features` (heads may need their
    features); by default the training features, else the first task's first split."""
    heads = {}
    for runner in self.runners:
      if runner.head_name not in heads:
        heads[runner.head_name] = runner.make_head(self.model_config)
    if features is None and self.config.do_train:
      features = self.train_features()
    elif features is None:
      task = self.tasks[0]
      split = next(iter(task.eval_splits + task.test_splits))
      features = self.split(0, split).features
    example = {k: v[:1] for k, v in features.items()}
    return FinetuningModel(self.model_config, heads).build_variables(example)

  def vocab_file(self) -> str:
    """A finished run's own copy of the vocabulary it read (its start may have moved
    since); else the configured vocab.txt or, when it is missing, the checkpoint's
    (Weights.vocab: a released model's zip and a Hugging Face directory hold one)."""
    if self.finished:
      for trial in range(1, self.config.num_trials + 1):
        kept = os.path.join(self.trial_dir(trial), RUN_VOCAB)
        if os.path.isfile(kept):
          return kept
    path = self.config.vocab_file
    if not os.path.isfile(path) and self.start:
      try:
        return self.start.weights.vocab()
      except CheckpointError:
        pass
    if not os.path.isfile(path):
      raise ValueError(f"{path}: no such vocabulary; put the vocab.txt the model was "
                       "pre-trained with there, or set \"vocab_file\" in --hparams")
    return path

  def run_signature(self) -> Dict[str, object]:
    """What fixes a trial's trained weights (record.check_resume compares it): the
    start, the model's sizes and every field not declared resumable."""
    return {"init_checkpoint": record_name(self.start),
            "model": self.model_config.to_dict(),
            **self.config.signed_fields()}

  # ---- evaluation -------------------------------------------------------------

  def predict(self, model, features, batch_size: Optional[int] = None
              ) -> Dict[str, object]:
    """Every head's outputs on the features, in batches of `batch_size` (default:
    eval_batch_size) cut to their longest example, token-axis outputs padded back."""
    if model not in self._predict_fns:
      # No autograph (nothing here branches on tensors): converting the Keras layers'
      # code slowed every run's first evaluation (bench/RESULTS.md,
      # "Figures moved from code comments"). A proxy: the function keeps no model alive.
      proxy = weakref.proxy(model)
      self._predict_fns[model] = tf.function(
          lambda batch: proxy(batch, training=False), reduce_retracing=True,
          autograph=False)
    call = self._predict_fns[model]
    size, n = batch_size or self.config.eval_batch_size, len(features["input_ids"])
    keys, max_length = self.token_features(), self.config.max_seq_length
    counts = padding.token_counts(features)
    runners = {r.head_name: r for r in self.runners}
    shortest = max(r.shortest_batch for r in self.runners)
    chunks = []
    for start in range(0, n, size):
      batch = {k: v[start:start + size] for k, v in features.items()}
      if keys:
        length = int(padding.batch_lengths(counts[start:start + size],
                                           self.config.batch_length_multiple, max_length))
        batch = padding.cut(batch, min(max_length, max(length, shortest)), keys)
      outputs = tf.nest.map_structure(lambda t: t.numpy(), call(batch))
      if keys:
        outputs = {head: runners[head].padded_outputs(out, max_length)
                   for head, out in outputs.items()}
      chunks.append(outputs)
    return tf.nest.map_structure(lambda *parts: np.concatenate(parts), *chunks)

  def token_features(self) -> Tuple[str, ...]:
    """The features batches are cut at, or () when they keep max_seq_length:
    batch_length_multiple 0, or a TPU (static shapes)."""
    if (not self.config.batch_length_multiple
            or isinstance(self.strategy, tf.distribute.TPUStrategy)):
      return ()
    return tuple(sorted({k for r in self.runners for k in r.token_features}))

  def outputs(self, model, index: int, split: str, batch_size: Optional[int] = None):
    data = self.split(index, split)
    return data, self.predict(model, data.features,
                              batch_size)[self.runners[index].head_name]

  def evaluate(self, model) -> Dict[str, Dict[str, float]]:
    """{"task split": {metric: percent}} over every task's dev splits."""
    results = {}
    for index, task in enumerate(self.tasks):
      for split in task.eval_splits:
        if task.metrics:
          data, outputs = self.outputs(model, index, split)
          results[f"{task.name} {split}"] = self.runners[index].score(
              data.examples, data.features, outputs, split)
    return results

  def write_test_predictions(self, model, trial: int):
    out_dir = os.path.join(self.config.results_dir, "test_predictions",
                           f"{self.config.tasks_label}_trial{trial}")
    for index, task in enumerate(self.tasks):
      for split in task.test_splits:
        data, outputs = self.outputs(model, index, split, self.config.predict_batch_size)
        for path in self.runners[index].write_predictions(
            data.examples, data.features, outputs, split, out_dir):
          self.log(f"wrote {path}")

  # ---- training ---------------------------------------------------------------

  def trial_dir(self, trial: int) -> str:
    return f"{self.config.model_dir}_{trial}"

  def finetuned_checkpoint(self, trial: int) -> str:
    """The latest checkpoint of a trial's fine-tuned model, or a NotFinetunedError."""
    model_dir = self.trial_dir(trial)
    latest = newest_readable(model_dir, self.log)  # a truncated newest one skipped
    if not latest:
      raise NotFinetunedError(f"{model_dir} holds no fine-tuned model of "
                              f"{self.config.tasks_label}")
    return latest

  def restore(self, model, trial: int) -> str:
    latest = self.finetuned_checkpoint(trial)
    restore_weights(model, latest)
    self.log(f"loaded {latest}")
    return latest

  def run_trial(self, trial: int) -> Dict[str, object]:
    config = self.config
    seed = config.trial_seed(trial)
    model_dir = self.trial_dir(trial)
    # As the original: with keep_all_models false only the last trial's model is kept
    # (--predict and serving use trial 1's, so they need keep_all_models or num_trials 1).
    kept = config.keep_all_models or trial == config.num_trials
    if config.do_train:
      record.check_run_folder(model_dir, config.data_dir, deletes=(
          "overwrite_model_dir" if config.overwrite_model_dir else
          "" if kept else "keep_all_models false"))
      record.check_resume(model_dir, RUN_CONFIG, self.run_signature(),
                          config.overwrite_model_dir, written=TRIAL_FILES)
    runtime.use_checkpointed_dropout(seed)
    history, scores = [], None
    if config.do_train:
      train = self.train_features()
      n, batch = len(train["input_ids"]), config.train_batch_size
      num_steps = num_train_steps(n, config)
      if num_steps < 1:
        raise ValueError(
            f"{n} training features // train_batch_size {batch} = {n // batch} full "
            f"batches x num_train_epochs {config.num_train_epochs:g} = "
            f"{n // batch * config.num_train_epochs:g} training steps, fewer than one; "
            "raise num_train_epochs or lower train_batch_size")
      lengths = self.train_lengths(train, self.train_order(train, num_steps, seed))
      loop = self.train_loop(train, num_steps, model_dir, label=f"trial {trial} step",
                             on_step=self.prior_watch(num_steps), lengths=lengths)
      model, start = loop.train_step.model, self.start
      if not start and not config.debug:  # debug runs are random by design
        print("warning: no pre-trained checkpoint found; fine-tuning from random "
              f"weights; {how_to_get_a_model(config)}", file=sys.stderr)
      # The record names the vocabulary read (configured or the start's own) and its
      # copy beside the checkpoints, which the exports and --predict read.
      vocab_fields = record.keep_vocab(model_dir, self.vocab_path)
      model_files.write(model_dir, normalization.FILE, self.normalization.fields())
      # A checkpoint past an epoch no longer holds its weights: its scores are kept.
      scores_path = os.path.join(model_dir, EPOCH_SCORES)
      scored = read_json(scores_path) if os.path.isfile(scores_path) else []
      with record.kept_once_trained(model_dir, RUN_CONFIG):
        record.write_record(model_dir, RUN_CONFIG, self.run_signature(), **vocab_fields,
                            finetuning={**dataclasses.asdict(config),
                                        "vocab_file": os.path.abspath(self.vocab_path)},
                            model=self.model_config.to_dict())
        epochs = max(1, int(np.ceil(config.num_train_epochs)))
        boundaries = sorted({min(num_steps, round(num_steps * (e + 1) / epochs))
                             for e in range(epochs)})
        dataset_fn = self.dataset_fn(train, num_steps, seed)
        for epoch, end in enumerate(boundaries, 1):
          loop.settings.num_train_steps = end
          loop.run(dataset_fn, init_fn=(
              lambda: model.load_pretrained(start.weights, config.init_adjustment))
                   if start else None)
          if not config.do_eval:
            continue
          before = next((e for e in scored if (e["epoch"], e["step"]) == (epoch, end)),
                        None)
          # The model holds this epoch's weights when the loop trained up to them now or
          # restored them (a checkpoint at the epoch's end, killed before its scores were
          # kept); a checkpoint past the epoch leaves only the scores kept of it.
          if loop.start_step < end or (loop.start_step == end and not before):
            scores = self.evaluate(model)
            scored = [e for e in scored if e["epoch"] < epoch] + [
                {"epoch": epoch, "step": end, "scores": scores}]
            model_files.write(model_dir, EPOCH_SCORES, scored)
            self.log(f"trial {trial} epoch {epoch}: " + format_scores(scores))
          elif before:
            scores = before["scores"]
            self.log(f"trial {trial} epoch {epoch}: {format_scores(scores)} (kept, as "
                     "scored before)")
          else:  # passed by an earlier run without do_eval
            scores = None
            self.log(f"trial {trial} epoch {epoch}: not scored (the run resumed past "
                     f"it, at step {loop.start_step}, with no scores kept of it)")
        if config.do_eval:
          history = [{"epoch": e["epoch"], "step": e["step"], **{
              f"{k} {m}": v for k, s in e["scores"].items() for m, v in s.items()}}
                     for e in scored]
      if config.export_serving and kept:
        for runner in self.runners:
          if not runner.serving:
            self.log(f"{runner.task.name}: no serving SavedModel (its family declares no "
                     "serving: finetune/serving.py Serving)")
        served = [runner for runner in self.runners if runner.serving]
        if served:
          with model_files.folder(model_dir, SAVED_MODEL) as folder:
            serving.export(model, served, self.tokenizer.vocab, self.normalization,
                           config.max_seq_length, folder)
          self.log(f"wrote the serving SavedModel {os.path.join(model_dir, SAVED_MODEL)}")
    else:
      with self.strategy.scope():
        model = self.build_model()
      try:
        self.restore(model, trial)
      except NotFinetunedError as e:
        raise ValueError(f"do_train is false but {e}; train first (do_train true) or "
                         "set model_dir") from None
    if config.do_eval and scores is None:  # trained: the last epoch's scores are final
      scores = self.evaluate(model)
    result = {"trial": trial, "scores": scores or {}, "history": history}
    if config.write_test_outputs and trial <= config.n_writes_test:
      self.write_test_predictions(model, trial)
    if not kept:
      record.delete_run(model_dir, RUN_CONFIG, TRIAL_FILES)
      stopping.save_deleted()
      self.log(f"keep_all_models is false: deleted {model_dir}")
    return result

  def prior_watch(self, num_steps: int) -> Optional[prior_watch.PriorWatch]:
    """The watch on the training loss, where every trained task has a label prior: its
    loss is the tasks' priors weighted by their shares of the training features."""
    trained = [(self.runners[i], self.split(i, t.train_split).features)
               for i, t in enumerate(self.tasks) if t.train_split]
    sizes = [len(features["input_ids"]) for _, features in trained]
    priors = [runner.prior_loss(features) for runner, features in trained]
    if not trained or None in priors:
      return None
    words = {runner.prior_words() for runner, _ in trained}
    return prior_watch.PriorWatch(
        float(np.average(priors, weights=sizes)), num_steps, PRIOR_REMEDY,
        baseline=words.pop() if len(words) == 1 else prior_watch.MIXED)

  def train_loop(self, features: Dict[str, np.ndarray], num_steps: int, model_dir: str,
                 label: str = "step", on_step=None,
                 lengths: Optional[np.ndarray] = None) -> TrainLoop:
    """The model (built on `features`), its optimizer and the loop that trains it into
    model_dir: a trial's, and the step the benches time. `lengths`: the batches'
    (train_lengths), which the logged tokens and FLOPs per step count."""
    config, strategy, batch = self.config, self.strategy, self.config.train_batch_size
    config.check_batch_split(batch, strategy.num_replicas_in_sync)
    if lengths is None:
      lengths = np.array([config.max_seq_length])
    values, counts = np.unique(lengths, return_counts=True)
    # Before any model call: one too big would never return.
    pieces = strategy.num_replicas_in_sync * config.gradient_accumulation_steps
    runtime.check_step_memory(strategy, config.mixed_precision, encoder_step_memory(
        self.model_config, config.max_seq_length, max(1, batch // pieces),
        config.recompute))
    with strategy.scope():
      model = self.build_model(features)
      use_recompute(model, config.recompute)
      if self.token_features():  # batches cut short drop what padded ones drop
        use_padded_length(model, config.max_seq_length)
      optimizer = create_optimizer(
          config.learning_rate, max(1, num_steps),
          int(num_steps * config.warmup_proportion), config.weight_decay_rate,
          lr_multiplier=model.lr_multiplier(config.layerwise_lr_decay),
          mixed_precision=config.mixed_precision)
    settings = LoopSettings(
        model_dir=model_dir, num_train_steps=num_steps,
        save_checkpoints_steps=config.save_checkpoints_steps, keep_checkpoint_max=1,
        log_every_steps=config.log_every_steps, use_xla=config.use_xla,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        tokens_per_step=batch * float(np.mean(lengths)),
        flops_per_step=float(np.average(  # the mean over the batches' lengths
            [model_flops.finetuning_flops_per_step(self.model_config, int(length), batch)
             for length in values], weights=counts)),
        peak_flops=runtime.peak_flops(strategy, config.mixed_precision),
        learning_rate=logged_learning_rate(optimizer), label=label, on_step=on_step,
        record_name=RUN_CONFIG, plot_curves=config.write_curves)
    return TrainLoop(strategy, model, optimizer, FinetuningLoss(self.runners, batch),
                     settings)

  def dataset_fn(self, features: Dict[str, np.ndarray], num_steps: int, seed: int):
    """The training input pipeline, as TrainLoop.run takes it: num_steps batches, a
    fresh order each epoch, each cut to its longest example."""
    order = self.train_order(features, num_steps, seed)
    lengths = self.train_lengths(features, order)
    keys = self.token_features()
    return lambda context: self.dataset(features, order, lengths, keys,
                                        self.config.train_batch_size, context)

  def train_order(self, features: Dict[str, np.ndarray], num_steps: int, seed: int
                  ) -> np.ndarray:
    """The training stream's indices, grouped by length when length_grouping_batches
    asks."""
    batch, window = self.config.train_batch_size, self.config.length_grouping_batches
    order = self.example_order(len(features["input_ids"]), num_steps * batch, seed)
    if not window:
      return order
    return padding.grouped_by_length(order, padding.token_counts(features), batch, window,
                                     seed)

  def train_lengths(self, features: Dict[str, np.ndarray], order: np.ndarray
                    ) -> np.ndarray:
    """Each training batch's length, in the order of `order` (example_order's)."""
    multiple = self.config.batch_length_multiple if self.token_features() else 0
    counts = padding.token_counts(features)[order]
    return padding.batch_lengths(counts.reshape(-1, self.config.train_batch_size),
                                 multiple, self.config.max_seq_length)

  @staticmethod
  def example_order(n: int, count: int, seed: int) -> np.ndarray:
    """A fresh permutation per epoch, concatenated: the training stream's indices."""
    rng = np.random.default_rng(seed)
    epochs = -(-count // n)
    return np.concatenate([rng.permutation(n) for _ in range(epochs)])[:count]

  @staticmethod
  def dataset(features, order, lengths, keys, batch_size, context):
    """This worker's share of each global batch, cut to that batch's length (the
    same on every worker)."""
    workers = context.num_input_pipelines
    per_worker = batch_size // workers
    tensors = {k: tf.constant(v) for k, v in features.items()}
    return (tf.data.Dataset.from_tensor_slices(
        (order.reshape(-1, per_worker), np.repeat(lengths, workers)))
            .shard(workers, context.input_pipeline_id)
            .map(lambda i, length: padding.cut(
                {k: tf.gather(v, i) for k, v in tensors.items()}, length, keys))
            .prefetch(tf.data.AUTOTUNE))


def num_train_steps(num_features: int, config: FinetuningConfig) -> int:
  """A trial's steps, as the original: whole batches per epoch, times the (possibly
  fractional) epochs."""
  return int(num_features // config.train_batch_size * config.num_train_epochs)


def pretrained_in(model_dir: str) -> Optional[PretrainedStart]:
  """The weights pre-trained in a model dir of the data dir (its export/, else its run's
  checkpoints), opened; None when it holds none."""
  for path in (os.path.join(model_dir, "export"), model_dir):
    try:
      return open_start(path)
    except CheckpointError:
      pass
  return None


def how_to_get_a_model(config: FinetuningConfig) -> str:
  """Where a pre-trained model comes from, in the commands' real flags: first the
  others pre-trained in the data dir."""
  models = os.path.dirname(config.pretrained_model_dir)
  names = sorted(os.listdir(models)) if os.path.isdir(models) else []
  others = [name for name in names if name != config.model_name
            and os.path.isdir(os.path.join(models, name))
            and pretrained_in(os.path.join(models, name))]
  found = (f"--model-name {' or '.join(others)} names one pre-trained in {models}; or "
           if others else "")
  return (f"{found}pre-train one with `python run_pretraining.py --model-name "
          f"{config.model_name} --data-dir {config.data_dir}` (after `python "
          f"build_pretraining_dataset.py --data-dir {config.data_dir}`), or pass "
          "--init-checkpoint DIR with a released ELECTRA checkpoint (electra_small.zip "
          "of github.com/google-research/electra, unpacked; its vocab.txt is used); "
          "\"debug\": true in --hparams runs a tiny random model instead")


def format_scores(scores: Dict[str, Dict[str, float]]) -> str:
  return "; ".join(f"{name}: " + ", ".join(f"{m} {v:.2f}" for m, v in s.items())
                   for name, s in scores.items()) or "(no dev metrics)"


def summarize(trials: List[Dict[str, object]]) -> Dict[str, object]:
  """Each metric's value per trial and their median."""
  values = {}
  for trial in trials:
    for name, scores in trial["scores"].items():
      for metric, value in scores.items():
        values.setdefault(f"{name} {metric}", []).append(value)
  return {key: {"trials": v, "median": statistics.median(v)} for key, v in values.items()}


def plot_history(trials, path: str):
  """The dev metrics after each epoch, one line per trial."""
  keys = {k for t in trials for h in t["history"] for k in h if k not in ("epoch", "step")}
  return curves.plot_panels(
      {key: {f"trial {t['trial']}": [(h["epoch"], h[key]) for h in t["history"] if key in h]
             for t in trials} for key in keys}, "epoch", path)


def run(config: FinetuningConfig, log=print) -> Dict[str, object]:
  """All trials; writes <results_dir>/<tasks>_results.{txt,json} and the dev-curve PNG.
  One run at a time per model_dir: another is refused while this one runs; a signal
  stops it saved, whenever it comes (training/stopping.py)."""
  with lock.run_dir_lock(config.distribution_strategy, config.model_dir), stopping.held():
    finetuner = Finetuner(config, log)
    finetuner.read_splits()
    trials = []
    for trial in range(1, config.num_trials + 1):
      trials.append(finetuner.run_trial(trial))
      if config.do_eval:
        log(f"trial {trial}/{config.num_trials}: " + format_scores(trials[-1]["scores"]))
    summary = summarize(trials)
    report = {"tasks": config.task_names, "summary": summary, "trials": trials}
    model_files.write(*os.path.split(config.results_file("json")), report)
    model_files.write(*os.path.split(config.results_file("txt")), "".join(
        f"{key}: median {value['median']:.2f} over {len(value['trials'])} trial(s): "
        f"{', '.join(f'{v:.2f}' for v in value['trials'])}\n"
        for key, value in summary.items()))
    report["plot"] = (plot_history(trials, config.results_file("png"))
                      if config.write_curves else None)
    return report
