"""Reading and writing the original release's TF1 name-based checkpoints.

One mapping table (`original_variables`) pairs each Keras variable with its name in the
original checkpoint and the shape it has there; reading and writing both use it. The only
layout differences are the attention projections, which tf_keras's MultiHeadAttention
keeps per head ([H, heads, head] and [heads, head, H]) where the original has [H, H].

The loading functions below take any pre-trained model's path: an original-format
checkpoint; run_pretraining.py's model dir (its newest training checkpoint, a TF2
object graph, read into a pair of the run's recorded sizes); or a Hugging Face ELECTRA
directory, or a folder holding a discriminator's and a generator's, which
model/huggingface.py reads through the same table.
"""

import os
import re
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from model import huggingface as hf
from model.huggingface import CheckpointError  # pylint: disable=unused-import  # part of this module's interface
from model.config import ModelConfig
from model.electra import ElectraPair
from model.encoder import ElectraEmbeddings, ElectraEncoder
from training import resume
from training.loop import newest_readable
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
       embeddings.position_embeddings.weights[0], (c.max_position_embeddings, e)),
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
    attention = block._attention_layer  # pylint: disable=protected-access
    for name in ("query", "key", "value"):
      out += _dense(f"{p}/attention/self/{name}", getattr(attention, f"_{name}_dense"), h, h)
    out += _dense(f"{p}/attention/output/dense", attention._output_dense, h, h)
    out += _layer_norm(f"{p}/attention/output/LayerNorm", block._attention_layer_norm, h)
    out += _dense(f"{p}/intermediate/dense", block._intermediate_dense, h, inner)
    out += _dense(f"{p}/output/dense", block._output_dense, inner, h)
    out += _layer_norm(f"{p}/output/LayerNorm", block._output_layer_norm, h)
  return out


def generator_head_variables(head, hidden: int) -> Mapping:
  c = head.model_config
  return (_dense("generator_predictions/dense", head.dense, hidden, c.embedding_width)
          + _layer_norm("generator_predictions/LayerNorm", head.layer_norm,
                        c.embedding_width)
          + [("generator_predictions/output_bias", head.output_bias, (c.vocab_size,))])


def discriminator_head_variables(head) -> Mapping:
  h = head.model_config.hidden_size
  return (_dense("discriminator_predictions/dense", head.dense, h, h)
          + _dense("discriminator_predictions/dense_1", head.dense_1, h, 1))


def original_variables(pair: ElectraPair, part: str = "pair") -> Mapping:
  """The mapping table for `part` of a built pair: (original name, variable, shape)."""
  if part not in PARTS:
    raise ValueError(f"part {part!r}: expected one of {PARTS}")
  c = pair.model_config
  out: Mapping = []
  if part in ("pair", "discriminator"):
    out += encoder_variables(pair.discriminator, "electra")
    out += discriminator_head_variables(pair.discriminator_head)
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
    out += generator_head_variables(pair.generator_head,
                                    pair.generator_model_config.hidden_size)
  return out


def resolve_checkpoint(path: str) -> str:
  """A checkpoint prefix from a prefix, or a directory holding one (a released zip);
  a Hugging Face directory (or folder of two) as it is."""
  if not path:
    raise CheckpointError("no checkpoint path given")
  if hf.hf_parts(path):
    return path
  run = pretraining_run(path)
  if run:
    return run[1]
  if os.path.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest and tf.io.gfile.exists(latest + ".index"):
      return latest
    # A "checkpoint" state file may hold paths from the machine that wrote it: look
    # for the prefixes themselves, newest step first.
    prefixes = [f[:-len(".index")] for f in os.listdir(path) if f.endswith(".index")]
    weights = None if prefixes else hf.weights_without_config(path)
    if weights:
      raise CheckpointError(
          f"{path}: {weights} is Hugging Face weights without their config.json: a "
          f"Hugging Face directory needs the config.json downloaded with them, in "
          f"{os.path.dirname(weights)}")
    if not prefixes:
      raise CheckpointError(f"{path}: directory holds no checkpoint (no *.index file); "
                            "expected a TF checkpoint prefix or a directory holding one")
    step = lambda p: int(m.group(1)) if (m := re.search(r"-(\d+)$", p)) else -1
    return os.path.join(path, max(prefixes, key=lambda p: (step(p), p)))
  if tf.io.gfile.exists(path + ".index"):
    return path
  if path.endswith(".index") and tf.io.gfile.exists(path):
    return path[:-len(".index")]
  raise CheckpointError(f"{path}: no such checkpoint (expected the prefix of "
                        "<prefix>.index / <prefix>.data-*, or a directory holding one)")


def refuse_finetuned(path: str):
  """A fine-tuned model where a pre-trained one is expected: say so."""
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  if os.path.isfile(os.path.join(folder, resume.FINETUNING_RECORD)):
    raise CheckpointError(
        f"{path}: a fine-tuned model (its folder holds {resume.FINETUNING_RECORD}); "
        "expected a pre-trained one: run_pretraining.py's model dir or its export/, a "
        "released ELECTRA checkpoint, or a Hugging Face ELECTRA directory")


def pretraining_run(path: str) -> Optional[Tuple[str, str]]:
  """(model dir, checkpoint prefix) when `path` is run_pretraining.py's model dir (its
  newest training checkpoint that reads whole) or one of its training checkpoints;
  None for anything else."""
  refuse_finetuned(path)
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  if not os.path.isfile(os.path.join(folder, resume.PRETRAINING_RECORD)):
    return None
  if not os.path.isdir(path):
    return (folder, path) if tf.io.gfile.exists(path + ".index") else None
  try:
    prefix = newest_readable(folder, note=lambda line: print(line, flush=True))
  except ValueError as e:
    raise CheckpointError(str(e)) from None
  if prefix is None:
    raise CheckpointError(f"{path}: a pre-training model dir without a checkpoint yet; "
                          "train it first (run_pretraining.py saves every "
                          "save_checkpoints_steps)")
  return folder, prefix


def find_vocab(path: str, given: str = "") -> str:
  """The vocab.txt `given`, else the one that goes with the checkpoint at `path`: beside
  it (ours, a released zip's, a Hugging Face directory's), its pre-training run's
  vocab_file, or the data dir's above an export/."""
  if given:
    return given
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  candidates = [os.path.join(f, "vocab.txt") for f in [folder, *sorted(
      hf.hf_parts(path).values())]]
  if pretraining_run(path):
    recorded = resume.read_record(folder, resume.PRETRAINING_RECORD).get("config", {})
    candidates.append(recorded.get("vocab_file", ""))
  candidates.append(os.path.join(folder, os.pardir, "vocab.txt"))
  for candidate in candidates:
    if candidate and os.path.isfile(candidate):
      return candidate
  raise CheckpointError(f"{path}: no vocab.txt beside the checkpoint; pass --vocab FILE")


def _run_record(folder: str) -> Dict:
  return resume.read_record(folder, resume.PRETRAINING_RECORD)["signature"]


def _run_part(signature: Dict) -> str:
  """What a pre-training run trains, as its export names it: Electric's generator is
  not an ElectraPair's, and the masked-LM baseline has no discriminator."""
  if signature.get("two_tower_generator") or signature.get("electric_objective"):
    return "discriminator"
  return "pair" if signature.get("electra_objective", True) else "generator"


def _run_values(folder: str, prefix: str, what: str) -> Dict[str, np.ndarray]:
  """The original-format arrays of `what` from a pre-training run's checkpoint, read
  into a pair built at the run's sizes (its checkpoint is TensorFlow 2's object graph:
  the run's model holds the pair as `electra`)."""
  signature = _run_record(folder)
  held = _run_part(signature)
  if held != "pair" and what != held:
    raise CheckpointError(f"{folder}: its run trained the {held} only (objective "
                          f"{'Electric' if held == 'discriminator' else 'masked LM'}); "
                          f"cannot load the {what}")
  pair = ElectraPair(ModelConfig.from_dict(signature["model"])).build_variables()
  parts = {"discriminator": ("discriminator", "discriminator_head"),
           "generator": ("generator", "generator_head")}
  wanted = parts.get(held, parts["discriminator"] + parts["generator"])
  holder = tf.train.Checkpoint(model=tf.train.Checkpoint(electra=tf.train.Checkpoint(
      **{name: getattr(pair, name) for name in wanted})))
  try:
    holder.restore(prefix).assert_existing_objects_matched().expect_partial()
  except (AssertionError, tf.errors.OpError, ValueError, IndexError) as e:
    raise CheckpointError(f"{prefix}: not a checkpoint of the model its run dir "
                          f"records ({str(e).splitlines()[0][:200]})") from None
  return {name: np.reshape(variable.numpy(), shape)
          for name, variable, shape in original_variables(pair, held)}


def read_shapes(path: str) -> Dict[str, Tuple[int, ...]]:
  prefix = resolve_checkpoint(path)
  try:
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError(f"{prefix}: not a readable TF checkpoint "
                          f"({str(e).splitlines()[0]})") from None
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
        f"{resume.PRETRAINING_RECORD}) or its export/")
  bert = any(n.startswith(("bert/", "cls/")) for n in unexpected)
  hint = ("; this looks like a BERT checkpoint (bert/, cls/)" if bert else "")
  raise CheckpointError(f"{prefix}: not an ELECTRA checkpoint: {len(unexpected)} "
                        "variable(s) outside ELECTRA's scopes (electra/, generator/, "
                        f"generator_predictions/, discriminator_predictions/){hint}")


def available_part(path: str) -> str:
  """What a checkpoint holds: "pair", "discriminator" or "generator"."""
  parts = hf.hf_parts(path)
  if parts:
    return "pair" if len(parts) == 2 else next(iter(parts))
  run = pretraining_run(path)
  if run:
    return _run_part(_run_record(run[0]))
  shapes = read_shapes(path)
  heads = (("discriminator", "discriminator_predictions/dense/kernel"),
           ("generator", "generator_predictions/output_bias"))
  held = [part for part, name in heads if name in shapes]
  return "pair" if len(held) != 1 else held[0]


def config_from_checkpoint(path: str, part: str = "pair") -> ModelConfig:
  """Infers the sizes from variable shapes (heads by the original's max(1, H // 64)),
  or reads them from a Hugging Face directory's config.json."""
  parts = hf.hf_parts(path)
  if parts:
    return hf.pair_config(path, parts, part)
  run = pretraining_run(path)
  if run:
    return ModelConfig.from_dict(_run_record(run[0])["model"])
  prefix = resolve_checkpoint(path)
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
  if disc is None:
    if gen is None or part != "generator":
      what = "a generator only" if gen else "no encoder"
      raise CheckpointError(f"{prefix}: holds {what} (no electra/encoder/layer_* "
                            f"variables); cannot load the {part}" +
                            ("; load it with part='generator'" if gen else ""))
    hidden, layers, inner = gen
    return ModelConfig.from_dict(dict(
        vocab_size=word[0], embedding_size=word[1], hidden_size=hidden,
        num_hidden_layers=layers, intermediate_size=inner,
        max_position_embeddings=shapes[f"{emb_scope}/embeddings/position_embeddings"][0],
        type_vocab_size=shapes[f"{emb_scope}/embeddings/token_type_embeddings"][0],
        generator_hidden_size=1.0, generator_layers=1.0,
        untied_generator_embeddings=untied_embeddings))
  hidden, layers, inner = disc
  values = dict(
      vocab_size=word[0], embedding_size=word[1], hidden_size=hidden,
      num_hidden_layers=layers, intermediate_size=inner,
      max_position_embeddings=shapes["electra/embeddings/position_embeddings"][0],
      type_vocab_size=shapes["electra/embeddings/token_type_embeddings"][0],
      untied_generator_embeddings=untied_embeddings)
  if gen is not None:
    values.update(generator_hidden_size=gen[0] / hidden, generator_layers=gen[1] / layers)
  elif "generator_predictions/output_bias" in shapes:
    values.update(untied_generator=False)  # the generator is the "electra" encoder
  return ModelConfig.from_dict(values)


def load_mapping(mapping: Mapping, path: str, what: str) -> str:
  """Assigns every variable of `mapping` from the checkpoint at `path`; returns its prefix.

  Every mapped variable must be present with its shape; names outside ELECTRA's scopes
  are refused; global_step, Adam slots and fine-tuning heads are ignored.
  """
  parts = hf.hf_parts(path)
  if parts:
    hf.load_weights(mapping, path, parts, what)
    return path
  run = pretraining_run(path)
  if run:
    prefix = run[1]
    values = _run_values(*run, what)
    shapes, read = {n: v.shape for n, v in values.items()}, values.__getitem__
  else:
    prefix = resolve_checkpoint(path)
    shapes = read_shapes(prefix)
    _check_names(prefix, shapes)
    read = tf.train.load_checkpoint(prefix).get_tensor
  missing = [n for n, _, _ in mapping if n not in shapes]
  if missing:
    hint = ""
    if what != "generator" and not any(n.startswith("electra/encoder/") for n in shapes):
      hint = " (the file holds no discriminator encoder: a generator-only checkpoint?)"
    raise CheckpointError(f"{prefix}: {len(missing)} variable(s) the {what} needs are "
                          f"missing: {cli.listed(missing)}{hint}")
  wrong = [f"{n} has {list(shapes[n])}, expected {list(s)}" for n, _, s in mapping
           if shapes[n] != s]
  if wrong:
    raise CheckpointError(f"{prefix}: {len(wrong)} variable(s) with the wrong shape "
                          f"for this config: {'; '.join(wrong[:3])}")
  for name, variable, _ in mapping:
    variable.assign(np.reshape(read(name), variable.shape))
  return prefix


def load_original(pair: ElectraPair, path: str, part: str = "pair") -> str:
  """Loads `part` of the pair from an original-format checkpoint; returns its prefix."""
  if not pair.built:
    pair.build_variables()
  return load_mapping(original_variables(pair, part), path, part)


def load_discriminator_encoder(encoder: ElectraEncoder, path: str) -> str:
  """Loads a lone (built) encoder from the discriminator's variables, for fine-tuning."""
  return load_mapping(encoder_variables(encoder, "electra"), path, "discriminator")


def save_original(pair: ElectraPair, prefix: str, part: str = "pair",
                  global_step: Optional[int] = None) -> str:
  """Writes `part` under the original names; files appear whole or not at all."""
  mapping = original_variables(pair, part)
  names = [n for n, _, _ in mapping]
  tensors = [tf.reshape(tf.cast(v, tf.float32), shape) for _, v, shape in mapping]
  if global_step is not None:
    names.append("global_step")
    tensors.append(tf.constant(global_step, tf.int64))
  folder = os.path.dirname(os.path.abspath(prefix))
  os.makedirs(folder, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=folder, prefix=".ckpt-tmp-") as tmp:
    tmp_prefix = os.path.join(tmp, os.path.basename(prefix))
    tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=tensors)
    for f in sorted(os.listdir(tmp), key=lambda f: f.endswith(".index")):  # index last
      os.replace(os.path.join(tmp, f), os.path.join(folder, f))
  # The state file that tf.train.latest_checkpoint reads (a text proto).
  with atomic_write(os.path.join(folder, "checkpoint")) as f:
    name = os.path.basename(prefix)
    f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
  return prefix


def load_pair(path: str, config: Optional[ModelConfig] = None,
              part: str = "pair") -> ElectraPair:
  """Builds a pair and loads `part` from `path`. Its sizes are `config`, else those
  run_pretraining.py exported beside the checkpoint (config.json), else inferred."""
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  saved = os.path.join(folder, "config.json")
  if config is None and not hf.hf_parts(path) and os.path.isfile(saved):
    config = ModelConfig.from_dict(hf.read_json(saved), source=saved)
  if config is None:
    config = config_from_checkpoint(path, part)
  pair = ElectraPair(config).build_variables()
  load_original(pair, path, part)
  return pair
