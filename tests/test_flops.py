"""FLOPs counting (model/flops.py, each objective's flops(), python -m tools.flops).

The original release's totals are reproduced exactly; one small config is counted by
hand, matmul by matmul, so a dropped term fails; the command agrees with the library.
"""

import json
import subprocess
import sys

import pytest

from model import flops
from model.config import ModelConfig
from pretrain.config import load_config
from pretrain.objectives import objective_for

# The original's table puts the MLM head on 20 of 128 (and 80 of 512) positions: BERT's
# max_predictions_per_seq, not ELECTRA's int((mask_prob + 0.005) * S) = 19 of 128.
ORIGINAL_OUTPUT_FRAC = 20 / 128
# Printed by `python3 flops_computation.py` of github.com/google-research/electra (its
# MODEL_FLOPS table: name, sizes, sequence length, batch, steps).
ORIGINAL = {
    # name: (hidden, layers, embedding, generator_hidden_size, seq, batch, steps,
    #        objective, printed total)
    "electra_small": (256, 12, 128, 0.25, 128, 128, 1e6, "electra", 1.293743798272e+18),
    "electra_base": (768, 12, None, 1 / 3, 512, 256, 766000, "electra",
                     6.424541834277683e+19),
    "electra_400k": (1024, 24, None, 0.25, 512, 2048, 400000, "electra",
                     7.117606040895488e+20),
    "electra_1.75M": (1024, 24, None, 0.25, 512, 2048, 1750000, "electra",
                      3.113952642891776e+21),
    "bert_small": (256, 12, 128, 0.25, 128, 128, 1.45e6, "masked_lm", 1.4187399146496e+18),
    "bert_base": (768, 12, None, 0.25, 512, 256, 1e6, "masked_lm", 6.428335104e+19),
    "bert_large": (1024, 24, None, 0.25, 512, 256, 1e6, "masked_lm", 1.91720905883648e+20),
}
# The same runs from our presets: (model name, overrides).
PRESETS = {
    "electra_small": ("electra_small", {}),
    "electra_base": ("electra_base", {}),
    "electra_400k": ("electra_large", {}),
    "electra_1.75M": ("electra_large", {"num_train_steps": 1750000}),
    "bert_small": ("bert_small", {"electra_objective": False, "num_train_steps": 1450000}),
    "bert_base": ("bert_base", {"electra_objective": False, "num_train_steps": 1000000}),
    "bert_large": ("bert_large", {"electra_objective": False, "train_batch_size": 256,
                                  "num_train_steps": 1000000}),
}


@pytest.mark.parametrize("name", sorted(ORIGINAL))
def test_original_totals(name):
  hidden, layers, embedding, gen_size, seq, batch, steps, objective, printed = \
      ORIGINAL[name]
  model_name, overrides = PRESETS[name]
  preset = load_config(model_name, "data", overrides)
  model = preset.model_config()
  assert (model.hidden_size, model.num_hidden_layers, model.embedding_width) == (
      hidden, layers, embedding or hidden)
  assert (preset.max_seq_length, preset.train_batch_size, preset.num_train_steps) == (
      seq, batch, steps)
  if objective == "electra":  # the masked LM's one encoder has no generator size
    assert model.generator_config().hidden_size == round(gen_size * hidden)
  ours = objective_for(preset)
  assert ours.name == objective
  counts = ours.flops(ORIGINAL_OUTPUT_FRAC)
  assert counts.train_flops_total == pytest.approx(printed, rel=1e-9)
  assert counts.train_flops_per_step * steps == pytest.approx(counts.train_flops_total)


def test_small_config_counted_by_hand():
  """Discriminator H 8 (2 heads, FFN 16, E 6), generator H 4 (1 head, FFN 16), one layer
  each, vocabulary 10, 4 tokens, the MLM head on half of them."""
  v, s, e, frac = 10, 4, 6, 0.5
  config = load_config("electra_small", "data", {
      "vocab_size": v, "max_seq_length": s, "train_batch_size": 3, "num_train_steps": 7,
      "embedding_size": e, "generator_hidden_size": 0.5, "model_hparam_overrides": {
          "hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 16,
          "num_hidden_layers": 1}})

  def mm(rows, inner, cols):  # [rows, inner] x [inner, cols]
    return 2 * rows * inner * cols

  def layer(h, heads, i):
    d = h // heads
    return (3 * mm(s, h, h) + 3 * s * h  # q, k, v and biases
            + heads * (mm(s, d, s) + mm(s, s, d))  # scores; weighted values
            + heads * s * s * (5 + 4 + 1)  # softmax, dropout, scale
            + mm(s, h, h) + s * h + 4 * s * h + s * h  # output, bias, dropout, residual
            + 5 * s  # the original's flat LayerNorm count
            + mm(s, h, i) + s * i + 8 * s * i  # intermediate, bias, GELU
            + mm(s, i, h) + s * h + 4 * s * h + s * h + 5 * s * h)

  def embeddings(h):
    return (mm(s, v, e) + mm(s, s + 2, e)  # one-hot word; position + token type
            + 2 * s * e + 5 * s * e + 4 * s * e  # add, LayerNorm, dropout
            + mm(s, e, h) + s * h)  # projection E -> H

  disc = layer(8, 2, 16) + embeddings(8) + mm(s, 8, 8) + s * 8 + 8 * s * 8 + mm(s, 8, 1)
  n = frac * s  # positions the MLM head runs on
  gen = (layer(4, 1, 16) + embeddings(4)
         + mm(n, 4, e) + n * e + 8 * n * e + 5 * n * e  # dense to E, GELU, LayerNorm
         + mm(n, e, v) + 5 * n * v + 2 * n * v)  # logits, softmax, target
  ours = objective_for(config).flops(frac)
  assert ours.train_flops_per_step == pytest.approx(2 * 3 * (disc + gen), rel=1e-12)
  assert ours.train_flops_total == pytest.approx(7 * 2 * 3 * (disc + gen), rel=1e-12)
  assert ours.infer_flops_per_sequence == pytest.approx(disc, rel=1e-12)


def test_objectives_and_generator_sizes():
  def per_step(**overrides):
    return objective_for(load_config("electra_small", "data", overrides)
                         ).flops().train_flops_per_step

  electra = per_step()
  assert per_step(electra_objective=False) < electra  # one encoder, no discriminator
  assert per_step(generator_hidden_size=0.5) > electra
  assert per_step(generator_layers=0.5) < electra
  assert per_step(untied_generator=False) > electra  # full-size generator
  assert per_step(uniform_generator=True) < electra
  assert per_step(untied_generator_embeddings=True) != electra
  # Electric: two generator towers and a cloze head at every position.
  assert per_step(electric_objective=True) > per_step(generator_layers=2.0)
  # Our default head fraction is the real one: 19 of 128 positions.
  objective = objective_for(load_config("electra_small", "data"))
  assert objective.flops().train_flops_per_step < objective.flops(
      ORIGINAL_OUTPUT_FRAC).train_flops_per_step
  with pytest.raises(ValueError, match="output_frac"):
    objective.flops(1.5)


def test_parameter_counts_match_the_keras_model():
  from model.electra import ElectraPair  # pylint: disable=g-import-not-at-top
  config = ModelConfig.from_dict({"vocab_size": 50, "hidden_size": 32,
                                  "num_hidden_layers": 2, "embedding_size": 16,
                                  "max_position_embeddings": 64,
                                  "generator_hidden_size": 0.5})
  pair = ElectraPair(config).build_variables()
  shared = pair.discriminator.embeddings.count_params()
  assert flops.encoder_parameters(config) == pair.discriminator.count_params()
  assert flops.encoder_parameters(config.generator_config(), own_embeddings=False) == (
      pair.generator.count_params() - shared)


def run_tool(*args):
  return subprocess.run([sys.executable, "-m", "tools.flops", *args],
                        capture_output=True, text=True)


@pytest.mark.slow
def test_command(tmp_path):
  # Debug size; vocab_size follows the data dir's vocab.txt, as pre-training does.
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"t{i}" for i in range(995)]
  (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in tokens))
  hparams = {"debug": True, "max_seq_length": 64}
  out = run_tool("--data-dir", str(tmp_path), "--hparams", json.dumps(hparams),
                 "--json")
  assert out.returncode == 0, out.stderr[-2000:]
  reported = json.loads(out.stdout)
  expected = objective_for(load_config("electra_small", str(tmp_path),
                                       {**hparams, "vocab_size": 1000})).flops()
  assert reported["vocab_size"] == 1000
  for key in ("train_flops_per_step", "train_flops_total", "infer_flops_per_sequence"):
    assert reported[key] == pytest.approx(getattr(expected, key), rel=1e-12), key

  bad = run_tool("--data-dir", str(tmp_path), "--hparams", '{"hiden_size": 3}')
  assert bad.returncode == 2 and bad.stdout == ""
  assert bad.stderr.startswith("error: ") and len(bad.stderr.strip().splitlines()) == 1
  assert "hiden_size" in bad.stderr
