"""messages: Kafka-format JSON message specs and the codecs generated from them.

``messages/specs/*.json`` hold the facts (names, types, versions, tags, defaults) of every message
kwire speaks; ``python -m messages.generator`` compiles them into ``messages/generated/``, which is
committed and never edited by hand.
"""
