"""`ttc serve`'s Gemini Files API, as much of it as Batch Mode uses: resumable uploads of a
batch's JSONL input file, and downloads of a batch's responses file.

    POST /upload/{v1,v1beta}/files                     start (X-Goog-Upload-Command: start;
                                                         body {"file": {displayName, mimeType}});
                                                         the reply's X-Goog-Upload-URL is the
                                                         session's URL (…?upload_id=N)
    POST /upload/{v1,v1beta}/files?upload_id=N         the bytes, in chunks (X-Goog-Upload-Command
                                                         `upload`, the last `upload, finalize`;
                                                         X-Goog-Upload-Offset); the last reply is
                                                         {"file": File} with X-Goog-Upload-Status
                                                         `final`, the others `active`
    GET  /{,download/}{v1,v1beta}/files/{id}:download  a file's bytes (?alt=media)

This is the protocol the official `google-genai` client speaks (`files.upload`,
`files.download`). Files are named `files/…`; a batch's responses file is stored here too.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import Any

from ttc.adapters.sim._wire import Invalid

__all__ = ["GeminiFile", "GeminiFiles"]

# The Files API's limit on one file (Batch Mode's input files: 2 GB).
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024


@dataclass(slots=True)
class GeminiFile:
    """A stored file: uploaded (a batch's input) or generated (a batch's responses)."""

    name: str
    data: bytes
    display_name: str = ""
    mime_type: str = "application/jsonl"
    source: str = "UPLOADED"
    created_at: float = field(default_factory=time.time)

    def as_object(self) -> dict[str, Any]:
        """The File resource, as the API returns it."""
        stamp = datetime.datetime.fromtimestamp(self.created_at, datetime.UTC)
        created = stamp.isoformat().replace("+00:00", "Z")
        obj: dict[str, Any] = {
            "name": self.name,
            "mimeType": self.mime_type,
            "sizeBytes": str(len(self.data)),
            "createTime": created,
            "updateTime": created,
            "state": "ACTIVE",
            "source": self.source,
        }
        if self.display_name:
            obj["displayName"] = self.display_name
        return obj


@dataclass(slots=True)
class _Session:
    display_name: str
    mime_type: str
    size: int | None
    data: bytearray = field(default_factory=bytearray)


class GeminiFiles:
    """Upload sessions and files, in memory."""

    def __init__(self) -> None:
        self.files: dict[str, GeminiFile] = {}
        self._sessions: dict[str, _Session] = {}

    def start(self, body: dict[str, Any], size: str | None) -> str:
        """Opens an upload session for `body`'s file metadata; its id."""
        meta = body.get("file") or {}
        if not isinstance(meta, dict):
            raise Invalid("file: expected an object")
        display = meta.get("displayName", meta.get("display_name")) or ""
        mime = meta.get("mimeType", meta.get("mime_type")) or "application/octet-stream"
        expected = int(size) if size is not None and size.isdigit() else None
        if expected is not None and expected > MAX_FILE_BYTES:
            raise Invalid(f"file: {expected} bytes is over the Files API's 2 GB")
        upload_id = f"sim-upload-{len(self._sessions) + 1}"
        self._sessions[upload_id] = _Session(str(display), str(mime), expected)
        return upload_id

    def chunk(self, upload_id: str, data: bytes, offset: int, finalize: bool) -> GeminiFile | None:
        """Appends a chunk at `offset`; with `finalize`, the file it made (else None)."""
        session = self._sessions.get(upload_id)
        if session is None:
            raise Invalid(f"upload_id: no such upload session: {upload_id}")
        if offset != len(session.data):
            raise Invalid(f"X-Goog-Upload-Offset: expected {len(session.data)}, got {offset}")
        session.data += data
        if not finalize:
            return None
        del self._sessions[upload_id]
        if session.size is not None and session.size != len(session.data):
            raise Invalid(
                f"the upload has {len(session.data)} bytes; its start said {session.size}"
            )
        return self.put(bytes(session.data), session.display_name, session.mime_type)

    def put(
        self, data: bytes, display_name: str, mime_type: str, source: str = "UPLOADED"
    ) -> GeminiFile:
        """Stores a file under a new name."""
        stored = GeminiFile(
            f"files/sim{len(self.files) + 1:012d}", data, display_name, mime_type, source
        )
        self.files[stored.name] = stored
        return stored

    def get(self, name: str) -> GeminiFile | None:
        """A stored file by its name (`files/…`, or its id alone), or None."""
        return self.files.get(name if name.startswith("files/") else f"files/{name}")
