"""Results across runs: the objective a run returns to a sweep, tables over seeds and sweeps, a paper's table
beside ours, one command per paper table, and W&B dashboards."""
