"""Scores SQuAD predictions as the official v1.1 and v2.0 evaluation scripts do.

  python -m tools.squad_eval DATA.json PREDICTIONS.json [--na-prob-file NA.json]

prints a JSON object with exact_match and f1 in percent (and the v2.0 fields).
"""

import argparse
import json
import sys
from typing import List, Optional

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from finetune.errors import DataError
from finetune.qa.squad_metrics import (check_coverage, check_layout, evaluate,
                                        expect_mapping, load_json)
from util import cli


def main(argv: Optional[List[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("data_file", help="SQuAD JSON data (v1.1 or v2.0)")
  parser.add_argument("pred_file", help="JSON object of question id: answer text")
  parser.add_argument("--na-prob-file", help="JSON object of question id: no-answer score")
  args = parser.parse_args(argv)

  def score() -> int:
    try:
      data = load_json(args.data_file, "SQuAD data")
      if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(f"{args.data_file}: expected a SQuAD JSON object with a \"data\" "
                        "list")
      predictions = expect_mapping(load_json(args.pred_file, "predictions"),
                                   args.pred_file, "predictions", str)
      na_probs = None
      if args.na_prob_file:
        na_probs = expect_mapping(load_json(args.na_prob_file, "no-answer scores"),
                                  args.na_prob_file, "no-answer scores", (int, float))
      check_layout(data["data"], args.data_file)
      missing = check_coverage(data["data"], predictions, args.pred_file, args.data_file)
      result = evaluate(data["data"], predictions, na_probs)
    except (KeyError, TypeError) as e:
      raise DataError(f"{args.data_file}: malformed SQuAD data: {e!r}") from None
    if missing:
      # The official scripts print a line per such question; one count says the same.
      v2 = "total" in result  # v2.0 scores only the predicted questions
      print(f"warning: {missing} question(s) of {args.data_file} have no prediction in "
            f"{args.pred_file}; " + ("they are left out of the scores" if v2 else
                                     "they score 0") + ", as in the official script",
            file=sys.stderr)
    print(json.dumps(result))
    return 0
  return cli.run_command(score)


if __name__ == "__main__":
  sys.exit(main())
