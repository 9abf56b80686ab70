"""Where an HTTP/1.1 request ends in the bytes read so far, for the request gate
(``webhook.slowclients``), which passes a connection on only once a whole request has arrived."""

from __future__ import annotations

HEAD_LIMIT = 64 * 1024  # a longer request head goes to cheroot, which refuses it
BUFFERED_BODY = 256 * 1024  # per connection: 256 connections buffer at most 64 MiB


def request_complete(data: bytes | bytearray) -> bool:
    """Whether ``data`` holds a whole request head and the body its Content-Length announces
    (or as much as the gate buffers); a head that cheroot will refuse also counts as whole."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return len(data) > HEAD_LIMIT
    body = data[end + 4 :]
    if len(body) >= BUFFERED_BODY:
        return True  # the worker reads the rest, within the request deadline
    length = 0
    for line in bytes(data[:end]).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            return _chunks_complete(bytes(body))
        if name == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                return True  # cheroot answers 400
    return len(body) >= length


def _chunks_complete(body: bytes) -> bool:
    """Whether a chunked body has arrived up to its last chunk and trailers; a malformed one
    counts as complete (cheroot refuses it)."""
    position = 0
    while True:
        line_end = body.find(b"\r\n", position)
        if line_end < 0:
            return False
        try:
            size = int(body[position:line_end].split(b";")[0], 16)
        except ValueError:
            return True
        if size == 0:
            rest = body[line_end + 2 :]
            return rest.startswith(b"\r\n") or b"\r\n\r\n" in rest
        position = line_end + 2 + size + 2
