"""Exports a fine-tuned model in the forms asked for (export/'s writers).

  python -m tools.export --model-dir DIR --output OUT
      [--format litert|onnx|all|litert_mixed_int8|saved_model|huggingface|original[,...]]
      [--calibration-examples N] [--data-dir DATA] [--seed S] [--smoothing-alpha A|none]
      [--outlier-channels K]

DIR is a fine-tuned trial dir of run_finetuning.py (<model_dir>_<trial>) of any task
family; OUT, a new folder, receives the forms' files (docs/deploying.md lists each
form's). `python -m tools.export_lite`, its former name, runs the same.
"""

import argparse
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from export import registry  # pylint: disable=wrong-import-position
from util import cli, hparams  # pylint: disable=wrong-import-position


def forms_flag(value: str):
  """--format: a form, "all" (litert and onnx), or several joined by commas."""
  forms = []
  for name in value.split(","):
    for form in (registry.DEPLOYMENT if name == "all" else [name]):
      if form not in registry.WRITERS:
        raise argparse.ArgumentTypeError(
            f"{name!r}: expected all or one of {', '.join(registry.WRITERS)}, several "
            "joined by commas")
      if form not in forms:
        forms.append(form)
  return forms


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model-dir", required=True,
                      help="a fine-tuned trial dir (<model_dir>_<trial>)")
  parser.add_argument("--output", required=True, help="the new export folder")
  parser.add_argument("--format", type=forms_flag, default=["litert"],
                      help="litert (default), onnx, all (both), litert_mixed_int8, "
                           "saved_model, huggingface, original; several joined by commas")
  parser.add_argument("--calibration-examples", type=int, default=256,
                      help="training examples the full- and mixed-int8 models are "
                           "calibrated on")
  parser.add_argument("--data-dir", default="",
                      help="where the task's training split is (default: the run's)")
  parser.add_argument("--seed", type=int, default=0, help="of the calibration sample")
  # Off by default: on all-MiniLM-L6-v2 it moved no dev metric of full or mixed int8
  # (bench/RESULTS.md, "Outlier migration").
  parser.add_argument("--smoothing-alpha", default="none",
                      help="migrate the calibrated forms' dense-input outliers into the "
                           "weights with this SmoothQuant alpha (0 to 1; 0.5 is the "
                           "paper's; default none: no migration)")
  parser.add_argument("--outlier-channels", type=int,
                      help="channels per block whose FFN outputs and residual sums full "
                           "int8 (of litert) keeps in int8 tensors of their own, apart "
                           f"from the others' (default {registry.OUTLIER_CHANNELS}; 0: "
                           "none)")
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, calibration_examples={"at_least": 1},
                  seed=hparams.SEED, outlier_channels={"at_least": 0})
  if args.outlier_channels is None:
    args.outlier_channels = registry.OUTLIER_CHANNELS
  elif "litert" not in args.format:  # it would do nothing
    parser.error(f"--outlier-channels is full int8's, of --format litert; --format "
                 f"{','.join(args.format)} writes no full int8")
  cli.check_given(parser, args, "model_dir", "output")
  cli.check_fraction_or_none(parser, args, "smoothing_alpha")

  def write() -> int:
    files = registry.export(args.model_dir, args.output, args.format,
                            args.calibration_examples, args.data_dir, args.seed,
                            smoothing_alpha=args.smoothing_alpha,
                            outlier_channels=args.outlier_channels)
    reader = (" and reader.py" if any(registry.WRITERS[f].READER for f in args.format)
              else "")
    print(f"wrote {args.output}: {', '.join(f.rsplit('/', 1)[-1] for f in files)}"
          + reader)
    return 0
  return cli.run_command(write)


if __name__ == "__main__":
  sys.exit(main())
