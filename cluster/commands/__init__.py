"""Scontrol and sacctmgr, run as argument lists never through a shell: the commands, the queue's
squeue parser, accounts and QOS limits, user provisioning, and the reservation request every
path takes (cluster/commands/reservation_request.py)."""
