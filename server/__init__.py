"""The hpcgrade service: the command line now, the web portal and API next."""
