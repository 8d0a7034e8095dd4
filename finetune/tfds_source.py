"""TensorFlow Datasets as an alternative source of task data: only what is prepared.

Tasks are read from TFDS only when the dataset is already prepared in the TFDS data
directory; nothing is ever downloaded. tensorflow_datasets is imported lazily, so the
readers of plain files do not need it.
"""

from typing import Dict, Iterator, Optional


def prepared_builder(name: Optional[str], data_dir: Optional[str] = None):
  """The TFDS builder of `name` when it is prepared in `data_dir`, else None."""
  if not name:
    return None
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  try:
    builder = tfds.builder(name, data_dir=data_dir)
  except Exception:  # pylint: disable=broad-except
    return None  # a name this TFDS version lacks is the same as "not prepared"
  return builder if builder.is_prepared() else None


def records(builder, split: str, max_examples: Optional[int] = None) -> Iterator[Dict]:
  """The split's records as NumPy values (text as bytes), in the stored order."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  dataset = builder.as_dataset(split=split, shuffle_files=False)
  if max_examples is not None:
    dataset = dataset.take(max_examples)
  return iter(tfds.as_numpy(dataset))
