"""The pre-training objectives by the config's `objective`: masked LM (masked_lm.py,
BERT's), ELECTRA (electra.py) and Electric (electric.py); a new one: docs/architecture.md,
"How to extend it"."""

from pretrain import config as pretrain_config
from pretrain.objectives.electra import Electra
from pretrain.objectives.electric import Electric
from pretrain.objectives.masked_lm import MaskedLM

OBJECTIVES = {objective.name: objective for objective in (MaskedLM, Electra, Electric)}
assert tuple(OBJECTIVES) == pretrain_config.OBJECTIVES, "pretrain/config.py OBJECTIVES"


def objective_for(config: pretrain_config.PretrainingConfig) -> MaskedLM:
  """The objective `config` names, for it (every objective extends MaskedLM)."""
  return OBJECTIVES[config.objective](config)
