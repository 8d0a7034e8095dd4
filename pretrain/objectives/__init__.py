"""The pre-training objectives, one class per file: masked LM (masked_lm.py, BERT's),
ELECTRA (electra.py) and Electric (electric.py), over the pieces in losses.py.

Each answers for its loss and eval outputs, the variables and parts it trains and its
FLOPs and memory per step; the config's switches (electra_objective,
electric_objective, as the original's) choose one. A new objective is a class (most
extend Electra) and a line in OBJECTIVES.
"""

from pretrain.config import PretrainingConfig
from pretrain.objectives.electra import Electra
from pretrain.objectives.electric import Electric
from pretrain.objectives.masked_lm import MaskedLM

# Asked in order; the first the config chooses is the objective (the masked LM, which
# every config chooses, is what is left).
OBJECTIVES = (Electric, Electra, MaskedLM)


def objective_for(config: PretrainingConfig) -> MaskedLM:
  """The objective `config` chooses, for it (every objective extends MaskedLM)."""
  chosen = next(objective for objective in OBJECTIVES if objective.chosen_by(config))
  return chosen(config)
