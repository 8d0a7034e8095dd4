"""The export forms, one writer module each: WRITERS, and `export`, which writes the
forms asked for of a fine-tuned model into a new folder.

A writer (docs/architecture.md, "An export form": NAME, READER, refusal(job),
write(job, folder, log)) whose files come in several variants also has FORMS, their
names (write then takes forms=, those to write: `export`'s `variants`; all by default),
and, with CALIBRATED, CALIBRATED_FORMS, those that read the calibration inputs.
"""

import functools
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from export import bundle, folder as export_folder
from export import huggingface, litert, litert_mixed_int8, onnx_files, original, saved_model
from export.source import Finetuned, load_finetuned
from finetune import tasks as task_registry
from finetune.serving import Serving

WRITERS = {writer.NAME: writer for writer in (original, huggingface, saved_model, litert,
                                              litert_mixed_int8, onnx_files)}
# Full int8's outlier channels per block in int8 tensors of their own by default
# (export/outlier_groups.py): the count that held MiniLM's SQuAD within a point too
# (bench/RESULTS.md, "Outlier channels in their own int8 tensors").
OUTLIER_CHANNELS = 8
# The forms read without TensorFlow through the reader bundle ("all" of tools.export).
DEPLOYMENT = ("litert", "onnx")


class Job:
  """One model to export and the options of its forms; what several writers need is
  made once (the model as a function of token ids, the calibration inputs, its LiteRT
  float32 flatbuffer)."""

  def __init__(self, finetuned: Finetuned, calibration_size: int = 256,
               data_dir: str = "", seed: int = 0,
               smoothing_alpha: Optional[float] = None,
               outlier_channels: int = OUTLIER_CHANNELS,
               variants: Optional[Dict[str, Sequence[str]]] = None):
    self.finetuned = finetuned
    # {writer name: the forms of its own FORMS it writes}; a writer not named writes all.
    self.variants = variants or {}
    serving: Optional[Serving] = finetuned.runner.serving
    self.deployable = serving if serving and serving.reader else None
    self.calibration_size, self.data_dir, self.seed = calibration_size, data_dir, seed
    # The calibrated forms' outlier migration (export/smoothing.py; None: none), and the
    # files written migrated, each with its alpha (deploy.json says so).
    self.smoothing_alpha = smoothing_alpha
    self.smoothed: Dict[str, float] = {}
    # Full int8's outlier channels per block in int8 tensors of their own
    # (export/outlier_groups.py; 0: none), and the files written so, each with its count.
    self.outlier_channels = outlier_channels
    self.grouped: Dict[str, int] = {}
    # The changed models' float32 flatbuffers, by (smoothing_alpha, outlier channels):
    # the calibrated forms' names of nodes.
    self.float32_references: Dict[tuple, bytes] = {}

  def writes(self, writer: str, form: str) -> bool:
    """Whether `writer` writes its `form` in this job (its FORMS: all unless narrowed)."""
    return form in self.variants.get(writer, (form,))

  def deployment_refusal(self, form: str) -> str:
    """Why `form` (a token-ids model read by the reader) cannot take this model."""
    if self.deployable is None:
      # The families with a reader in their Serving.
      families = [family.name for family in task_registry.FAMILIES
                  if getattr(family.runner().serving, "reader", "")]
      return (f"{form} takes a model of a family with a deployment declaration "
              f"({', '.join(families)}: their serving.py's SERVING); "
              f"{self.finetuned.task.name} is of the {self.finetuned.family.name} family")
    return ""

  @functools.cached_property
  def function(self):
    """model_function's, traced once for every form."""
    return self.model_function()

  def model_function(self):
    """The model as a new tf.function of its family's token-ids inputs (its serving.py).
    Their token axis is free, so the files convert with a dynamic sequence axis, unless
    its Serving's fixed_length (QA); LiteRT's speed with a free axis: bench/RESULTS.md,
    "Inference at the input's length"."""
    finetuned, deployable = self.finetuned, self.deployable
    length = finetuned.max_seq_length if deployable.fixed_length else None
    spec = [tf.TensorSpec([None, length], tf.int32, name=name)
            for name in deployable.inputs]
    model, head = finetuned.model, finetuned.runner.head_name

    def call(*tensors):
      batch = dict(zip(deployable.inputs, tensors))
      return deployable.outputs(finetuned.runner, model(batch, training=False)[head])
    return tf.function(call, input_signature=spec, autograph=False)

  @property
  def head_scope(self) -> str:
    """The name scope of the model's task head (its ops' names hold it)."""
    return self.finetuned.model.heads[self.finetuned.runner.head_name].name

  @functools.cached_property
  def litert_float32(self) -> bytes:
    """That form's file, and the calibrated forms' reference (it names their nodes)."""
    return litert.to_litert(self.function, self.finetuned.model.variables, "float32")

  @functools.cached_property
  def calibration(self) -> Dict[str, np.ndarray]:
    """The inputs of calibration_size examples drawn (seeded) from the training split
    (a QA example's windows may be several: the first rows are kept)."""
    finetuned = self.finetuned
    task = finetuned.task
    data_dir = self.data_dir or finetuned.settings["data_dir"]
    # (A missing or empty split is refused by the reader, naming its file.)
    examples = task_registry.read_examples(task, data_dir, task.train_split)
    chosen = np.random.default_rng(self.seed).permutation(len(examples))
    features = finetuned.runner.features(
        [examples[i] for i in chosen[:self.calibration_size]], task.train_split)
    return {name: features[name][:self.calibration_size]
            for name in self.deployable.inputs}


def _calibrated(writer, variants) -> bool:
  """Whether `writer` reads the calibration inputs for `variants` (None: all its own)."""
  return getattr(writer, "CALIBRATED", False) and (
      variants is None or any(v in getattr(writer, "CALIBRATED_FORMS", variants)
                                for v in variants))


def export(model_dir: str, output: str, forms: List[str], calibration_size: int = 256,
           data_dir: str = "", seed: int = 0, log=print,
           variants: Optional[Dict[str, Sequence[str]]] = None,
           smoothing_alpha: Optional[float] = None,
           outlier_channels: int = OUTLIER_CHANNELS) -> List[str]:
  """Writes the new folder `output` with the files of `forms` (of a writer named in
  `variants`, those of its FORMS) of the fine-tuned model in `model_dir`; their paths.
  Every refusal comes before anything is written."""
  unknown = [form for form in forms if form not in WRITERS]
  if unknown:
    raise ValueError(f"unknown export form {', '.join(unknown)}; expected one of "
                     f"{', '.join(WRITERS)}")
  variants = variants or {}
  for form, chosen in variants.items():
    if form not in forms:
      raise ValueError(f"variants of {form}, which is not among the forms exported "
                       f"({', '.join(forms)})")
    own = getattr(WRITERS[form], "FORMS", ())
    if not chosen or not set(chosen) <= set(own):
      raise ValueError(f"variants of {form}: {', '.join(chosen) or 'none'}; expected "
                       f"some of {', '.join(own) or 'none (it has one)'}")
  target, source = os.path.realpath(output), os.path.realpath(model_dir)
  if target == source:
    raise ValueError(f"--output {output} is the model dir, an input of this command; "
                     "give a new folder outside it")
  if os.path.lexists(output):
    raise ValueError(f"{output} exists; give a new output folder")
  finetuned = load_finetuned(model_dir, note=log)
  if target.startswith(source + os.sep):  # (a folder that is no model's may hold it)
    raise ValueError(f"--output {output} is inside the model dir {model_dir}, an input "
                     "of this command; give a new folder outside it")
  job = Job(finetuned, calibration_size, data_dir, seed, smoothing_alpha, outlier_channels,
            variants)
  writers = [WRITERS[form] for form in forms]
  for writer in writers:
    reason = writer.refusal(job)
    if reason:
      raise ValueError(f"{model_dir}: {reason}")
  if any(_calibrated(writer, variants.get(writer.NAME)) for writer in writers):
    rows = len(next(iter(job.calibration.values())))  # a bad split refused now
    if rows < calibration_size:
      log(f"note: calibrating on {rows} inputs, all that the training split gives "
          f"(asked for {calibration_size})")
  written = []

  def fill(tmp: str, doing):
    for writer in writers:
      doing(f"writing the {writer.NAME} files")
      chosen = variants.get(writer.NAME)
      written.extend(writer.write(job, tmp, log) if chosen is None else
                     writer.write(job, tmp, log, forms=tuple(chosen)))
    if any(writer.READER for writer in writers):
      doing(f"writing vocab.txt, {bundle.reader.INFO_FILE} and {bundle.READER}")
      calibrated = ("calibration" in job.__dict__) and len(
          next(iter(job.calibration.values())))
      bundle.write(finetuned, job.deployable, tmp, written, int(calibrated), job.smoothed,
                   job.grouped)
  export_folder.write_new(output, fill, log)
  return [os.path.join(output, name) for name in written]
