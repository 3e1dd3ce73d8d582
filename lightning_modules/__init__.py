"""LightningModules and the pieces they compose: encoder, heads, losses."""
