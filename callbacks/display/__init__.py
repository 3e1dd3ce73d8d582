"""Callbacks that shape what a person sees while training runs."""
