"""Lightning and Hydra callbacks, grouped by concern: phases (a method's training stages), evaluation,
safety (checkpoints, signals, resume), display (progress) and sweeps (Hydra multirun)."""
