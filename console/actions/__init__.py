"""Console's actions: the operations the console runs on the cluster for admins and users
(docs/architecture.md, "The skeleton of an app"): image operations on every node."""
