"""Hugging Face transformers' ELECTRA layout: its weight names, shapes and config.json.

Names follow from the original checkpoint's (original.py's mapping table) the way
transformers' own converter reads an original checkpoint (hf_name).

A sentence classifier is the one exception that is not a renaming: the original's head
(ours) is one dense layer on [CLS], transformers' ElectraClassificationHead is dense,
GELU, then out_proj. The export makes its dense the identity plus a shift c and folds
-c into out_proj's bias. With c larger than any [CLS] value can be below 6 (a LayerNorm
output is bounded: |x_i| <= |gamma_i| sqrt(H - 1) + |beta_i|), GELU is the identity in
float32 there (1 - Phi(6) ~ 1e-9), so the logits are ours up to rounding.

A BERT directory reads as a discriminator's encoder (fine-tuning): ELECTRA's
discriminator encoder is BERT's with embedding_size == hidden_size, under another scope.
"""

import os
import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from model.config import ModelConfig
from model.weights import CheckpointError, check_mapping, read_json
from util import cli


# Where the names of transformers' ELECTRA classes start.
DISCRIMINATOR, GENERATOR, CLASSIFIER = ("ElectraForPreTraining", "ElectraForMaskedLM",
                                        "ElectraForSequenceClassification")
TOKEN_CLASSIFIER, QUESTION_ANSWERING = ("ElectraForTokenClassification",
                                        "ElectraForQuestionAnswering")
# GELU(z) equals z in float32 from here on.
GELU_IDENTITY_FROM = 6.0


def hf_name(original: str) -> Tuple[str, bool]:
  """(transformers' name, whether the array is a kernel to transpose) of an original
  checkpoint variable of the discriminator or generator part."""
  name = original.replace("generator_predictions/output_bias", "generator_lm_head/bias")
  name = name.replace("discriminator_predictions/dense_1/",
                      "discriminator_predictions/dense_prediction/")
  name = re.sub(r"^generator/", "electra/", name)  # the generator part's own encoder
  parts = []
  for part in name.split("/"):
    layer = re.fullmatch(r"layer_(\d+)", part)
    parts.append(f"layer.{layer.group(1)}" if layer else part)
  last = parts[-1]
  kernel = last == "kernel"
  if last in ("kernel", "gamma"):
    parts[-1] = "weight"
  elif last == "beta":
    parts[-1] = "bias"
  elif last.endswith("_embeddings"):
    parts.append("weight")
  return ".".join(parts), kernel


def state_dict(mapping) -> Dict[str, np.ndarray]:
  out = {}
  for original, variable, shape in mapping:
    name, kernel = hf_name(original)
    value = np.reshape(np.asarray(variable.numpy(), np.float32), shape)
    out[name] = np.ascontiguousarray(value.T if kernel else value)
  return out


def classifier_weights(kernel: np.ndarray, bias: np.ndarray, gamma: np.ndarray,
                       beta: np.ndarray) -> Dict[str, np.ndarray]:
  """ElectraClassificationHead weights equal to one dense layer (kernel [H, n], bias [n])
  on [CLS] vectors of the encoder whose last LayerNorm has `gamma`, `beta` (see the
  module doc)."""
  hidden = kernel.shape[0]
  bound = float(np.max(np.abs(gamma) * np.sqrt(hidden - 1) + np.abs(beta)))
  shift = np.full([hidden], bound + GELU_IDENTITY_FROM, np.float64)
  kernel64 = kernel.astype(np.float64)
  return {
      "classifier.dense.weight": np.eye(hidden, dtype=np.float32),
      "classifier.dense.bias": shift.astype(np.float32),
      "classifier.out_proj.weight": np.ascontiguousarray(kernel.T, np.float32),
      "classifier.out_proj.bias": (bias - shift @ kernel64).astype(np.float32),
  }


def token_classifier_weights(kernel: np.ndarray, bias: np.ndarray
                             ) -> Dict[str, np.ndarray]:
  """ElectraForTokenClassification's classifier: the tagging head, on every piece."""
  return {"classifier.weight": np.ascontiguousarray(kernel.T, np.float32),
          "classifier.bias": np.asarray(bias, np.float32)}


def span_weights(start_kernel: np.ndarray, start_bias: np.ndarray,
                 end_kernel: np.ndarray, end_bias: np.ndarray) -> Dict[str, np.ndarray]:
  """ElectraForQuestionAnswering's qa_outputs (row 0 the start, row 1 the end) of two
  independent one-unit dense layers (kernels [H, 1])."""
  kernel = np.concatenate([start_kernel, end_kernel], axis=1)
  return {"qa_outputs.weight": np.ascontiguousarray(kernel.T, np.float32),
          "qa_outputs.bias": np.concatenate([start_bias, end_bias]).astype(np.float32)}


# config.json fields with only one value in the original architecture.
FIXED = {"position_embedding_type": "absolute", "layer_norm_eps": 1e-12}
# ModelConfig's fields that ElectraConfig names alike (embedding_size aside: ours may be
# None, meaning hidden_size).
SHARED_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "hidden_act", "hidden_dropout_prob",
                 "attention_probs_dropout_prob", "max_position_embeddings",
                 "type_vocab_size", "initializer_range")


def config_json(config: ModelConfig, architecture: str, **extra) -> Dict[str, object]:
  return {"architectures": [architecture], "model_type": "electra",
          "embedding_size": config.embedding_width,
          **{name: getattr(config, name) for name in SHARED_FIELDS},
          "pad_token_id": 0, **FIXED, **extra}


def classification_labels(labels: List[str]) -> Dict[str, object]:
  """id2label/label2id (and problem_type) of a classifier; regression for None."""
  if labels is None:
    return {"id2label": {"0": "score"}, "label2id": {"score": 0},
            "problem_type": "regression"}
  return {"id2label": {str(i): label for i, label in enumerate(labels)},
          "label2id": {label: i for i, label in enumerate(labels)},
          "problem_type": "single_label_classification"}


def tokenizer_files(lower_case: bool, strip_accents: bool, max_length: int
                    ) -> Dict[str, Dict[str, object]]:
  """tokenizer_config.json and special_tokens_map.json of BERT's WordPiece tokenizer,
  normalising the text as ours (data_prep/normalization.py: accents stripped only when
  lower-casing, which transformers reads the same way)."""
  special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
             "cls_token": "[CLS]", "mask_token": "[MASK]"}
  return {"tokenizer_config.json": {
              "tokenizer_class": "ElectraTokenizer", "do_lower_case": lower_case,
              "strip_accents": strip_accents, "tokenize_chinese_chars": True,
              "model_max_length": max_length, **special},
          "special_tokens_map.json": special}


# Weights in transformers' files that no mapping reads: a buffer, and the generator's
# output embeddings (tied to its word embeddings).
UNMAPPED = re.compile(r"(\.position_ids|^generator_lm_head\.weight)$")


# The model types read, each with the scope its task and pre-training models put the
# encoder's weights under (a bare ElectraModel or BertModel has none).
ENCODER_SCOPES = {"electra": "electra.", "bert": "bert."}
# BERT's pooler (dense + tanh on [CLS], for next-sentence prediction), under "electra."
# once renamed: ELECTRA's task heads read the [CLS] state itself.
POOLER = "electra.pooler."


def role(config: Dict[str, object]) -> str:
  """"generator" for transformers' masked LM, else "discriminator" (its pre-training
  model, the bare ElectraModel, or a fine-tuned one: the discriminator's encoder)."""
  return "generator" if config.get("architectures", [""])[0] == GENERATOR else \
      "discriminator"


# ---- reading a transformers directory -------------------------------------------------

HF_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# config.json states every size: none is inferred.
INFERRED = ()


def _is_hf_dir(path: str) -> bool:
  # Our export/ also holds a config.json (BertConfig fields, no model_type).
  if not os.path.isfile(os.path.join(path, "config.json")):
    return False
  if any(os.path.isfile(os.path.join(path, f)) for f in HF_WEIGHT_FILES):
    return True
  return "model_type" in read_json(os.path.join(path, "config.json"))


def hf_config(folder: str) -> Dict:
  path = os.path.join(folder, "config.json")
  config = read_json(path)
  if config.get("model_type") not in ENCODER_SCOPES:
    kind = ", ".join(config.get("architectures") or []) or "no architectures"
    raise CheckpointError(f"{path}: model_type {config.get('model_type')!r} ({kind}), "
                          "not ELECTRA; expected a Hugging Face ELECTRA directory "
                          "(model_type \"electra\"), or BERT's (\"bert\") to fine-tune")
  return config


def is_bert(folder: str) -> bool:
  return hf_config(folder)["model_type"] == "bert"


def bert_refused(folder: str, needs: str) -> CheckpointError:
  return CheckpointError(
      f"{folder}/config.json: model_type \"bert\" is read as a discriminator's encoder, "
      f"for fine-tuning only; {needs} is ELECTRA's, and a BERT directory has none")


def hf_parts(path: str) -> Dict[str, str]:
  """{"discriminator"/"generator": directory} of a Hugging Face directory or of a folder
  holding one of each; {} for anything else."""
  if not path or not os.path.isdir(path):
    return {}
  if _is_hf_dir(path):
    return {role(hf_config(path)): path}
  if any(f.endswith(".index") for f in os.listdir(path)):
    return {}
  parts = {}
  for folder in sorted(os.path.join(path, f) for f in os.listdir(path)):
    if os.path.isdir(folder) and _is_hf_dir(folder):
      kind = role(hf_config(folder))
      if kind in parts:
        raise CheckpointError(f"{path}: holds two Hugging Face {kind}s ({parts[kind]}, "
                              f"{folder}); expected one {DISCRIMINATOR} and one "
                              f"{GENERATOR} directory")
      parts[kind] = folder
  return parts


def locate(path: str) -> Optional[str]:
  """`path` when it is a Hugging Face ELECTRA directory, or a folder holding a
  discriminator's and a generator's; None for anything else. Transformers' weights
  without their config.json (in `path` or a folder of it) are no checkpoint of either
  format: refused, naming what is missing."""
  if hf_parts(path):
    return path
  if os.path.isdir(path) and not any(f.endswith(".index") for f in os.listdir(path)):
    for folder in [path] + sorted(os.path.join(path, f) for f in os.listdir(path)):
      weights = [os.path.join(folder, name) for name in HF_WEIGHT_FILES
                 if os.path.isfile(os.path.join(folder, name))]
      if weights and not os.path.isfile(os.path.join(folder, "config.json")):
        raise CheckpointError(
            f"{path}: {weights[0]} is Hugging Face weights without their config.json: a "
            f"Hugging Face directory needs the config.json downloaded with them, in "
            f"{folder}")
  return None


def part_held(path: str) -> str:
  parts = hf_parts(path)
  return "pair" if len(parts) == 2 else next(iter(parts))


def saved_model_config(path: str) -> None:
  """None: transformers' config.json is one network's, read per part by `model_config`."""
  del path


def vocab_files(path: str) -> List[str]:
  """The discriminator's vocab.txt first."""
  parts = hf_parts(path)
  return [os.path.join(parts[kind], "vocab.txt") for kind in sorted(parts)]


def _sizes(folder: str) -> Dict:
  """Our ModelConfig fields from the folder's ElectraConfig (the inverse of config_json),
  refused when it names a field the original architecture lacks."""
  config = hf_config(folder)
  for field, value in FIXED.items():
    if config.get(field, value) != value:
      raise CheckpointError(f"{folder}/config.json: {field} {config[field]!r}: the "
                            f"original ELECTRA has {value!r}")
  return {name: config[name] for name in ("embedding_size", *SHARED_FIELDS)
          if name in config}


def model_config(path: str, part: str = "pair") -> ModelConfig:
  parts = hf_parts(path)
  disc, gen = parts.get("discriminator"), parts.get("generator")
  if disc is not None and part != "discriminator" and is_bert(disc):
    raise bert_refused(disc, "the generator this needs")
  if part == "generator" or disc is None:
    if gen is None or part != "generator":
      raise CheckpointError(f"{path}: a Hugging Face generator ({GENERATOR}) only; "
                            f"cannot load the {part}; load it with part='generator'")
    values = dict(_sizes(gen), generator_hidden_size=1.0, generator_layers=1.0)
    source = gen
  else:
    values, source = _sizes(disc), disc
    if part == "pair":
      if gen is None:
        raise CheckpointError(
            f"{path}: a Hugging Face discriminator only; the pair needs its generator "
            f"too: put both directories ({DISCRIMINATOR} and {GENERATOR}) in one "
            "folder and give that folder")
      theirs = _sizes(gen)
      width = values.get("embedding_size") or values["hidden_size"]
      values.update(generator_hidden_size=theirs["hidden_size"] / values["hidden_size"],
                    generator_layers=theirs["num_hidden_layers"] /
                    values["num_hidden_layers"],
                    untied_generator_embeddings=theirs.get("embedding_size") != width)
  where = f"{source}/config.json"
  try:
    config = ModelConfig.from_dict(values, source=where)
  except ValueError as e:  # named once: the field checks name it already
    raise CheckpointError(str(e) if str(e).startswith(where) else f"{where}: {e}") \
        from None
  if part == "pair":
    # The generator's other sizes follow from its width, as in the original.
    derived = config.generator_config()
    for field in ("vocab_size", "embedding_size", "num_attention_heads",
                  "intermediate_size", "hidden_act", "max_position_embeddings",
                  "type_vocab_size"):
      value = theirs.get(field)
      expected = derived.embedding_width if field == "embedding_size" else \
          getattr(derived, field)
      if value is not None and value != expected:
        raise CheckpointError(f"{gen}/config.json: {field} {value}, but a generator of "
                              f"hidden size {derived.hidden_size} beside this "
                              f"discriminator has {expected}")
  return config


def _weights(folder: str) -> Tuple[str, Dict[str, np.ndarray]]:
  """(file, its float32 arrays by transformers' name, under "electra." whatever the
  model type, as hf_name names them)."""
  safetensors_file, torch_file = (os.path.join(folder, f) for f in HF_WEIGHT_FILES)
  if os.path.isfile(safetensors_file):
    import safetensors.numpy  # pylint: disable=g-import-not-at-top
    try:
      weights = safetensors.numpy.load_file(safetensors_file)
    except (OSError, ValueError, safetensors.SafetensorError) as e:
      raise CheckpointError(f"{safetensors_file}: not a readable safetensors file "
                            f"({e})") from None
    path = safetensors_file
  elif os.path.isfile(torch_file):
    try:
      import torch  # pylint: disable=g-import-not-at-top
    except ImportError:
      raise CheckpointError(f"{torch_file}: reading pytorch_model.bin needs torch (pip "
                            "install torch); or give a model.safetensors") from None
    try:
      state = torch.load(torch_file, map_location="cpu", weights_only=True)
    except Exception as e:  # pylint: disable=broad-except  # torch's many unpickling errors
      raise CheckpointError(f"{torch_file}: not a readable PyTorch state dict "
                            f"({cli.first_line(e)})") from None
    weights = {k: v.float().numpy() for k, v in state.items()}
    path = torch_file
  else:
    raise CheckpointError(f"{folder}: no {' or '.join(HF_WEIGHT_FILES)} beside its "
                          "config.json")
  scope = ENCODER_SCOPES[hf_config(folder)["model_type"]]
  if any(name.startswith(scope) for name in weights):
    weights = {"electra." + name[len(scope):] if name.startswith(scope) else name: value
               for name, value in weights.items()}
  else:  # a bare ElectraModel or BertModel
    weights = {f"electra.{name}": value for name, value in weights.items()}
  return path, weights


# Where the weights show config.json's sizes: the first dimension of a weight (named in
# ELECTRA's scope, as _weights renames), and the count of the encoder's layers.
SIZE_WEIGHTS = {
    "vocab_size": "electra.embeddings.word_embeddings.weight",
    "embedding_size": "electra.embeddings.LayerNorm.weight",
    "hidden_size": "electra.encoder.layer.0.output.LayerNorm.weight",
    "intermediate_size": "electra.encoder.layer.0.intermediate.dense.weight",
    "max_position_embeddings": "electra.embeddings.position_embeddings.weight",
    "type_vocab_size": "electra.embeddings.token_type_embeddings.weight"}
LAYER = re.compile(r"^electra\.encoder\.layer\.(\d+)\.")


def check_sizes(folder: str, file: str, weights: Dict[str, np.ndarray]):
  """Refuses a config.json whose sizes contradict its weights' shapes (an edited or
  another model's config.json): the model built from it would miss weights."""
  config = hf_config(folder)
  held = {field: (weights[name].shape[0], f"{name} is {list(weights[name].shape)}")
          for field, name in SIZE_WEIGHTS.items() if name in weights}
  layers = {int(m.group(1)) for m in map(LAYER.match, weights) if m}
  if layers:
    held["num_hidden_layers"] = (max(layers) + 1, f"layers 0-{max(layers)}")
  for field, (size, shown) in held.items():
    if field in config and config[field] != size:
      raise CheckpointError(f"{folder}/config.json: {field} {config[field]}, but the "
                            f"weights in {file} have {size} ({shown}); expected the "
                            "config.json saved with these weights")


def load(mapping, path: str, what: str):
  """Assigns the mapping from transformers' weights, each looked up by hf_name (kernels
  transposed); every one must be present with its shape, and nothing of the encoder
  left over (transformers' heads other than ELECTRA's two are ignored)."""
  parts = hf_parts(path)
  bert = {folder for folder in parts.values() if is_bert(folder)}
  groups = {}
  for original, variable, shape in mapping:
    generator = what == "generator" or original.startswith(("generator/",
                                                             "generator_predictions/"))
    folder = parts.get("generator" if generator else "discriminator")
    if folder is None:
      model_config(path, what)  # raises, saying which directory is missing
    name, kernel = hf_name(original)
    if folder in bert and not name.startswith("electra."):
      raise bert_refused(folder, f"the {what}'s head ({name.split('.')[0]})")
    groups.setdefault(folder, []).append(
        (name, variable, tuple(reversed(shape)) if kernel else shape, kernel))
  files = {folder: _weights(folder) for folder in groups}
  for folder, entries in groups.items():
    file, weights = files[folder]
    check_sizes(folder, file, weights)
    check_mapping([entry[:3] for entry in entries],
                  {name: value.shape for name, value in weights.items()}, file, what,
                  "weight", "its config.json")
    used = {name for name, _, _, _ in entries}
    if folder in bert:
      unread = {n for n in weights if n.startswith(POOLER) or not n.startswith("electra.")}
      if unread:
        print(f"note: {file}: BERT's pooler and heads ({len(unread)} weights) are not "
              "read: a fine-tuning head reads the [CLS] state itself", flush=True)
      weights = {n: v for n, v in weights.items() if n not in unread}
    left = [n for n in weights if n.startswith("electra.") and n not in used
            and not UNMAPPED.search(n)]
    # A generator beside its discriminator holds a copy of the shared embeddings.
    shared = parts.get("discriminator")
    if folder != shared and shared in files:
      other = files[shared][1]
      copies = [n for n in left if n.startswith("electra.embeddings.") and n in other]
      differ = [n for n in copies if not np.array_equal(weights[n], other[n])]
      if differ:
        raise CheckpointError(f"{file}: {len(differ)} embedding weight(s) differ from "
                              f"the discriminator's, which the generator shares in "
                              f"ELECTRA: {cli.listed(differ)}")
      left = [n for n in left if n not in copies]
    if left:
      raise CheckpointError(f"{file}: {len(left)} weight(s) its config.json does not "
                            f"use: {cli.listed(left)}")
  for folder, entries in groups.items():
    weights = files[folder][1]
    for name, variable, _, kernel in entries:
      value = weights[name].T if kernel else weights[name]
      variable.assign(np.reshape(value, variable.shape))
