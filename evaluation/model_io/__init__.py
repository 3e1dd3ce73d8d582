"""A trained model and a run folder's files in and out of the project: checkpoint or Hub name -> encoder, the
clustering files a run writes, embeddings kept on disk, export, model card, assigning new texts to a run's
clusters, and choosing K for a corpus it embeds."""
