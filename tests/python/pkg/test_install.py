"""How the package finds libdeepspeed_c: bundled next to the extension
($ORIGIN), or an installed copy when DEEPSPEED_C_ROOT was set at build time."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import deepspeed_c

from conftest import REPO_ROOT

PKG_DIR = os.path.dirname(deepspeed_c.__file__)


def _loaded_library(python, cwd):
    code = ("import deepspeed_c\n"
            "print([l.split()[-1] for l in open('/proc/self/maps') if 'libdeepspeed_c' in l][0])")
    return subprocess.run([python, "-c", code], cwd=cwd, check=True, capture_output=True,
                          text=True, timeout=120).stdout.strip()


def test_this_installation_loads_the_library_it_was_built_for(tmp_path):
    lib = _loaded_library(sys.executable, tmp_path)
    if os.path.dirname(lib) == PKG_DIR:   # the bundled wheel
        assert os.path.basename(lib) == f"libdeepspeed_c.so.{deepspeed_c.abi_version()}"
        if shutil.which("objdump"):
            dyn = subprocess.run(["objdump", "-p", os.path.join(PKG_DIR, "_lowlevel.so")],
                                 capture_output=True, text=True, check=True).stdout
            assert "$ORIGIN" in dyn, dyn
    else:
        assert os.path.exists(lib)


@pytest.mark.skipif(not os.environ.get("DS_BUILD_DIR"), reason="needs DS_BUILD_DIR (scripts/test.sh sets it)")
def test_deepspeed_c_root_uses_the_installed_library(tmp_path):
    build = os.environ["DS_BUILD_DIR"]
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], check=True,
                   capture_output=True, timeout=300)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    env = dict(os.environ, DEEPSPEED_C_ROOT=str(prefix))
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        os.path.join(REPO_ROOT, "bindings", "python")],
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    lib = _loaded_library(py, tmp_path)
    assert lib.startswith(str(prefix)), lib
    site = subprocess.run([py, "-c", "import deepspeed_c, os; print(os.path.dirname(deepspeed_c.__file__))"],
                          cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    assert not any(f.startswith("libdeepspeed_c") for f in os.listdir(site)), "the library was bundled anyway"
