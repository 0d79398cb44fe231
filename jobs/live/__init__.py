"""Live status: events from slurmctld's own hooks, pushes to browsers over Channels, and which
jobs someone is watching."""
