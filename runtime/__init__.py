"""The run protocol: what a training run agrees with its folder, its launcher and the sweep around it, without
Lightning's Trainer. The folder's lock (run_lock), SLURM's requeue record and the run's identity (preemption),
signals (interrupt), the message of a GPU out of memory (out_of_memory), the number a run returns to a sweep
(objective) and a job's place in a multirun (multirun)."""
