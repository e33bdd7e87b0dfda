"""A safe, deterministic file format for fitted models: a zip of `.npy` arrays and `.json` documents.

It is what `numpy.load(path, allow_pickle=False)` reads (arrays by name; documents as bytes), with fixed
timestamps and sorted members so that the same content always gives the same bytes. Loading never runs
code: arrays are read with `allow_pickle=False` and documents with `json.loads`.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bot.core.errors import ConfigError

FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip epoch: no build time in the bytes


class ArchiveError(ConfigError):
    """An archive that cannot be read: missing, damaged, or not in this format."""


@dataclass
class Archive:
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    documents: dict[str, Any] = field(default_factory=dict)


def write_archive(path: Path, archive: Archive) -> None:
    """Write atomically: a unique temporary file in the same directory, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    members: dict[str, bytes] = {}
    for name, array in archive.arrays.items():
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
        members[f"{name}.npy"] = buffer.getvalue()
    for name, document in archive.documents.items():
        members[f"{name}.json"] = json.dumps(document, sort_keys=True, ensure_ascii=False,
                                             separators=(",", ":")).encode()
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            for name in sorted(members):
                info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, members[name], compresslevel=9)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a pack or cache entry is meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_archive(path: Path) -> Archive:
    """Every member, checked (zip CRC) and parsed; any problem is one ArchiveError naming the file."""
    archive = Archive()
    try:
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                data = zf.read(name)
                stem, _, ext = name.rpartition(".")
                if ext == "npy":
                    archive.arrays[stem] = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
                elif ext == "json":
                    archive.documents[stem] = json.loads(data)
                else:
                    raise ArchiveError(f"{path}: unexpected member {name!r}; rebuild the file")
    except FileNotFoundError:
        raise ArchiveError(f"{path}: no such file") from None
    except ArchiveError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise ArchiveError(f"{path}: damaged or not a ddl-triage archive ({exc}); rebuild it") from None
    return archive
