"""Callbacks that own a method's training phases: centroid initialisation, stage switching."""
