"""Extractive question answering (SQuAD 1.1/2.0, MRQA), as the original's finetune/qa.

family.py declares the family and its config fields (finetune/family.py); data.py reads
the tasks into questions and cuts question + context into windows; model.py is the span
(and answerability) head with its loss and the runner that trains and scores it;
deployed.py turns logits into answer text (the runner's and every exported form's
reader, the SavedModel's too); squad_metrics.py is the official SQuAD scoring;
serving.py is the serving signature and the exports' declaration.
"""
