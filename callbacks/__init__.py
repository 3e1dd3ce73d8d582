"""Callbacks that own the training phases: initialisation, evaluation, stages."""
from callbacks.centroid_init import KMeansCentroidInit, kmeans_init
from callbacks.clustering_eval import ClusteringEvaluator

__all__ = ["KMeansCentroidInit", "kmeans_init", "ClusteringEvaluator"]
