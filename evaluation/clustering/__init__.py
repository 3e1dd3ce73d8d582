"""Clustering quality: Hungarian ACC / NMI / ARI and the KMeans protocols, scores without labels, the matched
confusion matrix, choosing K, and the bag-of-words rows of the papers' tables."""
