"""The one compiled part of odradek: the records section of a RecordBatch v2 in C
(protocol/_records.c), which the broker validates produced batches with and every reader of
batches decodes records with. It is optional: without a C compiler the install still succeeds and
the same walks run in Python (broker/log/validator.py, protocol/records.py), only slower."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("odradek.protocol._records", ["protocol/_records.c"], optional=True)])
