"""Validate attnviz documents against the schemas in schema/ with the jsonschema package (an
independent validator): `python3 tests/schema/validate.py SCHEMA_NAME FILE...`. A saved
capture (`.safetensors`) is checked as its `__metadata__` and each kind's parsed body.
Prints one line per file; exits 1 on the first document that does not validate."""

import json
import pathlib
import struct
import sys

from jsonschema import Draft202012Validator

SCHEMAS = pathlib.Path(__file__).resolve().parents[2] / "schema"


def validator(name):
    schema = json.loads((SCHEMAS / name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def check(v, doc, what):
    errors = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        print(f"{what}: {'/'.join(map(str, e.path))}: {e.message[:300]}")
        sys.exit(1)


def main():
    name, files = sys.argv[1], sys.argv[2:]
    v = validator(name)
    for f in files:
        if f.endswith(".safetensors"):
            raw = pathlib.Path(f).read_bytes()
            (n,) = struct.unpack("<Q", raw[:8])
            meta = json.loads(raw[8 : 8 + n])["__metadata__"]
            check(v, meta, f)
            body = validator("saved-body.schema.json")
            for kind in json.loads(meta["kinds"]):
                check(body, json.loads(meta[kind]), f"{f}: {kind}")
        else:
            check(v, json.loads(pathlib.Path(f).read_text()), f)
        print(f"{f}: valid")


main()
