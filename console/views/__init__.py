"""The console's pages: the landing page and dashboard (home), the cluster (nodes, GPUs,
heatmap, alerts, telemetry), operations and the lab view, images, dataset pins, the audit log.
What the console runs on the cluster is in console/actions/."""
