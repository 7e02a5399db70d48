"""Broker and topic configuration: Kafka's names, defaults and validation in one place.

Invariant: every broker or topic setting is declared once, in ``kafka_config``, with its type,
default and validator; nothing else parses configuration values.
"""
