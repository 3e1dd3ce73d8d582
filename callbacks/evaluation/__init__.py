"""Callbacks that evaluate during and after training and write the run's report."""
