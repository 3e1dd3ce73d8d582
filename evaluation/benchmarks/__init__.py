"""An encoder on the papers' benchmarks: short-text clustering, STS, SentEval transfer and few-shot, MTEB;
``evaluate_model`` runs any of them from one command."""
