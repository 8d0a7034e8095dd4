"""FLOPs of a pre-training run: `python -m tools.flops --model-name electra_small`.

The config loaded as run_pretraining.py loads it (same flags); what it prints and how it
counts: docs/pretraining.md, "FLOPs".
"""

import argparse
import dataclasses
import json
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment


def summary(config, output_frac=None) -> dict:
  """Everything the command reports, as JSON-ready values."""
  from model import flops  # pylint: disable=g-import-not-at-top
  from pretrain.objectives import objective_for  # pylint: disable=g-import-not-at-top
  model = config.model_config()
  generator = model.generator_config()
  objective = objective_for(config)
  if output_frac is None:
    output_frac = objective.output_frac()
  counts = objective.flops(output_frac)
  # Weights beyond the discriminator's: none when one encoder plays both roles;
  # shared embeddings are counted once, in the discriminator.
  towers = objective.generator_towers if (
      objective.has_discriminator and model.untied_generator) else 0
  return {
      "model_name": config.model_name, "objective": objective.name,
      "vocab_size": config.vocab_size, "max_seq_length": config.max_seq_length,
      "train_batch_size": config.train_batch_size,
      "num_train_steps": config.num_train_steps, "output_frac": output_frac,
      **dataclasses.asdict(counts),
      "discriminator_parameters": flops.encoder_parameters(model),
      "generator_parameters": towers * flops.encoder_parameters(
          generator, own_embeddings=model.untied_generator_embeddings),
      "discriminator_layers": model.num_hidden_layers,
      "discriminator_hidden_size": model.hidden_size,
      "generator_layers": generator.num_hidden_layers,
      "generator_hidden_size": generator.hidden_size,
  }


def describe(s: dict) -> str:
  from util.progress import format_count  # pylint: disable=g-import-not-at-top
  generator = ("" if s["objective"] == "masked_lm" else
               f", generator {s['generator_layers']} x {s['generator_hidden_size']}")
  return "\n".join([
      f"{s['model_name']} ({s['objective']}): discriminator {s['discriminator_layers']} "
      f"layers x {s['discriminator_hidden_size']}{generator}; vocab {s['vocab_size']}",
      f"  batch {s['train_batch_size']} x {s['max_seq_length']} tokens; MLM head on "
      f"{s['output_frac']:.4g} of the positions",
      f"  training:  {s['train_flops_per_step']:.4g} FLOPs per step, "
      f"{s['train_flops_total']:.4g} over {s['num_train_steps']:,} steps",
      f"  inference: {s['infer_flops_per_sequence']:.4g} FLOPs per sequence "
      "(discriminator forward)",
      f"  parameters: discriminator encoder {format_count(s['discriminator_parameters'])}"
      f", generator beyond it {format_count(s['generator_parameters'])} (heads not "
      "counted)",
  ])


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model-name", default="electra_small",
                      help="run name; picks the size preset as run_pretraining.py does")
  parser.add_argument("--data-dir", default="data",
                      help="its vocab.txt sets vocab_size when present (default: data)")
  parser.add_argument("--hparams", default="",
                      help="JSON object (or a JSON file) of hyperparameters to override")
  parser.add_argument("--output-frac", type=float, default=None,
                      help="fraction of positions the MLM head runs on (default: "
                      "max_predictions_per_seq / max_seq_length; the original's table "
                      "used 0.15625)")
  parser.add_argument("--json", action="store_true", help="print one JSON object")
  args = parser.parse_args(argv)

  from pretrain import config as pretrain_config  # pylint: disable=g-import-not-at-top
  from util import cli, hparams  # pylint: disable=g-import-not-at-top
  cli.check_flags(parser, args, output_frac={"kind": float, "above": 0,
                                             "at_most": 1})

  def report() -> int:
    try:
      # vocab_size follows the vocabulary, where there is one (load_config).
      result = summary(pretrain_config.load_config(args.model_name, args.data_dir,
                                                   hparams.parse_hparams(args.hparams)),
                       args.output_frac)
    except TypeError as e:  # a hyperparameter of the wrong type: bad input, not a bug
      raise ValueError(str(e)) from None
    print(json.dumps(result) if args.json else describe(result))
    return 0
  return cli.run_command(report)


if __name__ == "__main__":
  sys.exit(main())
