#!/usr/bin/env python3
"""Validates memgrant wire messages against docs/api/messages.schema.json.

Uses the jsonschema package (Debian: python3-jsonschema) when it is
installed; otherwise a small validator for exactly the subset of JSON Schema
that messages.schema.json uses ($ref to #/$defs, type, const, enum,
properties, patternProperties, additionalProperties, required, items,
minItems, maxItems, minimum, maximum, minLength, maxLength, pattern, oneOf,
anyOf).  A keyword the small validator does not know is an error, so the
schema cannot silently outgrow it.

    schemacheck.py DEF FILE...   validate each JSON file as $defs/DEF
"""
import json
import os
import re
import sys

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "api",
                           "messages.schema.json")

try:
    import jsonschema  # type: ignore
except ImportError:  # pragma: no cover - depends on the machine
    jsonschema = None
if os.environ.get("MEMGRANT_SCHEMACHECK") == "builtin":  # test the small validator itself
    jsonschema = None

KNOWN = {"$schema", "$id", "$ref", "$defs", "title", "description", "type", "const", "enum",
         "properties", "patternProperties", "additionalProperties", "required", "items", "minItems",
         "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "oneOf", "anyOf"}


def load_schema(path=SCHEMA_PATH):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _type_ok(v, t):
    if t == "null":
        return v is None
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "string":
        return isinstance(v, str)
    if t == "array":
        return isinstance(v, list)
    if t == "object":
        return isinstance(v, dict)
    raise ValueError("unknown type %r in the schema" % t)


def _eq(a, b):
    # JSON equality: true is not 1
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float))
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b)


def _small(root, s, v, path, errs):
    for k in s:
        if k not in KNOWN:
            raise ValueError("schemacheck: keyword %r is not supported by the small validator" % k)
    if "$ref" in s:
        ref = s["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError("schemacheck: only #/$defs/ references are supported: %r" % ref)
        _small(root, root["$defs"][ref[len("#/$defs/"):]], v, path, errs)
    if "type" in s:
        ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_type_ok(v, t) for t in ts):
            errs.append("%s: %s is not of type %s" % (path, json.dumps(v)[:60], "/".join(ts)))
            return
    if "const" in s and not _eq(v, s["const"]):
        errs.append("%s: %s is not %s" % (path, json.dumps(v)[:60], json.dumps(s["const"])))
    if "enum" in s and not any(_eq(v, e) for e in s["enum"]):
        errs.append("%s: %s is not one of %s" % (path, json.dumps(v)[:60], json.dumps(s["enum"])))
    if isinstance(v, str):
        if "minLength" in s and len(v) < s["minLength"]:
            errs.append("%s: shorter than %d" % (path, s["minLength"]))
        if "maxLength" in s and len(v) > s["maxLength"]:
            errs.append("%s: longer than %d" % (path, s["maxLength"]))
        if "pattern" in s and not re.search(s["pattern"], v):
            errs.append("%s: %r does not match %s" % (path, v[:60], s["pattern"]))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            errs.append("%s: %s is below %s" % (path, v, s["minimum"]))
        if "maximum" in s and v > s["maximum"]:
            errs.append("%s: %s is above %s" % (path, v, s["maximum"]))
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            errs.append("%s: fewer than %d items" % (path, s["minItems"]))
        if "maxItems" in s and len(v) > s["maxItems"]:
            errs.append("%s: more than %d items" % (path, s["maxItems"]))
        if "items" in s:
            for i, x in enumerate(v):
                _small(root, s["items"], x, "%s[%d]" % (path, i), errs)
    if isinstance(v, dict):
        for r in s.get("required", []):
            if r not in v:
                errs.append("%s: %r is required" % (path, r))
        props = s.get("properties", {})
        pats = s.get("patternProperties", {})
        for k, x in v.items():
            matched = False
            if k in props:
                matched = True
                _small(root, props[k], x, "%s.%s" % (path, k), errs)
            for p, ps in pats.items():
                if re.search(p, k):
                    matched = True
                    _small(root, ps, x, "%s.%s" % (path, k), errs)
            if not matched and s.get("additionalProperties", True) is False:
                errs.append("%s: unknown member %r" % (path, k))
    for kw in ("oneOf", "anyOf"):
        if kw in s:
            n = 0
            for sub in s[kw]:
                e = []
                _small(root, sub, v, path, e)
                n += not e
            if (kw == "oneOf" and n != 1) or (kw == "anyOf" and n == 0):
                errs.append("%s: matches %d of the %s alternatives" % (path, n, kw))


def validate(instance, definition, schema=None):
    """The list of problems of INSTANCE as $defs/DEFINITION (empty: valid)."""
    root = schema if schema is not None else load_schema()
    if definition not in root["$defs"]:
        raise KeyError("no $defs/%s in the schema" % definition)
    if jsonschema is not None:
        sub = {"$schema": root.get("$schema"), "$ref": "#/$defs/" + definition, "$defs": root["$defs"]}
        cls = jsonschema.validators.validator_for(sub)
        return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "$", e.message)
                for e in cls(sub).iter_errors(instance)]
    errs = []
    _small(root, root["$defs"][definition], instance, "$", errs)
    return errs


def engine():
    return "jsonschema %s" % getattr(jsonschema, "__version__", "?") if jsonschema else "built-in subset"


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    bad = 0
    schema = load_schema()
    for path in argv[2:]:
        with open(path, encoding="utf-8") as f:
            errs = validate(json.load(f), argv[1], schema)
        for e in errs:
            print("%s: %s" % (path, e))
        bad += bool(errs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
