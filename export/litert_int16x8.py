"""LiteRT's 16-bit-activation, 8-bit-weight form: model_int16x8.tflite, its int16
activation ranges calibrated as full int8's (the same seeded sample of the task's
training split, the same nodes kept float32). The form for a real pre-trained encoder,
whose activation outliers per-tensor int8 activations clip (docs/deploying.md); LiteRT
runs its int16 ops on reference kernels (XNNPACK takes none), so it is slower."""

from export import litert

NAME = "litert_int16x8"
READER = True
CALIBRATED = True
FORM = "int16x8"


def refusal(job) -> str:
  return litert.refusal(job)


def write(job, folder: str, log):
  return litert.write(job, folder, log, forms=(FORM,))
