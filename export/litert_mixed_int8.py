"""LiteRT's full-int8 form for a real pre-trained encoder: model_mixed_int8.tflite,
calibrated as full int8 with each layer's FFN and residual sums float32, its dense
layers' weights int8 (export/litert.py's _OUTLIER_NODES and int8_outlier_dense_weights
say why). Full int8's size; integer-only in the attention's dense layers only."""

from export import litert

NAME = "litert_mixed_int8"
READER = True
CALIBRATED = True
FORM = "mixed_int8"


def refusal(job) -> str:
  return job.deployment_refusal("LiteRT")  # (its outlier channels stay float32: no groups)


def write(job, folder: str, log):
  return litert.write(job, folder, log, forms=(FORM,))
