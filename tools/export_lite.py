"""Exports a fine-tuned sentence model for LiteRT (and ONNX Runtime), int8 included.

  python -m tools.export_lite --model-dir DIR --output OUT [--format litert|onnx|all]
      [--calibration-examples N] [--data-dir DATA] [--seed S]

DIR is a fine-tuned model directory of run_finetuning.py (<model_dir>_<trial>) of one
sentence classification or regression task. OUT, a new folder, receives
model_float32.tflite, model_dynamic_int8.tflite and model_full_int8.tflite (litert;
the full-int8 model calibrated on N examples of the task's training split, read under
DATA, by default the run's data_dir), model_float32.onnx and model_dynamic_int8.onnx
(onnx), vocab.txt, deploy.json and reader.py, which tokenizes as the project does and
runs a model file with ai-edge-litert or onnxruntime alone (finetune/deploy.py).
"""

import argparse
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from finetune import deploy  # pylint: disable=wrong-import-position
from util import cli  # pylint: disable=wrong-import-position


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model-dir", required=True,
                      help="a fine-tuned trial dir (<model_dir>_<trial>)")
  parser.add_argument("--output", required=True, help="the new export folder")
  parser.add_argument("--format", choices=(*deploy.FORMATS, "all"), default="litert")
  parser.add_argument("--calibration-examples", type=int, default=256,
                      help="training examples the full-int8 model is calibrated on")
  parser.add_argument("--data-dir", default="",
                      help="where the task's training split is (default: the run's)")
  parser.add_argument("--seed", type=int, default=0, help="of the calibration sample")
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, calibration_examples={"at_least": 1},
                  seed={"at_least": 0})
  cli.check_given(parser, args, "model_dir", "output")
  formats = list(deploy.FORMATS) if args.format == "all" else [args.format]

  def write() -> int:
    files = deploy.export(args.model_dir, args.output, formats,
                          args.calibration_examples, args.data_dir, args.seed)
    print(f"wrote {args.output}: {', '.join(f.rsplit('/', 1)[-1] for f in files)} "
          "and reader.py")
    return 0
  return cli.run_command(write)


if __name__ == "__main__":
  sys.exit(main())
