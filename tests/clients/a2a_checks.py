"""What the A2A SDK client checks share: one `ok <check>` or `FAIL <check>:
reason` line per check, and the SDK's requests and replies on the wire, kept
to be printed under a failure."""

from google.protobuf.json_format import MessageToJson


def show(*messages):
    return " ".join(MessageToJson(m, indent=None) for m in messages)


class Checks:
    """The checks of one client script, named `<prefix>.<check>`; a reply is
    kept whole, or its first `reply_chars` characters."""

    def __init__(self, prefix, reply_chars=None):
        self.prefix, self.reply_chars = prefix, reply_chars
        self.failed = False
        self.wire = []

    def check(self, name, cond, why):
        print(f"ok {self.prefix}.{name}" if cond else f"FAIL {self.prefix}.{name}: {why}", flush=True)
        if not cond:
            self.failed = True
            for line in self.wire:
                print(f"    wire: {line}", flush=True)

    async def log_request(self, request):
        self.wire.append(f"> {request.method} {request.url} a2a-version={request.headers.get('a2a-version')} "
                         f"{request.content.decode(errors='replace')}")

    async def log_response(self, response):
        await response.aread()
        self.wire.append(f"< {response.status_code} {response.text.strip()[:self.reply_chars]}")

    def hooks(self):
        """httpx's event hooks that keep the wire."""
        return {"request": [self.log_request], "response": [self.log_response]}
