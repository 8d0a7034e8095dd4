"""Fine-tuning model: loading the pre-trained encoder and layer-wise learning rates."""

import numpy as np
import pytest

from finetune.modeling import FinetuningModel
from finetune.sentence.model import SentenceHead
from model.config import ModelConfig
from runs.pretrained import open_weights
from tests import numpy_electra
from tests.helpers import TINY, Objective, make_checkpoint, padded_batch


def test_encoder_loads_and_heads_read_cls(tmp_path):
  prefix, weights = make_checkpoint(tmp_path, TINY)
  config = ModelConfig.from_dict(dict(vocab_size=97, hidden_size=32, num_hidden_layers=2,
                                      embedding_size=24, max_position_embeddings=40))
  model = FinetuningModel(config, {"glue/sst2": SentenceHead(2),
                                   "glue/stsb": SentenceHead(1)})
  inputs = padded_batch(97)
  model.build_variables(inputs).load_pretrained(open_weights(prefix))
  out = model(inputs, training=False)
  hidden = numpy_electra.forward(weights, **inputs, disc_heads=1,
                                 gen_heads=1)["discriminator_hidden"][:, 0]
  for name, shape in (("glue/sst2", (3, 2)), ("glue/stsb", (3,))):
    head = model.heads[name].dense
    want = hidden @ head.kernel.numpy() + head.bias.numpy()
    assert out[name].shape == shape
    np.testing.assert_allclose(out[name].numpy(), want.reshape(shape), atol=1e-5)


@pytest.mark.parametrize("decay", [0.8, 0.9])
def test_layerwise_learning_rate_of_every_variable(decay):
  config = ModelConfig.from_size("debug", vocab_size=50, embedding_size=64)
  model = FinetuningModel(config, {"cola": SentenceHead(2)}).build_variables(
      padded_batch(50))
  multiplier = model.lr_multiplier(decay)
  layers = config.num_hidden_layers
  expected = {}
  for v in model.encoder.embeddings.trainable_variables:
    expected[id(v)] = decay ** (layers + 2)
  for v in model.encoder.embeddings_project.trainable_variables:
    expected[id(v)] = decay ** (layers + 2)
  for i, block in enumerate(model.encoder.transformer_layers):
    for v in block.trainable_variables:
      expected[id(v)] = decay ** (layers + 2 - (i + 1))
  for v in model.heads["cola"].trainable_variables:
    expected[id(v)] = 1.0
  assert len(expected) == len(model.trainable_variables)
  for v in model.trainable_variables:
    assert multiplier(v) == pytest.approx(expected[id(v)]), v.name


def test_gradient_accumulation_with_embedding_gradients_matches_the_full_batch(tmp_path):
  """Embedding gradients are IndexedSlices; accumulating them must equal one big batch
  (and clipping, active at this learning rate, must see the same global norm)."""
  import tensorflow as tf
  import tf_keras
  from training.optimization import create_optimizer
  from training.loop import LoopSettings, TrainLoop
  rng = np.random.default_rng(0)
  batch = {"input_ids": rng.integers(1, 50, (8, 6)).astype(np.int32),
           "input_mask": np.ones((8, 6), np.int32), "segment_ids": np.zeros((8, 6), np.int32),
           "label": rng.integers(0, 2, 8).astype(np.int32)}
  config = ModelConfig.from_dict(dict(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                      hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0))
  weights = []
  for accumulation in (1, 2):
    tf_keras.utils.set_random_seed(7)  # the same initial weights both times
    model = FinetuningModel(config, {"t": SentenceHead(2, 0.0)}).build_variables(
        padded_batch(50))
    optimizer = create_optimizer(1e-2, 10, 0, 0.01, lr_multiplier=model.lr_multiplier(0.8))

    def loss_fn(model, b, *_):
      logits = model(b, training=True)["t"]
      return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          b["label"], logits)), {}
    settings = LoopSettings(model_dir=str(tmp_path / str(accumulation)),
                                     num_train_steps=2, log_every_steps=1,
                                     gradient_accumulation_steps=accumulation)
    TrainLoop(tf.distribute.get_strategy(), model, optimizer, Objective(loss_fn),
              settings).run(lambda ctx: tf.data.Dataset.from_tensors(batch).repeat())
    weights.append([w.numpy() for w in model.weights])
  for a, b in zip(*weights):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
