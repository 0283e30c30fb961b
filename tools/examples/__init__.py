"""Example controller plug-ins, ready to name in server.properties (README, "Plug-ins")."""
