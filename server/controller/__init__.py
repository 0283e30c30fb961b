"""The quorum controller (KIP-631) as a sans-IO state machine over committed metadata records.

:class:`~server.controller.controller.ControlManagers` replays every committed record of the
metadata log (from the newest snapshot on) and, when its node becomes the active controller,
says which records to append first (:mod:`server.controller.activation`). The node hosts it:
it feeds commits and snapshots in and appends what it returns. No I/O, no clock.
"""
