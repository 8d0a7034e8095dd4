"""The discriminator as a tool: how likely each word-piece of a text is to be replaced.

`Scorer` loads a pre-trained model (our export, an original checkpoint, or a Hugging
Face directory: model/weights/ reads each) with its vocabulary and scores lines.
With `corrupt_seed`, it first corrupts each line the way pre-training does (mask 15%,
let the generator sample the masked word-pieces; a sample equal to the original is not
a replacement) and scores the corrupted text, so the discriminator's calls can be set
against the replacements it was given.
"""

import dataclasses
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from data_prep import masking, normalization, records
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from model.config import check_vocab_size
from runs.pretrained import open_weights
from pretrain.objectives import losses

THRESHOLD = 0.5  # above it, the discriminator calls a word-piece replaced
MASK_PROB = 0.15
BATCH_SIZE = 32


@dataclasses.dataclass
class Scored:
  """One line: its word-pieces (as scored) and each one's replaced probability; after
  corruption also the word-pieces before it and where they were replaced."""
  tokens: List[str]
  probabilities: List[float]
  original_tokens: Optional[List[str]] = None
  replaced: Optional[List[bool]] = None

  def to_json(self):
    out = {"tokens": self.tokens, "probabilities": [round(p, 6) for p in
                                                    self.probabilities],
           "predicted_replaced": [p > THRESHOLD for p in self.probabilities]}
    if self.replaced is not None:
      out.update(original_tokens=self.original_tokens, replaced=self.replaced)
    return out


class Scorer:

  def __init__(self, checkpoint: str, vocab: str = "", cased: bool = False,
               corrupt: bool = False):
    """`cased` (--cased) asks for cased text; the text's normalisation is otherwise
    the one the model or its vocabulary records (tokenizer_config.json)."""
    weights = open_weights(checkpoint)
    vocab_file = weights.vocab(vocab)
    asked = False if cased else None
    text_normalization = normalization.of_model(vocab_file, weights.folder, asked, asked,
                                                asked=normalization.as_cased_flag)
    vocab = load_vocab(vocab_file)
    self.pair = weights.load_pair(part="pair" if corrupt else "discriminator")
    config = self.pair.model_config
    check_vocab_size(vocab.path, len(vocab), config.vocab_size, checkpoint,
                     "pass the model's vocab.txt with --vocab")
    self.vocab = vocab
    self.tokenizer = Tokenizer(vocab, *text_normalization)
    self.max_pieces = config.max_position_embeddings - 2  # [CLS] and [SEP]

  def _batch(self, pieces: Sequence[List[int]]):
    length = max(len(p) for p in pieces) + 2
    ids = np.zeros([len(pieces), length], np.int32)
    mask = np.zeros_like(ids)
    for row, p in enumerate(pieces):
      ids[row, :len(p) + 2] = [self.vocab.cls_id, *p, self.vocab.sep_id]
      mask[row, :len(p) + 2] = 1
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "segment_ids": tf.zeros_like(ids)}

  def _corrupt(self, inputs, seed):
    """Input ids with generator samples at 15% of the word-pieces, as pre-training."""
    ids, mask = inputs["input_ids"], inputs["input_mask"]
    mask_seed, sample_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    masked = masking.mask_inputs(
        ids, mask, mask_prob=MASK_PROB,
        max_predictions=records.max_predictions_per_seq(MASK_PROB, ids.shape[1]),
        mask_id=self.vocab.mask_id, special_ids=(self.vocab.cls_id, self.vocab.sep_id),
        seed=mask_seed)
    logits = self.pair.generator_logits(dict(inputs, input_ids=masked.input_ids),
                                        training=False,
                                        positions=masked.masked_lm_positions)
    sampled = losses.gumbel_sample(logits, sample_seed)
    corrupted, _ = losses.corrupt(ids, masked.masked_lm_positions, sampled,
                                  masked.masked_lm_weights, every_masked_is_fake=False)
    return corrupted

  def score(self, lines: Sequence[str], corrupt_seed: Optional[int] = None,
            where: str = "--text") -> List[Scored]:
    """One Scored per line; `where` names the input in errors (FILE:line)."""
    pieces = []
    for number, line in enumerate(lines, 1):
      ids = self.tokenizer.ids(line)
      if len(ids) > self.max_pieces:
        place = f"{where}:{number}" if where != "--text" else where
        raise ValueError(f"{place}: {len(ids)} word-pieces; this model reads at most "
                         f"{self.max_pieces} (max_position_embeddings "
                         f"{self.max_pieces + 2} less [CLS] and [SEP])")
      pieces.append(ids)
    out = []
    for start in range(0, len(pieces), BATCH_SIZE):
      chunk = pieces[start:start + BATCH_SIZE]
      inputs = self._batch(chunk)
      original = inputs["input_ids"].numpy()
      if corrupt_seed is not None:
        seed = tf.constant([corrupt_seed, start], tf.int64)
        inputs["input_ids"] = self._corrupt(inputs, seed)
      probabilities = tf.sigmoid(self.pair.discriminator_logits(inputs, training=False))
      probabilities, ids = probabilities.numpy(), inputs["input_ids"].numpy()
      for row, p in enumerate(chunk):
        span = slice(1, len(p) + 1)  # the word-pieces, not [CLS]/[SEP]
        scored = Scored([self.vocab.tokens[i] for i in ids[row, span]],
                        probabilities[row, span].tolist())
        if corrupt_seed is not None:
          scored.original_tokens = [self.vocab.tokens[i] for i in original[row, span]]
          scored.replaced = (ids[row, span] != original[row, span]).tolist()
        out.append(scored)
    return out


def format_text(scored: Scored) -> str:
  """One word-piece a line: probability, * when called replaced, and after corruption
  what it replaced and whether the call was right."""
  width = max([len(t) for t in scored.tokens] + [5])
  lines = []
  for i, (token, p) in enumerate(zip(scored.tokens, scored.probabilities)):
    line = f"{token:<{width}}  {p:.3f}  {'*' if p > THRESHOLD else ' '}"
    if scored.replaced is not None and scored.replaced[i]:
      verdict = "caught" if p > THRESHOLD else "missed"
      line += f"  replaced {scored.original_tokens[i]} ({verdict})"
    lines.append(line.rstrip())
  flagged = sum(p > THRESHOLD for p in scored.probabilities)
  summary = f"{len(scored.tokens)} word-pieces, {flagged} called replaced"
  if scored.replaced is not None:
    replaced = sum(scored.replaced)
    caught = sum(r and p > THRESHOLD for r, p in zip(scored.replaced,
                                                     scored.probabilities))
    summary += (f"; {replaced} replaced by the generator, {caught} of them caught, "
                f"{flagged - caught} false alarm(s)")
  return "\n".join(lines + [summary])
