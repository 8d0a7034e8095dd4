"""The original release's TF1 checkpoints: variables by name.

One mapping table (`original_variables`) pairs each Keras variable with its name in the
original checkpoint and the shape it has there; every format loads through it (the
Hugging Face names and a run's object graph are converted to these names), and
`save_variables` writes it. The only layout differences are the attention projections,
which tf_keras's MultiHeadAttention keeps per head ([H, heads, head] and [heads, head,
H]) where the original has [H, H].
"""

import glob
import json
import os
import re
import shutil
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from model.config import ModelConfig
from model.electra import ElectraPair
from model.encoder import ElectraEmbeddings, ElectraEncoder
from model.internals import block_layers
from model.weights import CheckpointError, by_name, check_mapping, read_json
from util import cli
from util.files import atomic_write

PARTS = ("pair", "discriminator", "generator")
PRETRAINING_SCOPES = ("electra/", "generator/", "generator_predictions/",
                      "discriminator_predictions/")
# Layout of a TF1 checkpoint we never map: the step counter and Adam's slots. Fine-tuning
# heads (task_specific/) are ignored when loading the pre-trained encoder.
IGNORED = re.compile(r"(^global_step$|/adam_[mv]$|^task_specific/)")

Mapping = List[Tuple[str, tf.Variable, Tuple[int, ...]]]


def _dense(prefix: str, layer, in_dim: int, out_dim: int) -> Mapping:
  return [(f"{prefix}/kernel", layer.kernel, (in_dim, out_dim)),
          (f"{prefix}/bias", layer.bias, (out_dim,))]


def _layer_norm(prefix: str, layer, dim: int) -> Mapping:
  return [(f"{prefix}/gamma", layer.gamma, (dim,)), (f"{prefix}/beta", layer.beta, (dim,))]


def embeddings_variables(embeddings: ElectraEmbeddings, scope: str) -> Mapping:
  c, e = embeddings.model_config, embeddings.embedding_width
  return [
      (f"{scope}/embeddings/word_embeddings", embeddings.embedding_table,
       (c.vocab_size, e)),
      (f"{scope}/embeddings/position_embeddings",
       embeddings.position_table, (c.max_position_embeddings, e)),
      (f"{scope}/embeddings/token_type_embeddings",
       embeddings.token_type_embeddings.embeddings, (c.type_vocab_size, e)),
  ] + _layer_norm(f"{scope}/embeddings/LayerNorm", embeddings.layer_norm, e)


def encoder_variables(encoder: ElectraEncoder, scope: str,
                      with_embeddings: bool = True) -> Mapping:
  """The encoder under `scope` ("electra", "generator"); embeddings optional (shared)."""
  c = encoder.model_config
  h, inner = c.hidden_size, c.intermediate_size
  out = embeddings_variables(encoder.embeddings, scope) if with_embeddings else []
  if encoder.embeddings_project is not None:
    out += _dense(f"{scope}/embeddings_project", encoder.embeddings_project,
                  encoder.embeddings.embedding_width, h)
  for i, block in enumerate(encoder.transformer_layers):
    p = f"{scope}/encoder/layer_{i}"
    layers = block_layers(block)
    for name in ("query", "key", "value"):
      out += _dense(f"{p}/attention/self/{name}", getattr(layers, name), h, h)
    out += _dense(f"{p}/attention/output/dense", layers.attention_output, h, h)
    out += _layer_norm(f"{p}/attention/output/LayerNorm", layers.attention_norm, h)
    out += _dense(f"{p}/intermediate/dense", layers.intermediate, h, inner)
    out += _dense(f"{p}/output/dense", layers.output, inner, h)
    out += _layer_norm(f"{p}/output/LayerNorm", layers.output_norm, h)
  return out


def original_variables(pair: ElectraPair, part: str = "pair") -> Mapping:
  """The mapping table for `part` of a built pair: (original name, variable, shape)."""
  if part not in PARTS:
    raise ValueError(f"part {part!r}: expected one of {PARTS}")
  c, h = pair.model_config, pair.model_config.hidden_size
  out: Mapping = []
  if part in ("pair", "discriminator"):
    out += encoder_variables(pair.discriminator, "electra")
    head = pair.discriminator_head
    out += (_dense("discriminator_predictions/dense", head.dense, h, h)
            + _dense("discriminator_predictions/dense_1", head.dense_1, h, 1))
  if part in ("pair", "generator"):
    if pair.generator is pair.discriminator:  # one encoder for both roles
      if part == "generator":
        out += encoder_variables(pair.generator, "electra")
    else:
      untied = c.untied_generator_embeddings
      if untied or part == "generator":
        out += embeddings_variables(pair.generator.embeddings,
                                    "generator" if untied else "electra")
      out += encoder_variables(pair.generator, "generator", with_embeddings=False)
    head, g = pair.generator_head, pair.generator_model_config
    e = g.embedding_width  # (the generator's own hidden size when its embeddings are)
    out += (_dense("generator_predictions/dense", head.dense, g.hidden_size, e)
            + _layer_norm("generator_predictions/LayerNorm", head.layer_norm, e)
            + [("generator_predictions/output_bias", head.output_bias, (c.vocab_size,))])
  return out


# Fields `model_config` cannot read from a checkpoint's shapes: it infers them.
INFERRED = ("num_attention_heads",)


def locate(path: str) -> Optional[str]:
  """The checkpoint prefix at `path` (a prefix, its .index file, or a directory holding
  one); None for anything else. A run dir's training checkpoints (TensorFlow 2's object
  graph, not these names) are runs/pretrained.py's, which formats.py asks first."""
  if os.path.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest and tf.io.gfile.exists(latest + ".index"):
      return latest
    # A "checkpoint" state file may hold paths from the machine that wrote it: look
    # for the prefixes themselves, newest step first.
    prefixes = [f[:-len(".index")] for f in os.listdir(path) if f.endswith(".index")]
    if not prefixes:
      return None
    step = lambda p: int(m.group(1)) if (m := re.search(r"-(\d+)$", p)) else -1
    return os.path.join(path, max(prefixes, key=lambda p: (step(p), p)))
  if tf.io.gfile.exists(path + ".index"):
    return path
  if path.endswith(".index") and tf.io.gfile.exists(path):
    return path[:-len(".index")]
  return None


def read_shapes(prefix: str) -> Dict[str, Tuple[int, ...]]:
  try:
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError(f"{prefix}: not a readable TF checkpoint "
                          f"({cli.first_line(e)})") from None
  return {name: tuple(shape) for name, shape in shapes.items()}


def _check_names(prefix: str, shapes: Dict[str, tuple]):
  unexpected = [n for n in shapes if not IGNORED.search(n)
                and not n.startswith(PRETRAINING_SCOPES)]
  if not unexpected:
    return
  if "_CHECKPOINTABLE_OBJECT_GRAPH" in shapes:
    raise CheckpointError(
        f"{prefix}: a TensorFlow 2 training checkpoint, not ELECTRA's original format; "
        "give run_pretraining.py's model dir (the folder holding "
        "pretrain_config.json) or its export/")
  bert = any(n.startswith(("bert/", "cls/")) for n in unexpected)
  hint = ("; this looks like a BERT checkpoint (bert/, cls/)" if bert else "")
  raise CheckpointError(f"{prefix}: not an ELECTRA checkpoint: {len(unexpected)} "
                        "variable(s) outside ELECTRA's scopes (electra/, generator/, "
                        f"generator_predictions/, discriminator_predictions/){hint}")


def part_held(prefix: str) -> str:
  shapes = read_shapes(prefix)
  heads = (("discriminator", "discriminator_predictions/dense/kernel"),
           ("generator", "generator_predictions/output_bias"))
  held = [part for part, name in heads if name in shapes]
  return "pair" if len(held) != 1 else held[0]


def model_config(prefix: str, part: str = "pair") -> ModelConfig:
  """The sizes of `part`, inferred from the variables' shapes (heads by the original's
  max(1, H // 64))."""
  shapes = read_shapes(prefix)
  _check_names(prefix, shapes)

  def size(scope):
    q = shapes.get(f"{scope}/encoder/layer_0/attention/self/query/kernel")
    if q is None:
      return None
    layers = len({m.group(1) for n in shapes
                  if (m := re.match(rf"{scope}/encoder/layer_(\d+)/", n))})
    inner = shapes[f"{scope}/encoder/layer_0/intermediate/dense/kernel"][1]
    return q[0], layers, inner

  disc, gen = size("electra"), size("generator")
  untied_embeddings = "generator/embeddings/word_embeddings" in shapes
  emb_scope = "generator" if (disc is None and untied_embeddings) else "electra"
  word = shapes.get(f"{emb_scope}/embeddings/word_embeddings")
  if word is None:
    raise CheckpointError(f"{prefix}: no {emb_scope}/embeddings/word_embeddings among "
                          f"its {len(shapes)} variables; not a whole ELECTRA checkpoint")
  if disc is None and (gen is None or part != "generator"):
    what = "a generator only" if gen else "no encoder"
    raise CheckpointError(f"{prefix}: holds {what} (no electra/encoder/layer_* "
                          f"variables); cannot load the {part}" +
                          ("; load it with part='generator'" if gen else ""))
  hidden, layers, inner = disc or gen
  values = dict(
      vocab_size=word[0], embedding_size=word[1], hidden_size=hidden,
      num_hidden_layers=layers, intermediate_size=inner,
      max_position_embeddings=shapes[f"{emb_scope}/embeddings/position_embeddings"][0],
      type_vocab_size=shapes[f"{emb_scope}/embeddings/token_type_embeddings"][0],
      untied_generator_embeddings=untied_embeddings)
  if disc is None:  # the generator alone, as a pair of its own size
    values.update(generator_hidden_size=1.0, generator_layers=1.0)
  elif gen is not None:
    values.update(generator_hidden_size=gen[0] / hidden, generator_layers=gen[1] / layers)
  elif "generator_predictions/output_bias" in shapes:
    values.update(untied_generator=False)  # the generator is the "electra" encoder
  return ModelConfig.from_dict(values)


def saved_model_config(prefix: str) -> Optional[ModelConfig]:
  """The whole config run_pretraining.py exports beside its checkpoint, or None."""
  saved = os.path.join(os.path.dirname(prefix), "config.json")
  if not os.path.isfile(saved):
    return None
  return ModelConfig.from_dict(read_json(saved), source=saved)


def vocab_files(prefix: str) -> List[str]:
  del prefix  # only the vocab.txt beside the checkpoint, where formats.py looks anyway
  return []


def load(mapping: Mapping, prefix: str, what: str):
  shapes = read_shapes(prefix)
  _check_names(prefix, shapes)
  check_whole(prefix, by_name.remedy(prefix))
  assign(mapping, shapes, tf.train.load_checkpoint(prefix).get_tensor, prefix, what)


def check_whole(prefix: str, remedy: str):
  """Refuses (with `remedy`) a checkpoint that does not read whole, before any use."""
  problem = unreadable_checkpoint(prefix)
  if problem:
    raise CheckpointError(f"{problem}; the checkpoint is cut short or damaged: {remedy}")


def unreadable_checkpoint(prefix: str) -> Optional[str]:
  """None when every tensor of the checkpoint at `prefix` reads; else "<file>: <why>"."""
  try:
    reader = tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError, IndexError) as e:
    return f"{prefix}.index: {cli.first_line(e)}"
  try:
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except (tf.errors.OpError, ValueError, IndexError) as e:
    shards = sorted(glob.glob(glob.escape(prefix) + ".data-*"))
    shown = shards[0] if len(shards) == 1 else prefix + ".data-*"
    return f"{shown}: {cli.first_line(e)}"
  return None


def assign(mapping: Mapping, shapes: Dict[str, Tuple[int, ...]],
           read: Callable[[str], np.ndarray], source: str, what: str):
  """Assigns every variable of `mapping` from `read(name)`, after checking that each
  is among `shapes` (those `source` holds) with its shape."""
  generator_only = what != "generator" and not any(n.startswith("electra/encoder/")
                                                   for n in shapes)
  check_mapping(mapping, shapes, source, what, hint=" (the file holds no discriminator "
                "encoder: a generator-only checkpoint?)" if generator_only else "")
  for name, variable, _ in mapping:
    variable.assign(np.reshape(read(name), variable.shape))


def save_folder(mapping: Mapping, folder: str, name: str, sizes: ModelConfig,
                vocab_file: str, global_step: Optional[int] = None) -> str:
  """The original release's folder: the checkpoint <folder>/<name>, config.json (the
  sizes, as saved_model_config reads them) and vocab.txt; returns the checkpoint's
  prefix. `folder`: a new one, which its writer puts in place whole."""
  prefix = save_variables(mapping, os.path.join(folder, name), global_step)
  with atomic_write(os.path.join(folder, "config.json")) as f:
    json.dump(sizes.to_dict(), f, indent=2, sort_keys=True)
  shutil.copyfile(vocab_file, os.path.join(folder, "vocab.txt"))
  return prefix


def save_variables(mapping: Mapping, prefix: str, global_step: Optional[int] = None) -> str:
  """Writes a mapping table's variables under their original names and shapes, with the
  state file `checkpoint`."""
  names = [n for n, _, _ in mapping]
  tensors = [tf.reshape(tf.cast(v, tf.float32), shape) for _, v, shape in mapping]
  if global_step is not None:
    names.append("global_step")
    tensors.append(tf.constant(global_step, tf.int64))
  folder = os.path.dirname(os.path.abspath(prefix))
  os.makedirs(folder, exist_ok=True)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=tensors)
  # The state file that tf.train.latest_checkpoint reads (a text proto).
  with atomic_write(os.path.join(folder, "checkpoint")) as f:
    name = os.path.basename(prefix)
    f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
  return prefix
