"""The clusters the portal knows: their registry and probes, the clients made for each
(services), where a job is placed, the sync runs, the startup checks, and the reservation
gateway that writes over REST or with scontrol as each generation allows."""
