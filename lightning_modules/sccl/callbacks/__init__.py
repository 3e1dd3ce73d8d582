"""SCCL's callback: the cluster centres initialised by KMeans before the first step.

It sits at the callbacks layer of the import graph (docs/architecture.md); the method module never imports it.
"""
