"""Regenerates the safetensors seed corpus (standard library only).

Usage: python3 make_corpus.py   (writes into ./safetensors/)
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
         "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


def raw(header_text, data=b"", pad=True):
    h = header_text.encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def build(tensors, metadata=None):
    """tensors: list of (name, dtype, shape); data bytes are a counting pattern."""
    header, off = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    data = bytes(i % 251 for i in range(off))
    return raw(json.dumps(header, separators=(",", ":")), data)


def main():
    os.makedirs(OUT, exist_ok=True)
    t = '"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
    files = {
        "valid_empty": raw("{}"),
        "valid_all_dtypes": build([(f"x.{d}", d, [3]) for d in SIZES]),
        "valid_metadata": build([("w", "F32", [2, 2])], {"format": "pt", "note": "seed"}),
        "valid_scalar_and_zero_size": build([("s", "F64", []), ("z", "F32", [0, 4]), ("b", "BF16", [5])]),
        "valid_checkpoint_model": build([("embed.weight", "F16", [8, 4]), ("dense.bias", "F16", [4]),
                                         ("ln.frozen", "F16", [4])], {"format": "pt"}),
        "valid_checkpoint_optim": build([("w/0/master", "F32", [6]), ("w/0/exp_avg", "F32", [6]),
                                         ("w/0/exp_avg_sq", "F32", [6])], {"rank": "0"}),
        "valid_unpadded_header": raw("{" + t + "}", bytes(8), pad=False),
        "valid_out_of_order_keys": raw('{"b":{"dtype":"U8","shape":[1],"data_offsets":[4,5]},'
                                       '"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}', bytes(5)),
        "bad_short": b"\x08\x00\x00",
        "bad_zero_length": struct.pack("<Q", 0),
        "bad_huge_length": struct.pack("<Q", 100000001) + b"{}",
        "bad_length_past_end": struct.pack("<Q", 4096) + b"{}",
        "bad_json": raw('{"t":'),
        "bad_not_object": raw("[1,2]"),
        "bad_duplicate_key": raw("{" + t + "," + t + "}", bytes(8)),
        "bad_dtype": raw('{"t":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}', bytes(8)),
        "bad_negative_dim": raw('{"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', bytes(8)),
        "bad_huge_shape": raw('{"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}',
                              bytes(8)),
        "bad_offsets_size": raw('{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,7]}}', bytes(7)),
        "bad_offsets_reversed": raw('{"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}', bytes(8)),
        "bad_overlap": raw("{" + t + ',"u":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
        "bad_gap": raw('{"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
        "bad_trailing": raw("{" + t + "}", bytes(9)),
        "bad_offsets_beyond": raw('{"t":{"dtype":"F32","shape":[2],"data_offsets":[1000000,1000008]}}', bytes(8)),
        "bad_metadata": raw('{"__metadata__":{"a":1}}'),
        "bad_deep_nesting": raw('{"t":' + "[" * 2000 + "]" * 2000 + "}"),
        "bad_nul_in_header": raw('{"t\u0000":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', bytes(1)),
    }
    for name, data in files.items():
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
            f.write(data)
    print(f"{len(files)} files in {OUT}")


if __name__ == "__main__":
    main()
