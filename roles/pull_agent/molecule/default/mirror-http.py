"""The test mirror's HTTP side: GET serves files under the folder given, PUT stores reports under reports/."""

import http.server
import sys
from pathlib import Path

ROOT = Path(sys.argv[1])


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=str(ROOT), **kwargs)

    def do_PUT(self):
        name = self.path.rsplit("/", 1)[-1]
        if not self.path.startswith("/reports/") or not name.endswith(".json") or "/" in name or name.startswith("."):
            self.send_error(403)
            return
        (ROOT / "reports" / name).write_bytes(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(204)
        self.end_headers()


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
