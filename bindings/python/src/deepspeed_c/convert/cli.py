"""Command line: python -m deepspeed_c.convert (see `main`)."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .errors import ConvertError

_EPILOG = """\
exit status: 0 success, 1 conversion failed (the message names the file or key),
2 bad command line, 3 checkpoint layout not supported (e.g. tensor parallelism).
Nothing is left in the output location when a conversion fails."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m deepspeed_c.convert",
        description="Convert a DeepSpeed checkpoint directory into a deepspeed_c checkpoint, or (with "
                    "--to-state-dict) a deepspeed_c checkpoint into a torch state_dict / safetensors file.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", help="DeepSpeed checkpoint directory (with --to-state-dict: a deepspeed_c "
                                  "checkpoint directory)")
    p.add_argument("output", help="output checkpoint directory (with --to-state-dict: OUT.pt or "
                                  "OUT.safetensors)")
    p.add_argument("--tag", help="the tag to read (default: the one 'latest' names)")
    p.add_argument("--config", help="the run's DeepSpeed config JSON (default: the ds_config DeepSpeed saved "
                                    "in the checkpoint)")
    p.add_argument("--out-tag", help="tag of the converted checkpoint (default: the source tag)")
    p.add_argument("--drop-client-key", action="append", default=[], metavar="KEY",
                   help="leave this client_state key out (e.g. one holding a non-JSON object); repeatable")
    p.add_argument("--to-state-dict", action="store_true",
                   help="export a deepspeed_c checkpoint's weights instead")
    p.add_argument("--fp32", action="store_true",
                   help="with --to-state-dict: the fp32 master weights instead of the working precision")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from . import api

    try:
        if args.to_state_dict:
            if args.config or args.out_tag or args.drop_client_key:
                print("python -m deepspeed_c.convert: error: --config, --out-tag and --drop-client-key apply "
                      "to a DeepSpeed conversion, not to --to-state-dict", file=sys.stderr)
                return 2
            out = api.export_state_dict(args.source, args.output, tag=args.tag, fp32=args.fp32)
        else:
            if args.fp32:
                print("python -m deepspeed_c.convert: error: --fp32 applies to --to-state-dict only",
                      file=sys.stderr)
                return 2
            out = api.convert_deepspeed_checkpoint(args.source, args.output, tag=args.tag, config=args.config,
                                                   out_tag=args.out_tag, drop_client_keys=args.drop_client_key)
    except ConvertError as exc:
        print(f"python -m deepspeed_c.convert: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("python -m deepspeed_c.convert: interrupted (nothing was written)", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug here, not bad input: still a message and a status, no traceback spew
        print(f"python -m deepspeed_c.convert: internal error: {type(exc).__name__}: {exc} "
              "(please report it with the command line)", file=sys.stderr)
        return 1
    print(f"convert: wrote {out}", file=sys.stderr)
    return 0
