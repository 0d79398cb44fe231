"""The standalone node agent (gpupool_agent.py) copied onto GPU nodes; a package only so tests can import it."""
