"""One codec for view data: a JSON header and one binary buffer per array.

The explorer sends the buffers over the widget's comm as they are; the exported page embeds
them gzip-compressed as base64 text (the browser inflates them with its own
DecompressionStream). `assets/app.js` decodes both the same way.

Quantisation, written once: "f4" is float32 (exact to float32); "u2" / "u1" store
q = round((x - lo) / (hi - lo) * (top - 1)) per slice of the first `per` axes (one lo, hi per
map), top = 65535 or 255 reserved for NaN; the value is lo + q / (top - 1) * (hi - lo), so the
error is at most (hi - lo) / (2 (top - 1)) plus float32 rounding.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib

import numpy as np

TOPS = {"u2": 65535, "u1": 255}
NUMPY = {"f4": "<f4", "u2": "<u2", "u1": "u1"}


def quantise(a: np.ndarray, dtype: str, per: int = 0) -> tuple[np.ndarray, list[float], list[float]]:
    """(integers, lo per slice, hi per slice) of a float array; NaN becomes the reserved top code."""
    top = TOPS[dtype]
    flat = np.asarray(a, dtype=np.float64).reshape((int(np.prod(a.shape[:per])) if per else 1, -1))
    fin = np.isfinite(flat)
    lo = np.where(fin.any(axis=1), np.min(np.where(fin, flat, np.inf), axis=1), 0.0)
    hi = np.where(fin.any(axis=1), np.max(np.where(fin, flat, -np.inf), axis=1), 0.0)
    span = np.where(hi > lo, hi - lo, 1.0)
    q = np.rint((np.where(fin, flat, lo[:, None]) - lo[:, None]) / span[:, None] * (top - 1))
    q = np.where(fin, q, top).astype(NUMPY[dtype])
    return q.reshape(a.shape), lo.tolist(), hi.tolist()


def dequantise(q: np.ndarray, dtype: str, lo, hi, per: int = 0) -> np.ndarray:
    top = TOPS[dtype]
    flat = q.reshape((len(lo), -1)).astype(np.float64)
    lo, hi = np.asarray(lo)[:, None], np.asarray(hi)[:, None]
    out = lo + flat / (top - 1) * (hi - lo)
    return np.where(flat == top, np.nan, out).reshape(q.shape)


def encode(vd: dict, dtypes: dict | None = None, default: str = "f4") -> tuple[dict, list[bytes]]:
    """(header, buffers): the view data's facts as JSON-ready data, each array as bytes.
    dtypes: {array name: "f4" | "u2" | "u1"}; quantised arrays are scaled per slice of their first
    axis when they have three or more axes (one scale per head's map), else as a whole."""
    header = {k: v for k, v in vd.items() if k != "arrays"}
    specs, buffers = [], []
    for name, a in vd["arrays"].items():
        a = np.asarray(a)
        dtype = (dtypes or {}).get(name, default)
        per = max(0, a.ndim - 2)  # slices: one 2-D map each (one head's map)
        spec = dict(name=name, shape=list(a.shape), dtype=dtype, per=per)
        if dtype == "f4":
            data = np.ascontiguousarray(a, dtype="<f4")
        else:
            data, lo, hi = quantise(a, dtype, per)
            spec.update(lo=lo, hi=hi)
        specs.append(spec)
        buffers.append(data.tobytes())
    header["arrays"] = specs
    return header, buffers


def decode(header: dict, buffers) -> dict:
    """The inverse of encode, as the front-end does it: the view data with float arrays."""
    vd = {k: v for k, v in header.items() if k != "arrays"}
    arrays = {}
    for spec, buf in zip(header["arrays"], buffers):
        raw = np.frombuffer(bytes(buf), dtype=NUMPY[spec["dtype"]]).reshape(spec["shape"])
        arrays[spec["name"]] = (raw.astype(np.float64) if spec["dtype"] == "f4"
                                else dequantise(raw, spec["dtype"], spec["lo"], spec["hi"], spec["per"]))
    vd["arrays"] = arrays
    return vd


def to_text(header: dict, buffers: list[bytes]) -> dict:
    """A payload for the exported page: the header, each buffer gzip-compressed as base64 text."""
    return dict(header=header, data=[base64.b64encode(gzip.compress(b, compresslevel=6, mtime=0)).decode("ascii")
                                     for b in buffers])


def from_text(payload: dict) -> dict:
    return decode(payload["header"], [gzip.decompress(base64.b64decode(s)) for s in payload["data"]])


def float32_text(value):
    """Every float in a JSON-ready value rounded to float32 (the precision of the arrays it describes), so it
    prints in at most 9 digits instead of 17: a short page's headers (limits, per-map ranges) compress by a third.
    An array's lo and hi move by at most float32 rounding, which the quantisation error allows for."""
    if isinstance(value, float):
        return float(str(np.float32(value))) if np.isfinite(value) else value
    if isinstance(value, list):
        return [float32_text(v) for v in value]
    if isinstance(value, dict):
        return {k: float32_text(v) for k, v in value.items()}
    return value


def rows_filter(raw: bytes, spec: dict, undo: bool = False) -> bytes:
    """PNG's "up" filter on a quantised array: each row of each map (the last two axes) less the row above,
    modulo 2^8 or 2^16 (lossless; undo: the running sum). Neighbouring tokens' rows are alike, so the page's
    stream compresses a few per cent better; filtered per map, a buffer of many maps is still its maps back to
    back (pack_page finds shared ones). app.js `unfilter` undoes it."""
    if spec["dtype"] not in ("u1", "u2") or len(spec["shape"]) < 2:
        return raw
    rows, cols = spec["shape"][-2:]
    a = np.frombuffer(raw, dtype=NUMPY[spec["dtype"]]).reshape(-1, rows, cols)
    if undo:
        return np.cumsum(a, axis=1, dtype=a.dtype).tobytes()
    out = a.copy()
    out[:, 1:] -= a[:, :-1]
    return out.tobytes()


SHARED_FROM = 256  # bytes: a buffer this long is looked for among those already packed
BEST_UP_TO = 2_000_000  # bytes: a page's stream up to this size is compressed at level 9, above at 6


def map_bytes(spec: dict) -> int:
    """Bytes of one map (the last two axes) of a quantised array; 0 for anything else."""
    if spec["dtype"] not in ("u1", "u2") or len(spec["shape"]) < 2:
        return 0
    return int(np.prod(spec["shape"][-2:])) * np.dtype(NUMPY[spec["dtype"]]).itemsize


def pack_page(payloads: dict, layouts: dict, info: dict | None = None) -> str:
    """Every payload of an exported page (`to_text` form) and its layouts as ONE text: base64 of
    gzip(4-byte little-endian length of a JSON part, the JSON part, every buffer back to back). The
    JSON part holds each payload's header and, for each of its buffers, [offset, length] among the
    buffers. One stream compresses what the payloads repeat (labels, keys, layouts, column starts):
    a short MiniLM page is about half the size of one that compresses each buffer on its own. info: facts
    the front-end needs only once a payload is drawn (the colour tables), merged into the page's facts."""
    items, blob = {}, bytearray()
    first = {}  # one map's bytes (the last two axes) -> where the page first stored it
    for key, p in payloads.items():
        spans = []
        for spec, text in zip(p["header"]["arrays"], p["data"]):
            raw = rows_filter(gzip.decompress(base64.b64decode(text)), spec)
            # a buffer the page already holds (the model view's maps are every layer's attention maps back to
            # back; a step's queries are the neuron view's) is stored once: its span points at the first copy
            size = map_bytes(spec)
            at = first.get(raw[:size], -1) if size and len(raw) >= SHARED_FROM else -1
            if at < 0 or blob[at:at + len(raw)] != raw:
                at = len(blob)
                blob += raw
                for i in range(0, len(raw), size) if size else ():
                    first.setdefault(raw[i:i + size], at + i)
            spans.append([at, len(raw)])
        items[key] = dict(header=p["header"], data=spans)
    head = to_json(dict(float32_text(dict(payloads=items, layouts=layouts)), info=info or {})).encode("utf-8")
    blob = len(head).to_bytes(4, "little") + head + bytes(blob)
    # gzip format (wbits 31), no time stamp; level 9 costs seconds on a 10 MB page for 2% less: 6 there
    z = zlib.compressobj(9 if len(blob) <= BEST_UP_TO else 6, zlib.DEFLATED, 31, 8, zlib.Z_FILTERED)
    return base64.b64encode(z.compress(blob) + z.flush()).decode("ascii")


def unpack_page(text: str) -> tuple[dict, dict, dict]:
    """The inverse of pack_page: (payloads in `to_text` form, layouts, info)."""
    blob = gzip.decompress(base64.b64decode(text))
    n = int.from_bytes(blob[:4], "little")
    part = json.loads(blob[4:4 + n].decode("utf-8"))
    base = 4 + n
    payloads = {key: dict(header=p["header"], data=[
        base64.b64encode(gzip.compress(rows_filter(blob[base + o:base + o + size], spec, undo=True), mtime=0))
        .decode("ascii") for spec, (o, size) in zip(p["header"]["arrays"], p["data"])])
        for key, p in part["payloads"].items()}
    return payloads, part["layouts"], part["info"]


def request_key(view: str, args: dict) -> str:
    """The one spelling of a request ('attention|{"kind":"probs","layer":0}'); the page looks payloads up by it."""
    return view + "|" + json.dumps(args, sort_keys=True, separators=(",", ":"))


def to_json(data) -> str:
    """JSON safe inside a <script> block (and in the widget's state): no NaN, no '</'."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
