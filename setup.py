"""The one compiled part of odradek: the record scanner the broker validates produced batches with
(broker/log/_recordscan.c). It is optional: without a C compiler the install still succeeds and
the broker uses the same check written in Python (broker/log/validator.py), only slower."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("odradek.broker.log._recordscan", ["broker/log/_recordscan.c"], optional=True)])
