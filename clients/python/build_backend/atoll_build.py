"""The build backend of atoll-client (PEP 517), standard library only.

The package is a few pure-Python files, so building it needs nothing that
is not already there: ``pip install clients/python`` works offline, in a
fresh virtual environment, without setuptools or wheel. It builds

* a wheel (``build_wheel``): ``src/atoll_client/*`` with its ``.dist-info``
  (``METADATA``, ``WHEEL``, ``RECORD``);
* a source archive (``build_sdist``): the files below plus ``PKG-INFO``.

The metadata comes from the ``[project]`` table of ``pyproject.toml``. Only
the keys that file uses are read, each a one-line string (``name``,
``version``, ``description``, ``requires-python``, ``license``'s ``text``),
plus ``readme`` (its file becomes the description).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

__all__ = [
    "build_wheel",
    "build_sdist",
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
]

#: The project directory (this file is in ``build_backend/`` below it).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The import package, under ``src/``.
PACKAGE = "atoll_client"
#: What a source archive holds besides ``src/``: paths below ROOT.
SDIST_FILES = ("pyproject.toml", "README.md", "build_backend/atoll_build.py")
#: Timestamp of every archive member (1980-01-01, the earliest a zip
#: records), so that a build of the same files gives the same bytes.
EPOCH = (1980, 1, 1, 0, 0, 0)
EPOCH_SECONDS = 315532800


def _project() -> Dict[str, str]:
    """The one-line string keys of ``[project]`` (and ``license.text``)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M)
    if not m:
        raise ValueError("pyproject.toml has no [project] table")
    table = m.group(1)
    keys = dict(re.findall(r'^([a-z-]+) = "([^"\n]*)"$', table, re.M))
    lic = re.search(r'^license = \{ text = "([^"\n]*)" \}$', table, re.M)
    if lic:
        keys["license"] = lic.group(1)
    for need in ("name", "version"):
        if need not in keys:
            raise ValueError(f"pyproject.toml: [project] has no {need}")
    return keys


def _dist_name(p: Dict[str, str]) -> str:
    """The name as file names spell it (``atoll_client``)."""
    return re.sub(r"[-_.]+", "_", p["name"]).lower()


def _metadata(p: Dict[str, str]) -> str:
    """Core metadata (version 2.1)."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
    ]
    if "description" in p:
        lines.append(f"Summary: {p['description']}")
    if "license" in p:
        lines.append(f"License: {p['license']}")
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    lines.append("Classifier: Typing :: Typed")
    body = ""
    if "readme" in p:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _package_files() -> List[Tuple[str, str]]:
    """(path in the archive, path on disk) of the import package."""
    src = os.path.join(ROOT, "src", PACKAGE)
    out = []
    for name in sorted(os.listdir(src)):
        if name.endswith(".py") or name == "py.typed":
            out.append((f"{PACKAGE}/{name}", os.path.join(src, name)))
    if not out:
        raise ValueError(f"no files in {src}")
    return out


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{path},sha256={digest.decode()},{len(data)}"


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    """Nothing: the standard library is enough."""
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    """Nothing: the standard library is enough."""
    return []


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[dict] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """Writes ``NAME-VERSION-py3-none-any.whl`` into ``wheel_directory``."""
    p = _project()
    base = f"{_dist_name(p)}-{p['version']}"
    info = f"{base}.dist-info"
    members: List[Tuple[str, bytes]] = []
    for arc, disk in _package_files():
        with open(disk, "rb") as f:
            members.append((arc, f.read()))
    members.append((f"{info}/METADATA", _metadata(p).encode()))
    wheel = "Wheel-Version: 1.0\nGenerator: atoll_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members.append((f"{info}/WHEEL", wheel.encode()))
    members.append((f"{info}/top_level.txt", f"{PACKAGE}\n".encode()))
    record = [_record_line(arc, data) for arc, data in members]
    record.append(f"{info}/RECORD,,")
    members.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{base}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in members:
            entry = zipfile.ZipInfo(arc, EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    return name


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    """Writes ``NAME-VERSION.tar.gz`` into ``sdist_directory``."""
    p = _project()
    base = f"{_dist_name(p)}-{p['version']}"
    files = [(rel, os.path.join(ROOT, rel)) for rel in SDIST_FILES]
    files += [(f"src/{arc}", disk) for arc, disk in _package_files()]
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:

        def add(arc: str, data: bytes) -> None:
            entry = tarfile.TarInfo(f"{base}/{arc}")
            entry.size, entry.mode = len(data), 0o644
            entry.mtime = EPOCH_SECONDS
            t.addfile(entry, io.BytesIO(data))

        for arc, disk in files:
            with open(disk, "rb") as f:
                add(arc, f.read())
        add("PKG-INFO", _metadata(p).encode())
    return name
