"""Every package of the source tree is listed in setup.cfg, so a built wheel (the Docker
image installs one) holds the same modules as the editable install."""
from __future__ import annotations

import configparser
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_package_is_in_setup_cfg():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    listed = set(cfg["options"]["packages"].split())
    folders = {line.split("=")[0].strip(): line.split("=")[1].strip()
               for line in cfg["options"]["package_dir"].strip().splitlines()}
    mapped = {os.path.normpath(os.path.join(ROOT, folder)) for folder in folders.values()}
    on_disk = set()
    for package, folder in folders.items():
        top = os.path.normpath(os.path.join(ROOT, folder))
        for dirpath, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in mapped]  # a package of its own
            if "__init__.py" in files and "__pycache__" not in dirpath:
                rel = os.path.relpath(dirpath, os.path.join(ROOT, folder))
                on_disk.add(package if rel == "." else package + "." + rel.replace(os.sep, "."))
    assert on_disk - listed == set()
