"""kwire: Kafka wire primitives, framing, headers, API keys, error codes and negotiation.

This package imports nothing but the standard library: no trio and no `messages` (the small Trio
client connection built on it, used by the tools and the node, is `server.net.client`).
"""
