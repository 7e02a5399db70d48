"""The compiled parts of odradek, both optional: without a C compiler the install still succeeds
and the same work runs in Python, only slower.

- protocol/_records.c: the records section of a RecordBatch v2, which the broker validates
  produced batches with and every reader of batches decodes records with (the Python walks:
  broker/log/validator.py, protocol/records.py).
- protocol/_frames.c: request frames cut out of a stream, request headers read, and the common
  Produce read and answered, as protocol/connection.py, protocol/header.py and
  protocol/produce_one.py do in Python.
- protocol/_codecs.c: the compiled decoders and encoders of the declared messages
  (protocol/compiled_codecs.py), which otherwise run as generated Python."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("odradek.protocol._records", ["protocol/_records.c"], optional=True),
                   Extension("odradek.protocol._frames", ["protocol/_frames.c"], optional=True),
                   Extension("odradek.protocol._codecs", ["protocol/_codecs.c"], optional=True)])
