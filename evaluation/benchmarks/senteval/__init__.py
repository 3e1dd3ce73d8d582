"""The SentEval transfer tasks: their files, the classifiers and protocols that score frozen embeddings, the
SentEval toolkit itself, and few-shot transfer."""
