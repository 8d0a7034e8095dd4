"""The optimizer and learning-rate schedule of the original ELECTRA (its optimization.py).

One Adam variant (`AdamWeightDecay`: no bias correction, decoupled weight decay) and one
schedule (`WarmupPolynomialDecay`) serve pre-training and fine-tuning.

Why not tf-models-official: its AdamWeightDecay (official/modeling/optimization/
legacy_adamw.py, also what official/nlp/optimization.create_optimizer builds) subclasses
Keras Adam, so it applies bias correction, and it clips each replica's gradients before
the all-reduce. Its warmups replace the decayed rate during warmup instead of multiplying
it: nlp WarmUp gives lr * step / W (the original: lr * (1 - step / T) ** power * step /
W), PolynomialWarmUp and LinearWarmup ramp towards the rate of step W and give a non-zero
rate at step 0. None matches the original's numbers, so the update rule and the warmup
are written here; the polynomial decay itself is tf_keras's PolynomialDecay, which equals
tf.compat.v1.train.polynomial_decay(cycle=False).

The optimizer is a tf_keras legacy OptimizerV2 (MirroredStrategy, LossScaleOptimizer
and tf.train.Checkpoint work as for any); its slots are named "adam_m" and "adam_v",
like the original's `<var>/adam_m` and `<var>/adam_v`.
"""

import re
from typing import Callable, Optional

import tensorflow as tf
import tf_keras

# variable_key: the key OptimizerV2 itself files slots under, the same for a mirrored
# variable and each replica's copy.
from model.internals import variable_key

SLOT_NAMES = ("adam_m", "adam_v")
GRADIENT_CLIP_NORM = 1.0


class WarmupPolynomialDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
  """lr * (1 - min(step, T) / T) ** power * min(1, step / num_warmup_steps), `step`
  the number of updates already applied (the module's doc: why not tf-models')."""

  def __init__(self, learning_rate: float, num_train_steps: int, num_warmup_steps: int,
               power: float = 1.0, name: str = "WarmupPolynomialDecay"):
    super().__init__()
    if num_train_steps <= 0:
      raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
    if num_warmup_steps < 0:
      raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
    self.learning_rate = learning_rate
    self.num_train_steps = num_train_steps
    self.num_warmup_steps = num_warmup_steps
    self.power = power
    self.name = name
    self._decay = tf_keras.optimizers.schedules.PolynomialDecay(
        learning_rate, num_train_steps, end_learning_rate=0.0, power=power, cycle=False)

  def __call__(self, step):
    with tf.name_scope(self.name):
      step = tf.cast(step, tf.float32)
      rate = self._decay(step)
      if self.num_warmup_steps:  # the original divides by zero here; 0 means no warmup
        rate *= tf.minimum(1.0, step / float(self.num_warmup_steps))
      return rate

  def get_config(self):
    return {"learning_rate": self.learning_rate, "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps, "power": self.power,
            "name": self.name}


def own_warmup(multiplier: float, own_warmup_steps: int, shared_warmup_steps: int
               ) -> Callable[[tf.Tensor], tf.Tensor]:
  """A step-dependent lr multiplier that gives some variables a linear warmup of their
  own: the shared schedule's warmup factor min(1, step / shared_warmup_steps) is
  replaced by min(1, step / own_warmup_steps), the decay kept. (At step 0 with a shared
  warmup the shared rate is 0, so the factor's 0/0 is taken as 0.)"""
  def factor(steps, step):
    return tf.minimum(1.0, step / float(steps)) if steps else tf.ones_like(step)

  def schedule(step):
    step = tf.cast(step, tf.float32)
    return multiplier * tf.math.divide_no_nan(factor(own_warmup_steps, step),
                                              factor(shared_warmup_steps, step))
  return schedule


def _base_variable_name(name: str) -> str:
  """'a/b/kernel/replica_1:0' -> 'a/b/kernel' (replica copies share a role)."""
  name = re.sub(r":\d+$", "", name)
  return re.sub(r"/replica_\d+$", "", name)


def uses_weight_decay(variable) -> bool:
  """False for LayerNorm parameters and biases, as the original's exclusion list.

  The original matched "LayerNorm", "layer_norm" and "bias" anywhere in TF1 names. Keras
  names differ ("self_attention_layer_norm/gamma:0", tfm EinsumDense "query/bias:0" of
  shape [heads, head_size], "output_bias:0"), so the role is read from the last name
  component (bias, or a normalization layer's gamma/beta) and from any component naming
  a layer norm, whatever its rank.
  """
  parts = _base_variable_name(variable.name).lower().split("/")
  if any("layernorm" in part or "layer_norm" in part for part in parts):
    return False
  leaf = parts[-1]
  return not (leaf.endswith("bias") or leaf in ("gamma", "beta"))


# Compiled (XLA, once per variable shape and decay, shared by every optimizer): the
# rule's dozen elementwise operations, the clipping's scale and the rate's multiplier
# folded in, become one pass over each variable and its moments. (Clipped apart, as
# Keras clips, every gradient took a pass of its own and the step two ops more per
# variable. One call for every variable instead saved no more and compiled 8-10 s
# longer for electra_small: bench/RESULTS.md, "The step's per-step costs, cut".) The
# same operations in the same order, so the numbers are the formula's to float
# rounding. (TensorFlow's fused Adam kernel would not do: it computes 1 - beta_2 in
# float32, 1.3e-5 off the original's 0.001.) A decay of 0 adds 0 * param, exactly
# nothing.
@tf.function(jit_compile=True, autograph=False)
def _adam_weight_decay_update(grad, param, m, v, scale, lr, multiplier, decay, beta_1,
                              beta_2, epsilon):
  """(param, m, v) after one step of the rule in AdamWeightDecay's doc, the gradient
  first multiplied by `scale`, the rate lr times `multiplier`."""
  grad = grad * scale
  next_m = beta_1 * m + (1.0 - beta_1) * grad
  next_v = beta_2 * v + (1.0 - beta_2) * tf.square(grad)
  update = next_m / (tf.sqrt(next_v) + epsilon) + decay * param
  return param - lr * multiplier * update, next_m, next_v


class AdamWeightDecay(tf_keras.optimizers.legacy.Optimizer):
  """The original's AdamWeightDecayOptimizer, as a Keras optimizer. For each variable
  with gradient g (after global-norm clipping):
    m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
    update = m / (sqrt(v) + eps) [+ weight_decay_rate * param if decayed]
    param <- param - lr(step) * lr_multiplier(var) * update

  lr_multiplier(var) is a float, or a function of the step (own_warmup).
  """

  def __init__(self, learning_rate, weight_decay_rate: float = 0.0,
               beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
               lr_multiplier: Optional[Callable[[tf.Variable], float]] = None,
               name: str = "AdamWeightDecay"):
    super().__init__(name)  # its clipping is ours, folded into the update
    self._set_hyper("learning_rate", learning_rate)
    self.weight_decay_rate = weight_decay_rate
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon
    self.lr_multiplier = lr_multiplier
    # Per-variable settings, decided once from the variables the caller passes (for a
    # distributed variable, the mirrored container, never a replica's copy).
    self._variable_settings = {}

  @property
  def learning_rate_schedule(self):
    return self._get_hyper("learning_rate")

  def learning_rate_at(self, step):
    """The base learning rate for the update applied when `iterations` == step."""
    rate = self.learning_rate_schedule
    return rate(step) if callable(rate) else tf.constant(rate, tf.float32)

  def _create_slots(self, var_list):
    for var in var_list:
      key = variable_key(var)
      if key not in self._variable_settings:
        multiplier = 1.0 if self.lr_multiplier is None else self.lr_multiplier(var)
        if not callable(multiplier):  # else a schedule of the step (own_warmup)
          multiplier = float(multiplier)
        decay = self.weight_decay_rate if uses_weight_decay(var) else 0.0
        self._variable_settings[key] = (multiplier, decay)
      for slot in SLOT_NAMES:
        self.add_slot(var, slot)

  def variable_settings(self, var):
    """(learning-rate multiplier, weight-decay rate) used for `var`."""
    return self._variable_settings[variable_key(var)]

  def _distributed_apply(self, distribution, grads_and_vars, apply_state, name):
    """Keras' apply after its aggregation, without its clipping: the clipping's scale
    computed once per device and folded into each variable's update."""
    del apply_state, name  # the rate is made below, on each device
    grads, variables = zip(*grads_and_vars)
    local = distribution.experimental_local_results
    updates = []
    for device, copies in enumerate(zip(*map(local, variables))):
      with tf.device(copies[0].device):
        grads_here = [local(grad)[device] for grad in grads]
        scale, lr = self._clip_scale(grads_here), self._decayed_lr(tf.float32)
        for grad, copy, var in zip(grads_here, copies, variables):
          multiplier, decay = self.variable_settings(var)
          if callable(multiplier):
            multiplier = multiplier(self.iterations)
          # The original densifies embedding gradients: rows without a gradient still
          # see their moments decay and their weights decayed: the dense rule applies.
          if isinstance(grad, tf.IndexedSlices):
            grad = tf.math.unsorted_segment_sum(grad.values, grad.indices,
                                                tf.shape(copy)[0])
          moments = [local(self.get_slot(var, slot))[device] for slot in SLOT_NAMES]
          values = _adam_weight_decay_update(
              grad, copy.value(), *[moment.value() for moment in moments], scale, lr,
              tf.cast(multiplier, tf.float32), decay, self.beta_1, self.beta_2,
              self.epsilon)
          updates += [variable.assign(value)
                      for variable, value in zip((copy, *moments), values)]
    with tf.control_dependencies(updates):
      return self.iterations.assign_add(1, read_value=False)

  def _clip_scale(self, grads):
    """tf.clip_by_global_norm's factor of the gradients (summed over replicas) at
    GRADIENT_CLIP_NORM: NaN when their norm is not finite, as there."""
    norm = tf.linalg.global_norm(grads)
    return GRADIENT_CLIP_NORM * tf.minimum(1.0 / norm, 1.0 / GRADIENT_CLIP_NORM) + (
        norm - norm)

  def get_config(self):
    config = super().get_config()
    config.update({
        "learning_rate": self._serialize_hyperparameter("learning_rate"),
        "weight_decay_rate": self.weight_decay_rate, "beta_1": self.beta_1,
        "beta_2": self.beta_2, "epsilon": self.epsilon,
    })  # lr_multiplier is a Python callable: not serializable, pass it again
    return config


def create_optimizer(learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                     weight_decay_rate: float = 0.01, lr_decay_power: float = 1.0,
                     lr_multiplier: Optional[Callable[[tf.Variable], float]] = None,
                     mixed_precision: str = "float32"):
  """The original's optimizer: AdamW (b1 0.9, b2 0.999, eps 1e-6), clipping at 1.0.
  `lr_multiplier(variable)` scales each variable's learning rate, called once per
  variable. Under mixed_float16 it comes wrapped in a LossScaleOptimizer: float16
  gradients would underflow without it."""
  schedule = WarmupPolynomialDecay(learning_rate, num_train_steps, num_warmup_steps,
                                   power=lr_decay_power)
  optimizer = AdamWeightDecay(schedule, weight_decay_rate=weight_decay_rate,
                              lr_multiplier=lr_multiplier)
  if mixed_precision == "mixed_float16":
    return tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
  return optimizer


def logged_learning_rate(optimizer) -> Callable[[int], float]:
  """step -> the base learning rate of that step's update (the step-th, applied when
  `iterations` was step - 1): what the loop logs after `step` steps."""
  adam = getattr(optimizer, "inner_optimizer", optimizer)
  return lambda step: float(adam.learning_rate_at(step - 1))
