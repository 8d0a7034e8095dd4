"""runs/start.py: a run's start from pre-trained weights, opened once and named
alike in both phases' run records."""

import os

from model.config import ModelConfig
from model.electra import ElectraPair
from runs.start import open_start, record_name
from pretrain import run_record
from pretrain.config import load_config
from tests.helpers import save_original

CONFIG = ModelConfig.from_dict(dict(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                    max_position_embeddings=32))


def test_a_start_is_named_by_its_weights_location_in_both_records(tmp_path):
  folder = tmp_path / "export"
  prefix = save_original(ElectraPair(CONFIG).build_variables(), str(folder / "model.ckpt"))
  start = open_start(str(folder))
  assert record_name(start) == os.path.abspath(prefix)
  assert record_name(None) == "" and open_start("") is None
  # Pre-training signs it so (fine-tuning's Finetuner.run_signature too).
  config = load_config("run", str(tmp_path), {"init_checkpoint": str(folder)})
  signature = run_record.run_signature(config, start)
  assert signature["init_checkpoint"] == record_name(start)
