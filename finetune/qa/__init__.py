"""Extractive question answering (SQuAD 1.1/2.0, MRQA), as the original's finetune/qa.

family.py declares the family and its config fields (finetune/family.py); data.py reads
the tasks into examples.py's questions; features.py cuts question + context into
windows; head.py is the span (and answerability) head with its loss; postprocess.py
turns logits into answer text; runner.py trains and scores; squad_metrics.py is the
official SQuAD scoring; serving.py is the serving signature; deployed.py is the
exported model's reader.
"""
