"""Reads the character data that R packages ship, without R.

Enough of R's serialization format (XDR, versions 2 and 3) for the objects the corpus uses:
character vectors, lists, integer and double vectors, attributes (names, data frame columns).
Two containers hold them:

- a lazy-load database, `data/Rdata.rdb` + `data/Rdata.rdx`: the .rdx is a gzip-compressed
  serialized list whose `variables` entry maps each object name to (offset, length) in the
  .rdb; each .rdb record is a 4-byte big-endian length followed by a zlib stream;
- an `.rda` file (what `save()` writes): gzip, then the magic `RDX2\\n` or `RDX3\\n`, then a
  serialized pairlist of (name, object).

An object with attributes is returned as `Attributed(value, attrs)`.
"""

import gzip
import struct
import zlib
from dataclasses import dataclass


@dataclass
class Attributed:
    value: object
    attrs: dict


NIL, REF, SYM, LIST, CLOS, ENV, PROM, LANG, CHAR = 254, 255, 1, 2, 3, 4, 5, 6, 9
LGL, INT, REAL, STR, VEC, EXPR, DOT = 10, 13, 14, 16, 19, 20, 17
SPECIAL_VALUES = {253, 252, 251, 250, 242, 241}  # global env, unbound, missing, base ns, ...


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0
        self.refs = []

    def int(self):
        (v,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return v

    def length(self):
        n = self.int()
        if n == -1:  # long vector: two more words
            hi, lo = self.int(), self.int()
            n = (hi << 32) + lo
        return n

    def read(self):
        if self.data[:2] != b"X\n":
            raise ValueError(f"not XDR serialization: {self.data[:2]!r}")
        self.pos = 2
        version = self.int()
        self.int()  # R version that wrote it
        self.int()  # oldest R version that reads it
        if version == 3:
            name_length = self.int()  # then the native encoding's name
            self.pos += name_length
        return self.item()

    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind == NIL:
            return None
        if kind in SPECIAL_VALUES:
            return None
        if kind == REF:
            index = flags >> 8 or self.int()
            return self.refs[index - 1]
        if kind == SYM:
            sym = ("symbol", self.item())
            self.refs.append(sym)
            return sym
        if kind in (LIST, LANG, CLOS, PROM, DOT):  # pairlists: attr?, tag?, car, cdr
            if has_attr:
                self.item()
            tag = self.item() if has_tag else None
            head = [(tag[1] if tag else None, self.item())]
            tail = self.item()
            return head + (tail if isinstance(tail, list) else [])
        if kind == CHAR:
            n = self.int()
            if n == -1:
                return None  # NA_character_
            text = self.data[self.pos:self.pos + n].decode("utf-8")
            self.pos += n
            return text
        if kind == ENV:
            env = {}
            self.refs.append(env)
            self.int()  # locked
            self.item()  # enclosure
            env["frame"] = self.item()
            self.item()  # hash table
            self.item()  # attributes
            return env
        if kind in (LGL, INT):
            n = self.length()
            value = list(struct.unpack_from(f">{n}i", self.data, self.pos))
            self.pos += 4 * n
        elif kind == REAL:
            n = self.length()
            value = list(struct.unpack_from(f">{n}d", self.data, self.pos))
            self.pos += 8 * n
        elif kind in (STR, VEC, EXPR):
            value = [self.item() for _ in range(self.length())]
        else:
            raise ValueError(f"R object type {kind} at byte {self.pos} is not supported")
        if has_attr:
            return Attributed(value, dict(self.item()))
        return value


def plain(obj):
    """The value without its attributes."""
    return obj.value if isinstance(obj, Attributed) else obj


def read_lazy_load(prefix):
    """Every object of a lazy-load database `{prefix}.rdb` / `{prefix}.rdx`, by name."""
    with open(f"{prefix}.rdx", "rb") as f:
        index = Reader(gzip.decompress(f.read())).read()
    fields = dict(zip(index.attrs["names"], index.value))
    variables = fields["variables"]
    with open(f"{prefix}.rdb", "rb") as f:
        db = f.read()
    out = {}
    for name, (offset, size) in zip(variables.attrs["names"], variables.value):
        record = db[int(offset):int(offset) + int(size)]
        out[name] = Reader(zlib.decompress(record[4:])).read()
    return out


def read_rda(path):
    """Every object of an `.rda` file, by name."""
    with open(path, "rb") as f:
        data = gzip.decompress(f.read())
    if data[:5] not in (b"RDX2\n", b"RDX3\n"):
        raise ValueError(f"{path}: not an .rda file ({data[:5]!r})")
    return dict(Reader(data[5:]).read())
