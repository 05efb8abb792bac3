"""Regenerates the manifest seed corpus (standard library only).

Usage: python3 make_manifest_corpus.py SEED_MANIFEST.json   (writes into ./manifest/)

SEED_MANIFEST.json is the manifest.json of a checkpoint ds_save_checkpoint
wrote; the committed corpus was made from
  ckpt_resume_driver fp32 save 2 DIR   (tests/ckpt: AdamW + OneCycle, parameters
  embed.weight [32,16], dense.weight [16,16], dense.bias [16] trainable, ln.frozen [16]) Besides the seed itself
it writes a 2-rank layout and one broken variant per rule the reader checks;
the variants are re-sealed (their manifest_crc32c recomputed) so that the
reader gets past the checksum to the rule under test, except where the
checksum is what is broken.
"""
import copy
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "manifest")
SEAL = '"manifest_crc32c"'


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def seal_text(body) -> bytes:
    """body: a JSON object's text (str or bytes) without its closing brace."""
    text = (body.encode() if isinstance(body, str) else body).rstrip() + b",\n  "
    return text + SEAL.encode() + b": " + str(crc32c(text)).encode() + b"\n}\n"


def sealed(obj) -> bytes:
    obj = {k: v for k, v in obj.items() if k != "manifest_crc32c"}
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    return seal_text(text[: text.rfind("}")])


def main():
    seed_bytes = open(sys.argv[1], "rb").read()
    seed = json.loads(seed_bytes)
    os.makedirs(OUT, exist_ok=True)
    files = {"valid_saved": seed_bytes, "valid_resealed": sealed(seed)}

    def variant(name, edit, reseal=True):
        m = copy.deepcopy(seed)
        edit(m)
        files[name] = sealed(m) if reseal else json.dumps(m).encode()

    # A 2-rank ZeRO layout: w split across the two optimizer files.
    def two_ranks(m):
        m["world_size"] = 2
        m["zero_stage"] = 2
        r0 = m["partition"]["optim_rank0.safetensors"]
        r0["fragments"] = {"embed.weight": {"offset": 0, "numel": 300}}
        m["partition"]["optim_rank1.safetensors"] = {
            "rank": 1, "fragments": {"embed.weight": {"offset": 300, "numel": 212},
                                     "dense.weight": {"offset": 0, "numel": 256},
                                     "dense.bias": {"offset": 0, "numel": 16}}}
        m["files"]["optim_rank1.safetensors"] = {"size": 600, "crc32c": 12345}
    variant("valid_two_ranks", two_ranks)
    variant("valid_no_optimizer", lambda m: (m.update(optimizer=None, lr_scheduler=None), m.update(partition={}),
                                             m["files"].pop("optim_rank0.safetensors")))
    variant("valid_unicode_names", lambda m: m["params"].update({"\u00e9t\u00e9/x": {"shape": [0, 9007199254740991],
                                                                                   "dtype": "F32", "trainable": False}}))

    variant("bad_seal_not_resealed", lambda m: m["counters"].update(global_steps=99), reseal=False)
    files["bad_truncated"] = seed_bytes[: len(seed_bytes) // 2]
    files["bad_empty"] = b""
    files["bad_not_object"] = seal_text("[1, 2")
    files["bad_seal_only"] = seal_text("{")
    for key in list(seed.keys()):
        if key != "manifest_crc32c":
            variant("bad_missing_" + key, lambda m, k=key: m.pop(k))
    variant("bad_format", lambda m: m.update(format="other"))
    variant("bad_format_version_newer", lambda m: m.update(format_version=2))
    variant("bad_world_size_zero", lambda m: m.update(world_size=0))
    variant("bad_zero_stage_4", lambda m: m.update(zero_stage=4))
    variant("bad_dtype_master", lambda m: m["dtypes"].update(master="F16"))
    variant("bad_dtype_unknown", lambda m: m["dtypes"].update(working="F31"))
    variant("bad_counter_negative", lambda m: m["counters"].update(global_samples=-1))
    variant("bad_counter_fraction", lambda m: m["counters"].update(global_steps=1.5))
    variant("bad_counter_huge", lambda m: m["counters"].update(micro_steps=2 ** 63))
    variant("bad_lr_negative", lambda m: m["optimizer"].update(lr=-1))
    variant("bad_betas_two", lambda m: m["optimizer"].update(betas=[2, 2]))
    variant("bad_betas_one", lambda m: m["optimizer"].update(betas=[0.9, 1]))
    variant("bad_betas_three", lambda m: m["optimizer"].update(betas=[0.9, 0.9, 0.9]))
    variant("bad_state_name_master", lambda m: m["optimizer"].update(state_names=["master"]))
    variant("bad_scheduler_index", lambda m: m["lr_scheduler"].update(last_batch_iteration=-2))
    variant("bad_loss_scale_zero", lambda m: m["loss_scaler"].update(cur_scale=0))
    variant("bad_hysteresis_zero", lambda m: m["loss_scaler"].update(cur_hysteresis=0))
    variant("bad_shape_negative", lambda m: m["params"]["dense.weight"].update(shape=[-3, 4]))
    variant("bad_shape_overflow", lambda m: m["params"]["dense.weight"].update(shape=[2 ** 40, 2 ** 40]))
    variant("bad_fragment_gap", lambda m: m["partition"]["optim_rank0.safetensors"]["fragments"]["dense.weight"].update(offset=1))
    variant("bad_fragment_short", lambda m: m["partition"]["optim_rank0.safetensors"]["fragments"]["dense.weight"].update(numel=255))
    variant("bad_fragment_unknown_param",
            lambda m: m["partition"]["optim_rank0.safetensors"]["fragments"].update(ghost={"offset": 0, "numel": 1}))
    variant("bad_fragment_of_frozen",
            lambda m: m["partition"]["optim_rank0.safetensors"]["fragments"].update({"ln.frozen": {"offset": 0, "numel": 16}}))
    variant("bad_partition_rank_range", lambda m: m["partition"]["optim_rank0.safetensors"].update(rank=5))
    variant("bad_partition_unlisted", lambda m: m["files"].pop("optim_rank0.safetensors"))
    variant("bad_file_name_slash", lambda m: m["files"].update({"../x": {"size": 1, "crc32c": 1}}))
    variant("bad_file_crc_range", lambda m: m["files"]["model.safetensors"].update(crc32c=2 ** 32))
    variant("bad_config_not_object", lambda m: m.update(config=[1]))
    variant("bad_rng_state", lambda m: m.update(rng_states={"a": 1}))
    text = sealed(seed).decode()
    files["bad_duplicate_key"] = text.replace('"tag":', '"tag": "x",\n  "tag":', 1).encode()
    files["bad_nul_in_key"] = seal_text(text[: text.rfind(SEAL)].rstrip().rstrip(",").replace('"tag":', '"t\\u0000ag":', 1))
    files["bad_lone_surrogate"] = seal_text(text[: text.rfind(SEAL)].rstrip().rstrip(",").replace('"tag": "', '"tag": "\\ud800', 1))
    files["bad_invalid_utf8"] = seal_text(text[: text.rfind(SEAL)].rstrip().rstrip(",").encode().replace(b'"tag": "', b'"tag": "\xff\xfe', 1))
    files["bad_deep_nesting"] = seal_text('{"client_state": ' + "[" * 5000 + "]" * 5000)
    files["bad_number_overflow"] = seal_text(text[: text.rfind(SEAL)].rstrip().rstrip(",").replace('"world_size": 1', '"world_size": 1e400', 1))
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} files to {OUT}")


if __name__ == "__main__":
    main()
