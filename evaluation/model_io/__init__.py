"""A trained model in and out of the project: checkpoint or Hub name -> encoder, export, model card, and
assigning new texts to a run's clusters."""
