"""What every layer shares, with no Lightning and nothing of a method: one-line user errors, the console, the
atomic writer, a run folder's file names, the device defaults, the data kinds, the text encoder (``encoding``) and
KMeans."""
