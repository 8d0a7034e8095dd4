"""The pre-training objectives, one class per file: masked LM (masked_lm.py, BERT's),
ELECTRA (electra.py) and Electric (electric.py), over the pieces in losses.py.

Each answers for its step (`compute`, top to bottom), the scalars it logs, its eval
outputs, the variables and parts it trains and its FLOPs and memory per step; the config's `objective` names one
(the original's switches electra_objective and electric_objective are its aliases). A
new objective is a class (most extend Electra) and a line in OBJECTIVES, its name in the
config's choices (pretrain/config.py OBJECTIVES).
"""

from pretrain import config as pretrain_config
from pretrain.objectives.electra import Electra
from pretrain.objectives.electric import Electric
from pretrain.objectives.masked_lm import MaskedLM

OBJECTIVES = {objective.name: objective for objective in (MaskedLM, Electra, Electric)}
assert tuple(OBJECTIVES) == pretrain_config.OBJECTIVES, "pretrain/config.py OBJECTIVES"


def objective_for(config: pretrain_config.PretrainingConfig) -> MaskedLM:
  """The objective `config` names, for it (every objective extends MaskedLM)."""
  return OBJECTIVES[config.objective](config)
