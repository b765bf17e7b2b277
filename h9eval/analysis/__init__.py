"""What a user reads: metrics, comparisons, plots, the HTML report, the threshold tuner."""
