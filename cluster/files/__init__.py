"""The jobs' files on the shared filesystem: the path map between the cluster's view and the
portal's, and opening files there without following links (jobfs)."""
