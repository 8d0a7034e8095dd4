"""Any pre-trained model's path, opened: the formats, and the one function that asks them.

Each format is a module answering the same questions about a path:

- `locate(path)`: the location of its weights (a checkpoint prefix, a directory) when
  the path is this format's, else None; a CheckpointError when it is this format's but
  cannot be read (e.g. a run dir without a checkpoint yet);
- `part_held(location)`: "pair", "discriminator" or "generator";
- `model_config(location, part)`: the sizes of that part; `saved_model_config(location)`:
  the whole config its writer saved beside the weights, or None; `INFERRED`: the fields
  model_config cannot read and infers;
- `vocab_files(location)`: where the format keeps a vocabulary other than beside it;
- `load(mapping, location, what)`: assigns original.py's mapping table of `what`.
"""

import dataclasses
import os
import types
from typing import Optional

from model.config import ModelConfig
from model.electra import ElectraPair
from model.encoder import ElectraEncoder
from model.weights import CheckpointError, by_name, huggingface, original

# Asked in this order, the first to claim a path reads it: runs/pretrained.py registers
# itself before original.py, so run dirs are its (Hugging Face directories hold no
# prefix).
FORMATS = [huggingface, original]


def register(weight_format: types.ModuleType):
  """Adds a format from a room above model/ (a run dir's), asked before original.py."""
  if weight_format not in FORMATS:
    FORMATS.insert(FORMATS.index(original), weight_format)


@dataclasses.dataclass(frozen=True)
class Weights:
  """The weights at `path`: where they are and the format that reads them."""
  path: str
  location: str
  format: types.ModuleType

  def part_held(self) -> str:
    return self.format.part_held(self.location)

  def model_config(self, part: str = "pair") -> ModelConfig:
    return self.format.model_config(self.location, part)

  @property
  def folder(self) -> str:
    """The folder holding the weights, where their vocab.txt and the text's
    normalisation (tokenizer_config.json) go."""
    return self.location if os.path.isdir(self.location) else os.path.dirname(
        self.location)

  def vocab(self, given: str = "") -> str:
    """`given`, else the vocab.txt that goes with the weights: beside them (ours, a
    released zip's, a Hugging Face directory's), where the format keeps it (a run's
    vocab_file), or the data dir's above an export/."""
    if given:
      return given
    folder = self.folder
    candidates = [os.path.join(folder, "vocab.txt"), *self.format.vocab_files(
        self.location), os.path.join(folder, os.pardir, "vocab.txt")]
    for candidate in candidates:
      if os.path.isfile(candidate):
        return candidate
    raise CheckpointError(f"{self.path}: no vocab.txt beside the checkpoint; pass "
                          "--vocab FILE")

  def load(self, mapping: original.Mapping, what: str) -> str:
    """Assigns every variable of `mapping` (original.py's table of `what`); returns the
    location."""
    self.format.load(mapping, self.location, what)
    return self.location

  def load_into(self, pair: ElectraPair, part: str = "pair") -> str:
    if not pair.built:
      pair.build_variables()
    return self.load(original.original_variables(pair, part), part)

  def load_encoder(self, encoder: ElectraEncoder) -> str:
    """A lone (built) encoder from the discriminator's weights, for fine-tuning."""
    return self.load(original.encoder_variables(encoder, "electra"), "discriminator")

  def load_pair(self, config: Optional[ModelConfig] = None,
                part: str = "pair") -> ElectraPair:
    """A pair of sizes `config`, else those saved beside the weights, else the format's
    reading of them, with `part` loaded."""
    config = (config or self.format.saved_model_config(self.location) or
              self.model_config(part))
    pair = ElectraPair(config).build_variables()
    self.load_into(pair, part)
    return pair


def open_weights(path: str) -> Weights:
  """The weights at `path` (or named by it: by_name.py), in whichever format claims
  them."""
  if not path:
    raise CheckpointError("no checkpoint path given")
  path = by_name.resolve(path)
  for weight_format in FORMATS:
    location = weight_format.locate(path)
    if location:
      return Weights(path, location, weight_format)
  if os.path.isdir(path):
    raise CheckpointError(f"{path}: directory holds no checkpoint (no *.index file); "
                          "expected a TF checkpoint prefix or a directory holding one")
  # A bare name was perhaps meant as a release's.
  releases = ("" if os.sep in path else
              f"; the releases by name are {', '.join(by_name.RELEASES)}")
  raise CheckpointError(f"{path}: no such checkpoint (expected the prefix of "
                        "<prefix>.index / <prefix>.data-*, or a directory holding one)"
                        f"{releases}")
