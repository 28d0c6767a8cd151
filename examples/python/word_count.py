"""word_count: a pure World transition for the exec runtime.

Calling convention (pure, declaredEffects []): the caller's arguments arrive on
stdin as one JSON object; the result is printed on stdout as one JSON object.
The runtime gives the process an empty environment, a scratch working
directory, 2 s and 1 MiB of I/O; the transition does no I/O of its own.
"""

import json
import sys


def main(input_text: str) -> str:
    args = json.loads(input_text)
    text = args.get("text")
    if not isinstance(text, str):
        return json.dumps({"ok": False, "refused": 'argument "text" must be a string'})
    return json.dumps({"ok": True, "words": len(text.split()), "lines": len(text.splitlines()), "chars": len(text)})


if __name__ == "__main__":
    sys.stdout.write(main(sys.stdin.read()))
