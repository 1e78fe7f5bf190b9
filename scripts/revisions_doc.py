"""Write ``spec/revisions.md`` to standard output: ``python scripts/revisions_doc.py > spec/revisions.md``.

The document is ``mcpx.core.revisions_doc.render()``, rendered from the
revision table in ``mcpx/core/revisions.py``; the core does no I/O, so the
writing is here.  UTF-8 bytes, with the newlines as rendered on every
platform (no ``\\r\\n`` on Windows), so the file is the same everywhere.
"""

from __future__ import annotations

import sys

from mcpx.core.revisions_doc import render


def main() -> None:
    text = render()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        sys.stdout.flush()
        buffer.write(text.encode("utf-8"))
        buffer.flush()
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
