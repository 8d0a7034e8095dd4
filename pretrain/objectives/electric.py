"""Electric (`objective: electric`): the discriminator as an energy model. Its step is
ELECTRA's (electra.py) with its two differences declared here.

A two-tower cloze generator (model/electra.py: TwoTowerGenerator) gives logits at every
position and is trained on every candidate token; every masked position is labelled
"replaced", even where the sample is the original, and the discriminator's logits get
stop_grad(log q(x_t)) + log(mask_prob / (1 - mask_prob)) added, q being the cloze
model's probability of the token it sees.
"""

import math
from typing import Optional

import tensorflow as tf

from pretrain.objectives.electra import Electra


class Electric(Electra):

  name = "electric"
  every_masked_is_fake = True

  @property
  def replaced_prior(self) -> Optional[float]:
    return None  # the logits already carry log(mask_prob / (1 - mask_prob))

  def logit_offset(self, cloze_logits, corrupted_ids):
    log_q = (tf.gather(cloze_logits, corrupted_ids, batch_dims=2) -
             tf.reduce_logsumexp(cloze_logits, -1))
    mask_prob = self.config.mask_prob
    return tf.stop_gradient(log_q) + math.log(mask_prob / (1 - mask_prob))
