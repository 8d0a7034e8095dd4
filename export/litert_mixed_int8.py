"""LiteRT's full-int8 form for a real pre-trained encoder: model_mixed_int8.tflite,
calibrated as full int8 (the same seeded sample of the task's training split, the same
nodes float32, the same outlier migration when asked) with each layer's residual sums and
its FFN float32: the FFN's two dense layers float32 in and out with int8 weights and the
GELU between them float32, where such encoders' activation outliers are that per-tensor
int8 activations clip (export/litert.py's _OUTLIER_NODES and
int8_outlier_dense_weights; bench/RESULTS.md has the measurements). Full int8's size;
integer-only in the attention's dense layers only."""

from export import litert

NAME = "litert_mixed_int8"
READER = True
CALIBRATED = True
FORM = "mixed_int8"


def refusal(job) -> str:
  return job.deployment_refusal("LiteRT")  # (its outlier channels stay float32: no groups)


def write(job, folder: str, log):
  return litert.write(job, folder, log, forms=(FORM,))
