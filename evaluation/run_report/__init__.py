"""What one run's folder shows: cluster descriptions (c-TF-IDF, representative texts), plots, the summary of
results.json and report.html."""
