"""Hugging Face transformers' ELECTRA layout: its weight names, shapes and config.json.

Names follow from the original checkpoint's (model/checkpoint.py's mapping table) the
way transformers' own converter reads an original checkpoint: scopes become dotted
modules (layer_3 -> layer.3), kernel/gamma -> weight (kernels transposed to torch's
[out, in]), beta -> bias, an embedding table gets .weight, the discriminator's dense_1
is dense_prediction, the generator's output_bias is generator_lm_head.bias (its weight
is the word embeddings, tied), and a generator's own scope becomes "electra".

A sentence classifier is the one exception that is not a renaming: the original's head
(ours) is one dense layer on [CLS], transformers' ElectraClassificationHead is dense,
GELU, then out_proj. The export makes its dense the identity plus a shift c and folds
-c into out_proj's bias. With c larger than any [CLS] value can be below 6 (a LayerNorm
output is bounded: |x_i| <= |gamma_i| sqrt(H - 1) + |beta_i|), GELU is the identity in
float32 there (1 - Phi(6) ~ 1e-9), so the logits are ours up to rounding.

Reading goes the same way: model/checkpoint.py loads a transformers directory through
the same mapping table, looking each variable up by hf_name; `model_config_values`
turns transformers' config.json back into our sizes.
"""

import re
from typing import Dict, List, Tuple

import numpy as np

from model.config import ModelConfig

# Where the names of transformers' three ELECTRA classes start.
DISCRIMINATOR, GENERATOR, CLASSIFIER = ("ElectraForPreTraining", "ElectraForMaskedLM",
                                        "ElectraForSequenceClassification")
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
  """transformers' float32 weights from a mapping table (name, variable, shape)."""
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


def config_json(config: ModelConfig, architecture: str, **extra) -> Dict[str, object]:
  """transformers' ElectraConfig fields for a model of these sizes."""
  return {
      "architectures": [architecture], "model_type": "electra",
      "vocab_size": config.vocab_size, "embedding_size": config.embedding_width,
      "hidden_size": config.hidden_size, "num_hidden_layers": config.num_hidden_layers,
      "num_attention_heads": config.num_attention_heads,
      "intermediate_size": config.intermediate_size, "hidden_act": config.hidden_act,
      "hidden_dropout_prob": config.hidden_dropout_prob,
      "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
      "max_position_embeddings": config.max_position_embeddings,
      "type_vocab_size": config.type_vocab_size,
      "initializer_range": config.initializer_range, "layer_norm_eps": 1e-12,
      "pad_token_id": 0, "position_embedding_type": "absolute", **extra}


def classification_labels(labels: List[str]) -> Dict[str, object]:
  """id2label/label2id (and problem_type) of a classifier; regression for None."""
  if labels is None:
    return {"id2label": {"0": "score"}, "label2id": {"score": 0},
            "problem_type": "regression"}
  return {"id2label": {str(i): label for i, label in enumerate(labels)},
          "label2id": {label: i for i, label in enumerate(labels)},
          "problem_type": "single_label_classification"}


def tokenizer_files(lower_case: bool, max_length: int) -> Dict[str, Dict[str, object]]:
  """tokenizer_config.json and special_tokens_map.json of BERT's WordPiece tokenizer;
  accents are stripped exactly when lower-casing, as ours (strip_accents null)."""
  special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
             "cls_token": "[CLS]", "mask_token": "[MASK]"}
  return {"tokenizer_config.json": {
              "tokenizer_class": "ElectraTokenizer", "do_lower_case": lower_case,
              "strip_accents": None, "tokenize_chinese_chars": True,
              "model_max_length": max_length, **special},
          "special_tokens_map.json": special}


# Weights in transformers' files that no mapping reads: a buffer, and the generator's
# output embeddings (tied to its word embeddings).
UNMAPPED = re.compile(r"(\.position_ids|^generator_lm_head\.weight)$")
# config.json fields with only one value in the original architecture.
FIXED = {"position_embedding_type": "absolute", "layer_norm_eps": 1e-12}


def role(config: Dict[str, object]) -> str:
  """"generator" for transformers' masked LM, else "discriminator" (its pre-training
  model, the bare ElectraModel, or a fine-tuned one: the discriminator's encoder)."""
  return "generator" if config.get("architectures", [""])[0] == GENERATOR else \
      "discriminator"


def model_config_values(config: Dict[str, object]) -> Dict[str, object]:
  """Our ModelConfig fields from transformers' ElectraConfig (the inverse of
  config_json); raises ValueError naming a field the original architecture lacks."""
  for field, value in FIXED.items():
    if config.get(field, value) != value:
      raise ValueError(f"{field} {config[field]!r}: the original ELECTRA has {value!r}")
  names = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
           "num_attention_heads", "intermediate_size", "hidden_act",
           "hidden_dropout_prob", "attention_probs_dropout_prob",
           "max_position_embeddings", "type_vocab_size", "initializer_range")
  return {name: config[name] for name in names if name in config}
