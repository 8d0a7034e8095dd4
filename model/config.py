"""Model sizes: one config object, with the original BertConfig field names.

Field names match the original `BertConfig` (so its JSON files load as they are), plus
the ELECTRA generator fields. Presets (small/base/large/debug) live in
configs/model_sizes.json; as in the original, heads = max(1, H // 64) and intermediate =
4H follow the hidden size unless a preset or override sets them.
"""

import dataclasses
from typing import Any, Dict, Optional

from util import hparams
from util.files import check_folder_name

# Start points of pre-training (model/initialization.py).
INIT_SCHEMES = ("truncated_normal", "mimetic", "mimetic_generator", "mimetic_open_cls")
# Fine-tuning's changes of pre-trained values (model/initialization.py).
INIT_ADJUSTMENTS = ("none", "attention", "positions", "attention_and_positions")


def check_vocab_size(vocab_file: str, tokens: int, vocab_size: int, whose: str,
                     remedy: str):
  """The one check of a vocabulary against a model, in both phases: `vocab_file` holds
  `tokens` tokens, `whose` model (the config's, a checkpoint's) has `vocab_size` rows of
  embeddings; they must agree."""
  if tokens != vocab_size:
    raise hparams.HParamsError(f"{vocab_file} holds {tokens} tokens but {whose} has a "
                               f"vocabulary of {vocab_size}; {remedy}")


def check_model_name(flag_value: str, overrides: Dict[str, Any]):
  """Refuses a run's name (--model-name, or --hparams' model_name, which wins) that is
  not one plain folder name: it names the run's folder under <data_dir>/models, and
  "..", "" or a path would make the data dir, the models folder or another folder the
  model dir, which overwrite_model_dir deletes runs' files from."""
  source, name = (("--hparams' model_name", overrides["model_name"])
                  if "model_name" in overrides else ("--model-name", flag_value))
  check_folder_name(source, name, "the run's folder under <data-dir>/models")


@dataclasses.dataclass(frozen=True)
class ModelChoice:
  """How a run names its model: the fields pre-training and fine-tuning configs share
  (ModelConfig.for_run turns them into sizes)."""
  model_size: str = hparams.field(
      "small", resumable=True,
      help="The size preset of configs/model_sizes.json (small, base, large, tiny, "
           "debug).")
  model_hparam_overrides: Dict[str, Any] = hparams.field(
      default_factory=dict, resumable=True,
      help="Sizes changed from the preset (the model's fields, below).")
  embedding_size: Optional[int] = hparams.field(
      None, at_least=1, resumable=True,
      help="Width of the embeddings (null: the preset's).")
  vocab_size: int = hparams.field(
      30522, at_least=1,
      help="Rows of the embeddings; follows vocab_file when left at its default.")
  do_lower_case: Optional[bool] = hparams.field(
      None, meaning=True,
      help="The tokenizer lower-cases the text. Null: as the data build recorded it "
           "beside the vocabulary (tokenizer_config.json; where nothing does, as the "
           "vocabulary's tokens show); given, it must agree.")
  strip_accents: Optional[bool] = hparams.field(
      None, meaning=True,
      help="When lower-casing, the tokenizer strips accents. Null: as the data build "
           "recorded it (as do_lower_case where nothing does); given, it must agree.")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  vocab_size: int = hparams.field(
      30522, at_least=1,
      help="Rows of the embeddings; follows vocab_file when left at its default.")
  hidden_size: int = hparams.field(
      256, at_least=1, help="Width of the transformer layers.")
  num_hidden_layers: int = hparams.field(12, at_least=1, help="Transformer layers.")
  num_attention_heads: int = hparams.field(
      4, at_least=1, help="Attention heads (the presets: hidden_size / 64).")
  intermediate_size: int = hparams.field(
      1024, at_least=1,
      help="Width of the feed-forward layer (the presets: 4 x hidden_size).")
  embedding_size: Optional[int] = hparams.field(
      None, at_least=1,
      help="Width of the embeddings (null: hidden_size, no projection).")
  hidden_act: str = hparams.field(
      "gelu", choices=("gelu", "relu"),
      help="The activation; gelu is the exact erf form, as the original's.")
  hidden_dropout_prob: float = hparams.field(
      0.1, at_least=0, below=1,
      help="Dropout of the embeddings and of each sublayer's output.")
  attention_probs_dropout_prob: float = hparams.field(
      0.1, at_least=0, below=1, help="Dropout of the attention weights.")
  max_position_embeddings: int = hparams.field(
      512, at_least=1, help="Position embeddings: the longest sequence.")
  type_vocab_size: int = hparams.field(2, at_least=1, help="Segment embeddings.")
  initializer_range: float = hparams.field(
      0.02, at_least=0, help="Standard deviation of the truncated-normal start.")
  generator_hidden_size: float = hparams.field(
      0.25, above=0, help="The generator's width, as a fraction of the discriminator's.")
  generator_layers: float = hparams.field(
      1.0, above=0, help="The generator's layers, as a fraction of the discriminator's.")
  untied_generator_embeddings: bool = hparams.field(
      False, help="The generator has embeddings of its own.")
  untied_generator: bool = hparams.field(
      True, help="Generator and discriminator are two encoders (false: one).")

  def __post_init__(self):
    hparams.check_fields(self)
    if self.hidden_size % self.num_attention_heads:
      raise hparams.HParamsError(
          f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
          f"{self.num_attention_heads}")

  def check_sequence_length(self, max_seq_length: int, source: str):
    if max_seq_length > self.max_position_embeddings:
      raise hparams.HParamsError(
          f"max_seq_length {max_seq_length} exceeds max_position_embeddings "
          f"{self.max_position_embeddings} of {source}; lower max_seq_length")

  @classmethod
  def coerce(cls, config) -> "ModelConfig":
    """A ModelConfig from itself or its dict (as Keras get_config round-trips it)."""
    return config if isinstance(config, cls) else cls(**config)

  @property
  def embedding_width(self) -> int:
    return self.embedding_size or self.hidden_size

  @classmethod
  def from_size(cls, size: str, **overrides) -> "ModelConfig":
    """A preset from configs/model_sizes.json with the original's derived sizes."""
    presets = hparams.load_preset("model_sizes")
    if size not in presets:
      raise hparams.HParamsError(hparams.unknown_name_message(size, presets,
                                                              "model size"))
    return cls.from_dict({**presets[size], **overrides}, source=f"model size {size!r}")

  @classmethod
  def from_dict(cls, values: Dict[str, Any], source: str = "model config"
                ) -> "ModelConfig":
    """Builds a config from BertConfig-style fields; heads and FFN follow H if unset."""
    values = hparams.check_overrides(cls, values, source)
    hidden = values.get("hidden_size", cls.hidden_size)
    derived = {"num_attention_heads": max(1, hidden // 64),
               "intermediate_size": 4 * hidden}
    base = cls(hidden_size=hidden, **derived)
    return dataclasses.replace(base, **values)

  @classmethod
  def for_run(cls, run_config, **values) -> "ModelConfig":
    """Sizes of a pre-training or fine-tuning run: its model_size (or "debug"), vocab
    and embedding sizes, then `values`, then its model_hparam_overrides; its
    max_seq_length must fit them."""
    values = {"vocab_size": run_config.vocab_size, **values}
    if run_config.embedding_size is not None:
      values["embedding_size"] = run_config.embedding_size
    values.update(hparams.check_overrides(cls, run_config.model_hparam_overrides,
                                          "model_hparam_overrides"))
    size = "debug" if run_config.debug else run_config.model_size
    config = cls.from_size(size, **values)
    config.check_sequence_length(run_config.max_seq_length, f"model size {size!r}")
    return config

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)

  def generator_config(self) -> "ModelConfig":
    """The generator's size, derived as the original's get_generator_config does."""
    if not self.untied_generator:
      return self  # one encoder plays both roles
    hidden = int(round(self.hidden_size * self.generator_hidden_size))
    return dataclasses.replace(
        self,
        hidden_size=hidden,
        num_hidden_layers=int(round(self.num_hidden_layers * self.generator_layers)),
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        # Shared embeddings keep the discriminator's width (the generator projects
        # them); untied ones are the generator's own, at its hidden size.
        embedding_size=None if self.untied_generator_embeddings else
        self.embedding_width)
