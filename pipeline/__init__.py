"""odradek.pipeline"""
