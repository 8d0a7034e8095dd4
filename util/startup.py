"""The environment TensorFlow reads as it loads; every command imports this first.

Library rooms never import it: a program that embeds them keeps its own settings.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter
# tf.keras is then tf_keras (Keras 2, what this project and tf-models-official build
# on); otherwise TensorFlow also imports Keras 3 as it loads: about 0.8 s of CPU in
# every command (bench/RESULTS.md, "Start-up").
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
