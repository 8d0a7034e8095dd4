"""The fine-tuning runner of sequence tagging (CoNLL-2000 chunking), as the original does it.

Each word is WordPiece-tokenized on its own and the sentence becomes [CLS] pieces [SEP];
a word's label sits on its first piece (the others carry no loss). Labels are the
BIOES form of the chunk tags (finetune/tagging/data.py) and a softmax over them is trained
with cross-entropy summed over the sentence's words. Words past max_seq_length are
left out of training and predicted O when scoring. Predictions go back to B-/I-/O tags
and are scored by span F1 (finetune/tagging/metrics.py, conlleval's counting).
"""

from typing import Dict

import numpy as np
import tensorflow as tf

from finetune.runner import TaskRunner, label_entropy
from finetune.tagging import data as tagging_data
from finetune.tagging import metrics as tagging_metrics
from finetune.tagging.head import TaggingHead
from finetune.tagging import serving as tagging_serving


class TaggingRunner(TaskRunner):
  """One label per word from the encoder's vector of its first piece."""

  labels = tagging_data.BIOES_LABELS

  def features(self, examples, split) -> Dict[str, np.ndarray]:
    length = self.config.max_seq_length
    vocab = self.tokenizer.vocab
    word_ids = {}
    for example in examples:
      for word in example.words:
        word_ids.setdefault(word, len(word_ids))
    ids, offsets = self.tokenizer.batch_ids(list(word_ids))
    pieces = [ids[offsets[i]:offsets[i + 1]] for i in range(len(word_ids))]
    label_id = {label: i for i, label in enumerate(self.labels)}
    n = len(examples)
    out = {name: np.zeros([n, length], np.int32) for name in (
        "input_ids", "input_mask", "segment_ids", "word_positions", "word_labels")}
    out["word_label_mask"] = np.zeros([n, length], np.float32)
    for i, example in enumerate(examples):
      tokens, positions = [vocab.cls_id], []
      for word in example.words:
        # A word BERT's cleaning empties (only control characters) still needs a slot.
        word_pieces = pieces[word_ids[word]] if len(pieces[word_ids[word]]) else [
            vocab.unk_id]
        if len(tokens) + len(word_pieces) + 1 > length:
          break
        positions.append(len(tokens))
        tokens.extend(word_pieces)
      tokens.append(vocab.sep_id)
      out["input_ids"][i, :len(tokens)] = tokens
      out["input_mask"][i, :len(tokens)] = 1
      # The original gives every piece of a tagging input segment id 1.
      out["segment_ids"][i, :len(tokens)] = 1
      out["word_positions"][i, :len(positions)] = positions
      out["word_labels"][i, :len(positions)] = [
          label_id[label] for label in tagging_data.to_bioes(example.tags)[:len(positions)]]
      out["word_label_mask"][i, :len(positions)] = 1.0
    return out

  def make_head(self, model_config):
    return TaggingHead(len(self.labels),
                       name="task_specific/" + self.head_name.replace("/", "_"))

  def loss(self, outputs, batch):
    per_word = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["word_labels"],
                                                              outputs)
    return tf.reduce_sum(per_word * batch["word_label_mask"], axis=-1)

  def prior_loss(self, features):
    # The loss sums over a sentence's words: each word costs the entropy's share.
    mask = features["word_label_mask"].astype(bool)
    return label_entropy(features["word_labels"][mask]) * float(mask.sum(-1).mean())

  def predicted_tags(self, examples, features, outputs):
    """Each sentence's predicted B-/I-/O tags (O for words cut off by max_seq_length)."""
    best = outputs.argmax(-1)
    counts = features["word_label_mask"].sum(-1).astype(int)
    return [tagging_data.to_bio([self.labels[k] for k in best[i, :counts[i]]] +
                           ["O"] * (len(example.words) - counts[i]))
            for i, example in enumerate(examples)]

  def read_unlabeled(self, path):
    return tagging_data.read_sentences(path)

  def prediction_records(self, examples, features, outputs):
    return [{"index": e.eid, "words": list(e.words), "tags": tags}
            for e, tags in zip(examples, self.predicted_tags(examples, features, outputs))]

  def score(self, examples, features, outputs, split):
    spans = tagging_metrics.chunk_f1([e.tags for e in examples],
                             self.predicted_tags(examples, features, outputs))
    return {name: 100.0 * spans[name] for name in ("f1", "precision", "recall")}

  def serving_function(self, module):
    return tagging_serving.tagging_function(module, self)
