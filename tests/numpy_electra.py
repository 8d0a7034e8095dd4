"""An independent NumPy forward pass of ELECTRA, written from the math (BERT's encoder)
and reading weights by their original checkpoint names. Used only by the tests."""

import math

import numpy as np
from scipy.special import erf


def gelu(x):
  return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x):
  x = x - x.max(-1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(-1, keepdims=True)


def embed(w, scope, input_ids, segment_ids):
  seq = input_ids.shape[1]
  x = (w[f"{scope}/embeddings/word_embeddings"][input_ids]
       + w[f"{scope}/embeddings/position_embeddings"][:seq][None]
       + w[f"{scope}/embeddings/token_type_embeddings"][segment_ids])
  return layer_norm(x, w[f"{scope}/embeddings/LayerNorm/gamma"],
                    w[f"{scope}/embeddings/LayerNorm/beta"])


def encoder(w, scope, x, input_mask, num_heads):
  """Post-LN BERT layers under `scope`, on embeddings x [B, S, E]."""
  if f"{scope}/embeddings_project/kernel" in w:
    x = x @ w[f"{scope}/embeddings_project/kernel"] + w[f"{scope}/embeddings_project/bias"]
  batch, seq, hidden = x.shape
  head = hidden // num_heads
  adder = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0
  i = 0
  while f"{scope}/encoder/layer_{i}/attention/self/query/kernel" in w:
    p = lambda name: w[f"{scope}/encoder/layer_{i}/{name}"]
    def heads(name):
      y = x @ p(f"attention/self/{name}/kernel") + p(f"attention/self/{name}/bias")
      return y.reshape(batch, seq, num_heads, head).transpose(0, 2, 1, 3)
    q, k, v = heads("query"), heads("key"), heads("value")
    probs = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + adder)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
    attn = context @ p("attention/output/dense/kernel") + p("attention/output/dense/bias")
    x = layer_norm(attn + x, p("attention/output/LayerNorm/gamma"),
                   p("attention/output/LayerNorm/beta"))
    inner = gelu(x @ p("intermediate/dense/kernel") + p("intermediate/dense/bias"))
    out = inner @ p("output/dense/kernel") + p("output/dense/bias")
    x = layer_norm(out + x, p("output/LayerNorm/gamma"), p("output/LayerNorm/beta"))
    i += 1
  return x


def forward(w, input_ids, input_mask, segment_ids, disc_heads, gen_heads,
            gen_scope="generator", gen_embedding_scope="electra"):
  """All four outputs of the original model, in float64."""
  w = {k: np.asarray(v, np.float64) for k, v in w.items()}
  disc = encoder(w, "electra", embed(w, "electra", input_ids, segment_ids), input_mask,
                 disc_heads)
  hidden = gelu(disc @ w["discriminator_predictions/dense/kernel"]
                + w["discriminator_predictions/dense/bias"])
  disc_logits = (hidden @ w["discriminator_predictions/dense_1/kernel"]
                 + w["discriminator_predictions/dense_1/bias"])[..., 0]
  gen = encoder(w, gen_scope, embed(w, gen_embedding_scope, input_ids, segment_ids),
                input_mask, gen_heads)
  g = gelu(gen @ w["generator_predictions/dense/kernel"]
           + w["generator_predictions/dense/bias"])
  g = layer_norm(g, w["generator_predictions/LayerNorm/gamma"],
                 w["generator_predictions/LayerNorm/beta"])
  gen_logits = (g @ w[f"{gen_embedding_scope}/embeddings/word_embeddings"].T
                + w["generator_predictions/output_bias"])
  return {"discriminator_hidden": disc, "discriminator_logits": disc_logits,
          "generator_hidden": gen, "generator_logits": gen_logits}


def original_shapes(vocab, emb, hidden, layers, inner, gen_hidden, gen_layers, gen_inner,
                    max_pos=512, type_vocab=2, untied_gen_embeddings=False,
                    generator=True, discriminator=True):
  """Names and shapes of a pre-training checkpoint, as the released ones have them."""
  shapes = {}

  def embeddings(scope, width):
    shapes.update({f"{scope}/embeddings/word_embeddings": (vocab, width),
                   f"{scope}/embeddings/position_embeddings": (max_pos, width),
                   f"{scope}/embeddings/token_type_embeddings": (type_vocab, width),
                   f"{scope}/embeddings/LayerNorm/gamma": (width,),
                   f"{scope}/embeddings/LayerNorm/beta": (width,)})

  def encoder_shapes(scope, width, h, n, ff):
    if width != h:
      shapes[f"{scope}/embeddings_project/kernel"] = (width, h)
      shapes[f"{scope}/embeddings_project/bias"] = (h,)
    for i in range(n):
      p = f"{scope}/encoder/layer_{i}"
      for name, (a, b) in {"attention/self/query": (h, h), "attention/self/key": (h, h),
                           "attention/self/value": (h, h),
                           "attention/output/dense": (h, h),
                           "intermediate/dense": (h, ff), "output/dense": (ff, h)}.items():
        shapes[f"{p}/{name}/kernel"] = (a, b)
        shapes[f"{p}/{name}/bias"] = (b,)
      for name in ("attention/output/LayerNorm", "output/LayerNorm"):
        shapes[f"{p}/{name}/gamma"] = (h,)
        shapes[f"{p}/{name}/beta"] = (h,)

  embeddings("electra", emb)
  if discriminator:
    encoder_shapes("electra", emb, hidden, layers, inner)
    shapes.update({"discriminator_predictions/dense/kernel": (hidden, hidden),
                   "discriminator_predictions/dense/bias": (hidden,),
                   "discriminator_predictions/dense_1/kernel": (hidden, 1),
                   "discriminator_predictions/dense_1/bias": (1,)})
  if generator:
    gen_width = gen_hidden if untied_gen_embeddings else emb
    if untied_gen_embeddings:
      embeddings("generator", gen_hidden)
    encoder_shapes("generator", gen_width, gen_hidden, gen_layers, gen_inner)
    shapes.update({"generator_predictions/dense/kernel": (gen_hidden, gen_width),
                   "generator_predictions/dense/bias": (gen_width,),
                   "generator_predictions/LayerNorm/gamma": (gen_width,),
                   "generator_predictions/LayerNorm/beta": (gen_width,),
                   "generator_predictions/output_bias": (vocab,)})
  return shapes


def random_weights(shapes, seed=0):
  """Weights at a realistic scale: N(0, 0.02) matrices, LayerNorm gains near 1."""
  rng = np.random.default_rng(seed)
  out = {}
  for name, shape in sorted(shapes.items()):
    if name.endswith("/gamma"):
      out[name] = 1.0 + 0.1 * rng.standard_normal(shape)
    elif name.endswith(("/beta", "/bias", "output_bias")):
      out[name] = 0.05 * rng.standard_normal(shape)
    else:
      out[name] = 0.02 * rng.standard_normal(shape)
  return {k: v.astype(np.float32) for k, v in out.items()}


def write_tf1_checkpoint(weights, prefix, extra=None):
  """Writes a name-based checkpoint the way TF1 code does (graph variables + Saver),
  independently of the project's writer. `extra` adds further tensors (e.g. Adam slots)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    variables = [tf.compat.v1.Variable(v, name=n) for n, v in
                 {**weights, **(extra or {})}.items()]
    step = tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver(variables + [step])
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return saver.save(sess, prefix, global_step=1000)
