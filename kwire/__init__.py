"""kwire: Kafka wire primitives, framing, headers, API keys, error codes and negotiation.

This package imports nothing but the standard library, except `kwire.connection`, the small Trio
client connection used by the tools and the node.
"""
