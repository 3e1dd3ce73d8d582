"""AECL's callbacks: the stage switch with its KMeans pseudo-labels, and the attention-mass (NS) diagnostic.

They sit at the callbacks layer of the import graph (docs/architecture.md): they use the shared evaluation
callbacks' pieces, and the method module never imports them (a config names them).
"""
